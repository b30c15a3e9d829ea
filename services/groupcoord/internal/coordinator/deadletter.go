package coordinator

import (
	"context"
	"errors"
	"maps"
	"time"

	"skein/libs/client"
	"skein/libs/errs"
	"skein/libs/record"
	"skein/services/groupcoord/internal/assign"
	"skein/services/groupcoord/internal/delivery"
	"skein/services/groupcoord/internal/group"
	"skein/services/groupcoord/internal/offsetlog"
)

// Record is one record of a topic groups consume, as the dead-letter
// writer reads and writes it.
type Record struct {
	Key, Value []byte // nil: none (a null key, a tombstone)
	Headers    []record.Header
	Timestamp  int64 // ms since the epoch
	// Transactional: read back, the record was written in a transaction
	// (written, it never is: a dead-letter copy is a plain record).
	Transactional bool
}

// DeadLetters is what dead-lettering needs of the cluster beyond
// __consumer_offsets (ClientLog in production). A Log that implements it
// enables dead-lettering; without it a nack that reaches
// max.delivery.attempts is refused (UNKNOWN_SERVER_ERROR).
type DeadLetters interface {
	// HighWatermark answers the high watermark of a partition (what a
	// read_uncommitted reader can read up to).
	HighWatermark(ctx context.Context, topic string, partition int32) (int64, error)
	// EnsureTopic creates topic when it does not exist, with the partition
	// count and replication factor of like, and answers its partition count
	// once the metadata has it.
	EnsureTopic(ctx context.Context, topic, like string) (int32, error)
	// Read answers the record at offset, as a read_uncommitted reader gets
	// it; ok is false when there is none: a transaction marker, or deleted
	// or compacted away.
	Read(ctx context.Context, topic string, partition int32, offset int64) (rec Record, ok bool, err error)
	// TxnOutcome answers, of the transactional record at offset, whether
	// its transaction has ended and whether it committed.
	TxnOutcome(ctx context.Context, topic string, partition int32, offset int64) (committed, ended bool, err error)
	// Find answers the offset of the first record at or after from whose
	// headers satisfy match, -1 when none up to the high watermark.
	Find(ctx context.Context, topic string, partition int32, from int64, match func([]record.Header) bool) (int64, error)
	// Append writes rec (acks=all) and answers its offset.
	Append(ctx context.Context, topic string, partition int32, rec Record) (int64, error)
}

// NackResult is a nack's answer.
type NackResult struct {
	// Failed is the record's failed deliveries, this one included.
	Failed       int32
	DeadLettered bool
	DLQTopic     string
	DLQPartition int32
	DLQOffset    int64
	// Next is where the member reads the partition next.
	Next int64
}

// Nack records a failed delivery of the record at offset of topic:partition
// by a member that owns the partition at epoch (as for a commit). The
// record is delivered again, or, once its failed deliveries reach the
// group's max.delivery.attempts, written to the group's dead-letter topic
// and the group's committed offset moved past it — in that order, each
// step durable before the next (see package delivery). Refusals change
// nothing: UNKNOWN_MEMBER_ID (no such member or group), STALE_MEMBER_EPOCH
// (another epoch, or a partition the member does not own),
// UNKNOWN_TOPIC_OR_PARTITION, OFFSET_OUT_OF_RANGE (at or past the high
// watermark, below the committed offset, or no record to nack there: a
// transaction marker, a record of an aborted transaction, a deleted one),
// OFFSET_NOT_AVAILABLE (retriable: the nack would dead-letter a record
// whose transaction is still open), INVALID_REQUEST, and what the
// dead-letter topic refuses the copy with (INVALID_RECORD,
// MESSAGE_TOO_LARGE, ...: the nack is then undone).
func (c *Coordinator) Nack(ctx context.Context, groupID string, member group.MemberID, epoch group.Epoch, topic string, partition int32, offset int64, reason string) (NackResult, error) {
	for range 3 {
		res, err := c.nack(ctx, groupID, member, epoch, topic, partition, offset, reason)
		if !errors.Is(err, errDecisionChanged) {
			return res, err
		}
	}
	return NackResult{}, errs.Errorf(errs.CoordinatorLoadInProgress, "group %q's settings kept changing during the nack: nothing changed; retry", groupID)
}

// errDecisionChanged: what the nack decides changed between its checks and
// its write (the group's settings were altered meanwhile); nothing was
// written, and the nack starts again.
var errDecisionChanged = errors.New("the nack's decision changed before it was written")

func (c *Coordinator) nack(ctx context.Context, groupID string, member group.MemberID, epoch group.Epoch, topic string, partition int32, offset int64, reason string) (NackResult, error) {
	switch {
	case member == "":
		return NackResult{}, errs.Errorf(errs.UnknownMemberID, "no member id: a nack comes from a member")
	case offset < 0:
		return NackResult{}, errs.Errorf(errs.InvalidRequest, "offset %d is negative", offset)
	case len(reason) > delivery.MaxReason:
		return NackResult{}, errs.Errorf(errs.InvalidRequest, "reason is %d bytes, more than %d", len(reason), delivery.MaxReason)
	}
	p, err := c.partitionFor(groupID)
	if err != nil {
		return NackResult{}, err
	}
	if n, ok := c.topics()[topic]; !ok || partition < 0 || partition >= n {
		return NackResult{}, errs.Errorf(errs.UnknownTopicOrPartition, "no partition %s:%d", topic, partition)
	}
	if c.dlq == nil {
		return NackResult{}, errs.Errorf(errs.UnknownServerError, "this coordinator cannot read the topics groups consume")
	}
	tp := assign.TopicPartition{Topic: topic, Partition: partition}
	p.nackMu.Lock()
	defer p.nackMu.Unlock()

	// decide checks the member and decides, under p.mu.
	var cfg delivery.Config
	decide := func(gs *groupState) (delivery.Partition, delivery.Outcome, error) {
		if err := gs.g.CanCommit(member, epoch, topic, partition); err != nil {
			return nil, delivery.Outcome{}, err
		}
		var err error
		if cfg, err = delivery.Parse(gs.config); err != nil {
			c.logger.Warn("a group's stored settings do not parse: defaults apply", "group", groupID, "err", err)
			cfg = delivery.DefaultConfig()
		}
		committed := int64(-1)
		if o, ok := gs.offsets[tp]; ok {
			committed = o.Offset
		}
		return delivery.Nack(gs.deliveries[tp], offset, committed, cfg.MaxAttempts, reason)
	}
	p.mu.Lock()
	err = p.readyLocked()
	var out delivery.Outcome
	if gs := p.groups[groupID]; err == nil && gs == nil {
		err = errs.Errorf(errs.UnknownMemberID, "member %s is not in group %q: the group does not exist", member, groupID)
	} else if err == nil {
		_, out, err = decide(gs)
	}
	p.mu.Unlock()
	if err != nil {
		return NackResult{}, err
	}
	hw, err := c.dlq.HighWatermark(ctx, topic, partition)
	if err != nil {
		return NackResult{}, err
	}
	if offset >= hw {
		return NackResult{}, errs.Errorf(errs.OffsetOutOfRange, "offset %d of %s:%d is at or past its high watermark %d", offset, topic, partition, hw)
	}
	// A record of an aborted transaction is nacked by nobody (its copy
	// would make it visible to every reader of the dead-letter topic), nor
	// a marker or a deleted record; one of a transaction still open is
	// counted, and dead-lettered once the transaction has committed.
	rec, ok, err := c.dlq.Read(ctx, topic, partition, offset)
	if err != nil {
		return NackResult{}, err
	}
	if !ok && !out.Resumed { // a resumed dead-lettering may have copied it already
		return NackResult{}, errs.Errorf(errs.OffsetOutOfRange, "no record at offset %d of %s:%d to nack: it is a transaction marker, or was deleted", offset, topic, partition)
	}
	if ok && rec.Transactional {
		committed, ended, err := c.dlq.TxnOutcome(ctx, topic, partition, offset)
		switch {
		case err != nil:
			return NackResult{}, err
		case ended && !committed:
			return NackResult{}, errs.Errorf(errs.OffsetOutOfRange, "offset %d of %s:%d is a record of an aborted transaction: nothing to nack", offset, topic, partition)
		case !ended && out.Action == delivery.DeadLetter:
			return NackResult{}, errs.Errorf(errs.OffsetNotAvailable, "offset %d of %s:%d is a record of a transaction still open: it can be dead-lettered once the transaction commits; retry", offset, topic, partition)
		}
	}
	var src *Record
	if ok {
		src = &rec
	}
	dlqTopic := cfg.TopicFor(topic)
	if out.Action == delivery.DeadLetter && dlqTopic == topic {
		// The copy would come back to the group as a new record, and be
		// dead-lettered again, for ever.
		return NackResult{}, errs.Errorf(errs.InvalidConfig, "group %q's dlq.topic is %q, the record's own topic: a dead-lettered record would come back to the group; set dlq.topic to another topic", groupID, topic)
	}
	var dlqFrom int64 = -1
	var dlqPart int32
	if out.Action == delivery.DeadLetter {
		// Where a copy of the record would be, before anything is written.
		n, err := c.dlq.EnsureTopic(ctx, dlqTopic, topic)
		if err != nil {
			return NackResult{}, err
		}
		dlqPart = partition % n
		if !out.Resumed {
			if dlqFrom, err = c.dlq.HighWatermark(ctx, dlqTopic, dlqPart); err != nil {
				return NackResult{}, err
			}
		}
	}

	// Count the nack (and, when it decides so, mark the record
	// dead-lettering) durably.
	var prev delivery.Entry
	var hadPrev bool
	err = p.update(groupID, false, func(gs *groupState, _ time.Time) (change, error) {
		if !gs.topics.has(tp) {
			return change{}, errs.Errorf(errs.UnknownTopicOrPartition, "no partition %s:%d", topic, partition)
		}
		prev, hadPrev = gs.deliveries[tp].Find(offset)
		np, o, err := decide(gs)
		if err != nil {
			return change{}, err
		}
		if o.Action != out.Action || o.Resumed != out.Resumed {
			// Checked for the other decision (the dead-letter topic, an
			// open transaction): check again.
			return change{}, errDecisionChanged
		}
		out = o
		if o.Resumed {
			return change{}, nil
		}
		if o.Action == delivery.DeadLetter {
			np = np.WithDLQFrom(offset, dlqFrom)
			out.Entry.DLQFrom = dlqFrom
		}
		return change{deliveries: map[assign.TopicPartition]delivery.Partition{tp: np}}, nil
	})
	if err == errNoGroup {
		err = errs.Errorf(errs.UnknownMemberID, "member %s is not in group %q: the group does not exist", member, groupID)
	}
	if err != nil {
		return NackResult{}, err
	}
	res := NackResult{Failed: out.Entry.Nacks, Next: out.Next}
	if out.Action == delivery.Redeliver {
		c.metrics.nacked(groupID, topic)
		c.metrics.redelivered(groupID, topic)
		return res, nil
	}

	// Dead-letter: the copy first, then move the group past the record.
	// The nack counts once the copy is not refused: a refused one is undone.
	res.DLQTopic, res.DLQPartition = dlqTopic, dlqPart
	res.DLQOffset, err = c.deadLetter(ctx, groupID, tp, dlqTopic, dlqPart, out.Entry, src)
	if err == nil || !refusedCopy(err) {
		c.metrics.nacked(groupID, topic)
	}
	if err != nil {
		if refusedCopy(err) {
			// Nothing was written: undo this nack's count and mark (or, when
			// an earlier nack marked it, that mark), so that a refused nack
			// changes nothing.
			if out.Resumed {
				prev, hadPrev = out.Entry.Unmarked()
			}
			uerr := p.update(groupID, false, func(gs *groupState, _ time.Time) (change, error) {
				return change{deliveries: map[assign.TopicPartition]delivery.Partition{tp: gs.deliveries[tp].Undo(out.Entry, prev, hadPrev)}}, nil
			})
			if uerr != nil {
				c.logger.Warn("undoing a nack whose dead-letter copy was refused failed: the next nack of the record dead-letters it", "group", groupID,
					"topic", topic, "partition", partition, "offset", offset, "err", uerr)
			}
			return NackResult{}, errs.Errorf(errs.Of(err), "the dead-letter topic %q refused the record, so the nack changed nothing: %s", dlqTopic, errs.Message(err))
		}
		return NackResult{}, err
	}
	err = p.update(groupID, false, func(gs *groupState, now time.Time) (change, error) {
		if !gs.topics.has(tp) {
			return change{}, errs.Errorf(errs.UnknownTopicOrPartition, "%s:%d was deleted while dead-lettering", topic, partition)
		}
		ch := change{deliveries: map[assign.TopicPartition]delivery.Partition{}}
		committed := int64(-1)
		if o, ok := gs.offsets[tp]; ok {
			committed = o.Offset
		}
		if committed < offset+1 {
			committed = offset + 1
			ch.offsets = map[assign.TopicPartition]offsetlog.Offset{tp: {Offset: committed, LeaderEpoch: -1, CommitTime: now}}
		}
		ch.deliveries[tp] = gs.deliveries[tp].Prune(committed)
		return ch, nil
	})
	if err == errNoGroup {
		err = errs.Errorf(errs.GroupIDNotFound, "group %q was deleted while dead-lettering", groupID)
	}
	if err != nil {
		return NackResult{}, err
	}
	c.metrics.deadLettered(groupID, topic)
	c.logger.Info("record dead-lettered", "group", groupID, "topic", topic, "partition", partition, "offset", offset,
		"attempts", out.Entry.Nacks, "dlq_topic", dlqTopic, "dlq_partition", dlqPart, "dlq_offset", res.DLQOffset)
	res.DeadLettered = true
	return res, nil
}

// refusedCopy reports whether the dead-letter topic refused a copy and no
// attempt wrote it: anything else (a timeout, a lost connection, a refusal
// after an attempt without an answer) may have written it.
func refusedCopy(err error) bool {
	var uncertain *client.UncertainError
	if errors.As(err, &uncertain) {
		return false
	}
	switch errs.Of(err) {
	case errs.InvalidRecord, errs.MessageTooLarge, errs.RecordListTooLarge, errs.InvalidTimestamp, errs.CorruptMessage,
		errs.TopicAuthorizationFailed, errs.PolicyViolation, errs.InvalidConfig:
		return true
	}
	return false
}

// deadLetter writes rec, the record at tp's offset e.Offset, to the
// dead-letter partition once: a copy an earlier attempt wrote (at or after
// e.DLQFrom) is answered instead of a second. rec is nil when the source
// log no longer holds the record: only an earlier copy can then be found.
func (c *Coordinator) deadLetter(ctx context.Context, groupID string, tp assign.TopicPartition, dlqTopic string, dlqPart int32, e delivery.Entry, rec *Record) (int64, error) {
	match := func(hs []record.Header) bool { return delivery.Matches(hs, groupID, tp.Topic, tp.Partition, e.Offset) }
	from := e.DLQFrom
	if from < 0 {
		from = 0
	}
	if off, err := c.dlq.Find(ctx, dlqTopic, dlqPart, from, match); err != nil {
		return -1, err
	} else if off >= 0 {
		c.logger.Info("the record is in the dead-letter topic already: not writing it again", "group", groupID,
			"topic", tp.Topic, "partition", tp.Partition, "offset", e.Offset, "dlq_offset", off)
		return off, nil
	}
	if rec == nil {
		return -1, errs.Errorf(errs.OffsetOutOfRange, "offset %d of %s:%d was deleted before it was dead-lettered: commit past it", e.Offset, tp.Topic, tp.Partition)
	}
	// The copy is timestamped when it is dead-lettered, the record's own
	// timestamp going in a header: the dead-letter topic's time retention
	// then keeps it for retention.ms from now. With the record's own
	// timestamp an old record would be deleted at once (alone in its
	// segment, as the source's segment keeps it beside newer records), or
	// refused by the topic's message.timestamp bounds.
	cp := *rec
	cp.Headers = delivery.Headers(rec.Headers, groupID, tp.Topic, tp.Partition, e.Offset, rec.Timestamp, e)
	cp.Timestamp = c.cfg.Now().UnixMilli()
	cp.Transactional = false
	return c.dlq.Append(ctx, dlqTopic, dlqPart, cp)
}

// Deliveries answers the failed deliveries of records of tps the group
// has not moved past.
func (c *Coordinator) Deliveries(groupID string, tps []assign.TopicPartition) map[assign.TopicPartition]delivery.Partition {
	p, err := c.partitionFor(groupID)
	if err != nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	gs := p.groups[groupID]
	if gs == nil {
		return nil
	}
	out := map[assign.TopicPartition]delivery.Partition{}
	for _, tp := range tps {
		d := gs.deliveries[tp]
		if o, ok := gs.offsets[tp]; ok {
			d = d.Prune(o.Offset)
		}
		if len(d) > 0 {
			out[tp] = d
		}
	}
	return out
}

// GroupConfig answers a group's settings, defaults included (a group that
// does not exist has the defaults).
func (c *Coordinator) GroupConfig(ctx context.Context, groupID string) (map[string]string, error) {
	p, err := c.partitionFor(groupID)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.readyLocked(); err != nil {
		return nil, err
	}
	var stored map[string]string
	if gs := p.groups[groupID]; gs != nil {
		stored = gs.config
	}
	cfg, err := delivery.Parse(stored)
	if err != nil {
		return nil, err
	}
	return cfg.Values(), nil
}

// AlterGroupConfig sets some of a group's settings ("" resets one to its
// default), durably, and answers all of them. A group that does not exist
// yet is created with its settings, as Kafka keeps configs of groups to
// come. Nothing changes unless every key and value is valid
// (INVALID_CONFIG).
func (c *Coordinator) AlterGroupConfig(ctx context.Context, groupID string, set map[string]string) (map[string]string, error) {
	p, err := c.partitionFor(groupID)
	if err != nil {
		return nil, err
	}
	var cfg delivery.Config
	err = p.update(groupID, true, func(gs *groupState, _ time.Time) (change, error) {
		m, cf, err := delivery.Alter(gs.config, set)
		if err != nil {
			return change{}, err
		}
		cfg = cf
		if maps.Equal(m, gs.config) && (len(m) > 0) == (gs.config != nil) {
			return change{}, nil
		}
		return change{configSet: true, config: m}, nil
	})
	if err != nil {
		return nil, err
	}
	return cfg.Values(), nil
}
