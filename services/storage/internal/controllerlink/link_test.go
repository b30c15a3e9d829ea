package controllerlink

import (
	"context"
	"log/slog"
	"net"
	"slices"
	"strings"
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
	fenced        atomic.Bool  // set by ControlledShutdown, cleared by a registration
	lastCluster   atomic.Value // the cluster id of the last registration
}

func (f *fakeController) RegisterBroker(_ context.Context, req *controllerv1.RegisterBrokerRequest) (*controllerv1.RegisterBrokerResponse, error) {
	f.registrations.Add(1)
	f.lastCluster.Store(req.GetClusterId())
	f.fenced.Store(false)
	return &controllerv1.RegisterBrokerResponse{BrokerEpoch: 2}, nil
}

func (f *fakeController) ControlledShutdown(context.Context, *controllerv1.ControlledShutdownRequest) (*controllerv1.ControlledShutdownResponse, error) {
	f.fenced.Store(true)
	return &controllerv1.ControlledShutdownResponse{}, nil
}

func (f *fakeController) BrokerHeartbeat(ctx context.Context, _ *controllerv1.BrokerHeartbeatRequest) (*controllerv1.BrokerHeartbeatResponse, error) {
	f.heartbeats.Add(1)
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

// A heartbeat whose tick comes long after the one before (the process
// was stopped) gives unreachable the time the process ran again, from which
// its followers' silence counts, and says so in the log.
func TestLateHeartbeatAfterAStallCountsSilenceFromTheResume(t *testing.T) {
	f := &fakeController{}
	var logs strings.Builder // read once the heartbeat loop, its only writer, has ended
	l, err := New(Config{BrokerID: 1, Controllers: []string{serve(t, f)}, HeartbeatInterval: 5 * time.Millisecond}, slog.New(slog.NewJSONHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	// The loop reads the clock once a heartbeat, when its tick comes. Each
	// read is a millisecond after the one before (heartbeats on time,
	// however slow the machine running the test), and from the 3rd on, 10 s
	// more: the process was stopped between the second heartbeat and the
	// third.
	base := time.Now()
	var reads atomic.Int64
	at := func(n int64) time.Time {
		t := base.Add(time.Duration(n) * time.Millisecond)
		if n >= 3 {
			t = t.Add(10 * time.Second)
		}
		return t
	}
	l.now = func() time.Time { return at(reads.Add(1)) }
	silent := []*controllerv1.UnreachableLeader{{Topic: "t", Partition: 0, Leader: 2, LeaderEpoch: 1, SilentMs: 1500}}
	var resumes []time.Time // what each heartbeat passed to unreachable
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		l.Heartbeat(ctx, func(resumed time.Time) []*controllerv1.UnreachableLeader {
			resumes = append(resumes, resumed)
			return silent
		}, nil)
	}()
	deadline := time.Now().Add(10 * time.Second)
	for reads.Load() < 5 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	cancel()
	<-done
	if want := []time.Time{{}, {}, at(3), at(3)}; len(resumes) < 4 || !slices.EqualFunc(resumes[:4], want, time.Time.Equal) {
		t.Fatalf("resumed given to unreachable: %v, want %v first", resumes, want)
	}
	if out := logs.String(); strings.Count(out, `"msg":"heartbeat late: this node did not run for a while`) != 1 {
		t.Fatalf("log:\n%s", out)
	}
}

// A registration names the cluster the node's partition directories were
// made for, asked at each registration (it is recorded when the first is
// made), so that another cluster's controllers can refuse it.
func TestRegistrationNamesTheDirectoriesCluster(t *testing.T) {
	f := &fakeController{}
	var cluster atomic.Value
	cluster.Store("")
	l, err := New(Config{BrokerID: 1, Controllers: []string{serve(t, f)}, ClusterID: func() string { return cluster.Load().(string) }}, slog.Default())
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"", "cluster-a"} {
		cluster.Store(want)
		if err := l.Register(context.Background()); err != nil {
			t.Fatal(err)
		}
		if got := f.lastCluster.Load(); got != want {
			t.Errorf("registration names cluster %q, want %q", got, want)
		}
	}
}
