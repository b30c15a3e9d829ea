package server

import (
	"context"
	"slices"

	"google.golang.org/protobuf/proto"

	controllerv1 "skein/gen/skein/controller/v1"
	"skein/libs/acl"
)

// watchView is what a client's metadata watch (not a Skein service's)
// under an authorizer may see: the topics it may describe, as Kafka's
// Metadata answers, and the ACL bindings only with describe on the
// cluster, as Kafka's DescribeAcls. Its images are marked filtered. The
// permissions change only with the bindings, so a message that carries a
// binding's change, or that finds the cluster permission changed, is
// replaced by the whole image, seen through the view again.
type watchView struct {
	acls  func() bool            // may describe the cluster now
	topic func(name string) bool // may describe the topic now

	aclsShown bool
	shown     map[string]bool // the topics the watcher holds
}

// watchView answers nil when the watch of ctx shows everything: no
// authorizer, or a Skein service's watch.
func (s *Server) watchView(ctx context.Context) *watchView {
	c, known := caller(ctx)
	if s.auth == nil || !known || c.Service {
		return nil
	}
	v := &watchView{
		acls:  func() bool { return s.auth.Allowed(c, known, acl.Cluster, acl.ClusterName, acl.Describe) },
		topic: func(name string) bool { return s.auth.Allowed(c, known, acl.Topic, name, acl.Describe) },
		shown: map[string]bool{},
	}
	v.aclsShown = v.acls()
	return v
}

// filter answers m as the watcher may see it; image is the current whole
// image, for when permissions may have changed.
func (v *watchView) filter(m *controllerv1.WatchMetadataResponse, image func() *controllerv1.MetadataImage) *controllerv1.WatchMetadataResponse {
	aclsNow := v.acls()
	if d := m.GetDelta(); aclsNow != v.aclsShown || d != nil && slices.ContainsFunc(d.GetRecords(), isAcl) {
		// Whatever is sent next (a heartbeat may go before the change's
		// delta), the whole image after the change.
		m = &controllerv1.WatchMetadataResponse{Update: &controllerv1.WatchMetadataResponse_Image{Image: image()}}
	}
	v.aclsShown = aclsNow
	if im := m.GetImage(); im != nil {
		return &controllerv1.WatchMetadataResponse{Update: &controllerv1.WatchMetadataResponse_Image{Image: v.image(im)}}
	}
	if d := v.delta(m.GetDelta()); d != m.GetDelta() {
		return &controllerv1.WatchMetadataResponse{Update: &controllerv1.WatchMetadataResponse_Delta{Delta: d}}
	}
	return m
}

// image answers im with the topics (and their partitions) the watcher may
// not describe left out, and the bindings unless it may see them, marked
// filtered; it becomes what the watcher holds.
func (v *watchView) image(im *controllerv1.MetadataImage) *controllerv1.MetadataImage {
	out := proto.CloneOf(im)
	out.Filtered = true
	v.shown = map[string]bool{}
	out.Topics = slices.DeleteFunc(out.Topics, func(t *controllerv1.TopicRecord) bool {
		if v.topic(t.GetName()) {
			v.shown[t.GetName()] = true
			return false
		}
		return true
	})
	out.Partitions = slices.DeleteFunc(out.Partitions, func(p *controllerv1.PartitionRecord) bool { return !v.shown[p.GetTopic()] })
	if !v.aclsShown {
		out.Acls = nil
	}
	return out
}

// delta answers d with the records of topics the watcher may not describe
// left out (d itself when none is). It holds no binding: filter sent an
// image instead.
func (v *watchView) delta(d *controllerv1.MetadataDelta) *controllerv1.MetadataDelta {
	if d == nil {
		return nil
	}
	kept := make([]*controllerv1.MetadataRecord, 0, len(d.GetRecords()))
	for _, r := range d.GetRecords() {
		if v.keep(r) {
			kept = append(kept, r)
		}
	}
	if len(kept) == len(d.GetRecords()) {
		return d
	}
	return &controllerv1.MetadataDelta{Version: d.GetVersion(), Records: kept}
}

// keep reports whether the watcher sees r, and notes the topics it comes
// to hold or stops holding.
func (v *watchView) keep(r *controllerv1.MetadataRecord) bool {
	switch {
	case r.GetTopic() != nil:
		name := r.GetTopic().GetName()
		if v.topic(name) {
			v.shown[name] = true
		}
		return v.shown[name]
	case r.GetRemovedTopic() != nil:
		name := r.GetRemovedTopic().GetName()
		was := v.shown[name]
		delete(v.shown, name)
		return was
	case r.GetPartition() != nil:
		return v.shown[r.GetPartition().GetTopic()]
	}
	return true
}
