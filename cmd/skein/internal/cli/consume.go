package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"

	skeinv1 "skein/gen/skein/v1"
)

// from is where consume starts: earliest, latest or an offset.
type from struct {
	earliest, latest bool
	offset           int64
}

func parseFrom(s string) (from, error) {
	switch s {
	case "earliest", "beginning":
		return from{earliest: true}, nil
	case "latest", "end":
		return from{latest: true}, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return from{}, usagef("--from %q: want earliest, latest or an offset", s)
	}
	return from{offset: n}, nil
}

// printer writes records, one per line, and counts toward --max.
type printer struct {
	mu       sync.Mutex
	w        io.Writer
	json     bool // each record as the API's JSON, one per line
	printKey bool
	// printTimestamp, printPartition, printOffset and printHeaders put
	// those before the key, as Kafka's console consumer prints them
	// (print.timestamp, print.partition, print.offset, print.headers).
	printTimestamp, printPartition, printOffset, printHeaders bool
	sep                                                       string
	max                                                       int
	n                                                         int
}

// print writes r and reports whether --max is reached.
func (p *printer) print(r *skeinv1.ConsumedRecord) (done bool, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.max > 0 && p.n >= p.max {
		return true, nil
	}
	if p.json {
		if err := printJSONLine(p.w, r); err != nil {
			return true, err
		}
		p.n++
		return p.max > 0 && p.n >= p.max, nil
	}
	var b strings.Builder
	if p.printTimestamp {
		typ := "CreateTime:"
		if r.GetTimestampType() == skeinv1.TimestampType_LOG_APPEND_TIME {
			typ = "LogAppendTime:"
		}
		b.WriteString(typ + strconv.FormatInt(r.GetTimestampMs(), 10) + p.sep)
	}
	if p.printPartition {
		b.WriteString("Partition:" + strconv.Itoa(int(r.GetPartition())) + p.sep)
	}
	if p.printOffset {
		b.WriteString("Offset:" + strconv.FormatInt(r.GetOffset(), 10) + p.sep)
	}
	if p.printHeaders {
		b.WriteString(headersText(r.GetHeaders()) + p.sep)
	}
	if p.printKey {
		b.WriteString(fieldText(r.Key, r.KeyBytes) + p.sep)
	}
	b.WriteString(fieldText(r.Value, r.ValueBytes) + "\n")
	if _, err := io.WriteString(p.w, b.String()); err != nil {
		return true, err
	}
	p.n++
	return p.max > 0 && p.n >= p.max, nil
}

// headersText is a record's headers as Kafka's console consumer prints
// them: KEY:VALUE, separated by commas (null for a header without a
// value), or NO_HEADERS.
func headersText(hs []*skeinv1.Header) string {
	if len(hs) == 0 {
		return "NO_HEADERS"
	}
	var b strings.Builder
	for i, h := range hs {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(h.GetKey() + ":" + fieldText(h.Value, h.ValueBytes))
	}
	return b.String()
}

// fieldText is a key or value as printed: its text, its bytes as they
// are, or "null" for a record without one (as Kafka's console consumer
// prints a null key, and a tombstone's value).
func fieldText(text *string, raw []byte) string {
	switch {
	case raw != nil:
		return string(raw)
	case text != nil:
		return *text
	}
	return "null"
}

// errMaxReached ends consumption once --max records are printed.
var errMaxReached = errors.New("max reached")

func consumeCmd(ctx context.Context, args []string, stdio IO) error {
	f := newFlags("consume", stdio, true)
	fromFlag := f.String("from", "earliest", "earliest, latest or an offset; with --group, where partitions without a committed offset start: earliest, latest or none (fail instead)")
	follow := f.Bool("follow", false, "keep printing new records as they are committed, from partitions added to the topic meanwhile too (Ctrl-C to stop)")
	partition := f.Int("partition", -1, "only this partition (default: all)")
	maxRecords := f.Int("max", 0, "stop after this many records (0: no limit)")
	printKey := f.Bool("print-key", false, "print each record's key before its value (null for a record without a key)")
	printTimestamp := f.Bool("print-timestamp", false, "print each record's timestamp first, as CreateTime:MS or LogAppendTime:MS (ms since the epoch)")
	printPartition := f.Bool("print-partition", false, "print each record's partition before its offset, key and value, as Partition:N")
	printOffset := f.Bool("print-offset", false, "print each record's offset before its key and value, as Offset:N")
	printHeaders := f.Bool("print-headers", false, "print each record's headers before its key and value, as KEY:VALUE,KEY:VALUE (NO_HEADERS for none)")
	sep := f.String("key-separator", "\t", "what separates the fields printed before a value (--print-key, --print-partition, --print-offset, --print-headers)")
	readCommitted := f.Bool("read-committed", false, "skip aborted and open transactions (without --follow, reading stops at an open one and says so on stderr)")
	group := f.String("group", "", "consume as a member of this consumer group, committing where it stands: past what it printed, and at the start of a partition that gave it nothing")
	sessionTimeout := f.Duration("session-timeout", 0, "with --group: the member's session timeout (default: the coordinator's)")
	instanceID := f.String("instance-id", "", "with --group: a static member's instance id")
	assignor := f.String("assignor", "", "with --group: range or uniform (default: the group's)")
	idle := f.Duration("idle", 0, "with --group: stop after this long without a record (0: run until Ctrl-C or --max)")
	pos, err := f.parse(args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("consume takes one topic, got %q", pos)
	}
	noReset := *fromFlag == "none" // a group's auto_offset_reset only
	if noReset && *group == "" {
		return usagef("--from none is for --group: partitions without a committed offset then fail instead of starting anywhere")
	}
	startAt := *fromFlag
	if noReset {
		startAt = "earliest" // for the checks below; the join says none
	}
	start, err := parseFrom(startAt)
	if err != nil {
		if *group != "" {
			// A member starts where its group committed; --from is only
			// where partitions without a commit start.
			return usagef("--from %q: want earliest, latest or none (with --group, where a partition without a committed offset starts)", startAt)
		}
		return err
	}
	topic := pos[0]
	switch {
	case *partition < -1:
		return usagef("--partition %d: want a partition number, or -1 for all", *partition)
	case *maxRecords < 0:
		return usagef("--max %d: want 0 (no limit) or more", *maxRecords)
	case *sessionTimeout > math.MaxInt32*time.Millisecond || *sessionTimeout < 0:
		return usagef("--session-timeout %v is out of range", *sessionTimeout)
	case *idle < 0:
		return usagef("--idle %v: want 0 (no limit) or more", *idle)
	}
	if f.typed["group"] && *group == "" {
		// "--group $GROUP" with $GROUP empty: as a plain consumer it would
		// join no group and commit nothing, and exit 0 as if it had. Only
		// "" is refused, as the gateway refuses it (INVALID_GROUP_ID): " "
		// is a group id the cluster takes and group describe shows. An
		// empty SKEIN_GROUP counts as unset, as every empty environment
		// twin does (it is acl's --group twin too, and "SKEIN_GROUP=" is
		// how a shell clears it).
		return usagef("--group is empty: name the consumer group, or leave --group out to read without one")
	}
	if *group == "" {
		// These shape a group member; without --group they would do
		// nothing. Typed ones only: an environment twin (SKEIN_SESSION_TIMEOUT
		// is also a coordinator's setting) is left alone.
		for _, name := range []string{"session-timeout", "instance-id", "assignor", "idle"} {
			if f.typed[name] {
				return usagef("--%s is for a group member: it needs --group", name)
			}
		}
	}
	if _, err := int32Flag("partition", *partition); err != nil {
		return err
	}
	iso := skeinv1.IsolationLevel_READ_UNCOMMITTED
	if *readCommitted {
		iso = skeinv1.IsolationLevel_READ_COMMITTED
	}
	conn, err := f.dial()
	if err != nil {
		return err
	}
	defer conn.Close()
	out := &printer{w: stdio.Out, json: *f.json, printKey: *printKey, sep: *sep, max: *maxRecords,
		printTimestamp: *printTimestamp, printPartition: *printPartition, printOffset: *printOffset, printHeaders: *printHeaders}
	if *group != "" {
		switch {
		case *partition >= 0 || *follow:
			return usagef("--group consumes the partitions the group assigns, until Ctrl-C: no --partition or --follow")
		case !start.earliest && !start.latest:
			return usagef("--group starts at the committed offsets; --from can only be earliest, latest or none (for partitions with none)")
		}
		sub := &skeinv1.JoinGroupRequest{Group: *group, Topics: []string{topic}, InstanceId: *instanceID, Assignor: *assignor, AutoOffsetReset: "earliest", IsolationLevel: iso}
		switch {
		case noReset:
			sub.AutoOffsetReset = "none"
		case start.latest:
			sub.AutoOffsetReset = "latest"
		}
		if *sessionTimeout > 0 {
			sub.SessionTimeoutMs = ptr(int32(*sessionTimeout / time.Millisecond))
		}
		return groupConsume(ctx, conn, sub, out, stdio.Err, *idle)
	}

	dctx, cancel := timeout(ctx)
	desc, err := skeinv1.NewAdminServiceClient(conn).DescribeTopic(dctx, &skeinv1.DescribeTopicRequest{Topic: topic})
	cancel()
	if err != nil {
		return err
	}
	var parts []int32
	for _, p := range desc.GetTopic().GetPartitions() {
		if *partition < 0 || p.GetPartition() == int32(*partition) {
			parts = append(parts, p.GetPartition())
		}
	}
	if len(parts) == 0 {
		return fmt.Errorf("topic %s has no partition %d", topic, *partition)
	}
	if !start.earliest && !start.latest && len(parts) > 1 {
		return usagef("--from OFFSET needs --partition: offsets are per partition")
	}
	cons := skeinv1.NewConsumerServiceClient(conn)
	if *follow {
		err = tailAll(ctx, conn, topic, parts, start, iso, out, *partition < 0)
	} else {
		for _, p := range parts {
			if err = readToEnd(ctx, cons, topic, p, start, iso, out, stdio.Err); err != nil {
				break
			}
		}
	}
	switch {
	case errors.Is(err, errMaxReached):
		return nil
	case ctx.Err() != nil:
		// Interrupted (Ctrl-C, the usual end of --follow): what was
		// printed stands, and the exit status says how it ended.
		return ctx.Err()
	}
	return err
}

// readToEnd prints one partition from start to its end as of now. Under
// read_committed the end is the last stable offset; when an open
// transaction holds it below the high watermark, errw is told so, since
// the records after it are not printed.
func readToEnd(ctx context.Context, cons skeinv1.ConsumerServiceClient, topic string, p int32, start from, iso skeinv1.IsolationLevel, out *printer, errw io.Writer) error {
	req := &skeinv1.FetchRequest{Topic: topic, Partition: p, IsolationLevel: iso, MaxRecords: ptr(int32(500))}
	switch {
	case start.latest:
		return nil // nothing is after the end, and we do not wait
	case !start.earliest:
		req.Offset = ptr(start.offset)
	}
	end := int64(-1)
	for {
		cctx, cancel := timeout(ctx)
		resp, err := cons.Fetch(cctx, req)
		cancel()
		if err != nil {
			return err
		}
		if end < 0 {
			end = resp.GetHighWatermark()
			if iso == skeinv1.IsolationLevel_READ_COMMITTED {
				end = resp.GetLastStableOffset()
				if hw := resp.GetHighWatermark(); end < hw {
					fmt.Fprintf(errw, "skein: %s-%d: read up to its last stable offset %d: a transaction open there holds back what is written up to %d (--follow waits for it)\n", topic, p, end, hw)
				}
			}
		}
		for _, r := range resp.GetRecords() {
			if r.GetOffset() >= end {
				return nil
			}
			if done, err := out.print(r); err != nil || done {
				return errors.Join(err, errMaxReached)
			}
		}
		if resp.GetNextOffset() >= end || (len(resp.GetRecords()) == 0 && resp.GetNextOffset() == req.GetOffset()) {
			return nil
		}
		req.Offset = ptr(resp.GetNextOffset())
	}
}

// newPartitionPoll is how often consume --follow looks for partitions added
// to the topic while it runs (a variable for the tests).
var newPartitionPoll = 5 * time.Second

// tailAll follows every partition at once until ctx ends or --max. With
// watch (every partition of the topic was asked for), partitions added to
// the topic meanwhile are followed too, from their start: everything in
// them was written after the command started.
func tailAll(ctx context.Context, conn grpc.ClientConnInterface, topic string, parts []int32, start from, iso skeinv1.IsolationLevel, out *printer, watch bool) error {
	cons, admin := skeinv1.NewConsumerServiceClient(conn), skeinv1.NewAdminServiceClient(conn)
	g, gctx := errgroup.WithContext(ctx)
	follow := func(p int32, offset *int64) {
		g.Go(func() error {
			stream, err := cons.Tail(gctx, &skeinv1.TailRequest{Topic: topic, Partition: p, IsolationLevel: iso, Offset: offset})
			if err != nil {
				return err
			}
			for {
				resp, err := stream.Recv()
				if err != nil {
					return err
				}
				for _, r := range resp.GetRecords() {
					if done, err := out.print(r); err != nil || done {
						return errors.Join(err, errMaxReached)
					}
				}
			}
		})
	}
	// earliest answers each partition's log start; a partition without a
	// leader yet is left out.
	earliest := func() (map[int32]int64, error) {
		cctx, cancel := timeout(gctx)
		defer cancel()
		offs, err := admin.ListOffsets(cctx, &skeinv1.ListOffsetsRequest{Topic: topic, Spec: skeinv1.OffsetSpec_EARLIEST})
		if err != nil {
			return nil, err
		}
		m := map[int32]int64{}
		for _, o := range offs.GetOffsets() {
			if o.GetOffset() >= 0 && o.GetErrorCode() == 0 {
				m[o.GetPartition()] = o.GetOffset()
			}
		}
		return m, nil
	}
	var starts map[int32]int64
	if start.earliest {
		var err error
		if starts, err = earliest(); err != nil {
			return err
		}
	}
	known := map[int32]bool{}
	for _, p := range parts {
		known[p] = true
		switch {
		case start.earliest:
			off := starts[p] // 0 when its leader did not say
			follow(p, &off)
		case start.latest:
			follow(p, nil)
		default:
			follow(p, ptr(start.offset))
		}
	}
	if watch {
		g.Go(func() error {
			t := time.NewTicker(newPartitionPoll)
			defer t.Stop()
			for {
				select {
				case <-gctx.Done():
					return nil
				case <-t.C:
				}
				// A failed look is tried again on the next tick: the
				// partitions already followed report their own errors.
				cctx, cancel := timeout(gctx)
				desc, err := admin.DescribeTopic(cctx, &skeinv1.DescribeTopicRequest{Topic: topic})
				cancel()
				if err != nil {
					continue
				}
				grew := false
				for _, pd := range desc.GetTopic().GetPartitions() {
					grew = grew || !known[pd.GetPartition()]
				}
				if !grew {
					continue
				}
				starts, err := earliest()
				if err != nil {
					continue
				}
				for _, pd := range desc.GetTopic().GetPartitions() {
					p := pd.GetPartition()
					if off, ok := starts[p]; ok && !known[p] {
						known[p] = true
						follow(p, &off)
					}
				}
			}
		})
	}
	return g.Wait()
}
