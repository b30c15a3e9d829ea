package gateway

import (
	"context"
	"net/http"
	"slices"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	skeinv1 "skein/gen/skein/v1"
	"skein/libs/acl"
	"skein/libs/errs"
	"skein/libs/metadata"
	"skein/libs/peerauth"
	"skein/libs/rpcerr"
)

// authorizer decides each public call with libs/acl against the ACL
// bindings of the gateway's metadata image, which follows the controller's.
type authorizer struct {
	super    map[string]bool
	bindings *peerauth.Bindings
	// image is the metadata image the bindings are read from: a change of
	// ACLs is a new image.
	image func() *metadata.Image
}

func newAuthorizer(image func() *metadata.Image, super map[string]bool) *authorizer {
	return &authorizer{super: super, bindings: peerauth.NewBindings(image), image: image}
}

// need is one permission a call needs: any one of its requests allowed
// grants it; a refusal names the first.
type need []acl.Request

func one(principal string, typ acl.ResourceType, name string, op acl.Operation) need {
	return need{{Principal: principal, Resource: typ, Name: name, Operation: op}}
}

// needs maps a public request to the permissions it needs. A request not
// named here needs none.
func needs(p string, req any) []need {
	topic := func(name string, op acl.Operation) need { return one(p, acl.Topic, name, op) }
	group := func(name string, op acl.Operation) need { return one(p, acl.Group, name, op) }
	cluster := func(op acl.Operation) need { return one(p, acl.Cluster, "", op) }
	txn := func(id string) need { return one(p, acl.TransactionalID, id, acl.Write) }
	// readTopics adds read on every topic of offsets, as Kafka's offset
	// commits (plain and transactional) need.
	readTopics := func(n []need, offsets []*skeinv1.TopicPartitionOffset) []need {
		seen := map[string]bool{}
		for _, o := range offsets {
			if !seen[o.GetTopic()] {
				seen[o.GetTopic()] = true
				n = append(n, topic(o.GetTopic(), acl.Read))
			}
		}
		return n
	}
	nackNeeds := func(n []need, r *skeinv1.NackRecordRequest) []need {
		if r.GetTopic() != "" {
			n = append(n, topic(r.GetTopic(), acl.Read))
		}
		return n
	}
	withTxn := func(n []need, id string) []need {
		if id != "" {
			n = append(n, txn(id))
		}
		return n
	}
	switch r := req.(type) {
	// AdminService
	case *skeinv1.GetClusterRequest:
		return []need{cluster(acl.Describe)}
	case *skeinv1.CreateTopicRequest:
		// Kafka allows either: create on the topic, or on the cluster.
		return []need{append(topic(r.GetName(), acl.Create), cluster(acl.Create)...)}
	case *skeinv1.DescribeTopicRequest:
		return []need{topic(r.GetTopic(), acl.Describe)}
	case *skeinv1.DeleteTopicRequest:
		return []need{topic(r.GetTopic(), acl.Delete)}
	case *skeinv1.CreatePartitionsRequest:
		return []need{topic(r.GetTopic(), acl.Alter)}
	case *skeinv1.AlterTopicConfigsRequest:
		return []need{topic(r.GetTopic(), acl.Alter)}
	case *skeinv1.ListOffsetsRequest:
		// As Kafka's ListOffsets (and the storage nodes): describe.
		return []need{topic(r.GetTopic(), acl.Describe)}
	case *skeinv1.DeleteRecordsRequest:
		// As Kafka's DeleteRecords: delete on the topic.
		return []need{topic(r.GetTopic(), acl.Delete)}
	case *skeinv1.ElectLeadersRequest, *skeinv1.CreateAclsRequest, *skeinv1.DeleteAclsRequest:
		return []need{cluster(acl.Alter)}
	case *skeinv1.DescribeAclsRequest:
		return []need{cluster(acl.Describe)}
	// ProducerService, ConsumerService
	case *skeinv1.ProduceRequest:
		return withTxn([]need{topic(r.GetTopic(), acl.Write)}, r.GetTransactionalId())
	case *skeinv1.ProduceStreamRequest:
		return []need{topic(r.GetTopic(), acl.Write)}
	case *skeinv1.FetchRequest:
		return []need{topic(r.GetTopic(), acl.Read)}
	case *skeinv1.TailRequest:
		return []need{topic(r.GetTopic(), acl.Read)}
	// GroupService: a member reads its group, and joining reads the topics
	// it subscribes to; committing offsets reads their topics.
	case *skeinv1.JoinGroupRequest:
		n := []need{group(r.GetGroup(), acl.Read)}
		for _, t := range r.GetTopics() {
			n = append(n, topic(t, acl.Read))
		}
		return n
	case *skeinv1.HeartbeatRequest:
		return []need{group(r.GetGroup(), acl.Read)}
	case *skeinv1.FetchGroupRecordsRequest:
		return []need{group(r.GetGroup(), acl.Read)}
	case *skeinv1.CommitOffsetsRequest:
		return readTopics([]need{group(r.GetGroup(), acl.Read)}, r.GetOffsets())
	case *skeinv1.GetOffsetsRequest:
		return []need{group(r.GetGroup(), acl.Describe)}
	case *skeinv1.LeaveGroupRequest:
		return []need{group(r.GetGroup(), acl.Read)}
	case *skeinv1.NackRecordRequest:
		// A nack hands the record to the dead-letter topic and commits
		// past it: read on its topic, as a commit needs, checked before
		// anything about the topic is looked up (a topic the caller may
		// not read is refused alike whether or not it exists).
		return nackNeeds([]need{group(r.GetGroup(), acl.Read)}, r)
	case *skeinv1.DescribeGroupRequest:
		return []need{group(r.GetGroup(), acl.Describe)}
	case *skeinv1.GetGroupConfigRequest:
		return []need{group(r.GetGroup(), acl.Describe)}
	case *skeinv1.SetGroupConfigRequest:
		return []need{group(r.GetGroup(), acl.Alter)}
	case *skeinv1.DeleteGroupRequest:
		return []need{group(r.GetGroup(), acl.Delete)}
	case *skeinv1.DeleteOffsetsRequest:
		// As Kafka's OffsetDelete: delete on the group, read on the
		// topic. One that names no topic is refused by its handler, not
		// checked against the topic "".
		n := []need{group(r.GetGroup(), acl.Delete)}
		if r.GetTopic() != "" {
			n = append(n, topic(r.GetTopic(), acl.Read))
		}
		return n
	case *skeinv1.ConsumeRequest:
		// A commit or nack on the stream is for the stream's own group
		// (one naming another is refused), whose read was checked at the
		// subscribe, and one that names no group is not checked against
		// the group "". Each still needs read on the topics it names, as
		// its unary twin does: the principal may have lost it since.
		switch {
		case r.GetSubscribe() != nil:
			return needs(p, r.GetSubscribe())
		case r.GetCommit() != nil:
			return readTopics(nil, r.GetCommit().GetOffsets())
		case r.GetNack() != nil:
			return nackNeeds(nil, r.GetNack())
		}
	// TransactionService
	case *skeinv1.InitProducerRequest:
		// Without a transactional id: write on some topic (check).
		return withTxn(nil, r.GetTransactionalId())
	case *skeinv1.SendOffsetsRequest:
		return readTopics([]need{txn(r.GetTransactionalId()), group(r.GetGroup(), acl.Read)}, r.GetOffsets())
	case *skeinv1.CommitTransactionRequest:
		return []need{txn(r.GetTransactionalId())}
	case *skeinv1.AbortTransactionRequest:
		return []need{txn(r.GetTransactionalId())}
	case *skeinv1.DescribeProducersRequest:
		// As Kafka's DescribeProducers.
		return []need{topic(r.GetTopic(), acl.Read)}
	case *skeinv1.DescribeTransactionRequest:
		// As Kafka's DescribeTransactions (a listing needs nothing: it
		// is filtered to the ids the principal may describe).
		return []need{one(p, acl.TransactionalID, r.GetTransactionalId(), acl.Describe)}
	}
	return nil
}

// check answers nil when every need of req is granted to principal, else
// the refusal of the first need that is not, and the request it names.
func (z *authorizer) check(principal string, req any) (acl.Request, error) {
	bs := z.bindings.Get()
	if r, ok := req.(*skeinv1.InitProducerRequest); ok && r.GetTransactionalId() == "" {
		// An idempotent producer's id needs write on some topic, as
		// Kafka's InitProducerId asks (authorizeByResourceType).
		if !acl.AuthorizeAny(bs, z.super, principal, acl.Topic, acl.Write) {
			return acl.Request{Principal: principal, Resource: acl.Topic, Name: "(any)", Operation: acl.Write}, acl.RefusalAny(principal, acl.Topic, acl.Write)
		}
		return acl.Request{}, nil
	}
	for _, n := range needs(principal, req) {
		granted := false
		for _, r := range n {
			if acl.Authorize(bs, z.super, r).Allowed {
				granted = true
				break
			}
		}
		if !granted {
			return n[0], acl.Refusal(n[0])
		}
	}
	return acl.Request{}, nil
}

// allowed reports whether principal may do op on one resource.
func (z *authorizer) allowed(principal string, typ acl.ResourceType, name string, op acl.Operation) bool {
	return acl.Authorize(z.bindings.Get(), z.super, acl.Request{Principal: principal, Resource: typ, Name: name, Operation: op}).Allowed
}

// filter drops from a listing what the principal may not describe, as
// Kafka's metadata, list-groups and list-transactions answers do, and from
// a group's offsets those of topics it may not describe, as Kafka's offset
// fetch does (a
// group's total lag then counts the offsets kept); from a group's members
// it drops those topics from their subscriptions and assignments. A topic
// the principal created but may not describe (create alone) is answered
// by its name only, as Kafka's CreateTopics leaves out the id, configs
// and counts of a topic its caller may not describe. A member's assignment
// keeps the topics the principal may describe, and its fetched records and
// positions those it may read.
func (z *authorizer) filter(principal string, resp any) {
	offsets := func(offs []*skeinv1.CommittedOffset) (kept []*skeinv1.CommittedOffset, lag int64) {
		kept = offs[:0]
		for _, o := range offs {
			if z.allowed(principal, acl.Topic, o.GetTopic(), acl.Describe) {
				kept = append(kept, o)
				lag += max(o.GetLag(), 0) // -1: not known, not in the total
			}
		}
		return kept, lag
	}
	// assignment drops the topics the principal may not describe: a
	// heartbeat or fetch in another member's name (its id is in the
	// group's description) would otherwise name the topics it reads.
	assignment := func(tps []*skeinv1.TopicPartitions) []*skeinv1.TopicPartitions {
		kept := tps[:0]
		for _, a := range tps {
			if z.allowed(principal, acl.Topic, a.GetTopic(), acl.Describe) {
				kept = append(kept, a)
			}
		}
		return kept
	}
	switch r := resp.(type) {
	case *skeinv1.JoinGroupResponse:
		r.Assignment = assignment(r.GetAssignment())
	case *skeinv1.HeartbeatResponse:
		r.Assignment = assignment(r.GetAssignment())
	case *skeinv1.FetchGroupRecordsResponse:
		// Records and positions of a topic the principal may not read
		// are not its to see, as Kafka's Fetch needs read on each topic:
		// a member's fetch reads what the group assigned it, and a
		// principal with read on the group alone fetching in a member's
		// name must not get the records of that member's topics.
		r.Assignment = assignment(r.GetAssignment())
		r.Records = slices.DeleteFunc(r.Records, func(rec *skeinv1.ConsumedRecord) bool {
			return !z.allowed(principal, acl.Topic, rec.GetTopic(), acl.Read)
		})
		r.Positions = slices.DeleteFunc(r.Positions, func(p *skeinv1.TopicPartitionOffset) bool {
			return !z.allowed(principal, acl.Topic, p.GetTopic(), acl.Read)
		})
	case *skeinv1.GetOffsetsResponse:
		r.Offsets, _ = offsets(r.GetOffsets())
	case *skeinv1.DescribeGroupResponse:
		r.Offsets, r.TotalLag = offsets(r.GetOffsets())
		// A member's subscription and assignment, too: which topics a
		// group reads is the topics' to show.
		for _, m := range r.GetMembers() {
			topics := m.Topics[:0]
			for _, t := range m.GetTopics() {
				if z.allowed(principal, acl.Topic, t, acl.Describe) {
					topics = append(topics, t)
				}
			}
			m.Topics = topics
			m.Assignment = assignment(m.GetAssignment())
		}
	case *skeinv1.CreateTopicResponse:
		if t := r.GetTopic(); t != nil && !z.allowed(principal, acl.Topic, t.GetName(), acl.Describe) {
			r.Topic = &skeinv1.TopicDescription{Name: t.GetName()}
		}
	case *skeinv1.ListTopicsResponse:
		kept := r.Topics[:0]
		for _, t := range r.GetTopics() {
			if z.allowed(principal, acl.Topic, t.GetName(), acl.Describe) {
				kept = append(kept, t)
			}
		}
		r.Topics = kept
	case *skeinv1.ListGroupsResponse:
		kept := r.Groups[:0]
		for _, g := range r.GetGroups() {
			if z.allowed(principal, acl.Group, g.GetGroup(), acl.Describe) {
				kept = append(kept, g)
			}
		}
		r.Groups = kept
	case *skeinv1.ListTransactionsResponse:
		kept := r.Transactions[:0]
		for _, x := range r.GetTransactions() {
			if z.allowed(principal, acl.TransactionalID, x.GetTransactionalId(), acl.Describe) {
				kept = append(kept, x)
			}
		}
		r.Transactions = kept
	}
}

// authorize decides one request of a call (a unary request, or each
// message a stream receives); a refusal is logged with what was asked.
func (a *auth) authorize(ctx context.Context, method string, req any) error {
	if a.authz == nil {
		return nil
	}
	p := display(principalFrom(ctx))
	r, err := a.authz.check(p, req)
	if err == nil {
		return nil
	}
	resource := r.Resource.String() + ":" + r.Name
	if r.Resource == acl.Cluster {
		resource = "cluster"
	}
	trace.SpanFromContext(ctx).SetAttributes(attribute.String("skein.principal", p))
	a.log.WarnContext(ctx, "call denied", "principal", p, "operation", method, "resource", resource,
		"acl_operation", r.Operation.String(), "error_code", errs.Of(err).Name, "reason", err.Error())
	return rpcerr.ToGRPC(err)
}

// consoleGuard authorizes the console's routes under --authorizer: the
// event stream and the demos' status need cluster describe, a demo action
// (kill, pause, resume a node) cluster alter.
func (a *auth) consoleGuard(h http.Handler, alters bool) http.Handler {
	if a.authz == nil {
		return h
	}
	op := acl.Describe
	if alters {
		op = acl.Alter
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := display(principalFrom(r.Context()))
		if a.authz.allowed(p, acl.Cluster, "", op) {
			h.ServeHTTP(w, r)
			return
		}
		err := acl.Refusal(acl.Request{Principal: p, Resource: acl.Cluster, Operation: op})
		a.log.WarnContext(r.Context(), "call denied", "principal", p, "operation", r.Method+" "+r.URL.Path, "resource", "cluster",
			"acl_operation", op.String(), "error_code", errs.Of(err).Name, "reason", err.Error())
		writeError(w, http.StatusForbidden, errorBody{Code: int32(codes.PermissionDenied), ErrorCode: errs.Of(err).Name, Message: errs.Message(err)})
	})
}

// authorizedStream authorizes each message the stream receives.
type authorizedStream struct {
	grpc.ServerStream
	a      *auth
	method string
}

func (s *authorizedStream) RecvMsg(m any) error {
	if err := s.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	return s.a.authorize(s.Context(), s.method, m)
}
