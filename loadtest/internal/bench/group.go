package bench

import (
	"context"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/status"

	skeinv1 "skein/gen/skein/v1"
)

// GroupConsumeConfig is one group consume run: Members members of one
// consumer group, each over its own gateway gRPC connection, reading with
// FetchGroupRecords (echoing positions, so the gateway stays stateless) and
// committing every CommitInterval, until NumRecords, Duration, or no member
// has had a record for IdleTimeout.
type GroupConsumeConfig struct {
	Endpoints      Endpoints
	Topic          string
	Group          string
	Members        int
	FromLatest     bool
	NumRecords     int64
	Duration       time.Duration
	IdleTimeout    time.Duration
	MaxRecords     int           // per fetch
	MaxWait        time.Duration // long-poll per fetch
	MinBytes       int32         // bytes of all a member's partitions a fetch waits for, up to MaxWait (0: any)
	CommitInterval time.Duration
	Progress       time.Duration
	Log            io.Writer
}

// GroupConsume runs a group consume load and returns its summary.
func GroupConsume(ctx context.Context, cfg GroupConsumeConfig) (Summary, error) {
	if cfg.Members <= 0 {
		cfg.Members = 1
	}
	if cfg.Group == "" {
		cfg.Group = "skein-bench"
	}
	if cfg.MaxRecords <= 0 {
		cfg.MaxRecords = 2000
	}
	if cfg.MaxWait <= 0 {
		cfg.MaxWait = 500 * time.Millisecond
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = 5 * time.Second
	}
	if cfg.CommitInterval <= 0 {
		cfg.CommitInterval = time.Second
	}
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	if cfg.Duration > 0 {
		runCtx, cancel = context.WithTimeout(runCtx, cfg.Duration)
		defer cancel()
	}
	st := newStats()
	stop := make(chan struct{})
	go st.progress(cfg.Log, cfg.Progress, "consumed", stop)
	var total atomic.Int64
	var lastData atomic.Int64 // unix nanos of the last record any member read
	lastData.Store(time.Now().UnixNano())
	var wg sync.WaitGroup
	errc := make(chan error, cfg.Members)
	for range cfg.Members {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := groupMember(ctx, runCtx, cancel, cfg, st, &total, &lastData); err != nil {
				errc <- err
				cancel()
			}
		}()
	}
	wg.Wait()
	close(stop)
	close(errc)
	if err := <-errc; err != nil {
		return Summary{}, err
	}
	return st.summary(Summary{Mode: "group-consume", Transport: GRPC, Topic: cfg.Topic, Group: cfg.Group, Concurrency: cfg.Members}), nil
}

// groupMember is one member's loop; it leaves the group when the run ends.
func groupMember(ctx, runCtx context.Context, stopAll context.CancelFunc, cfg GroupConsumeConfig, st *stats, total, lastData *atomic.Int64) error {
	conn, err := dialGateway(cfg.Endpoints.Gateway)
	if err != nil {
		return err
	}
	defer conn.Close()
	gs := skeinv1.NewGroupServiceClient(conn)
	reset := "earliest"
	if cfg.FromLatest {
		reset = "latest"
	}
	join := func() (string, int32, error) {
		jctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		resp, err := gs.JoinGroup(jctx, &skeinv1.JoinGroupRequest{Group: cfg.Group, Topics: []string{cfg.Topic}, AutoOffsetReset: reset})
		if err != nil {
			return "", 0, err
		}
		return resp.GetMemberId(), resp.GetMemberEpoch(), nil
	}
	member, epoch, err := join()
	if err != nil {
		return err
	}
	var positions []*skeinv1.TopicPartitionOffset
	committed := map[int32]int64{}
	commit := func(cctx context.Context) {
		var offs []*skeinv1.TopicPartitionOffset
		for _, p := range positions {
			if committed[p.GetPartition()] != p.GetOffset() {
				offs = append(offs, p)
			}
		}
		if len(offs) == 0 {
			return
		}
		if _, err := gs.CommitOffsets(cctx, &skeinv1.CommitOffsetsRequest{Group: cfg.Group, MemberId: member, MemberEpoch: epoch, Offsets: offs}); err != nil {
			if runCtx.Err() == nil {
				st.fail(0, err)
			}
			return
		}
		for _, o := range offs {
			committed[o.GetPartition()] = o.GetOffset()
		}
	}
	defer func() {
		lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		commit(lctx)
		_, _ = gs.LeaveGroup(lctx, &skeinv1.LeaveGroupRequest{Group: cfg.Group, MemberId: member})
	}()
	mr, mw := int32(cfg.MaxRecords), int32(cfg.MaxWait.Milliseconds())
	var minBytes *int32
	if cfg.MinBytes > 0 {
		minBytes = &cfg.MinBytes
	}
	lastCommit := time.Now()
	for runCtx.Err() == nil {
		t0 := time.Now()
		resp, err := gs.FetchGroupRecords(runCtx, &skeinv1.FetchGroupRecordsRequest{Group: cfg.Group, MemberId: member, MemberEpoch: epoch,
			MaxRecords: &mr, MaxWaitMs: &mw, MinBytes: minBytes, Positions: positions, Encoding: skeinv1.Encoding_BYTES})
		now := time.Now()
		if err != nil {
			if runCtx.Err() != nil {
				return nil
			}
			st.fail(0, err)
			if rejoin(err) {
				if member, epoch, err = join(); err != nil {
					return err
				}
				positions, committed = nil, map[int32]int64{}
				continue
			}
			time.Sleep(100 * time.Millisecond)
			continue
		}
		epoch, positions = resp.GetMemberEpoch(), resp.GetPositions()
		var bytes int64
		for _, r := range resp.GetRecords() {
			bytes += int64(len(r.GetValueBytes()))
			if sent, ok := SentAt(r.GetValueBytes()); ok {
				st.endToEnd(now.Sub(sent))
			}
		}
		if n := int64(len(resp.GetRecords())); n > 0 {
			st.fetched(n, bytes, now.Sub(t0))
			lastData.Store(now.UnixNano())
			if cfg.NumRecords > 0 && total.Add(n) >= cfg.NumRecords {
				stopAll()
				return nil
			}
		} else if now.Sub(time.Unix(0, lastData.Load())) > cfg.IdleTimeout {
			return nil
		}
		if now.Sub(lastCommit) >= cfg.CommitInterval {
			commit(runCtx)
			lastCommit = now
		}
	}
	return nil
}

// rejoin reports whether err means the member is no longer in the group.
func rejoin(err error) bool {
	st, ok := status.FromError(err)
	if !ok {
		return false
	}
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			return info.GetReason() == "UNKNOWN_MEMBER_ID" || info.GetReason() == "FENCED_MEMBER_EPOCH"
		}
	}
	return false
}
