package client

import (
	"cmp"
	"context"
	"slices"
	"time"

	"skein/libs/errs"
	"skein/libs/record"
)

// A GroupConsumer reads each partition it owns through one Follow stream
// from the partition's leader, kept open from Poll to Poll, rather than
// with a fetch request per answer: a member at the log's end costs its
// leaders and itself one message per commit instead of a request and an
// answer. The streams run ahead of Poll by what the inbox and the stream's
// flow control hold; Poll hands their answers out in the order they came.
//
// A stream belongs to its partition's position: it started there, and each
// answer Poll hands out moves both. When the position moves another way (a
// seek, a nack, a reset, a revocation) the stream no longer matches, and
// Poll replaces it by one from the new position; answers of the old one
// still on their way are dropped.

// followInbox is how many answers the streams of one member may have
// waiting for Poll, over all its partitions; a stream with an answer that
// does not fit waits, and its flow control then holds up its leader.
const followInbox = 8

// followRetry is how long a partition whose stream failed waits before the
// next one starts.
const followRetry = 500 * time.Millisecond

// follower is one owned partition's Follow stream.
type follower struct {
	tp TopicPartition
	// principal is the client the stream reads for (OnBehalfOf): the
	// leader checks the topic's ACLs for it.
	principal string
	// pos is the partition's position while the stream matches it: where
	// the answers not yet handed out start.
	pos int64
	// left holds an answer's records past a Poll's MaxRecords, which the
	// next Poll hands out first; leftNext is that answer's next offset.
	left     []ConsumedRecord
	leftNext int64
	cancel   context.CancelFunc
	done     chan struct{}
}

// followAnswer is one answer of a stream, its records copied out of the
// stream's buffer, or the error the stream ended with.
type followAnswer struct {
	f     *follower
	from  int64
	recs  []ConsumedRecord
	next  int64
	bytes int
	err   error
}

// syncFollows makes the streams match the positions: a partition that is
// no longer owned, or whose position moved, loses its stream; an owned
// partition with a position and no stream gets one (unless its last one
// failed a moment ago). The streams read for the client ctx names
// (OnBehalfOf), as the fetches of a Poll would: one made for another
// client is replaced.
func (g *GroupConsumer) syncFollows(ctx context.Context) {
	principal := PrincipalOf(ctx)
	for tp, f := range g.follows {
		if ps := g.owned[tp]; ps == nil || ps.pos != f.pos || f.principal != principal {
			g.stopFollow(f)
		}
	}
	now := time.Now()
	for tp, ps := range g.owned {
		if ps.pos >= 0 && g.follows[tp] == nil && !now.Before(g.followAfter[tp]) {
			g.startFollow(principal, tp, ps.pos)
		}
	}
	// Forget the stopped streams that have ended.
	g.stopped = slices.DeleteFunc(g.stopped, func(f *follower) bool {
		select {
		case <-f.done:
			return true
		default:
			return false
		}
	})
}

func (g *GroupConsumer) stopFollow(f *follower) {
	f.cancel()
	if g.follows[f.tp] == f {
		delete(g.follows, f.tp)
	}
	g.stopped = append(g.stopped, f)
}

// stopFollows ends every stream and waits until each has ended, those
// stopped before included.
func (g *GroupConsumer) stopFollows() {
	for _, f := range g.follows {
		g.stopFollow(f)
	}
	for _, f := range g.stopped {
		<-f.done
	}
	g.stopped = nil
}

func (g *GroupConsumer) startFollow(principal string, tp TopicPartition, from int64) {
	if g.inbox == nil {
		g.inbox = make(chan followAnswer, followInbox)
	}
	ctx, cancel := context.WithCancel(g.c.ctx) // ends with the client too
	ctx = OnBehalfOf(ctx, principal)
	f := &follower{tp: tp, principal: principal, pos: from, cancel: cancel, done: make(chan struct{})}
	g.follows[tp] = f
	req := FetchRequest{Topic: tp.Topic, Partition: tp.Partition, Offset: from, MaxRecords: g.cfg.MaxRecords, Isolation: g.cfg.Isolation}
	inbox := g.inbox
	go func() {
		defer close(f.done)
		at := from
		err := g.c.Follow(ctx, req, func(res *FetchResult) error {
			a := followAnswer{f: f, from: at, recs: copyRecords(res.Records), next: res.NextOffset, bytes: res.Bytes}
			at = res.NextOffset
			select {
			case inbox <- a:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
		if ctx.Err() != nil {
			return
		}
		select {
		case inbox <- followAnswer{f: f, from: at, err: err}:
		case <-ctx.Done():
		}
	}()
}

// copyRecords copies records whose bytes are a stream buffer's into one
// allocation of their own.
func copyRecords(recs []ConsumedRecord) []ConsumedRecord {
	if len(recs) == 0 {
		return nil
	}
	n := 0
	for _, r := range recs {
		n += len(r.Key) + len(r.Value)
		for _, h := range r.Headers {
			n += len(h.Value)
		}
	}
	arena := make([]byte, 0, n)
	cp := func(b []byte) []byte {
		if b == nil {
			return nil
		}
		arena = append(arena, b...)
		return arena[len(arena)-len(b) : len(arena) : len(arena)]
	}
	out := make([]ConsumedRecord, len(recs))
	for i, r := range recs {
		out[i] = r
		out[i].Key, out[i].Value = cp(r.Key), cp(r.Value)
		if len(r.Headers) > 0 {
			out[i].Headers = make([]record.Header, len(r.Headers))
			for j, h := range r.Headers {
				out[i].Headers[j] = record.Header{Key: h.Key, Value: cp(h.Value)}
			}
		}
	}
	return out
}

// pollFollowed answers what the streams of the owned partitions have, as
// Poll's fetch: at most MaxRecords records, as soon as there are records
// of MinBytes (their batches' bytes) or MaxRecords of them, or what there
// is once wait has passed.
func (g *GroupConsumer) pollFollowed(ctx context.Context, wait time.Duration) ([]ConsumedRecord, error) {
	var out []ConsumedRecord
	bytes := 0
	buffered := false // records an earlier Poll had no room for: answered at once, whatever MinBytes says
	full := func() bool { return len(out) >= g.cfg.MaxRecords }
	enough := func() bool { return full() || len(out) > 0 && (buffered || bytes >= int(g.cfg.MinBytes)) }
	// take hands out an answer's records, as many as fit, and moves the
	// position past them; the rest waits in the follower.
	take := func(f *follower, recs []ConsumedRecord, next int64) {
		ps := g.owned[f.tp]
		if room := g.cfg.MaxRecords - len(out); len(recs) > room {
			f.left, f.leftNext = recs[room:], next
			recs = recs[:room]
			next = recs[len(recs)-1].Offset + 1
		} else {
			f.left = nil
		}
		out = append(out, recs...)
		ps.pos, f.pos = next, next
	}
	for _, tp := range g.Assignment() {
		if f := g.follows[tp]; f != nil && len(f.left) > 0 && !full() {
			take(f, f.left, f.leftNext)
			buffered = true
		}
	}

	var firstErr, corrupt, stuck error
	outOfRange := false
	timer := time.NewTimer(wait)
	defer timer.Stop()
	block := !enough()
	for !full() {
		var a followAnswer
		if block {
			select {
			case a = <-g.inbox:
			case <-timer.C:
				block = false
				continue
			case <-g.wake:
				block = false
				continue
			case <-ctx.Done():
				if len(out) > 0 {
					return out, nil
				}
				return nil, ctx.Err()
			}
		} else {
			select {
			case a = <-g.inbox:
			default:
			}
			if a.f == nil {
				break // nothing more has come
			}
		}
		f := a.f
		if g.follows[f.tp] != f {
			continue // an answer of a stream already replaced
		}
		if ps := g.owned[f.tp]; ps == nil || ps.pos != f.pos || a.from != f.pos {
			// Not where the position is: the stream is replaced at the
			// next Poll, from the position.
			g.stopFollow(f)
			continue
		}
		if a.err != nil {
			g.stopFollow(f)
			g.followAfter[f.tp] = time.Now().Add(followRetry)
			switch errs.Of(a.err) {
			case errs.OffsetOutOfRange:
				if g.cfg.AutoOffsetReset == ResetNone {
					// Nowhere to move it: the caller is told, in every
					// Poll that has nothing else to answer, until the
					// partition's position is set again (Kafka's poll
					// throws OffsetOutOfRangeException).
					if stuck == nil {
						stuck = errs.Errorf(errs.OffsetOutOfRange, "%s, and auto offset reset is none", errs.Message(a.err))
					}
					// Told by every Poll from the next on, whatever
					// the other partitions answer, until its position
					// moves.
					g.stuck = &stuckPosition{tp: f.tp, pos: f.pos, err: stuck}
					break
				}
				g.c.log.InfoContext(ctx, "position out of range, resetting", "topic", f.tp.Topic, "partition", f.tp.Partition,
					"offset", f.pos, "reset", g.cfg.AutoOffsetReset)
				g.owned[f.tp].pos, outOfRange = -2, true
				delete(g.followAfter, f.tp)
			case errs.UnknownTopicOrPartition:
				// A partition the coordinator assigned before this client's
				// metadata has it, or one being deleted (the coordinator
				// then takes it back): tried again, as a fetch would be.
				g.c.log.InfoContext(ctx, "an owned partition is not in the metadata yet", "group", g.cfg.Group, "topic", f.tp.Topic, "partition", f.tp.Partition, "err", a.err)
			case errs.CorruptMessage:
				// Followed again it fails again: the caller is told (as
				// Kafka's poll throws CorruptRecordException) in a Poll
				// that has nothing else to answer.
				g.c.log.ErrorContext(ctx, "a record batch of an owned partition is damaged on its leader", "group", g.cfg.Group, "topic", f.tp.Topic, "partition", f.tp.Partition, "err", a.err)
				corrupt = cmp.Or(corrupt, a.err)
			default:
				g.c.log.WarnContext(ctx, "following a partition failed", "group", g.cfg.Group, "topic", f.tp.Topic, "partition", f.tp.Partition, "err", a.err)
				firstErr = cmp.Or(firstErr, a.err)
			}
			continue
		}
		bytes += a.bytes
		take(f, a.recs, a.next)
		if block && enough() {
			block = false
		}
	}
	if outOfRange {
		if err := g.resetPositions(ctx, func(ps *partState) bool { return ps.pos == -2 }); err != nil {
			if len(out) > 0 {
				// The positions are past out already: the records go to
				// the caller, and the reset is tried again at the next Poll.
				g.c.log.WarnContext(ctx, "resetting positions out of range", "group", g.cfg.Group, "err", err)
				return out, nil
			}
			return nil, err
		}
	}
	if len(out) == 0 && cmp.Or(corrupt, stuck) != nil {
		return nil, cmp.Or(corrupt, stuck)
	}
	if len(out) == 0 && firstErr != nil && len(g.follows) == 0 {
		return nil, firstErr // every stream failed
	}
	return out, nil
}
