package api

import (
	"cmp"
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	groupv1 "skein/gen/skein/group/v1"
	skeinv1 "skein/gen/skein/v1"
	"skein/libs/client"
	"skein/libs/errs"
)

// Group limits and defaults.
const (
	// MaxOffsetMetadata is the most bytes of metadata one committed offset
	// may carry (Kafka's offset.metadata.max.bytes).
	MaxOffsetMetadata = 4096
	// MaxGroupWait caps a member fetch's long poll.
	MaxGroupWait = 30 * time.Second
	// MaxGroupIDLength bounds a group id.
	MaxGroupIDLength = 255
)

var tracer = otel.Tracer("skein/gateway")

// Group is GroupService. It keeps no member state: membership, epochs and
// assignments live in the group coordinator, positions in the caller's
// requests (or the committed offsets), so any gateway serves any call. The
// one thing a member sets at join that later calls need — auto_offset_reset
// — travels in the member id the gateway mints ("<32 hex>-earliest",
// "<32 hex>-latest" or "<32 hex>-none").
type Group struct {
	skeinv1.UnimplementedGroupServiceServer

	c        *client.Client
	groups   *client.Groups
	log      *slog.Logger
	drain    sync.Once
	draining chan struct{} // closed by Drain

	streamsMu sync.Mutex
	streams   map[[2]string]*streamMember // the Consume streams' members, by group and member id
}

// NewGroup serves GroupService through c.
func NewGroup(c *client.Client, log *slog.Logger) *Group {
	return &Group{c: c, groups: c.Groups(), log: log, draining: make(chan struct{})}
}

// Drain ends every Consume stream (the member leaves its group), so a
// graceful stop does not wait for streams that never end.
func (s *Group) Drain() { s.drain.Do(func() { close(s.draining) }) }

// Close closes the coordinator connections.
func (s *Group) Close() error { return s.groups.Close() }

func validateGroupID(g string) error {
	switch {
	case g == "":
		return errs.Errorf(errs.InvalidGroupID, "the group id is empty")
	case len(g) > MaxGroupIDLength:
		return errs.Errorf(errs.InvalidGroupID, "the group id is %d bytes long, more than %d", len(g), MaxGroupIDLength)
	}
	return nil
}

func validateMember(group, member string, epoch int32) error {
	if err := validateGroupID(group); err != nil {
		return err
	}
	if member == "" {
		return errs.Errorf(errs.UnknownMemberID, "no member id")
	}
	if epoch <= 0 {
		return errs.Errorf(errs.InvalidRequest, "member_epoch must be the positive epoch the join or the last call answered, got %d", epoch)
	}
	return nil
}

// maxMemberIDLen bounds a member id a caller chooses.
const maxMemberIDLen = 64

// maxInstanceIDLen bounds an instance id (static membership), as Kafka
// bounds group.instance.id. The coordinator writes it in the group's record
// of __consumer_offsets, where an unbounded one would be refused as a
// record too large for that topic.
const maxInstanceIDLen = 249

// validNameRune reports whether r may be in a member id or an instance id a
// caller chooses.
func validNameRune(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-'
}

// validateChosenID checks an id a caller chooses, named field in the
// message: 1 to limit characters of [a-zA-Z0-9._-], else INVALID_REQUEST.
// Too long an id is not quoted back.
func validateChosenID(field, id string, limit int) error {
	if len(id) > limit {
		return errs.Errorf(errs.InvalidRequest, "%s is %d bytes long: want 1-%d characters of [a-zA-Z0-9._-]", field, len(id), limit)
	}
	if id == "" || strings.IndexFunc(id, func(r rune) bool { return !validNameRune(r) }) >= 0 {
		return errs.Errorf(errs.InvalidRequest, "%s %q: want 1-%d characters of [a-zA-Z0-9._-]", field, id, limit)
	}
	return nil
}

// resetOf answers the auto_offset_reset a member id minted here carries.
func resetOf(member string) string {
	switch {
	case strings.HasSuffix(member, "-"+client.ResetEarliest):
		return client.ResetEarliest
	case strings.HasSuffix(member, "-"+client.ResetNone):
		return client.ResetNone
	}
	return client.ResetLatest
}

func toAssignment(tps []*groupv1.TopicPartitions) []*skeinv1.TopicPartitions {
	out := make([]*skeinv1.TopicPartitions, 0, len(tps))
	for _, t := range tps {
		out = append(out, &skeinv1.TopicPartitions{Topic: t.GetTopic(), Partitions: slices.Clone(t.GetPartitions())})
	}
	return out
}

// JoinGroup adds a member and answers its id, epoch and first assignment.
func (s *Group) JoinGroup(ctx context.Context, req *skeinv1.JoinGroupRequest) (*skeinv1.JoinGroupResponse, error) {
	if req.GetIsolationLevel() != skeinv1.IsolationLevel_READ_UNCOMMITTED {
		// Taken and then ignored, it would let a member that asked for
		// committed records only be served aborted and open ones.
		return nil, errs.Errorf(errs.InvalidRequest, "isolation_level %s: a member that joins here keeps no reader, so each fetch of its records (POST .../members/{member_id}/records) names its own isolation_level; the Consume stream takes it at subscribe", req.GetIsolationLevel())
	}
	hb, err := s.joinRequest(ctx, req)
	if err != nil {
		return nil, err
	}
	resp, err := s.groups.Heartbeat(ctx, hb)
	if err != nil {
		return nil, err
	}
	return &skeinv1.JoinGroupResponse{MemberId: resp.GetMemberId(), MemberEpoch: resp.GetMemberEpoch(),
		HeartbeatIntervalMs: resp.GetHeartbeatIntervalMs(), Assignment: toAssignment(resp.GetAssignment())}, nil
}

// joinRequest validates a join and builds its coordinator heartbeat.
func (s *Group) joinRequest(ctx context.Context, req *skeinv1.JoinGroupRequest) (*groupv1.ConsumerGroupHeartbeatRequest, error) {
	if err := validateGroupID(req.GetGroup()); err != nil {
		return nil, err
	}
	if len(req.GetTopics()) == 0 {
		return nil, errs.Errorf(errs.InvalidRequest, "topics is empty: a member subscribes to at least one topic")
	}
	for _, t := range req.GetTopics() {
		if _, _, err := knownTopic(ctx, s.c, t); err != nil {
			return nil, err
		}
	}
	if req.SessionTimeoutMs != nil && *req.SessionTimeoutMs <= 0 {
		return nil, errs.Errorf(errs.InvalidSessionTimeout, "session_timeout_ms must be positive, got %d", *req.SessionTimeoutMs)
	}
	switch req.GetAssignor() {
	case "", "range", "uniform":
	default:
		return nil, errs.Errorf(errs.UnsupportedAssignor, "assignor %q: want \"range\" or \"uniform\"", req.GetAssignor())
	}
	if err := validateRead(req.GetIsolationLevel(), skeinv1.Encoding_TEXT); err != nil {
		return nil, err // a unary join ignores it, but not a value no reader could have
	}
	reset := req.GetAutoOffsetReset()
	switch reset {
	case "":
		reset = client.ResetLatest
	case client.ResetEarliest, client.ResetLatest, client.ResetNone:
	default:
		return nil, errs.Errorf(errs.InvalidRequest, "auto_offset_reset %q: want \"earliest\", \"latest\" or \"none\"", reset)
	}
	id := req.GetMemberId()
	if id == "" {
		id = client.NewMemberID()
	} else if err := validateChosenID("member_id", id, maxMemberIDLen); err != nil {
		return nil, err
	}
	if iid := req.GetInstanceId(); iid != "" { // empty: a dynamic member
		if err := validateChosenID("instance_id", iid, maxInstanceIDLen); err != nil {
			return nil, err
		}
	}
	return &groupv1.ConsumerGroupHeartbeatRequest{
		GroupId: req.GetGroup(), MemberId: id + "-" + reset, MemberEpoch: 0,
		InstanceId: req.GetInstanceId(), SessionTimeoutMs: req.GetSessionTimeoutMs(),
		SubscribedTopics: req.GetTopics(), ServerAssignor: req.GetAssignor(), OwnedPartitions: []*groupv1.TopicPartitions{},
	}, nil
}

// owned answers what a member holds as the coordinator sees it: its
// assignment less the partitions being revoked from it (the member was told
// to let go of them on an earlier call), within its target. Leaving out
// every partition being revoked — even one the target has given back to
// the member since, which the coordinator assigns again only once let go —
// confirms revocations the member has been told about, never one it has not.
func (s *Group) owned(ctx context.Context, group, member string) ([]client.TopicPartition, error) {
	d, err := s.groups.Describe(ctx, group)
	if errs.Of(err) == errs.GroupIDNotFound {
		return nil, errs.Errorf(errs.UnknownMemberID, "group %q does not exist", group)
	}
	if err != nil {
		return nil, err
	}
	for _, m := range d.GetMembers() {
		if m.GetMemberId() != member {
			continue
		}
		target := client.FromTopicPartitions(m.GetTargetAssignment())
		revoking := client.FromTopicPartitions(m.GetRevoking())
		var out []client.TopicPartition
		for _, tp := range client.FromTopicPartitions(m.GetAssignment()) {
			if slices.Contains(target, tp) && !slices.Contains(revoking, tp) {
				out = append(out, tp)
			}
		}
		return out, nil
	}
	return nil, errs.Errorf(errs.UnknownMemberID, "member %s is not in group %q", member, group)
}

func (s *Group) heartbeat(ctx context.Context, group, member string, epoch int32, owned []client.TopicPartition) (*groupv1.ConsumerGroupHeartbeatResponse, error) {
	return s.groups.Heartbeat(ctx, &groupv1.ConsumerGroupHeartbeatRequest{
		GroupId: group, MemberId: member, MemberEpoch: epoch, OwnedPartitions: client.ToTopicPartitions(owned)})
}

// Heartbeat keeps a member alive and answers its assignment. Partitions an
// earlier answer took away count as given up from this call on.
func (s *Group) Heartbeat(ctx context.Context, req *skeinv1.HeartbeatRequest) (*skeinv1.HeartbeatResponse, error) {
	if err := validateMember(req.GetGroup(), req.GetMemberId(), req.GetMemberEpoch()); err != nil {
		return nil, err
	}
	owned, err := s.owned(ctx, req.GetGroup(), req.GetMemberId())
	if err != nil {
		return nil, err
	}
	resp, err := s.heartbeat(ctx, req.GetGroup(), req.GetMemberId(), req.GetMemberEpoch(), owned)
	if err != nil {
		return nil, err
	}
	return &skeinv1.HeartbeatResponse{MemberEpoch: resp.GetMemberEpoch(), Assignment: toAssignment(resp.GetAssignment()),
		HeartbeatIntervalMs: resp.GetHeartbeatIntervalMs()}, nil
}

// FetchGroupRecords heartbeats for the member and reads its assignment.
// With positions, the member holds exactly their partitions: a partition
// the coordinator takes away is committed at its position (commit-on-revoke)
// and given up in the same call, so the group reads every record once.
// Without positions, reading starts at the committed offsets (or the
// member's auto_offset_reset).
func (s *Group) FetchGroupRecords(ctx context.Context, req *skeinv1.FetchGroupRecordsRequest) (*skeinv1.FetchGroupRecordsResponse, error) {
	if err := validateMember(req.GetGroup(), req.GetMemberId(), req.GetMemberEpoch()); err != nil {
		return nil, err
	}
	maxRecords, wait, err := fetchLimits(req.MaxRecords, req.MaxWaitMs)
	if err != nil {
		return nil, err
	}
	if req.GetMinBytes() < 0 {
		return nil, errs.Errorf(errs.InvalidRequest, "min_bytes must not be negative, got %d", req.GetMinBytes())
	}
	if err := validateRead(req.GetIsolationLevel(), req.GetEncoding()); err != nil {
		return nil, err
	}
	given := map[client.TopicPartition]int64{}
	for _, p := range req.GetPositions() {
		if err := validateTopicPartition(p.GetTopic(), p.GetPartition()); err != nil {
			return nil, err
		}
		tp := client.TopicPartition{Topic: p.GetTopic(), Partition: p.GetPartition()}
		if _, dup := given[tp]; dup {
			return nil, errs.Errorf(errs.InvalidRequest, "positions names %s:%d twice", tp.Topic, tp.Partition)
		}
		if p.GetOffset() < unknownPosition {
			return nil, errs.Errorf(errs.OffsetOutOfRange, "position %d of %s:%d is negative", p.GetOffset(), tp.Topic, tp.Partition)
		}
		given[tp] = p.GetOffset()
	}
	group, member := req.GetGroup(), req.GetMemberId()
	var owned []client.TopicPartition
	if len(given) > 0 {
		for tp := range given {
			owned = append(owned, tp)
		}
	} else if owned, err = s.owned(ctx, group, member); err != nil {
		return nil, err
	}
	resp, err := s.heartbeat(ctx, group, member, req.GetMemberEpoch(), owned)
	if err != nil {
		return nil, err
	}
	assignment := client.FromTopicPartitions(resp.GetAssignment())
	if len(given) > 0 {
		var revoked []*groupv1.PartitionOffset
		released := false
		for _, tp := range owned {
			if slices.Contains(assignment, tp) {
				continue
			}
			released = true
			if given[tp] >= 0 { // an unstarted one has no position to commit
				revoked = append(revoked, &groupv1.PartitionOffset{Topic: tp.Topic, Partition: tp.Partition, Offset: given[tp]})
			}
		}
		if released {
			if len(revoked) > 0 {
				s.commitOnRevoke(ctx, group, member, resp.GetMemberEpoch(), revoked)
			}
			if resp, err = s.heartbeat(ctx, group, member, resp.GetMemberEpoch(), assignment); err != nil {
				return nil, err
			}
			assignment = client.FromTopicPartitions(resp.GetAssignment())
		}
	}
	starts, err := s.startOffsets(ctx, group, resetOf(member), assignment, given, req.GetIsolationLevel())
	if err != nil {
		return nil, err
	}
	// This call's heartbeat keeps the member for one heartbeat interval:
	// a wait past it could outlast the member's session, and answer
	// records of partitions the group has given to another member since.
	if hb := time.Duration(resp.GetHeartbeatIntervalMs()) * time.Millisecond; hb > 0 {
		wait = min(wait, hb)
	}
	out := &skeinv1.FetchGroupRecordsResponse{Records: []*skeinv1.ConsumedRecord{}, MemberEpoch: resp.GetMemberEpoch(),
		Assignment: toAssignment(resp.GetAssignment()), Positions: []*skeinv1.TopicPartitionOffset{}}
	failed := deliveryAttempts(resp.GetDeliveries())
	next, err := s.read(ctx, group, resetOf(member), starts, fetchLimit{records: maxRecords, minBytes: req.GetMinBytes(), wait: wait}, req.GetIsolationLevel(), func(r client.ConsumedRecord) {
		cr := toConsumed(r, req.GetEncoding())
		cr.DeliveryAttempt = failed[client.TopicPartition{Topic: r.Topic, Partition: r.Partition}][r.Offset] + 1
		out.Records = append(out.Records, cr)
	})
	if err != nil {
		return nil, err
	}
	for _, tp := range assignment {
		off, ok := next[tp]
		if !ok {
			off = unknownPosition // not started: its committed offset is pending in a transaction
		}
		out.Positions = append(out.Positions, &skeinv1.TopicPartitionOffset{Topic: tp.Topic, Partition: tp.Partition, Offset: off})
	}
	return out, nil
}

// unknownPosition is the position of a partition the member holds but has
// not started reading: the next call starts it at its committed offset.
const unknownPosition = -1

func fetchLimits(maxRecords, maxWaitMs *int32) (int, time.Duration, error) {
	n, wait := DefaultMaxRecords, time.Duration(0)
	if maxRecords != nil {
		if *maxRecords < 1 {
			return 0, 0, errs.Errorf(errs.InvalidRequest, "max_records must be at least 1, got %d", *maxRecords)
		}
		n = int(*maxRecords)
	}
	if maxWaitMs != nil {
		if *maxWaitMs < 0 {
			return 0, 0, errs.Errorf(errs.InvalidRequest, "max_wait_ms must not be negative, got %d", *maxWaitMs)
		}
		wait = min(time.Duration(*maxWaitMs)*time.Millisecond, MaxGroupWait)
	}
	return n, wait, nil
}

func validateTopicPartition(topic string, partition int32) error {
	if err := ValidateTopicName(topic); err != nil {
		return err
	}
	if partition < 0 {
		return errs.Errorf(errs.UnknownTopicOrPartition, "partition %d of %q is negative", partition, topic)
	}
	return nil
}

// commitOnRevoke commits the positions of partitions taken from a member
// before they are given up; a failure is logged (the next owner then starts
// at the older commit: records are read twice, never skipped).
func (s *Group) commitOnRevoke(ctx context.Context, group, member string, epoch int32, offsets []*groupv1.PartitionOffset) {
	results, err := s.groups.CommitOffsets(ctx, &groupv1.OffsetCommitRequest{GroupId: group, MemberId: member, MemberEpoch: epoch, Offsets: offsets})
	if err == nil {
		for _, r := range results {
			if r.GetErrorCode() != skeinv1.ErrorCode_NONE {
				err = errs.Errorf(errs.ForCode(errs.Code(r.GetErrorCode())), "%s", r.GetErrorMessage())
			}
		}
	}
	if err != nil {
		s.log.WarnContext(ctx, "commit on revoke failed", "group", group, "member", member, "err", err)
	}
}

// startOffsets answers where each partition of the assignment is read from:
// the given position, else the committed offset, else the reset policy. A
// read_committed member does not start a partition whose committed offset
// is pending in a transaction (Kafka's stable offsets): it is left out
// until the transaction ends, neither read from the offset before it nor
// reset.
func (s *Group) startOffsets(ctx context.Context, group, reset string, assignment []client.TopicPartition, given map[client.TopicPartition]int64, iso skeinv1.IsolationLevel) (map[client.TopicPartition]int64, error) {
	out := map[client.TopicPartition]int64{}
	var todo []client.TopicPartition
	for _, tp := range assignment {
		if off, ok := given[tp]; ok && off >= 0 {
			out[tp] = off
		} else {
			todo = append(todo, tp)
		}
	}
	if len(todo) == 0 {
		return out, nil
	}
	fetch := s.groups.FetchOffsets
	if iso == skeinv1.IsolationLevel_READ_COMMITTED {
		fetch = s.groups.FetchStableOffsets
	}
	committed, err := fetch(ctx, group, client.ToTopicPartitions(todo))
	if err != nil {
		return nil, err
	}
	unstable := map[client.TopicPartition]bool{}
	for _, o := range committed {
		tp := client.TopicPartition{Topic: o.GetTopic(), Partition: o.GetPartition()}
		switch {
		case !slices.Contains(todo, tp):
		case o.GetErrorCode() == skeinv1.ErrorCode_UNSTABLE_OFFSET_COMMIT:
			unstable[tp] = true
		case o.GetErrorCode() != skeinv1.ErrorCode_NONE:
			// Not known: never a reset in its place, which could skip or
			// repeat what the group committed. Left unstarted for the next
			// call, unless it will not pass.
			err := errs.Errorf(errs.ForCode(errs.Code(o.GetErrorCode())), "the committed offset of %s-%d could not be read", tp.Topic, tp.Partition)
			if !errs.IsRetriable(err) {
				return nil, err
			}
			unstable[tp] = true
		case o.GetOffset() >= 0:
			out[tp] = o.GetOffset()
		}
	}
	var missing []client.TopicPartition
	for _, tp := range todo {
		if _, ok := out[tp]; !ok && !unstable[tp] {
			missing = append(missing, tp)
		}
	}
	if reset == client.ResetNone && len(missing) > 0 {
		return nil, client.NoResetError(group, missing)
	}
	return out, s.reset(ctx, reset, missing, iso, out)
}

// reset sets each partition's offset in out to the reset policy's (never
// called under ResetNone).
func (s *Group) reset(ctx context.Context, reset string, tps []client.TopicPartition, iso skeinv1.IsolationLevel, out map[client.TopicPartition]int64) error {
	spec := client.LatestOffset
	if reset == client.ResetEarliest {
		spec = client.EarliestOffset
	}
	byTopic := map[string][]int32{}
	for _, tp := range tps {
		byTopic[tp.Topic] = append(byTopic[tp.Topic], tp.Partition)
	}
	// A partition whose offset cannot be had now (no leader, say) is left
	// out: not started (position -1), or at its position out of range, it
	// is tried again by the member's next call while the others are read.
	// A refusal that will not pass (not authorized) fails the call.
	for topic, parts := range byTopic {
		parts, leaderless := client.SplitByLeader(s.c.Metadata(), topic, parts)
		if len(leaderless) > 0 {
			// At debug level: every call of the member says it again.
			s.log.DebugContext(ctx, "the reset offsets of a member's partitions wait for their leaders", "topic", topic, "partitions", leaderless)
		}
		if len(parts) == 0 {
			continue
		}
		offs, err := s.c.ListOffsets(ctx, topic, parts, spec, iso)
		if err != nil {
			if !errs.IsRetriable(err) {
				return err
			}
			s.log.WarnContext(ctx, "the reset offsets of a member's partitions are not available yet", "topic", topic, "err", err)
			continue
		}
		for _, o := range offs {
			if o.Err != nil {
				if !errs.IsRetriable(o.Err) {
					return o.Err
				}
				s.log.WarnContext(ctx, "the reset offset of a member's partition is not available yet", "topic", topic, "partition", o.Partition, "err", o.Err)
				continue
			}
			out[client.TopicPartition{Topic: topic, Partition: o.Partition}] = o.Offset
		}
	}
	return nil
}

// fetchLimit is what bounds one read of a member's partitions: at most
// records in all, waiting up to wait for minBytes of them.
type fetchLimit struct {
	records  int
	minBytes int32
	wait     time.Duration
}

// read fetches the partitions from their start offsets, hands every record
// to emit (and joins it to its producer's trace), and answers the next
// position of each partition. A start out of range moves to the reset
// policy's offset and reads nothing this time.
func (s *Group) read(ctx context.Context, group, reset string, starts map[client.TopicPartition]int64, lim fetchLimit, iso skeinv1.IsolationLevel, emit func(client.ConsumedRecord)) (map[client.TopicPartition]int64, error) {
	wait := lim.wait
	next := map[client.TopicPartition]int64{}
	if len(starts) == 0 {
		if wait > 0 {
			t := time.NewTimer(wait)
			defer t.Stop()
			select {
			case <-t.C:
			case <-ctx.Done():
			}
		}
		return next, nil
	}
	var reqs []client.FetchRequest
	for tp, off := range starts {
		reqs = append(reqs, client.FetchRequest{Topic: tp.Topic, Partition: tp.Partition, Offset: off,
			MaxRecords: lim.records, MaxBytes: DefaultMaxBytes, MaxWait: wait, Isolation: iso})
	}
	slices.SortFunc(reqs, func(a, b client.FetchRequest) int {
		if a.Topic != b.Topic {
			return strings.Compare(a.Topic, b.Topic)
		}
		return int(a.Partition - b.Partition)
	})
	var outOfRange []client.TopicPartition
	var firstErr, stuck error
	failed := 0
	for _, a := range s.c.FetchAny(ctx, reqs, lim.records, lim.minBytes) {
		tp := client.TopicPartition{Topic: a.Request.Topic, Partition: a.Request.Partition}
		next[tp] = a.Next
		switch {
		case a.Err == nil:
			traceConsumed(ctx, group, a.Records)
			for _, r := range a.Records {
				emit(r)
			}
		case errs.Of(a.Err) == errs.OffsetOutOfRange && reset == client.ResetNone:
			// Nowhere to move it: the call fails, whatever the others
			// answered (their positions stay too, so they are read
			// again), until the member sends another position for it, as
			// Kafka's poll throws OffsetOutOfRangeException until a seek.
			if stuck == nil {
				stuck = errs.Errorf(errs.OffsetOutOfRange, "%s, and auto_offset_reset is none", errs.Message(a.Err))
			}
		case errs.Of(a.Err) == errs.OffsetOutOfRange:
			outOfRange = append(outOfRange, tp)
		case errs.Of(a.Err) == errs.CorruptMessage:
			// Read again it fails again: the member is told, as Kafka's
			// poll throws CorruptRecordException, instead of an empty
			// answer for ever (a position past the batch reads on).
			return nil, a.Err
		default:
			// This partition's position stays; the member reads it next time.
			failed++
			if firstErr == nil {
				firstErr = a.Err
			}
		}
	}
	if failed == len(reqs) {
		return nil, firstErr
	}
	if stuck != nil {
		return nil, stuck
	}
	return next, s.reset(ctx, reset, outOfRange, iso, next)
}

// maxTraceLinks bounds the consume spans one fetch starts.
const maxTraceLinks = 64

// traceConsumed starts, for each distinct producer trace among the records,
// a "skein.consume" span inside that trace (a child of the produce span,
// named in the record's traceparent header) linked to this fetch's span, so
// a trace shows a record from produce to consume.
func traceConsumed(ctx context.Context, group string, recs []client.ConsumedRecord) {
	seen := map[string]bool{}
	fetch := trace.LinkFromContext(ctx)
	for _, r := range recs {
		if len(seen) >= maxTraceLinks {
			return
		}
		for _, h := range r.Headers {
			if h.Key != client.TraceparentHeader || seen[string(h.Value)] {
				continue
			}
			seen[string(h.Value)] = true
			pctx := propagation.TraceContext{}.Extract(context.Background(), propagation.MapCarrier{client.TraceparentHeader: string(h.Value)})
			if !trace.SpanContextFromContext(pctx).IsValid() {
				continue
			}
			_, span := tracer.Start(pctx, "skein.consume", trace.WithSpanKind(trace.SpanKindConsumer), trace.WithLinks(fetch),
				trace.WithAttributes(attribute.String("group", group), attribute.String("topic", r.Topic),
					attribute.Int("partition", int(r.Partition)), attribute.Int64("offset", r.Offset)))
			span.End()
		}
	}
}

// CommitOffsets commits a member's offsets, or, with no member id and a
// negative epoch, an administrative reset of an empty group. Every input is
// checked first; a partition the member does not own refuses the whole
// call, before anything is written.
func (s *Group) CommitOffsets(ctx context.Context, req *skeinv1.CommitOffsetsRequest) (*skeinv1.CommitOffsetsResponse, error) {
	if err := validateGroupID(req.GetGroup()); err != nil {
		return nil, err
	}
	admin := req.GetMemberId() == "" && req.GetMemberEpoch() < 0
	if !admin {
		if err := validateMember(req.GetGroup(), req.GetMemberId(), req.GetMemberEpoch()); err != nil {
			return nil, err
		}
	}
	if len(req.GetOffsets()) == 0 {
		return nil, errs.Errorf(errs.InvalidRequest, "offsets is empty")
	}
	if err := waitReady(ctx, s.c); err != nil {
		return nil, err
	}
	seen := map[client.TopicPartition]bool{}
	creq := &groupv1.OffsetCommitRequest{GroupId: req.GetGroup(), MemberId: req.GetMemberId(), MemberEpoch: req.GetMemberEpoch()}
	for _, o := range req.GetOffsets() {
		tp := client.TopicPartition{Topic: o.GetTopic(), Partition: o.GetPartition()}
		if _, n, err := knownTopic(ctx, s.c, tp.Topic); err != nil {
			return nil, err
		} else if err := checkPartition(tp.Topic, tp.Partition, n); err != nil {
			return nil, err
		}
		if seen[tp] {
			return nil, errs.Errorf(errs.InvalidRequest, "offsets names %s:%d twice", tp.Topic, tp.Partition)
		}
		seen[tp] = true
		if o.GetOffset() < 0 {
			return nil, errs.Errorf(errs.InvalidRequest, "offset %d of %s:%d is negative", o.GetOffset(), tp.Topic, tp.Partition)
		}
		if len(o.GetMetadata()) > MaxOffsetMetadata {
			return nil, errs.Errorf(errs.OffsetMetadataTooLarge, "metadata of %s:%d is %d bytes, more than %d", tp.Topic, tp.Partition, len(o.GetMetadata()), MaxOffsetMetadata)
		}
		creq.Offsets = append(creq.Offsets, &groupv1.PartitionOffset{Topic: tp.Topic, Partition: tp.Partition, Offset: o.GetOffset(), Metadata: o.GetMetadata()})
	}
	if err := s.checkCommit(ctx, req, seen); err != nil {
		return nil, err
	}
	results, err := s.groups.CommitOffsets(ctx, creq)
	if err != nil {
		return nil, err
	}
	out := &skeinv1.CommitOffsetsResponse{}
	for _, r := range results {
		if r.GetErrorCode() != skeinv1.ErrorCode_NONE {
			// A refusal the checks above could not foresee (the group moved
			// on meanwhile): the commit is idempotent, so the caller retries
			// or rejoins as the code says.
			return nil, errs.Errorf(errs.ForCode(errs.Code(r.GetErrorCode())), "%s:%d: %s", r.GetTopic(), r.GetPartition(), r.GetErrorMessage())
		}
		out.Results = append(out.Results, &skeinv1.PartitionCommitResult{Topic: r.GetTopic(), Partition: r.GetPartition()})
	}
	return out, nil
}

// checkCommit refuses, before anything is written, a commit the
// coordinator would refuse for some partition, so that a commit is written
// whole or not at all: an unknown member, a stale epoch, a partition
// outside the member's assignment (which includes the partitions being
// revoked from it: still its to commit); an administrative commit to a
// group with members.
func (s *Group) checkCommit(ctx context.Context, req *skeinv1.CommitOffsetsRequest, tps map[client.TopicPartition]bool) error {
	d, err := s.groups.Describe(ctx, req.GetGroup())
	if errs.Of(err) == errs.GroupIDNotFound {
		if req.GetMemberId() == "" {
			return nil // an administrative commit creates the group's offsets
		}
		return errs.Errorf(errs.UnknownMemberID, "group %q does not exist", req.GetGroup())
	}
	if err != nil {
		return err
	}
	if req.GetMemberId() == "" {
		if n := len(d.GetMembers()); n > 0 {
			return errs.Errorf(errs.NonEmptyGroup, "group %q has %d member(s): offsets can be reset only while it has none", req.GetGroup(), n)
		}
		return nil
	}
	var me *groupv1.MemberDescription
	for _, m := range d.GetMembers() {
		if m.GetMemberId() == req.GetMemberId() {
			me = m
		}
	}
	if me == nil {
		return errs.Errorf(errs.UnknownMemberID, "member %s is not in group %q", req.GetMemberId(), req.GetGroup())
	}
	if me.GetMemberEpoch() != req.GetMemberEpoch() {
		return errs.Errorf(errs.StaleMemberEpoch, "member %s is at epoch %d, not %d", me.GetMemberId(), me.GetMemberEpoch(), req.GetMemberEpoch())
	}
	mine := client.FromTopicPartitions(me.GetAssignment())
	for tp := range tps {
		if !slices.Contains(mine, tp) {
			return errs.Errorf(errs.StaleMemberEpoch, "member %s does not own %s:%d at epoch %d", me.GetMemberId(), tp.Topic, tp.Partition, req.GetMemberEpoch())
		}
	}
	return nil
}

// LeaveGroup removes a member; its partitions move to the others. A
// static member (one with an instance id) leaves for now, as Kafka's
// static members do on close (epoch -2): its partitions wait, until its
// session times out, for a member that joins with its instance id.
func (s *Group) LeaveGroup(ctx context.Context, req *skeinv1.LeaveGroupRequest) (*skeinv1.LeaveGroupResponse, error) {
	if err := validateMember(req.GetGroup(), req.GetMemberId(), 1); err != nil {
		return nil, err
	}
	leave := &groupv1.ConsumerGroupHeartbeatRequest{GroupId: req.GetGroup(), MemberId: req.GetMemberId(), MemberEpoch: -1}
	d, err := s.groups.Describe(ctx, req.GetGroup())
	switch {
	case errs.Of(err) == errs.GroupIDNotFound:
		// No such group: the plain leave answers what is wrong.
	case err != nil:
		// Without knowing whether the member is static, a plain leave
		// could end a static member's membership for good.
		return nil, err
	}
	for _, m := range d.GetMembers() {
		if m.GetMemberId() == req.GetMemberId() && m.GetInstanceId() != "" {
			leave.MemberEpoch, leave.InstanceId = -2, m.GetInstanceId()
		}
	}
	if _, err := s.groups.Heartbeat(ctx, leave); err != nil {
		return nil, err
	}
	return &skeinv1.LeaveGroupResponse{}, nil
}

// stateName is the API's spelling of a coordinator state.
func stateName(s string) string { return strings.ToUpper(s) }

// ListGroups lists the groups of every group coordinator.
func (s *Group) ListGroups(ctx context.Context, _ *skeinv1.ListGroupsRequest) (*skeinv1.ListGroupsResponse, error) {
	if err := waitReady(ctx, s.c); err != nil {
		return nil, err
	}
	list, err := s.groups.List(ctx)
	if err != nil {
		return nil, err
	}
	out := &skeinv1.ListGroupsResponse{Groups: []*skeinv1.GroupSummary{}}
	for _, l := range list {
		out.Groups = append(out.Groups, &skeinv1.GroupSummary{Group: l.GetGroupId(), State: stateName(l.GetState()), Members: l.GetMembers()})
	}
	return out, nil
}

// committedWithLag answers a group's committed offsets with each
// partition's high watermark and the lag behind it (as Kafka's
// kafka-consumer-groups counts it: an open transaction's records count,
// though a read_committed member cannot read them yet),
// and a row for each partition of assigned (its members' assignment) with
// nothing committed: offset and lag -1, as Kafka's tool shows "-" there
// (where its member starts depends on its auto_offset_reset). The total
// counts the lags that are known. Rows are in topic and partition order.
func (s *Group) committedWithLag(ctx context.Context, group string, assigned []client.TopicPartition) ([]*skeinv1.CommittedOffset, int64, error) {
	offs, err := s.groups.FetchOffsets(ctx, group, nil)
	if err != nil {
		return nil, 0, err
	}
	committed := map[client.TopicPartition]*groupv1.CommittedOffset{}
	byTopic := map[string][]int32{}
	for _, o := range offs {
		if o.GetOffset() >= 0 {
			tp := client.TopicPartition{Topic: o.GetTopic(), Partition: o.GetPartition()}
			committed[tp] = o
			byTopic[tp.Topic] = append(byTopic[tp.Topic], tp.Partition)
		}
	}
	var unstarted []client.TopicPartition
	for _, tp := range assigned {
		if _, ok := committed[tp]; !ok && !slices.Contains(unstarted, tp) {
			unstarted = append(unstarted, tp)
			byTopic[tp.Topic] = append(byTopic[tp.Topic], tp.Partition)
		}
	}
	hw := map[client.TopicPartition]int64{}
	for topic, parts := range byTopic {
		if s.c.Metadata().PartitionCount(topic) == 0 {
			continue // deleted since
		}
		res, err := s.c.ListOffsets(ctx, topic, parts, client.LatestOffset, skeinv1.IsolationLevel_READ_UNCOMMITTED)
		if err != nil {
			return nil, 0, err
		}
		for _, r := range res {
			if r.Err == nil {
				hw[client.TopicPartition{Topic: topic, Partition: r.Partition}] = r.Offset
			}
		}
	}
	out := []*skeinv1.CommittedOffset{}
	var total int64
	for tp, o := range committed {
		// -1 for both while the partition's end is not known (its leader
		// did not answer, the topic was deleted): not a lag of 0.
		co := &skeinv1.CommittedOffset{Topic: tp.Topic, Partition: tp.Partition, Offset: o.GetOffset(), Metadata: o.GetMetadata(), HighWatermark: -1, Lag: -1}
		if h, ok := hw[tp]; ok {
			co.HighWatermark, co.Lag = h, max(h-o.GetOffset(), 0)
			total += co.Lag
		}
		out = append(out, co)
	}
	for _, tp := range unstarted {
		co := &skeinv1.CommittedOffset{Topic: tp.Topic, Partition: tp.Partition, Offset: -1, HighWatermark: -1, Lag: -1}
		if h, ok := hw[tp]; ok {
			co.HighWatermark = h
		}
		out = append(out, co)
	}
	slices.SortFunc(out, func(a, b *skeinv1.CommittedOffset) int {
		return cmp.Or(strings.Compare(a.GetTopic(), b.GetTopic()), cmp.Compare(a.GetPartition(), b.GetPartition()))
	})
	return out, total, nil
}

// GetOffsets answers committed offsets with lag; GROUP_ID_NOT_FOUND for a
// group that does not exist.
func (s *Group) GetOffsets(ctx context.Context, req *skeinv1.GetOffsetsRequest) (*skeinv1.GetOffsetsResponse, error) {
	if err := validateGroupID(req.GetGroup()); err != nil {
		return nil, err
	}
	if err := waitReady(ctx, s.c); err != nil {
		return nil, err
	}
	offs, _, err := s.committedWithLag(ctx, req.GetGroup(), nil)
	if err != nil {
		return nil, err
	}
	if len(offs) == 0 {
		if _, err := s.groups.Describe(ctx, req.GetGroup()); err != nil {
			return nil, err
		}
	}
	return &skeinv1.GetOffsetsResponse{Offsets: offs}, nil
}

// DescribeGroup answers state, epoch, members with their assignment, and lag.
func (s *Group) DescribeGroup(ctx context.Context, req *skeinv1.DescribeGroupRequest) (*skeinv1.DescribeGroupResponse, error) {
	if err := validateGroupID(req.GetGroup()); err != nil {
		return nil, err
	}
	if err := waitReady(ctx, s.c); err != nil {
		return nil, err
	}
	d, err := s.groups.Describe(ctx, req.GetGroup())
	if err != nil {
		return nil, err
	}
	if stateName(d.GetState()) == "DEAD" {
		return nil, errs.Errorf(errs.GroupIDNotFound, "group %q does not exist", req.GetGroup())
	}
	var assigned []client.TopicPartition
	for _, m := range d.GetMembers() {
		assigned = append(assigned, client.FromTopicPartitions(m.GetAssignment())...)
	}
	offs, total, err := s.committedWithLag(ctx, req.GetGroup(), assigned)
	if err != nil {
		return nil, err
	}
	out := &skeinv1.DescribeGroupResponse{Group: d.GetGroupId(), State: stateName(d.GetState()), GroupEpoch: d.GetGroupEpoch(),
		Assignor: d.GetAssignor(), Members: []*skeinv1.GroupMember{}, Offsets: offs, TotalLag: total}
	for _, m := range d.GetMembers() {
		out.Members = append(out.Members, &skeinv1.GroupMember{MemberId: m.GetMemberId(), InstanceId: m.GetInstanceId(),
			MemberEpoch: m.GetMemberEpoch(), Topics: m.GetSubscribedTopics(), Assignment: toAssignment(m.GetAssignment())})
	}
	return out, nil
}

// DeleteGroup deletes an empty group and its offsets.
func (s *Group) DeleteGroup(ctx context.Context, req *skeinv1.DeleteGroupRequest) (*skeinv1.DeleteGroupResponse, error) {
	if err := validateGroupID(req.GetGroup()); err != nil {
		return nil, err
	}
	if err := waitReady(ctx, s.c); err != nil {
		return nil, err
	}
	if err := s.groups.Delete(ctx, req.GetGroup()); err != nil {
		return nil, err
	}
	return &skeinv1.DeleteGroupResponse{}, nil
}

// DeleteOffsets deletes a group's committed offsets of a topic's
// partitions, every partition of the topic when none is named (Kafka's
// OffsetDelete, as kafka-consumer-groups --delete-offsets sends it). A
// partition of a topic some member of the group subscribes to keeps its
// offset (GROUP_SUBSCRIBED_TO_TOPIC in its result), one past the topic's
// count is UNKNOWN_TOPIC_OR_PARTITION in its result, as Kafka answers
// both; the others' offsets go, with a transaction's pending offsets of
// them, and a member that starts on one later starts at its
// auto_offset_reset. Refused as a whole: an invalid group id, no topic, a
// negative partition or one named twice, a topic that does not exist, a
// group that does not exist.
func (s *Group) DeleteOffsets(ctx context.Context, req *skeinv1.DeleteOffsetsRequest) (*skeinv1.DeleteOffsetsResponse, error) {
	if err := validateGroupID(req.GetGroup()); err != nil {
		return nil, err
	}
	topic := req.GetTopic()
	if topic == "" {
		return nil, errs.Errorf(errs.InvalidRequest, "topic is missing: name the topic whose committed offsets to delete (over REST ?topic=NAME)")
	}
	seen := map[int32]bool{}
	for _, p := range req.GetPartition() {
		switch {
		case p < 0:
			return nil, errs.Errorf(errs.InvalidRequest, "partition %d of %q is negative: partitions are numbered from 0", p, topic)
		case seen[p]:
			return nil, errs.Errorf(errs.InvalidRequest, "partition %d of %q is named twice", p, topic)
		}
		seen[p] = true
	}
	_, n, err := knownTopic(ctx, s.c, topic)
	if err != nil {
		return nil, err
	}
	parts := slices.Clone(req.GetPartition())
	if len(parts) == 0 {
		for p := range n {
			parts = append(parts, p)
		}
	}
	slices.Sort(parts)
	out := &skeinv1.DeleteOffsetsResponse{Results: make([]*skeinv1.DeleteOffsetsResult, len(parts))}
	ask := &groupv1.TopicPartitions{Topic: topic}
	at := map[int32]int{}
	for i, p := range parts {
		out.Results[i] = &skeinv1.DeleteOffsetsResult{Topic: topic, Partition: p}
		if err := checkPartition(topic, p, n); err != nil {
			// As Kafka: the partitions the topic has are still decided.
			out.Results[i].ErrorCode, out.Results[i].Message = skeinv1.ErrorCode(errs.CodeOf(err)), errs.Message(err)
			continue
		}
		ask.Partitions = append(ask.Partitions, p)
		at[p] = i
	}
	// Asked even with no partition left: the group's own refusals
	// (GROUP_ID_NOT_FOUND, GROUP_AUTHORIZATION_FAILED) come first.
	results, err := s.groups.DeleteOffsets(ctx, req.GetGroup(), []*groupv1.TopicPartitions{ask})
	if err != nil {
		return nil, err
	}
	answered := map[int32]bool{}
	for _, r := range results {
		i, ok := at[r.GetPartition()]
		if !ok || r.GetTopic() != topic {
			continue
		}
		answered[r.GetPartition()] = true
		out.Results[i].ErrorCode, out.Results[i].Message = r.GetErrorCode(), r.GetErrorMessage()
	}
	for p, i := range at {
		if !answered[p] {
			// Never in a coordinator's answer: not known to be deleted.
			out.Results[i].ErrorCode, out.Results[i].Message = skeinv1.ErrorCode_UNKNOWN_SERVER_ERROR, "the group coordinator did not answer for this partition"
		}
	}
	return out, nil
}
