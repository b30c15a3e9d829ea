package membership

import (
	"io"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func start(t *testing.T, role Role, id int32, bind string, seeds ...string) *Node {
	t.Helper()
	return startWith(t, FastTimings(), role, id, bind, seeds...)
}

// startWith starts a member with timings.
func startWith(t *testing.T, timings Timings, role Role, id int32, bind string, seeds ...string) *Node {
	t.Helper()
	n, err := Start(Config{
		BindAddr: bind,
		Seeds:    seeds,
		Meta:     Meta{Role: role, ID: id, GRPCAddr: "127.0.0.1:" + strconv.Itoa(9000+int(id))},
		Logger:   quiet,
		Timings:  timings,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Kill() })
	return n
}

// waitEvent returns the first event of type typ about name, failing after d.
func waitEvent(t *testing.T, n *Node, typ EventType, name string, d time.Duration) Event {
	t.Helper()
	return waitEvents(t, n, typ, []string{name}, d)[name]
}

// waitEvents returns the first event of type typ about each of names, in
// whatever order they come, failing after d.
func waitEvents(t *testing.T, n *Node, typ EventType, names []string, d time.Duration) map[string]Event {
	t.Helper()
	got := map[string]Event{}
	deadline := time.After(d)
	for len(got) < len(names) {
		select {
		case ev, ok := <-n.Events():
			if !ok {
				t.Fatalf("%s: events closed while waiting for %s of %v", n.Name(), typ, names)
			}
			if _, seen := got[ev.Member.Name]; ev.Type == typ && !seen && slices.Contains(names, ev.Member.Name) {
				got[ev.Member.Name] = ev
			}
		case <-deadline:
			t.Fatalf("%s: %s events for %v within %v, got only %v", n.Name(), typ, names, d, got)
		}
	}
	return got
}

func TestThreeMembers(t *testing.T) {
	a := start(t, RoleController, 1, "127.0.0.1:0")
	b := start(t, RoleStorage, 2, "127.0.0.1:0", a.Addr())
	c := start(t, RoleGroupCoordinator, 3, "127.0.0.1:0", a.Addr())

	// b and c join through a at about the same time, in either order.
	joins := waitEvents(t, a, EventJoin, []string{"storage-2", "groupcoord-3"}, 5*time.Second)
	if ev := joins["storage-2"]; ev.Member.Meta != (Meta{Role: RoleStorage, ID: 2, GRPCAddr: "127.0.0.1:9002"}) || ev.Member.Addr != b.Addr() {
		t.Errorf("join event %+v", ev)
	}
	waitEvent(t, b, EventJoin, "groupcoord-3", 5*time.Second)
	waitEvent(t, c, EventJoin, "storage-2", 5*time.Second)
	waitMembers(t, a, 3)

	// A meta change reaches the others as an update.
	if err := b.UpdateMeta(Meta{Role: RoleStorage, ID: 2, GRPCAddr: "127.0.0.1:9999", Incarnation: "i2"}); err != nil {
		t.Fatal(err)
	}
	if ev := waitEvent(t, a, EventUpdate, "storage-2", 5*time.Second); ev.Member.Meta.GRPCAddr != "127.0.0.1:9999" || ev.Member.Meta.Incarnation != "i2" {
		t.Errorf("update event %+v", ev)
	}

	// A crash (no goodbye) is detected by the failure detector.
	killed := time.Now()
	if err := c.Kill(); err != nil {
		t.Fatal(err)
	}
	ev := waitEvent(t, a, EventDead, "groupcoord-3", 5*time.Second)
	t.Logf("dead detected after %v", time.Since(killed))
	if ev.Member.Meta.Role != RoleGroupCoordinator {
		t.Errorf("dead event lost the meta: %+v", ev)
	}
	if d := time.Since(killed); d > 3*time.Second {
		t.Errorf("failure detection took %v, want about 1-2 s", d)
	}

	// A graceful leave is seen as a leave, quickly.
	left := time.Now()
	if err := b.Close(time.Second); err != nil {
		t.Fatal(err)
	}
	waitEvent(t, a, EventLeave, "storage-2", 3*time.Second)
	t.Logf("leave seen after %v", time.Since(left))
	for range b.Events() {
		// Close closes the channel; draining ends.
	}
	waitMembers(t, a, 1)
}

// With the quieter set docs/OPERATIONS.md offers (500 ms probes, news
// every 500 ms), a crash is detected within about 2.5 s, and a graceful
// leave — two broadcasts, each waiting for a gossip round — is gossiped
// within the 2 s the processes give it when they stop.
func TestQuieterTimingsDetectAndLeave(t *testing.T) {
	slow := FastTimings()
	slow.ProbeInterval, slow.ProbeTimeout, slow.SuspicionMult, slow.GossipInterval = 500*time.Millisecond, 250*time.Millisecond, 2, 500*time.Millisecond
	a := startWith(t, slow, RoleController, 1, "127.0.0.1:0")
	b := startWith(t, slow, RoleStorage, 2, "127.0.0.1:0", a.Addr())
	c := startWith(t, slow, RoleGroupCoordinator, 3, "127.0.0.1:0", a.Addr())
	waitEvents(t, a, EventJoin, []string{"storage-2", "groupcoord-3"}, 10*time.Second)
	waitMembers(t, b, 3)

	killed := time.Now()
	if err := c.Kill(); err != nil {
		t.Fatal(err)
	}
	waitEvent(t, a, EventDead, "groupcoord-3", 10*time.Second)
	t.Logf("dead detected after %v", time.Since(killed))
	if d := time.Since(killed); d > 4*time.Second {
		t.Errorf("failure detection took %v, want about 1.5-2.5 s", d)
	}

	left := time.Now()
	if err := b.Close(2 * time.Second); err != nil {
		t.Fatalf("leaving: %v", err)
	}
	waitEvent(t, a, EventLeave, "storage-2", 3*time.Second)
	t.Logf("leave seen after %v", time.Since(left))
}

func waitMembers(t *testing.T, n *Node, want int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for len(n.Members()) != want {
		if time.Now().After(deadline) {
			t.Fatalf("%s sees %v, want %d members", n.Name(), n.Members(), want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A member whose seed is not up yet keeps trying and joins once it is.
func TestRetryJoin(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	seedAddr := l.Addr().String()
	l.Close()
	timings := FastTimings()
	timings.ReconnectInterval, timings.ReconnectMaxInterval = 100*time.Millisecond, 100*time.Millisecond
	n, err := Start(Config{BindAddr: "127.0.0.1:0", Seeds: []string{seedAddr}, Timings: timings,
		Meta: Meta{Role: RoleGateway, ID: 1}, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Kill()
	time.Sleep(200 * time.Millisecond)
	seed := start(t, RoleController, 1, seedAddr)
	waitEvent(t, seed, EventJoin, "gateway-1", 5*time.Second)
}

func TestConfigErrors(t *testing.T) {
	if _, err := Start(Config{BindAddr: "nonsense", Logger: quiet}); err == nil {
		t.Error("a bind address without a port must be refused")
	}
	big := make([]byte, 600)
	for i := range big {
		big[i] = 'x'
	}
	if _, err := Start(Config{BindAddr: "127.0.0.1:0", Meta: Meta{GRPCAddr: string(big)}, Logger: quiet}); err == nil {
		t.Error("meta above 512 bytes must be refused")
	}
}

// Lookup finds a member by role and id: itself as alive; another in its
// last known state, an alive entry before a dead one of the same process
// under an older name, else the latest.
func TestLookup(t *testing.T) {
	self, _ := encodeMeta(Meta{Role: RoleController, ID: 1}, false)
	now := time.Now()
	n := &Node{name: "controller-1", meta: self, members: map[string]Member{
		"controller-2":     {Name: "controller-2", Meta: Meta{Role: RoleController, ID: 2}, State: StateAlive, since: now.Add(-time.Minute)},
		"controller-2-old": {Name: "controller-2-old", Meta: Meta{Role: RoleController, ID: 2}, State: StateDead, since: now},
		"storage-2":        {Name: "storage-2", Meta: Meta{Role: RoleStorage, ID: 2}, State: StateAlive, since: now},
		"controller-3-a":   {Name: "controller-3-a", Meta: Meta{Role: RoleController, ID: 3}, State: StateDead, since: now.Add(-time.Minute)},
		"controller-3-b":   {Name: "controller-3-b", Meta: Meta{Role: RoleController, ID: 3}, State: StateLeft, since: now},
	}}
	for _, tc := range []struct {
		id    int32
		ok    bool
		name  string
		state State
	}{
		{1, true, "controller-1", StateAlive},
		{2, true, "controller-2", StateAlive},
		{3, true, "controller-3-b", StateLeft},
		{4, false, "", StateAlive},
	} {
		m, ok := n.Lookup(RoleController, tc.id)
		if ok != tc.ok || ok && (m.Name != tc.name || m.State != tc.state) {
			t.Errorf("Lookup(controller, %d) = %s %v %v, want %s %v %v", tc.id, m.Name, m.State, ok, tc.name, tc.state, tc.ok)
		}
	}
}

// memberlist's lines keep their level, but a failure on this node's own
// closed socket (its stop) is debug, not an error.
func TestLogWriterLevels(t *testing.T) {
	var b strings.Builder
	w := logWriter{slog.New(slog.NewTextHandler(&b, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	for _, line := range []string{
		"[ERR] memberlist: Failed to send ping: write udp 127.0.0.1:1: use of closed network connection",
		"[ERR] memberlist: Failed to send ping: no route to host",
		"[WARN] memberlist: Was able to connect to x over TCP but UDP probes failed",
		"[DEBUG] memberlist: Stream connection from=1",
	} {
		if _, err := w.Write([]byte(line + "\n")); err != nil {
			t.Fatal(err)
		}
	}
	out := b.String()
	for _, want := range []string{
		`level=DEBUG msg="memberlist: Failed to send ping: write udp 127.0.0.1:1: use of closed network connection"`,
		`level=ERROR msg="memberlist: Failed to send ping: no route to host"`,
		`level=WARN msg="memberlist: Was able to connect`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in:\n%s", want, out)
		}
	}
	if strings.Contains(out, "Stream connection") {
		t.Errorf("a DEBUG line of memberlist's was kept:\n%s", out)
	}
}
