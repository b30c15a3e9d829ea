package controllerlink

import (
	"context"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	grpcmd "google.golang.org/grpc/metadata"

	controllerv1 "skein/gen/skein/controller/v1"
	controllerv1grpc "skein/gen/skein/controller/v1/controllerv1grpc"
	"skein/libs/metadata"
)

// fakeController counts heartbeats; a follower names leaderAddr in the
// header a real follower sets when it passes a call on.
type fakeController struct {
	controllerv1grpc.UnimplementedControllerServiceServer
	leaderAddr    string
	heartbeats    atomic.Int64
	registrations atomic.Int64
	fenced        atomic.Bool // set by ControlledShutdown, cleared by a registration
	// reported: how many unreachable leaders each heartbeat carried, in order.
	mu       sync.Mutex
	reported []int
}

func (f *fakeController) RegisterBroker(context.Context, *controllerv1.RegisterBrokerRequest) (*controllerv1.RegisterBrokerResponse, error) {
	f.registrations.Add(1)
	f.fenced.Store(false)
	return &controllerv1.RegisterBrokerResponse{BrokerEpoch: 2}, nil
}

func (f *fakeController) ControlledShutdown(context.Context, *controllerv1.ControlledShutdownRequest) (*controllerv1.ControlledShutdownResponse, error) {
	f.fenced.Store(true)
	return &controllerv1.ControlledShutdownResponse{}, nil
}

func (f *fakeController) BrokerHeartbeat(ctx context.Context, req *controllerv1.BrokerHeartbeatRequest) (*controllerv1.BrokerHeartbeatResponse, error) {
	f.heartbeats.Add(1)
	f.mu.Lock()
	f.reported = append(f.reported, len(req.GetUnreachableLeaders()))
	f.mu.Unlock()
	if f.fenced.Load() {
		return &controllerv1.BrokerHeartbeatResponse{Fenced: true}, nil
	}
	if f.leaderAddr != "" {
		if err := grpc.SetHeader(ctx, grpcmd.Pairs(metadata.ControllerLeaderHeader, f.leaderAddr)); err != nil {
			return nil, err
		}
	}
	return &controllerv1.BrokerHeartbeatResponse{}, nil
}

func serve(t *testing.T, f *fakeController) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	controllerv1grpc.RegisterControllerServiceServer(s, f)
	go func() { _ = s.Serve(lis) }()
	t.Cleanup(s.Stop)
	return lis.Addr().String()
}

func heartbeat(t *testing.T, l *Link) {
	t.Helper()
	err := l.call(context.Background(), func(c controllerv1grpc.ControllerServiceClient, opts ...grpc.CallOption) error {
		_, err := c.BrokerHeartbeat(context.Background(), &controllerv1.BrokerHeartbeatRequest{BrokerId: 1}, opts...)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// A broker whose first controller is a follower sends its later heartbeats
// straight to the leader the follower named; a name it was not configured
// with changes nothing.
func TestCallsMoveToTheLeaderAFollowerNames(t *testing.T) {
	leader := &fakeController{}
	leaderAddr := serve(t, leader)
	follower := &fakeController{leaderAddr: leaderAddr}
	stranger := &fakeController{leaderAddr: "127.0.0.1:1"}
	l, err := New(Config{BrokerID: 1, Controllers: []string{serve(t, follower), leaderAddr, serve(t, stranger)}}, slog.Default())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for range 3 {
		heartbeat(t, l)
	}
	if f, ld := follower.heartbeats.Load(), leader.heartbeats.Load(); f != 1 || ld != 2 {
		t.Fatalf("heartbeats: follower %d, leader %d; want 1 and 2", f, ld)
	}

	l.next.Store(2) // as if the others had failed
	for range 2 {
		heartbeat(t, l)
	}
	if s := stranger.heartbeats.Load(); s != 2 {
		t.Fatalf("a controller naming an unknown leader got %d heartbeats, want 2 (it stays the one to call)", s)
	}
}

// After a controlled shutdown the controller answers heartbeats "fenced",
// as the shutdown asked; the broker must not register again, which would
// make it live, electable and an ISR member again until it stops.
func TestNoRegistrationAfterControlledShutdown(t *testing.T) {
	f := &fakeController{}
	l, err := New(Config{BrokerID: 1, Controllers: []string{serve(t, f)}, HeartbeatInterval: 5 * time.Millisecond}, slog.Default())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); l.Heartbeat(ctx, nil, nil) }()
	defer func() { cancel(); <-done }()
	if _, err := l.ControlledShutdown(ctx); err != nil {
		t.Fatal(err)
	}
	for from := f.heartbeats.Load(); f.heartbeats.Load() < from+5; time.Sleep(time.Millisecond) {
	}
	if n := f.registrations.Load(); n != 0 {
		t.Fatalf("the broker registered %d times after its controlled shutdown fenced it", n)
	}
}

// A heartbeat answered "fenced" registers again and says why, never with
// an empty error.
func TestFencedAnswerIsLoggedWithAReason(t *testing.T) {
	f := &fakeController{}
	f.fenced.Store(true)
	var logs strings.Builder // read once the heartbeat loop, its only writer, has ended
	l, err := New(Config{BrokerID: 1, Controllers: []string{serve(t, f)}, HeartbeatInterval: 5 * time.Millisecond}, slog.New(slog.NewJSONHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); l.Heartbeat(ctx, nil, nil) }()
	for f.registrations.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	cancel()
	<-done
	out := logs.String()
	if !strings.Contains(out, `"msg":"broker fenced by the controller; registering again","reason":"the heartbeat's answer says fenced`) || strings.Contains(out, `"err":null`) {
		t.Fatalf("log:\n%s", out)
	}
}

// A heartbeat that comes late because the process did not run carries no
// unreachable leaders: its followers' silence spans the stall. The one
// after it reports them again.
func TestLateHeartbeatAfterAStallReportsNoLeaders(t *testing.T) {
	f := &fakeController{}
	var logs strings.Builder // read once the heartbeat loop, its only writer, has ended
	l, err := New(Config{BrokerID: 1, Controllers: []string{serve(t, f)}, HeartbeatInterval: 5 * time.Millisecond}, slog.New(slog.NewJSONHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	heartbeat(t, l) // connected before the loop's first short-lived call
	// The loop reads the clock once after the first heartbeat, then twice
	// a heartbeat: when its tick comes and after its call. Each read is a
	// millisecond after the one before (heartbeats on time, however slow
	// the machine running the test), and from the 4th read on, the third
	// heartbeat's tick, 10 s more: the process was stopped between the
	// second heartbeat and the third.
	base := time.Now()
	var reads atomic.Int64
	l.now = func() time.Time {
		n := reads.Add(1)
		at := base.Add(time.Duration(n) * time.Millisecond)
		if n >= 4 {
			at = at.Add(10 * time.Second)
		}
		return at
	}
	silent := []*controllerv1.UnreachableLeader{{Topic: "t", Partition: 0, Leader: 2, LeaderEpoch: 1, SilentMs: 1500}}
	var asked []int64 // the clock reads before each call of unreachable: which heartbeats asked it
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		l.Heartbeat(ctx, func() []*controllerv1.UnreachableLeader {
			asked = append(asked, reads.Load())
			return silent
		}, nil)
	}()
	deadline := time.Now().Add(10 * time.Second)
	for reads.Load() < 9 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	cancel()
	<-done
	// The first, second and fourth heartbeats ask; the third does not.
	if want := []int64{0, 2, 6}; len(asked) < 3 || !slices.Equal(asked[:3], want) {
		t.Fatalf("unreachable asked after clock reads %v, want %v first", asked, want)
	}
	f.mu.Lock()
	got := slices.Clone(f.reported[1:]) // after the one that connected
	f.mu.Unlock()
	if i := slices.Index(got, 0); i < 0 || !slices.Contains(got[i:], 1) {
		t.Fatalf("unreachable leaders per heartbeat the controller saw: %v, want one with none, then reports again", got)
	}
	if out := logs.String(); !strings.Contains(out, `"msg":"heartbeat late: this node did not run for a while`) {
		t.Fatalf("log:\n%s", out)
	}
}
