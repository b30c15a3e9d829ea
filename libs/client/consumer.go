package client

import (
	"cmp"
	"context"
	"errors"
	"math"
	"slices"
	"sort"
	"sync"
	"time"

	"google.golang.org/grpc"

	storagev1 "skein/gen/skein/storage/v1"
	skeinv1 "skein/gen/skein/v1"
	"skein/libs/errs"
	"skein/libs/grpcopt"
	"skein/libs/metadata"
	"skein/libs/record"
	"skein/libs/rpcerr"
	"skein/libs/topicname"
)

// Offset specs for ListOffsets, as Kafka's ListOffsets timestamps.
const (
	LatestOffset   int64 = -1
	EarliestOffset int64 = -2
)

// FetchRequest reads one partition from an offset.
type FetchRequest struct {
	Topic     string
	Partition int32
	Offset    int64
	// MaxRecords caps the records answered (0: no cap beyond MaxBytes).
	MaxRecords int
	// MaxBytes caps the batch bytes the leader answers (0: 1 MiB); at least
	// one whole batch always comes back.
	MaxBytes int32
	// MaxWait is the long-poll: how long the leader may wait for data when
	// there is none at Offset.
	MaxWait time.Duration
	// MinBytes, with MaxWait, makes the leader wait until at least this many
	// bytes of batches are there from Offset, or MaxWait has passed
	// (fetch.min.bytes; 0 or 1: answer as soon as there is anything).
	MinBytes  int32
	Isolation skeinv1.IsolationLevel
	// LeaderWait bounds how long the fetch waits for a partition the
	// metadata names no leader of (an offline partition) to get one before
	// it answers LEADER_NOT_AVAILABLE; 0 waits until ctx ends.
	LeaderWait time.Duration
	// PastEmpty: an answer of batches that hold no record for this reader
	// (emptied by compaction, transaction markers, an aborted
	// transaction's records under read_committed), which moves the offset
	// on without a record, is followed by another fetch from there, within
	// the same MaxWait, as a Kafka consumer's next poll would; an empty
	// answer then means the end of the partition or a wait that ran out.
	// Without it such an answer is returned as it is (a caller asking
	// about one offset wants that).
	PastEmpty bool
}

// ConsumedRecord is one record read back. Its slices are the caller's.
type ConsumedRecord struct {
	Topic       string
	Partition   int32
	Offset      int64
	Timestamp   int64
	Key         []byte // nil: no key
	Value       []byte // nil: a tombstone
	Headers     []record.Header
	LeaderEpoch int32
	// Transactional: the record was written in a transaction (a
	// read_uncommitted reader also gets those of open and aborted ones).
	Transactional bool
	// LogAppendTime: Timestamp is the time the leader appended the record
	// (message.timestamp.type=LogAppendTime), not its create time.
	LogAppendTime bool
}

// FetchResult is a fetch's records and the partition's offsets.
type FetchResult struct {
	Records []ConsumedRecord
	// NextOffset is where the next fetch starts: past the last record
	// answered, or past batches that held nothing for the reader (control
	// batches, aborted transactions).
	NextOffset       int64
	HighWatermark    int64
	LastStableOffset int64
	LogStartOffset   int64
	// Bytes is the size of the record batches the leader answered, control
	// batches and the skipped batches of aborted transactions included: what
	// the leader's min_bytes counts.
	Bytes int
	// damaged is set when the answer stopped before a batch that failed
	// its check: the records are those before it, and the next read from
	// NextOffset fails with it.
	damaged error
}

// leaderErr reports whether err means the request went to the wrong or an
// unreachable broker, so that fresh metadata may route it better.
func leaderErr(err error) bool {
	switch errs.Of(err) {
	case errs.NotLeaderOrFollower, errs.FencedLeaderEpoch, errs.UnknownLeaderEpoch, errs.LeaderNotAvailable,
		errs.NetworkException, errs.BrokerNotAvailable, errs.UnknownTopicOrPartition, errs.ReplicaNotAvailable:
		return true
	}
	return false
}

// waitRetry waits the attempt's backoff, cut short by a metadata change
// when the error says the leader moved.
func (c *Client) waitRetry(ctx context.Context, attempt int, err error) error {
	changed := c.metadataChanged()
	t := time.NewTimer(c.backoff(attempt))
	defer t.Stop()
	if !leaderErr(err) {
		changed = nil
	}
	select {
	case <-t.C:
	case <-changed:
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

// leaderOf answers a partition's leader broker connection and epoch.
func (c *Client) leaderOf(topic string, partition int32) (*brokerConn, int32, error) {
	m := c.Metadata()
	if m.PartitionCount(topic) == 0 {
		return nil, 0, errs.Errorf(errs.UnknownTopicOrPartition, "topic %q does not exist", topic)
	}
	if _, ok := m.Partition(topic, partition); !ok {
		return nil, 0, errs.Errorf(errs.UnknownTopicOrPartition, "topic %q has no partition %d", topic, partition)
	}
	leader, epoch, ok := leaderOf(m, topic, partition)
	if !ok {
		return nil, 0, errs.Errorf(errs.LeaderNotAvailable, "%s-%d has no leader", topic, partition)
	}
	bc, err := c.broker(leader)
	return bc, epoch, err
}

// Fetch reads committed records of one partition from its leader, following
// leader changes until ctx ends. Errors that retrying cannot fix
// (OFFSET_OUT_OF_RANGE, say) are answered at once.
func (c *Client) Fetch(ctx context.Context, req FetchRequest) (*FetchResult, error) {
	res, _, err := c.fetch(ctx, req, false)
	return res, err
}

// FetchView is Fetch without copying the records out of the answer: their
// keys, values and header values are slices of a pooled buffer, valid only
// until release is called, which the caller must do once it is done with
// them (it gives the buffer back for later fetches). On error there is
// nothing to release.
func (c *Client) FetchView(ctx context.Context, req FetchRequest) (res *FetchResult, release func(), err error) {
	return c.fetch(ctx, req, true)
}

func (c *Client) fetch(ctx context.Context, req FetchRequest, view bool) (*FetchResult, func(), error) {
	if err := topicname.Validate(req.Topic); err != nil {
		return nil, nil, err
	}
	if err := c.WaitReady(ctx); err != nil {
		return nil, nil, err
	}
	if !req.PastEmpty {
		return c.fetchFrom(ctx, req, view)
	}
	deadline := time.Now().Add(req.MaxWait)
	var last *FetchResult // the answer before, which moved the offset on
	bytes := 0
	for hop := 0; ; hop++ {
		res, release, err := c.fetchFrom(ctx, req, view)
		if err != nil {
			if last != nil {
				// What was read stands; the next fetch meets the error.
				// Its records (none) hold no buffer, but a view's caller
				// still gets a release to call.
				var release func()
				if view {
					release = func() {}
				}
				return last, release, nil
			}
			return nil, nil, err
		}
		bytes += res.Bytes
		res.Bytes = bytes
		if len(res.Records) > 0 || res.NextOffset <= req.Offset || hop == maxEmptyHops || ctx.Err() != nil {
			return res, release, nil
		}
		if release != nil {
			release() // no record refers to it
		}
		last = res
		req.Offset = res.NextOffset
		req.MaxWait = max(time.Until(deadline), 0)
	}
}

// maxEmptyHops bounds the fetches one PastEmpty fetch makes past batches
// without a record for its reader; each moves the offset on.
const maxEmptyHops = 64

// fetchFrom is one fetch from req.Offset, retried while the error is
// retriable.
func (c *Client) fetchFrom(ctx context.Context, req FetchRequest, view bool) (*FetchResult, func(), error) {
	maxBytes := req.MaxBytes
	if maxBytes <= 0 {
		maxBytes = 1 << 20
	}
	var leaderless time.Time // when the fetch first found no leader
	for attempt := 0; ; attempt++ {
		res, release, err := c.fetchOnce(ctx, req, maxBytes, view)
		if err == nil || !errs.IsRetriable(err) || ctx.Err() != nil || errs.Of(err) == errs.CorruptMessage {
			return res, release, err
		}
		if m := c.Metadata(); errs.Of(err) == errs.UnknownTopicOrPartition && m.PartitionCount(req.Topic) == 0 {
			return nil, nil, noTopic(m, req.Topic) // the topic is gone (or never was): no point waiting
		}
		wctx, cancel := ctx, context.CancelFunc(func() {})
		if errs.Of(err) == errs.LeaderNotAvailable && req.LeaderWait > 0 {
			if leaderless.IsZero() {
				leaderless = time.Now()
			}
			left := req.LeaderWait - time.Since(leaderless)
			if left <= 0 {
				return nil, nil, err
			}
			wctx, cancel = context.WithTimeout(ctx, left)
		}
		werr := c.waitRetry(wctx, attempt, err)
		cancel()
		if werr != nil && ctx.Err() != nil {
			return nil, nil, err
		}
	}
}

// fetchOnce asks the leader once. Under view the records are slices of the
// answer's pooled buffer and release gives it back; otherwise they are
// copies and the buffer is already back.
func (c *Client) fetchOnce(ctx context.Context, req FetchRequest, maxBytes int32, view bool) (res *FetchResult, release func(), err error) {
	bc, epoch, err := c.leaderOf(req.Topic, req.Partition)
	if err != nil {
		return nil, nil, err
	}
	// A long poll parked on a leader that the metadata replaces (paused, cut
	// off, fenced) would wait out max_wait or the connection's death: end it
	// when the leader moves, and ask the new one.
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	go c.cancelOnLeaderChange(ctx, cancel, req.Topic, req.Partition, bc.id, epoch)
	// The answer's batches are decoded into a pooled buffer, given back once
	// decodeFetch has copied the records out of it, or by the caller of a
	// view once it is done with them.
	resp := &storagev1.FetchResponse{}
	reply := &grpcopt.Pooled{Msg: resp}
	defer func() {
		if release == nil {
			reply.Release()
		}
	}()
	err = bc.cc.Invoke(ctx, storagev1.StorageService_Fetch_FullMethodName, &storagev1.FetchRequest{
		MaxWaitMs:      int32(req.MaxWait / time.Millisecond),
		MinBytes:       max(req.MinBytes, 1),
		MaxBytes:       maxBytes,
		IsolationLevel: req.Isolation,
		Partitions: []*storagev1.PartitionFetch{{
			Topic: req.Topic, Partition: req.Partition, FetchOffset: req.Offset,
			CurrentLeaderEpoch: epoch, PartitionMaxBytes: maxBytes,
			// The leader stops at the batch holding the last record kept.
			MaxRecords: int32(min(max(req.MaxRecords, 0), math.MaxInt32)),
		}},
	}, reply, grpc.StaticMethod())
	if err != nil {
		if cause := context.Cause(ctx); errors.Is(cause, errLeaderMoved) {
			return nil, nil, errs.Errorf(errs.NotLeaderOrFollower, "%s-%d: %v", req.Topic, req.Partition, cause)
		}
		return nil, nil, rpcerr.FromStatus(err)
	}
	var pr *storagev1.PartitionFetchResult
	for _, r := range resp.GetPartitions() {
		if r.GetTopic() == req.Topic && r.GetPartition() == req.Partition {
			pr = r
		}
	}
	if pr == nil {
		return nil, nil, errs.Errorf(errs.UnknownServerError, "the fetch answer has no %s-%d", req.Topic, req.Partition)
	}
	if code := pr.GetErrorCode(); code != skeinv1.ErrorCode_NONE {
		return nil, nil, errs.Errorf(errs.ForCode(errs.Code(code)), "%s", pr.GetErrorMessage())
	}
	if res, err = decodeFetch(req, pr, view); err != nil || !view {
		return res, nil, err
	}
	return res, reply.Release, nil
}

var errLeaderMoved = errors.New("the partition's leader changed during the fetch")

// cancelOnLeaderChange cancels a fetch to leader (at epoch) when the metadata
// names another leader or a newer epoch, until ctx ends.
func (c *Client) cancelOnLeaderChange(ctx context.Context, cancel context.CancelCauseFunc, topic string, partition, leader, epoch int32) {
	for {
		changed := c.metadataChanged()
		if l, e, ok := leaderOf(c.Metadata(), topic, partition); ok && (l != leader || e > epoch) {
			cancel(errLeaderMoved)
			return
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return
		}
	}
}

// decodeFetch turns a partition's fetched batches into records: from
// req.Offset on, at most req.MaxRecords, skipping control batches and, under
// read_committed, the batches of aborted transactions (Kafka's consumer
// logic: a producer's batches from an aborted transaction's first offset up
// to its abort marker are dropped). The records' bytes are copies, or under
// view slices of pr's.
func decodeFetch(req FetchRequest, pr *storagev1.PartitionFetchResult, view bool) (*FetchResult, error) {
	cp := clone
	if view {
		cp = func(b []byte) []byte { return b }
	}
	out := &FetchResult{
		NextOffset:       req.Offset,
		HighWatermark:    pr.GetHighWatermark(),
		LastStableOffset: pr.GetLastStableOffset(),
		LogStartOffset:   pr.GetLogStartOffset(),
		Bytes:            len(pr.GetRecords()),
	}
	readCommitted := req.Isolation == skeinv1.IsolationLevel_READ_COMMITTED
	aborted := slices.Clone(pr.GetAbortedTransactions())
	slices.SortFunc(aborted, func(a, b *storagev1.AbortedTransaction) int {
		return cmp.Compare(a.GetFirstOffset(), b.GetFirstOffset())
	})
	abortedPIDs := map[int64]bool{}

	out.Records = make([]ConsumedRecord, 0, recordCountHint(pr.GetRecords(), req.MaxRecords))
	it := record.NewBatchIter(pr.GetRecords())
	it.AllowPartial = true
	var ri record.RecordIter
	for it.Next() {
		b := it.Batch()
		if err := b.Verify(); err != nil {
			// A batch the leader's disk damaged: what came before it is
			// answered, and the fetch from it fails at once, naming it
			// (as Kafka's consumer returns the records before a corrupt
			// one, then throws CorruptRecordException). Asked again, the
			// same leader answers the same bytes: fetchFrom does not retry.
			// Its first offset is outside what the check covers, its last
			// inside: only the first can be named.
			damaged := errs.Errorf(errs.CorruptMessage, "%s-%d: the record batch at offset %d (the batch's first) failed its check (%v): the leader's copy is damaged; a position past that batch reads on",
				req.Topic, req.Partition, b.BaseOffset(), errs.Message(err))
			if out.NextOffset > req.Offset || len(out.Records) > 0 {
				out.damaged = damaged
				return out, nil
			}
			return nil, damaged
		}
		// Batches before the asked offset still count for read_committed:
		// an abort marker there closes a transaction of the aborted list.
		before := int64(b.NextOffset()) <= req.Offset
		if readCommitted {
			for len(aborted) > 0 && aborted[0].GetFirstOffset() <= int64(b.LastOffset()) {
				abortedPIDs[aborted[0].GetProducerId()] = true
				aborted = aborted[1:]
			}
		}
		if b.IsControl() {
			if readCommitted && b.IsTransactional() {
				if ri.Reset(b) == nil && ri.Next() {
					if mk, err := record.ParseMarker(ri.Record()); err == nil && mk.Type == record.ControlAbort {
						delete(abortedPIDs, b.ProducerID())
					}
				}
			}
			out.NextOffset = max(out.NextOffset, int64(b.NextOffset()))
			continue
		}
		if before {
			continue
		}
		if readCommitted && b.IsTransactional() && abortedPIDs[b.ProducerID()] {
			out.NextOffset = max(out.NextOffset, int64(b.NextOffset()))
			continue
		}
		if view && b.Compression() != record.None {
			// A view's records are slices of the decompressed batch:
			// the next batch must not decompress into the same buffer.
			ri = record.RecordIter{}
		}
		if err := ri.Reset(b); err != nil {
			return nil, err
		}
		for ri.Next() {
			off := int64(ri.Offset())
			if off < req.Offset {
				continue
			}
			if req.MaxRecords > 0 && len(out.Records) >= req.MaxRecords {
				return out, nil
			}
			r := ri.Record()
			ts := ri.Timestamp()
			if b.LogAppendTime() {
				ts = b.MaxTimestamp()
			}
			cr := ConsumedRecord{
				Topic: req.Topic, Partition: req.Partition, Offset: off, Timestamp: ts,
				Key: cp(r.Key), Value: cp(r.Value), LeaderEpoch: int32(b.PartitionLeaderEpoch()), Transactional: b.IsTransactional(),
				LogAppendTime: b.LogAppendTime(),
			}
			for _, h := range r.AppendHeaders(nil) {
				cr.Headers = append(cr.Headers, record.Header{Key: h.Key, Value: cp(h.Value)})
			}
			out.Records = append(out.Records, cr)
			out.NextOffset = off + 1
		}
		if err := ri.Err(); err != nil {
			return nil, err
		}
		// A compacted batch may end past its last record.
		if req.MaxRecords <= 0 || len(out.Records) < req.MaxRecords {
			out.NextOffset = max(out.NextOffset, int64(b.NextOffset()))
		}
	}
	if err := it.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// clone copies b, keeping nil as nil (null) and empty as empty. A consumed
// record's bytes are always copies: the fetch answer they came in, and a
// compressed batch's decompressed records, are buffers used again.
// recordCountHint is how many records data's batch headers announce, at
// most maxRecords (when positive) and never more than data could hold: a
// capacity for the records, which grown one by one were copied a dozen
// times over in a fetch of thousands. The headers are not verified yet, so
// it is only a hint.
func recordCountHint(data []byte, maxRecords int) int {
	const minRecordSize = 7 // a record's length, attributes, deltas, key, value and header count
	limit := len(data) / minRecordSize
	if maxRecords > 0 {
		limit = min(limit, maxRecords)
	}
	n := 0
	it := record.NewBatchIter(data)
	it.AllowPartial = true
	for n < limit && it.Next() {
		if b := it.Batch(); !b.IsControl() {
			n += max(int(b.RecordCount()), 0)
		}
	}
	return min(n, limit)
}

func clone(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append(make([]byte, 0, len(b)), b...)
}

// PartitionOffset is one partition's answer to ListOffsets.
type PartitionOffset struct {
	Partition int32
	// Offset is -1 when no record has a timestamp at or after the one asked.
	Offset      int64
	Timestamp   int64
	LeaderEpoch int32
	// Replicas are the log end offsets the leader knows, its own and its
	// followers' (each as of its latest fetch), by replica id.
	Replicas []ReplicaOffset
	Err      error
}

// ReplicaOffset is one replica's log end offset as its leader knows it.
type ReplicaOffset struct {
	Replica      int32
	LogEndOffset int64
}

// SplitByLeader splits partitions of topic into those the metadata gives a
// leader and those it gives none (their reads and offsets would wait for
// one).
func SplitByLeader(m *metadata.Image, topic string, partitions []int32) (led, leaderless []int32) {
	for _, p := range partitions {
		if _, ok := m.Leader(topic, p); ok {
			led = append(led, p)
		} else {
			leaderless = append(leaderless, p)
		}
	}
	return led, leaderless
}

// ListOffsets asks each partition's leader for an offset: LatestOffset (the
// HW, or the LSO under read_committed), EarliestOffset (the log start), or
// the first offset whose timestamp is at or after spec (ms). partitions nil
// means all. Leaders are asked in parallel; partitions whose leader moved are
// retried a few times, and those of a new leader whose high watermark has
// not caught up yet (OFFSET_NOT_AVAILABLE) for a few seconds. Per-partition
// failures are in Err.
func (c *Client) ListOffsets(ctx context.Context, topic string, partitions []int32, spec int64, iso skeinv1.IsolationLevel) ([]PartitionOffset, error) {
	if err := topicname.Validate(topic); err != nil {
		return nil, err
	}
	if err := c.WaitReady(ctx); err != nil {
		return nil, err
	}
	m := c.Metadata()
	n := m.PartitionCount(topic)
	if n == 0 {
		return nil, noTopic(m, topic)
	}
	if partitions == nil {
		for p := int32(0); p < n; p++ {
			partitions = append(partitions, p)
		}
	}
	results := map[int32]*PartitionOffset{}
	todo := slices.Clone(partitions)
	for attempt := 0; len(todo) > 0; attempt++ {
		var mu sync.Mutex
		var wg sync.WaitGroup
		byBroker := map[*brokerConn][]*storagev1.ListOffsetsPartition{}
		for _, p := range todo {
			bc, epoch, err := c.leaderOf(topic, p)
			if err != nil {
				results[p] = &PartitionOffset{Partition: p, Offset: -1, Err: err}
				continue
			}
			byBroker[bc] = append(byBroker[bc], &storagev1.ListOffsetsPartition{Topic: topic, Partition: p, CurrentLeaderEpoch: epoch, Timestamp: spec})
		}
		for bc, parts := range byBroker {
			wg.Add(1)
			go func() {
				defer wg.Done()
				resp, err := bc.st.ListOffsets(ctx, &storagev1.ListOffsetsRequest{IsolationLevel: iso, Partitions: parts})
				mu.Lock()
				defer mu.Unlock()
				for _, lp := range parts {
					results[lp.GetPartition()] = &PartitionOffset{Partition: lp.GetPartition(), Offset: -1, Err: rpcerr.FromStatus(err)}
				}
				for _, r := range resp.GetPartitions() {
					po := &PartitionOffset{Partition: r.GetPartition(), Offset: r.GetOffset(), Timestamp: r.GetTimestamp(), LeaderEpoch: r.GetLeaderEpoch()}
					for _, ro := range r.GetReplicaOffsets() {
						po.Replicas = append(po.Replicas, ReplicaOffset{Replica: ro.GetReplica(), LogEndOffset: ro.GetLogEndOffset()})
					}
					if code := r.GetErrorCode(); code != skeinv1.ErrorCode_NONE {
						po.Offset, po.Replicas, po.Err = -1, nil, errs.Errorf(errs.ForCode(errs.Code(code)), "%s", r.GetErrorMessage())
					}
					results[r.GetPartition()] = po
				}
			}()
		}
		wg.Wait()
		var retry []int32
		var lastErr error
		attempts := 3
		for _, p := range todo {
			if r := results[p]; r.Err != nil && errs.IsRetriable(r.Err) {
				retry, lastErr = append(retry, p), r.Err
				if errs.Of(r.Err) == errs.OffsetNotAvailable {
					// Until the ISR has fetched from the new leader: about
					// a replication round, or until a dead member is fenced.
					attempts = 8
				}
			}
		}
		if len(retry) == 0 || attempt >= attempts || ctx.Err() != nil || c.waitRetry(ctx, attempt, lastErr) != nil {
			break
		}
		todo = retry
	}
	out := make([]PartitionOffset, 0, len(partitions))
	for _, p := range partitions {
		out = append(out, *results[p])
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Partition < out[j].Partition })
	return out, nil
}
