package client

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"google.golang.org/grpc"

	controllerv1 "skein/gen/skein/controller/v1"
	controllerv1grpc "skein/gen/skein/controller/v1/controllerv1grpc"
	groupv1 "skein/gen/skein/group/v1"
	skeinv1 "skein/gen/skein/v1"
	"skein/libs/errs"
	"skein/libs/rpcerr"
)

// Coordinator is the FindCoordinator answer: the node that owns a key's
// partition of the coordinator's internal topic.
type Coordinator struct {
	Partition int32
	NodeID    int32
	Addr      string
	Epoch     int32
}

// CoordinatorKind names the coordinators: of consumer groups, or of
// transactional producers.
type CoordinatorKind int

const (
	// GroupCoordinator owns consumer groups (partitions of __consumer_offsets).
	GroupCoordinator CoordinatorKind = iota + 1
	// TransactionCoordinator owns transactional ids (partitions of
	// __transaction_state).
	TransactionCoordinator
)

// String is "GROUP" or "TRANSACTION".
func (k CoordinatorKind) String() string {
	switch k {
	case GroupCoordinator:
		return "GROUP"
	case TransactionCoordinator:
		return "TRANSACTION"
	}
	return "UNKNOWN"
}

func (k CoordinatorKind) proto() controllerv1.CoordinatorKind {
	switch k {
	case GroupCoordinator:
		return controllerv1.CoordinatorKind_COORDINATOR_KIND_GROUP
	case TransactionCoordinator:
		return controllerv1.CoordinatorKind_COORDINATOR_KIND_TRANSACTION
	}
	return controllerv1.CoordinatorKind_COORDINATOR_KIND_UNSPECIFIED
}

func kindOf(k controllerv1.CoordinatorKind) CoordinatorKind {
	switch k {
	case controllerv1.CoordinatorKind_COORDINATOR_KIND_GROUP:
		return GroupCoordinator
	case controllerv1.CoordinatorKind_COORDINATOR_KIND_TRANSACTION:
		return TransactionCoordinator
	}
	return 0
}

// FindCoordinator asks the controller which coordinator owns a group id
// (GroupCoordinator) or transactional id (TransactionCoordinator).
func (c *Client) FindCoordinator(ctx context.Context, kind CoordinatorKind, key string) (Coordinator, error) {
	var resp *controllerv1.FindCoordinatorResponse
	err := c.callController(ctx, func(ctx context.Context, cl controllerv1grpc.ControllerServiceClient) error {
		var err error
		resp, err = cl.FindCoordinator(ctx, &controllerv1.FindCoordinatorRequest{Kind: kind.proto(), Key: key})
		return err
	})
	if err != nil {
		return Coordinator{}, err
	}
	return Coordinator{Partition: resp.GetPartition(), NodeID: resp.GetNodeId(), Addr: resp.GetGrpcAddr(), Epoch: resp.GetCoordinatorEpoch()}, nil
}

// coordinatorErr reports whether err says the group lives elsewhere or its
// coordinator cannot serve it yet: look it up again and retry.
func coordinatorErr(err error) bool {
	switch errs.Of(err) {
	case errs.NotCoordinator, errs.CoordinatorNotAvailable, errs.CoordinatorLoadInProgress,
		errs.NetworkException, errs.RequestTimedOut:
		return true
	}
	return false
}

// Groups reaches the group coordinators: it finds the one that owns a group
// (cached per group, looked up again on NOT_COORDINATOR and its kin) and
// calls GroupCoordinatorService there, retrying with backoff while the
// group moves or its new owner loads it. It is safe for concurrent use.
type Groups struct {
	c *Client

	owners *ownerCache // by group id

	mu    sync.Mutex
	conns map[string]*grpc.ClientConn // by address; guarded by mu
}

// Groups returns a new handle on the group coordinators; Close it when done.
func (c *Client) Groups() *Groups {
	return &Groups{c: c, conns: map[string]*grpc.ClientConn{}, owners: newOwnerCache(GroupCoordinator, "group")}
}

// Close closes the coordinator connections.
func (g *Groups) Close() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, cc := range g.conns {
		cc.Close()
	}
	g.conns = map[string]*grpc.ClientConn{}
	return nil
}

func (g *Groups) conn(addr string) (groupv1.GroupCoordinatorServiceClient, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	cc, ok := g.conns[addr]
	if !ok {
		var err error
		if cc, err = grpc.NewClient(addr, g.c.dialOptions()...); err != nil {
			return nil, err
		}
		g.conns[addr] = cc
	}
	return groupv1.NewGroupCoordinatorServiceClient(cc), nil
}

var errCoordinatorMoved = errors.New("the metadata names a new owner of the coordinator's partition")

// callOwner runs fn under a context that also ends when the metadata names
// a newer owner of co's partition than co (a higher coordinator epoch): a
// call parked on a coordinator that was paused or cut off would otherwise
// wait for its connection's keepalive to fail. It then answers
// NOT_COORDINATOR, which the caller retries at the new owner.
func (c *Client) callOwner(ctx context.Context, kind CoordinatorKind, co Coordinator, fn func(context.Context) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	go c.cancelOnOwnerChange(ctx, cancel, kind, co.Partition, co.Epoch)
	err := fn(ctx)
	if err != nil && errors.Is(context.Cause(ctx), errCoordinatorMoved) {
		return errs.Errorf(errs.NotCoordinator, "%s coordinator %d at %s: %v", kind, co.NodeID, co.Addr, errCoordinatorMoved)
	}
	return err
}

// cancelOnOwnerChange cancels ctx when the metadata's owner of a partition
// of the kind's internal topic has a coordinator epoch above epoch, until
// ctx ends.
func (c *Client) cancelOnOwnerChange(ctx context.Context, cancel context.CancelCauseFunc, kind CoordinatorKind, partition, epoch int32) {
	for {
		changed := c.metadataChanged()
		if a, ok := c.Metadata().Assignment(kind.proto(), partition); ok && a.GetCoordinatorEpoch() > epoch {
			cancel(errCoordinatorMoved)
			return
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return
		}
	}
}

// maxCoordinatorAttempts bounds the retries of one call: enough for a
// coordinator failover (gossip notices, the controller moves ownership, the
// new owner loads the group) at the client's backoff.
const maxCoordinatorAttempts = 30

// call runs fn against the group's coordinator. fn answers the call's error,
// including one carried in the answer's body; errors that say the group
// lives elsewhere (or is loading) forget the cached owner and retry with
// backoff until ctx ends.
func (g *Groups) call(ctx context.Context, group string, fn func(context.Context, groupv1.GroupCoordinatorServiceClient) error) error {
	for attempt := 0; ; attempt++ {
		co, err := g.owners.owner(ctx, g.c, group)
		if err == nil {
			var cl groupv1.GroupCoordinatorServiceClient
			if cl, err = g.conn(co.Addr); err == nil {
				err = g.c.callOwner(ctx, GroupCoordinator, co, func(ctx context.Context) error { return fn(ctx, cl) })
			}
			if err != nil {
				err = rpcerr.FromStatus(err)
				if coordinatorErr(err) {
					g.owners.forget(group, co)
				}
			}
		}
		if err == nil || !coordinatorErr(err) || ctx.Err() != nil || attempt >= maxCoordinatorAttempts {
			return err
		}
		g.c.log.DebugContext(ctx, "group coordinator call failed, retrying", "group", group, "err", err)
		if sleep(ctx, g.c.backoff(attempt)) != nil {
			return err
		}
	}
}

// codeErr turns an answer's error code into an error (nil for NONE).
func codeErr(code skeinv1.ErrorCode, msg string) error {
	if code == skeinv1.ErrorCode_NONE {
		return nil
	}
	return errs.Errorf(errs.ForCode(errs.Code(code)), "%s", msg)
}

// Heartbeat sends a ConsumerGroupHeartbeat (a join with epoch 0, a leave with
// -1 or -2) to the group's coordinator.
func (g *Groups) Heartbeat(ctx context.Context, req *groupv1.ConsumerGroupHeartbeatRequest) (*groupv1.ConsumerGroupHeartbeatResponse, error) {
	var resp *groupv1.ConsumerGroupHeartbeatResponse
	err := g.call(ctx, req.GetGroupId(), func(ctx context.Context, cl groupv1.GroupCoordinatorServiceClient) error {
		var err error
		if resp, err = cl.ConsumerGroupHeartbeat(ctx, req); err != nil {
			return err
		}
		return codeErr(resp.GetErrorCode(), resp.GetErrorMessage())
	})
	if err != nil {
		return nil, err
	}
	return resp, nil
}

// CommitOffsets commits offsets and answers the per-partition results. A
// call whose every partition says the group lives elsewhere is retried at
// the new owner.
func (g *Groups) CommitOffsets(ctx context.Context, req *groupv1.OffsetCommitRequest) ([]*groupv1.PartitionResult, error) {
	var resp *groupv1.OffsetCommitResponse
	err := g.call(ctx, req.GetGroupId(), func(ctx context.Context, cl groupv1.GroupCoordinatorServiceClient) error {
		var err error
		if resp, err = cl.OffsetCommit(ctx, req); err != nil {
			return err
		}
		return allMoved(resp.GetPartitions())
	})
	if err != nil {
		return nil, err
	}
	return resp.GetPartitions(), nil
}

// allMoved answers the first result's error when every result says the
// group lives elsewhere: the whole call is to be retried.
func allMoved(rs []*groupv1.PartitionResult) error {
	if len(rs) == 0 {
		return nil
	}
	for _, r := range rs {
		if !coordinatorErr(codeErr(r.GetErrorCode(), "")) {
			return nil
		}
	}
	return codeErr(rs[0].GetErrorCode(), rs[0].GetErrorMessage())
}

// FetchOffsets answers a group's committed offsets of the given partitions
// (nil: every partition with a committed offset). An offset of -1 means
// none is committed.
func (g *Groups) FetchOffsets(ctx context.Context, group string, partitions []*groupv1.TopicPartitions) ([]*groupv1.CommittedOffset, error) {
	return g.fetchOffsets(ctx, group, partitions, false)
}

// FetchStableOffsets is FetchOffsets for a read_committed reader: a
// partition whose offset is pending in a transaction answers
// UNSTABLE_OFFSET_COMMIT (retriable) rather than the offset before it.
func (g *Groups) FetchStableOffsets(ctx context.Context, group string, partitions []*groupv1.TopicPartitions) ([]*groupv1.CommittedOffset, error) {
	return g.fetchOffsets(ctx, group, partitions, true)
}

// fetchOffsets is FetchOffsets; requireStable makes a partition whose
// offset is pending in a transaction answer UNSTABLE_OFFSET_COMMIT.
func (g *Groups) fetchOffsets(ctx context.Context, group string, partitions []*groupv1.TopicPartitions, requireStable bool) ([]*groupv1.CommittedOffset, error) {
	var resp *groupv1.OffsetFetchResponse
	err := g.call(ctx, group, func(ctx context.Context, cl groupv1.GroupCoordinatorServiceClient) error {
		var err error
		if resp, err = cl.OffsetFetch(ctx, &groupv1.OffsetFetchRequest{GroupId: group, Partitions: partitions, RequireStable: requireStable}); err != nil {
			return err
		}
		if err := codeErr(resp.GetErrorCode(), "offset fetch of group "+group); err != nil {
			return err
		}
		for _, o := range resp.GetOffsets() {
			if err := codeErr(o.GetErrorCode(), "offset fetch of group "+group); coordinatorErr(err) {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return resp.GetOffsets(), nil
}

// Describe describes one group; a group the coordinator does not hold is
// GROUP_ID_NOT_FOUND.
func (g *Groups) Describe(ctx context.Context, group string) (*groupv1.GroupDescription, error) {
	var d *groupv1.GroupDescription
	err := g.call(ctx, group, func(ctx context.Context, cl groupv1.GroupCoordinatorServiceClient) error {
		resp, err := cl.DescribeGroups(ctx, &groupv1.DescribeGroupsRequest{GroupIds: []string{group}})
		if err != nil {
			return err
		}
		for _, gd := range resp.GetGroups() {
			if gd.GetGroupId() == group {
				d = gd
				if c := gd.GetErrorCode(); c != skeinv1.ErrorCode_NONE {
					// The description carries a code alone: its meaning says why.
					return codeErr(c, fmt.Sprintf("group %q: %s", group, errs.ForCode(errs.Code(c)).Desc))
				}
				return nil
			}
		}
		return errs.Errorf(errs.GroupIDNotFound, "group %q does not exist", group)
	})
	if err != nil {
		return nil, err
	}
	return d, nil
}

// Delete deletes an empty group and its committed offsets (NON_EMPTY_GROUP
// while it has members).
func (g *Groups) Delete(ctx context.Context, group string) error {
	return g.call(ctx, group, func(ctx context.Context, cl groupv1.GroupCoordinatorServiceClient) error {
		resp, err := cl.DeleteGroups(ctx, &groupv1.DeleteGroupsRequest{GroupIds: []string{group}})
		if err != nil {
			return err
		}
		for _, r := range resp.GetGroups() {
			if r.GetGroupId() == group {
				return codeErr(r.GetErrorCode(), r.GetErrorMessage())
			}
		}
		return errs.Errorf(errs.GroupIDNotFound, "group %q does not exist", group)
	})
}

// DeleteOffsets deletes a group's committed offsets of partitions (Kafka's
// OffsetDelete) and answers one result per partition, in the request's
// order: NONE once deleted (or when none was committed), else why the
// offset stays (GROUP_SUBSCRIBED_TO_TOPIC, UNKNOWN_TOPIC_OR_PARTITION,
// TOPIC_AUTHORIZATION_FAILED). A refusal of the whole request
// (GROUP_ID_NOT_FOUND, GROUP_AUTHORIZATION_FAILED, ...) is the error. A
// deletion is safe to retry, as the call does while the group moves.
func (g *Groups) DeleteOffsets(ctx context.Context, group string, partitions []*groupv1.TopicPartitions) ([]*groupv1.PartitionResult, error) {
	var resp *groupv1.OffsetDeleteResponse
	err := g.call(ctx, group, func(ctx context.Context, cl groupv1.GroupCoordinatorServiceClient) error {
		var err error
		if resp, err = cl.OffsetDelete(ctx, &groupv1.OffsetDeleteRequest{GroupId: group, Partitions: partitions}); err != nil {
			return err
		}
		return codeErr(resp.GetErrorCode(), resp.GetErrorMessage())
	})
	if err != nil {
		return nil, err
	}
	return resp.GetPartitions(), nil
}

// List lists the groups of every live group coordinator in the metadata,
// sorted by group id. A coordinator that cannot be reached fails the call.
func (g *Groups) List(ctx context.Context) ([]*groupv1.GroupListing, error) {
	if err := g.c.WaitReady(ctx); err != nil {
		return nil, err
	}
	var addrs []string
	for _, co := range g.c.Metadata().Coordinators() {
		if co.GetKind() == controllerv1.CoordinatorKind_COORDINATOR_KIND_GROUP && co.GetAlive() && co.GetGrpcAddr() != "" {
			addrs = append(addrs, co.GetGrpcAddr())
		}
	}
	if len(addrs) == 0 {
		return nil, errs.Errorf(errs.CoordinatorNotAvailable, "no live group coordinator in the metadata")
	}
	seen := map[string]*groupv1.GroupListing{}
	for _, addr := range addrs {
		cl, err := g.conn(addr)
		if err != nil {
			return nil, err
		}
		resp, err := cl.ListGroups(ctx, &groupv1.ListGroupsRequest{})
		if err != nil {
			return nil, rpcerr.FromStatus(err)
		}
		for _, l := range resp.GetGroups() {
			seen[l.GetGroupId()] = l
		}
	}
	out := make([]*groupv1.GroupListing, 0, len(seen))
	for _, l := range seen {
		out = append(out, l)
	}
	slices.SortFunc(out, func(a, b *groupv1.GroupListing) int {
		if a.GetGroupId() < b.GetGroupId() {
			return -1
		}
		if a.GetGroupId() > b.GetGroupId() {
			return 1
		}
		return 0
	})
	return out, nil
}
