package membership

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
)

// cuttable is a gossip transport whose outgoing links can be cut: a cut
// between a and b on both a's and b's transports is a network partition
// (nothing either sends reaches the other, directly or as an indirect probe).
type cuttable struct {
	inner *memberlist.NetTransport
	mu    sync.Mutex
	cut   map[string]bool // destination host:port -> cut
}

var errCut = errors.New("link cut by the test")

func newCuttable(t *testing.T) *cuttable {
	t.Helper()
	nt, err := memberlist.NewNetTransport(&memberlist.NetTransportConfig{BindAddrs: []string{"127.0.0.1"}, BindPort: 0})
	if err != nil {
		t.Fatal(err)
	}
	return &cuttable{inner: nt, cut: map[string]bool{}}
}

func (c *cuttable) setCut(addr string, cut bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cut[addr] = cut
}

func (c *cuttable) isCut(addr string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cut[addr]
}

func (c *cuttable) FinalAdvertiseAddr(ip string, port int) (net.IP, int, error) {
	return c.inner.FinalAdvertiseAddr(ip, port)
}
func (c *cuttable) WriteTo(b []byte, addr string) (time.Time, error) {
	if c.isCut(addr) {
		return time.Now(), nil // lost on the way, as UDP is
	}
	return c.inner.WriteTo(b, addr)
}
func (c *cuttable) PacketCh() <-chan *memberlist.Packet { return c.inner.PacketCh() }
func (c *cuttable) DialTimeout(addr string, timeout time.Duration) (net.Conn, error) {
	if c.isCut(addr) {
		time.Sleep(min(timeout, 50*time.Millisecond))
		return nil, errCut
	}
	return c.inner.DialTimeout(addr, timeout)
}
func (c *cuttable) StreamCh() <-chan net.Conn { return c.inner.StreamCh() }
func (c *cuttable) Shutdown() error           { return c.inner.Shutdown() }

// A member cut off for far longer than GossipToTheDeadTime is declared dead
// on both sides, and is alive on both sides again within a few reconnect
// rounds of the heal — without a restart.
func TestRejoinAfterLongPartition(t *testing.T) {
	timings := FastTimings()
	timings.GossipToTheDeadTime = 500 * time.Millisecond
	timings.ReconnectInterval, timings.ReconnectMaxInterval = 200*time.Millisecond, 500*time.Millisecond
	var nodes []*Node
	var transports []*cuttable
	for i := range 3 {
		tr := newCuttable(t)
		var seeds []string
		if i > 0 {
			seeds = []string{nodes[0].Addr()}
		}
		n, err := Start(Config{
			Transport: tr, Seeds: seeds, Timings: timings, Logger: quiet,
			Meta: Meta{Role: RoleStorage, ID: int32(i + 1), GRPCAddr: "127.0.0.1:" + strconv.Itoa(9000+i)},
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = n.Kill() })
		nodes, transports = append(nodes, n), append(transports, tr)
	}
	for _, n := range nodes {
		waitMembers(t, n, 3)
	}
	a, c := nodes[0], nodes[2]
	partition := func(cut bool) {
		for i := range 2 {
			transports[i].setCut(c.Addr(), cut)
			transports[2].setCut(nodes[i].Addr(), cut)
		}
	}
	partition(true)
	waitEvent(t, a, EventDead, c.Name(), 10*time.Second)
	waitEvent(t, c, EventDead, a.Name(), 10*time.Second)
	time.Sleep(4 * timings.GossipToTheDeadTime) // long past the time memberlist would still gossip to the dead
	if got := len(a.Members()); got != 2 {
		t.Fatalf("during the cut %s sees %d members, want 2", a.Name(), got)
	}
	partition(false)
	healed := time.Now()
	waitEvent(t, a, EventJoin, c.Name(), 10*time.Second)
	for _, n := range nodes {
		waitMembers(t, n, 3)
	}
	t.Logf("whole again %v after the heal", time.Since(healed).Round(time.Millisecond))
	// And it stays whole.
	time.Sleep(time.Second)
	for _, n := range nodes {
		if got := len(n.Members()); got != 3 {
			t.Errorf("after the heal %s sees %d members: %v", n.Name(), got, fmt.Sprint(n.Members()))
		}
	}
}

// A member that comes back under its name at another address (a container
// rescheduled) is alive again at the new address for the others.
func TestRejoinAtNewAddress(t *testing.T) {
	a := start(t, RoleController, 1, "127.0.0.1:0")
	b := start(t, RoleStorage, 2, "127.0.0.1:0", a.Addr())
	waitEvent(t, a, EventJoin, b.Name(), 5*time.Second)
	old := b.Addr()
	if err := b.Kill(); err != nil {
		t.Fatal(err)
	}
	waitEvent(t, a, EventDead, b.Name(), 5*time.Second)
	b2 := start(t, RoleStorage, 2, "127.0.0.1:0", a.Addr())
	// The first alive message at the new address may come before a may
	// reclaim the name (DeadNodeReclaimTime); the next push-pull brings it.
	ev := waitEvent(t, a, EventJoin, b2.Name(), 3*FastTimings().PushPullInterval)
	if ev.Member.Addr == old || ev.Member.Addr != b2.Addr() {
		t.Errorf("rejoined at %s; old address %s, new %s", ev.Member.Addr, old, b2.Addr())
	}
}
