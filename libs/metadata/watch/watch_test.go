package watch_test

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	controllerv1 "skein/gen/skein/controller/v1"
	controllerv1grpc "skein/gen/skein/controller/v1/controllerv1grpc"
	"skein/libs/client/clienttest"
	"skein/libs/metadata"
	"skein/libs/metadata/watch"
)

func controllers(t *testing.T, addrs ...string) []watch.Controller {
	t.Helper()
	var out []watch.Controller
	for _, a := range addrs {
		cc, err := grpc.NewClient(a, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cc.Close() })
		out = append(out, watch.Controller{Addr: a, Client: controllerv1grpc.NewControllerServiceClient(cc)})
	}
	return out
}

// run starts Run and answers the images it delivers.
func run(t *testing.T, cfg watch.Config) <-chan *metadata.Image {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	images := make(chan *metadata.Image, 64)
	done := make(chan struct{})
	go func() {
		defer close(done)
		watch.Run(ctx, cfg, func(im *metadata.Image) { images <- im })
	}()
	t.Cleanup(func() { cancel(); <-done })
	return images
}

func next(t *testing.T, images <-chan *metadata.Image, d time.Duration) *metadata.Image {
	t.Helper()
	select {
	case im := <-images:
		return im
	case <-time.After(d):
		t.Fatalf("no image within %v", d)
		return nil
	}
}

// A controller cut off from its quorum sends its image and then nothing:
// after the silence the watcher follows the next controller, from a fresh
// image that holds what changed meanwhile, and then its deltas.
func TestLeavesASilentController(t *testing.T) {
	ctrl := clienttest.NewController("c")
	ctrl.AddBroker(1, "b1")
	cut, _ := clienttest.ServeController(t, clienttest.CutOff{Controller: ctrl})
	live, _ := clienttest.ServeController(t, ctrl)
	// The fake's heartbeat comes every metadata.WatchHeartbeat (1 s).
	images := run(t, watch.Config{Controllers: controllers(t, cut, live), Silence: 1500 * time.Millisecond})

	first := next(t, images, 5*time.Second)
	if _, ok := first.Broker(1); !ok || first.ClusterID() != "c" {
		t.Fatalf("first image: cluster %q, brokers %v", first.ClusterID(), first.Brokers())
	}
	ctrl.AddBroker(2, "b2") // the cut-off controller does not pass this on
	fresh := next(t, images, 5*time.Second)
	if _, ok := fresh.Broker(2); !ok || fresh.Version() <= first.Version() {
		t.Fatalf("after the silence: version %d (first %d), brokers %v", fresh.Version(), first.Version(), fresh.Brokers())
	}
	ctrl.AddBroker(3, "b3")
	delta := next(t, images, 5*time.Second)
	if _, ok := delta.Broker(3); !ok || delta.Version() != fresh.Version()+1 {
		t.Fatalf("after a delta: version %d, brokers %v", delta.Version(), delta.Brokers())
	}
	// Heartbeats keep the live controller followed and deliver nothing.
	select {
	case im := <-images:
		t.Fatalf("an image without a change: version %d", im.Version())
	case <-time.After(2500 * time.Millisecond):
	}
	// Each delivery is the callee's own copy.
	if _, ok := first.Broker(2); ok {
		t.Error("a later version changed an image already delivered")
	}
}

// scripted is a controller that answers every WatchMetadata with msgs, then
// with err (nil: it holds the stream open until the watcher leaves).
type scripted struct {
	controllerv1grpc.UnimplementedControllerServiceServer
	msgs  []*controllerv1.WatchMetadataResponse
	err   error
	calls atomic.Int32
}

func (s *scripted) WatchMetadata(_ *controllerv1.WatchMetadataRequest, stream controllerv1grpc.ControllerService_WatchMetadataServer) error {
	s.calls.Add(1)
	for _, m := range s.msgs {
		if err := stream.Send(m); err != nil {
			return err
		}
	}
	if s.err != nil {
		return s.err
	}
	<-stream.Context().Done()
	return nil
}

func image(version uint64, brokers ...int32) *controllerv1.WatchMetadataResponse {
	im := &controllerv1.MetadataImage{ClusterId: "c", Version: version}
	for _, b := range brokers {
		im.Brokers = append(im.Brokers, &controllerv1.BrokerRecord{Id: b})
	}
	return &controllerv1.WatchMetadataResponse{Update: &controllerv1.WatchMetadataResponse_Image{Image: im}}
}

func delta(version uint64, recs ...*controllerv1.MetadataRecord) *controllerv1.WatchMetadataResponse {
	return &controllerv1.WatchMetadataResponse{Update: &controllerv1.WatchMetadataResponse_Delta{Delta: &controllerv1.MetadataDelta{Version: version, Records: recs}}}
}

// A controller that refuses the stream, and one whose delta does not fit the
// image, are left for the next, round robin; every stream starts from a
// fresh image, and heartbeats and replays deliver nothing.
func TestMovesOnFromErrorsAndBadDeltas(t *testing.T) {
	refusing := &scripted{err: status.Error(codes.Unavailable, "not now")}
	bad := &scripted{
		msgs: []*controllerv1.WatchMetadataResponse{
			image(5, 1),
			delta(6, metadata.PartitionRecord(&controllerv1.PartitionRecord{Topic: "nope", Partition: 0})),
		},
		err: status.Error(codes.Internal, "must not be reached"),
	}
	good := &scripted{msgs: []*controllerv1.WatchMetadataResponse{
		image(7, 1, 2),
		delta(7), // heartbeat
		delta(6), // replay
		delta(8, metadata.BrokerRecord(&controllerv1.BrokerRecord{Id: 3})),
		delta(9), // an empty delta that moves the version
	}}
	var addrs []string
	for _, s := range []*scripted{refusing, bad, good} {
		a, _ := clienttest.ServeController(t, s)
		addrs = append(addrs, a)
	}
	backoffs := make(chan int, 16)
	images := run(t, watch.Config{
		Controllers: controllers(t, addrs...),
		NodeID:      42,
		Backoff:     func(f int) time.Duration { backoffs <- f; return 10 * time.Millisecond },
	})
	var versions []metadata.Version
	var last *metadata.Image
	for range 4 {
		last = next(t, images, 5*time.Second)
		versions = append(versions, last.Version())
	}
	if want := []metadata.Version{5, 7, 8, 9}; !slices.Equal(versions, want) {
		t.Errorf("versions delivered %v, want %v", versions, want)
	}
	if len(last.Brokers()) != 3 {
		t.Errorf("brokers %v, want 1, 2 and 3", last.Brokers())
	}
	if r, b, g := refusing.calls.Load(), bad.calls.Load(), good.calls.Load(); r != 1 || b != 1 || g != 1 {
		t.Errorf("streams opened: refusing %d, bad %d, good %d; want one each", r, b, g)
	}
	// The refusal delivered nothing, the bad stream its image: the count of
	// empty streams in a row starts again after it.
	if f1, f2 := <-backoffs, <-backoffs; f1 != 0 || f2 != 0 {
		t.Errorf("backoff failures %d, %d; want 0, 0", f1, f2)
	}
}

// A controller that offers an image older than one already delivered (it
// lags a quorum it cannot reach) is left for the next: the watcher never
// goes back to an older version, which would look to a storage node as
// though the newer topics had been deleted.
func TestNeverGoesBackToAnOlderImage(t *testing.T) {
	first := &scripted{msgs: []*controllerv1.WatchMetadataResponse{image(7, 1, 2)}, err: status.Error(codes.Unavailable, "gone")}
	lagging := &scripted{msgs: []*controllerv1.WatchMetadataResponse{image(5, 1), delta(6), delta(9, metadata.BrokerRecord(&controllerv1.BrokerRecord{Id: 4}))}}
	caughtUp := &scripted{msgs: []*controllerv1.WatchMetadataResponse{image(7, 1, 2), delta(8, metadata.BrokerRecord(&controllerv1.BrokerRecord{Id: 3}))}}
	var addrs []string
	for _, s := range []*scripted{first, lagging, caughtUp} {
		a, _ := clienttest.ServeController(t, s)
		addrs = append(addrs, a)
	}
	backoffs := make(chan int, 16)
	images := run(t, watch.Config{
		Controllers: controllers(t, addrs...),
		Backoff:     func(f int) time.Duration { backoffs <- f; return 10 * time.Millisecond },
	})
	var versions []metadata.Version
	var last *metadata.Image
	for range 3 {
		last = next(t, images, 5*time.Second)
		versions = append(versions, last.Version())
	}
	if want := []metadata.Version{7, 7, 8}; !slices.Equal(versions, want) {
		t.Errorf("versions delivered %v, want %v (the lagging controller's 5 never)", versions, want)
	}
	if got := last.Brokers(); len(got) != 3 {
		t.Errorf("brokers %v, want 1, 2 and 3", got)
	}
	if n := lagging.calls.Load(); n != 1 {
		t.Errorf("streams opened on the lagging controller: %d, want 1", n)
	}
	// The refused stream delivered nothing: it counts as a failure.
	if f1, f2 := <-backoffs, <-backoffs; f1 != 0 || f2 != 1 {
		t.Errorf("backoff failures %d, %d; want 0, then 1 after the refused stream", f1, f2)
	}
}

// gated is a controller that sends an image, then a delta once released,
// and holds the stream open without heartbeats.
type gated struct {
	controllerv1grpc.UnimplementedControllerServiceServer
	release chan struct{}
	calls   atomic.Int32
}

func (g *gated) WatchMetadata(_ *controllerv1.WatchMetadataRequest, stream controllerv1grpc.ControllerService_WatchMetadataServer) error {
	g.calls.Add(1)
	if err := stream.Send(image(5, 1)); err != nil {
		return err
	}
	select {
	case <-g.release:
		if err := stream.Send(delta(6, metadata.BrokerRecord(&controllerv1.BrokerRecord{Id: 2}))); err != nil {
			return err
		}
	case <-stream.Context().Done():
		return nil
	}
	<-stream.Context().Done()
	return nil
}

// The silence counts the controller's time, not the watcher's own: an
// image that takes the watcher three silences to apply (a storage node
// opening thousands of replicas) does not make it leave the stream, and the
// controller's next delta arrives on it.
func TestApplyingASlowImageIsNoSilence(t *testing.T) {
	g := &gated{release: make(chan struct{})}
	addr, _ := clienttest.ServeController(t, g)
	const silence = 300 * time.Millisecond
	images := make(chan *metadata.Image, 4)
	var once sync.Once
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		watch.Run(ctx, watch.Config{Controllers: controllers(t, addr), Silence: silence}, func(im *metadata.Image) {
			if im.Version() == 5 {
				time.Sleep(3 * silence)
				once.Do(func() { close(g.release) })
			}
			images <- im
		})
	}()
	t.Cleanup(func() { cancel(); <-done })
	if im := next(t, images, 5*time.Second); im.Version() != 5 {
		t.Fatalf("first image at version %d", im.Version())
	}
	if im := next(t, images, 5*time.Second); im.Version() != 6 {
		t.Fatalf("then version %d, want the delta's 6", im.Version())
	}
	if n := g.calls.Load(); n != 1 {
		t.Fatalf("%d streams: the watcher left the controller while it applied an image", n)
	}
}
