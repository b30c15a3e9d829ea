package api

import (
	"context"
	"errors"
	"io"
	"maps"
	"slices"
	"sync/atomic"
	"time"

	groupv1 "skein/gen/skein/group/v1"
	skeinv1 "skein/gen/skein/v1"
	"skein/libs/client"
	"skein/libs/errs"
	"skein/libs/rpcerr"
)

// consumeAgain is what a Consume stream's client does when the gateway
// ends it to shut down.
const consumeAgain = "the member left the group; subscribe again on a new stream"

// consumePoll is how long one round of a Consume stream long-polls.
const consumePoll = 500 * time.Millisecond

// Consume is the streaming form of a group member: the first message
// subscribes (a join), then the server streams records and assignment
// changes while the client sends commits and nacks on the same stream. A
// nack moves the member's position back to the record (or past it once
// dead-lettered), so what follows it comes again, in order. The stream is
// the member's session: the gateway heartbeats for it on the coordinator's
// interval, and on revocation commits the positions of the records it
// streamed from the revoked partitions before giving them up; when the
// stream ends the member leaves the group.
func (s *Group) Consume(stream skeinv1.GroupService_ConsumeServer) error {
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	go func() {
		select {
		case <-s.draining:
			cancel()
		case <-ctx.Done():
		}
	}()
	first, err := stream.Recv()
	if errors.Is(err, io.EOF) {
		return nil
	}
	if err != nil {
		return err
	}
	sub := first.GetSubscribe()
	if sub == nil {
		return errs.Errorf(errs.InvalidRequest, "the first message of a Consume stream subscribes")
	}
	join, err := s.joinRequest(ctx, sub)
	if err != nil {
		return err
	}
	iso := sub.GetIsolationLevel()
	if err := validateRead(iso, skeinv1.Encoding_TEXT); err != nil {
		return err
	}
	// A second stream that joins as the same member (a client that
	// reconnected before this gateway saw its first stream end) takes the
	// member over: the first ends without leaving the group, so that the
	// two neither read the same partitions nor does one's end remove the
	// other from the group.
	me := s.claimMember(ctx, join.GetGroupId(), join.GetMemberId(), cancel)
	defer s.releaseMember(join.GetGroupId(), join.GetMemberId(), me)
	ended := func() error {
		if me.takenOver.Load() {
			return rpcerr.ToGRPC(errs.Errorf(errs.FencedMemberEpoch, "another Consume stream joined group %q as this member: this one ends", join.GetGroupId()))
		}
		return drained(s.draining, consumeAgain)
	}
	changed := false
	mark := func(context.Context, []client.TopicPartition) { changed = true }
	gc, err := s.c.NewGroupConsumer(client.GroupConsumerConfig{
		Group: join.GetGroupId(), Topics: join.GetSubscribedTopics(), InstanceID: join.GetInstanceId(), MemberID: join.GetMemberId(),
		SessionTimeout: time.Duration(join.GetSessionTimeoutMs()) * time.Millisecond, Assignor: join.GetServerAssignor(),
		AutoOffsetReset: resetOf(join.GetMemberId()), MaxRecords: DefaultMaxRecords, MaxWait: consumePoll, Isolation: iso,
		OnAssigned: mark, OnRevoked: mark, OnLost: mark,
	})
	if err != nil {
		return err
	}
	defer func() {
		if me.takenOver.Load() {
			gc.Drop() // the member goes on in the stream that took it over
			return
		}
		lctx, lcancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer lcancel()
		// The client commits what it processed: records streamed to it
		// may never have been (it stopped after a few, or was
		// interrupted), so their positions are not committed here.
		if err := gc.Leave(lctx); err != nil {
			s.log.WarnContext(ctx, "leaving the group at the end of a Consume stream", "group", join.GetGroupId(), "member", gc.MemberID(), "err", err)
		}
	}()

	commits := make(chan *skeinv1.ConsumeRequest, 64)
	recvErr := make(chan error, 1)
	go func() {
		for {
			m, err := stream.Recv()
			if err == nil && m.GetCommit() == nil && m.GetNack() == nil {
				err = errs.Errorf(errs.InvalidRequest, "after subscribing, a Consume stream carries only commits and nacks")
			}
			if err != nil {
				recvErr <- err
				return
			}
			select {
			case commits <- m:
				gc.Wake() // answered now, not after the poll's wait
			case <-ctx.Done():
				return
			}
		}
	}()

	// answer runs one commit or nack the client sent and answers it.
	answer := func(m *skeinv1.ConsumeRequest) error {
		resp := &skeinv1.ConsumeResponse{}
		if n := m.GetNack(); n != nil {
			resp.Kind = &skeinv1.ConsumeResponse_Nacked{Nacked: s.streamNack(ctx, gc, n)}
		} else {
			resp.Kind = &skeinv1.ConsumeResponse_Committed{Committed: s.streamCommit(ctx, gc, m.GetCommit())}
		}
		return stream.Send(resp)
	}
	joined := false
	// told: the position of each partition the client was last sent, so
	// that a position that moves without records (a partition started at
	// its reset offset, a transaction's marker passed) is sent too: the
	// client can then commit where it stands, as a Kafka consumer commits
	// its positions, not only past the records it was given.
	told := map[client.TopicPartition]int64{}
	positions := func() []*skeinv1.TopicPartitionOffset {
		var out []*skeinv1.TopicPartitionOffset
		for _, tp := range gc.Assignment() {
			out = append(out, &skeinv1.TopicPartitionOffset{Topic: tp.Topic, Partition: tp.Partition, Offset: gc.Position(tp)})
		}
		return out
	}
	// moved reports a position not yet told; a partition no longer held
	// is forgotten, so that it is told again if it comes back.
	moved := func() bool {
		held := gc.Assignment()
		maps.DeleteFunc(told, func(tp client.TopicPartition, _ int64) bool { return !slices.Contains(held, tp) })
		for _, tp := range held {
			if was, ok := told[tp]; gc.Position(tp) >= 0 && (!ok || was != gc.Position(tp)) {
				return true
			}
		}
		return false
	}
	tell := func(out *skeinv1.FetchGroupRecordsResponse) error {
		for _, p := range out.Positions {
			told[client.TopicPartition{Topic: p.GetTopic(), Partition: p.GetPartition()}] = p.GetOffset()
		}
		return stream.Send(&skeinv1.ConsumeResponse{Kind: &skeinv1.ConsumeResponse_Records{Records: out}})
	}
	for {
		select {
		case err := <-recvErr:
			if ctx.Err() != nil {
				return ended()
			}
			if errors.Is(err, io.EOF) {
				// The client's last commits may still be queued (a client
				// that commits and closes at once): the member leaves
				// without committing, so they are run before it does.
				for {
					select {
					case m := <-commits:
						if err := answer(m); err != nil {
							return err
						}
						continue
					default:
					}
					return nil
				}
			}
			return err
		case m := <-commits:
			if err := answer(m); err != nil {
				return err
			}
			continue
		default:
		}
		recs, err := gc.Poll(ctx)
		if ctx.Err() != nil {
			return ended()
		}
		if err != nil {
			return err
		}
		assignment := toAssignment(client.ToTopicPartitions(gc.Assignment()))
		switch {
		case !joined:
			joined, changed = true, false
			if err := stream.Send(&skeinv1.ConsumeResponse{Kind: &skeinv1.ConsumeResponse_Joined{Joined: &skeinv1.JoinGroupResponse{
				MemberId: gc.MemberID(), MemberEpoch: gc.MemberEpoch(), HeartbeatIntervalMs: int32(gc.HeartbeatInterval() / time.Millisecond),
				Assignment: assignment}}}); err != nil {
				return err
			}
		case changed:
			changed = false
			if err := stream.Send(&skeinv1.ConsumeResponse{Kind: &skeinv1.ConsumeResponse_Assignment{Assignment: &skeinv1.HeartbeatResponse{
				MemberEpoch: gc.MemberEpoch(), Assignment: assignment, HeartbeatIntervalMs: int32(gc.HeartbeatInterval() / time.Millisecond)}}}); err != nil {
				return err
			}
		}
		if len(recs) == 0 {
			if moved() {
				if err := tell(&skeinv1.FetchGroupRecordsResponse{MemberEpoch: gc.MemberEpoch(), Assignment: assignment, Positions: positions()}); err != nil {
					return err
				}
			}
			continue
		}
		traceConsumed(ctx, join.GetGroupId(), recs)
		out := &skeinv1.FetchGroupRecordsResponse{MemberEpoch: gc.MemberEpoch(), Assignment: assignment}
		for _, r := range recs {
			cr := toConsumed(r, skeinv1.Encoding_TEXT)
			cr.DeliveryAttempt = gc.DeliveryAttempt(client.TopicPartition{Topic: r.Topic, Partition: r.Partition}, r.Offset)
			out.Records = append(out.Records, cr)
		}
		out.Positions = positions()
		if err := tell(out); err != nil {
			return err
		}
	}
}

// streamMember is a Consume stream's hold on its member id on this gateway.
type streamMember struct {
	cancel    context.CancelFunc
	takenOver atomic.Bool
	done      chan struct{} // closed once the stream let go of the member
}

// claimMember registers a stream as the member's on this gateway; a stream
// that held it before is taken over (cancelled; it ends without leaving)
// and waited for, a moment at most (one stuck sending to a client that is
// gone does not notice the cancel), so that it is done with the member
// before this one joins.
func (s *Group) claimMember(ctx context.Context, group, member string, cancel context.CancelFunc) *streamMember {
	me := &streamMember{cancel: cancel, done: make(chan struct{})}
	key := [2]string{group, member}
	s.streamsMu.Lock()
	prev := s.streams[key]
	if s.streams == nil {
		s.streams = map[[2]string]*streamMember{}
	}
	s.streams[key] = me
	s.streamsMu.Unlock()
	if prev != nil {
		prev.takenOver.Store(true)
		prev.cancel()
		t := time.NewTimer(takeoverWait)
		defer t.Stop()
		select {
		case <-prev.done:
		case <-t.C:
		case <-ctx.Done():
		}
	}
	return me
}

// takeoverWait bounds how long a stream taking a member over waits for the
// stream that held it to end.
const takeoverWait = time.Second

// releaseMember lets go of the member, unless another stream took it over.
func (s *Group) releaseMember(group, member string, me *streamMember) {
	key := [2]string{group, member}
	s.streamsMu.Lock()
	if s.streams[key] == me {
		delete(s.streams, key)
	}
	s.streamsMu.Unlock()
	close(me.done)
}

// streamCommit commits a stream member's offsets at its current epoch and
// answers per partition; a bad offset is refused in its result, not by
// ending the stream.
func (s *Group) streamCommit(ctx context.Context, gc *client.GroupConsumer, req *skeinv1.CommitOffsetsRequest) *skeinv1.CommitOffsetsResponse {
	out := &skeinv1.CommitOffsetsResponse{}
	creq := &groupv1.OffsetCommitRequest{GroupId: gc.Group(), MemberId: gc.MemberID(), MemberEpoch: gc.MemberEpoch()}
	for _, o := range req.GetOffsets() {
		var err error
		switch {
		case req.GetGroup() != "" && req.GetGroup() != gc.Group():
			err = errs.Errorf(errs.InvalidRequest, "the stream commits for its group %q, not %q", gc.Group(), req.GetGroup())
		case o.GetOffset() < 0:
			err = errs.Errorf(errs.InvalidRequest, "offset %d is negative", o.GetOffset())
		case len(o.GetMetadata()) > MaxOffsetMetadata:
			err = errs.Errorf(errs.OffsetMetadataTooLarge, "metadata is %d bytes, more than %d", len(o.GetMetadata()), MaxOffsetMetadata)
		case !containsTP(gc.Assignment(), o.GetTopic(), o.GetPartition()):
			err = errs.Errorf(errs.StaleMemberEpoch, "member %s does not own %s:%d", gc.MemberID(), o.GetTopic(), o.GetPartition())
		}
		if err != nil {
			out.Results = append(out.Results, &skeinv1.PartitionCommitResult{Topic: o.GetTopic(), Partition: o.GetPartition(),
				ErrorCode: skeinv1.ErrorCode(errs.CodeOf(err)), Message: errs.Message(err)})
			continue
		}
		creq.Offsets = append(creq.Offsets, &groupv1.PartitionOffset{Topic: o.GetTopic(), Partition: o.GetPartition(), Offset: o.GetOffset(), Metadata: o.GetMetadata()})
	}
	if len(creq.Offsets) == 0 {
		return out
	}
	results, err := s.groups.CommitOffsets(ctx, creq)
	if err != nil {
		for _, o := range creq.Offsets {
			out.Results = append(out.Results, &skeinv1.PartitionCommitResult{Topic: o.GetTopic(), Partition: o.GetPartition(),
				ErrorCode: skeinv1.ErrorCode(errs.CodeOf(err)), Message: errs.Message(err)})
		}
		return out
	}
	for _, r := range results {
		out.Results = append(out.Results, &skeinv1.PartitionCommitResult{Topic: r.GetTopic(), Partition: r.GetPartition(),
			ErrorCode: r.GetErrorCode(), Message: r.GetErrorMessage()})
	}
	return out
}

func containsTP(tps []client.TopicPartition, topic string, partition int32) bool {
	for _, tp := range tps {
		if tp.Topic == topic && tp.Partition == partition {
			return true
		}
	}
	return false
}
