package coordinator

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"skein/libs/errs"
	"skein/libs/metadata"
	"skein/services/groupcoord/internal/delivery"
	"skein/services/groupcoord/internal/group"
)

// fakeClock is a clock the test moves.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (f *fakeClock) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

func (f *fakeClock) advance(d time.Duration) {
	f.mu.Lock()
	f.now = f.now.Add(d)
	f.mu.Unlock()
}

func listed(c *Coordinator) []string {
	var ids []string
	for _, l := range c.ListGroups(context.Background()) {
		ids = append(ids, l.GroupID)
	}
	return ids
}

// Offsets of an empty group expire a retention after their commit, and the
// group goes with them; a member subscribed to the topic keeps its group's
// offsets however old; a group with settings keeps them and loses its
// offsets; and a coordinator that takes over finds what the first one
// removed gone.
func TestOffsetsExpire(t *testing.T) {
	const day = 24 * time.Hour
	clock := &fakeClock{now: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)}
	cfg := testConfig(1)
	cfg.Now = clock.Now
	cfg.Group.MaxSessionTimeout, cfg.Group.DefaultSessionTimeout = 60*day, 30*day // the live member outlasts the jumps
	cfg.OffsetsRetention, cfg.RetentionCheckInterval = 7*day, 10*time.Millisecond
	log := newMemLog()
	c := New(cfg, log, nil)
	t.Cleanup(c.Close)
	c.OnMetadata(owning(1, all()...))
	waitLoaded(t, c, nParts)

	for _, id := range []string{"gone", "live", "configured"} {
		m := join(t, c, id, "orders")
		if err := commit(c, id, m.MemberID, m.MemberEpoch, "orders", 1, 7); err != nil {
			t.Fatal(err)
		}
		if id == "live" {
			continue
		}
		if _, err := c.Heartbeat(context.Background(), id, group.HeartbeatRequest{MemberID: m.MemberID, MemberEpoch: group.LeaveEpoch}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.AlterGroupConfig(context.Background(), "configured", map[string]string{delivery.KeyMaxAttempts: "3"}); err != nil {
		t.Fatal(err)
	}
	// An empty group that never committed goes at the first check.
	m := join(t, c, "idle", "audit")
	if _, err := c.Heartbeat(context.Background(), "idle", group.HeartbeatRequest{MemberID: m.MemberID, MemberEpoch: group.LeaveEpoch}); err != nil {
		t.Fatal(err)
	}
	clock.advance(time.Second) // the next check
	waitFor(t, "the empty group that never committed is deleted", func() bool { return !slices.Contains(listed(c), "idle") })

	clock.advance(7*day - time.Second - time.Millisecond)
	time.Sleep(100 * time.Millisecond) // several checks
	for _, id := range []string{"gone", "live", "configured"} {
		if got := committed(t, c, id, "orders", 1); got != 7 {
			t.Fatalf("%s: offset %d a millisecond before the retention, want 7", id, got)
		}
	}

	clock.advance(cfg.RetentionCheckInterval) // the next check, past the retention
	waitFor(t, "the empty group's offsets expire", func() bool { return committed(t, c, "gone", "orders", 1) == -1 })
	waitFor(t, "the configured group's offsets expire", func() bool { return committed(t, c, "configured", "orders", 1) == -1 })
	if got := listed(c); !slices.Equal(got, []string{"configured", "live"}) {
		t.Fatalf("groups %v, want [configured live]", got)
	}
	if got := committed(t, c, "live", "orders", 1); got != 7 {
		t.Fatalf("the subscribed group's offset is %d, want 7", got)
	}
	if cf, err := c.GroupConfig(context.Background(), "configured"); err != nil || cf[delivery.KeyMaxAttempts] != "3" {
		t.Fatalf("the configured group's settings %v, %v", cf, err)
	}

	// The next owner reads the tombstones.
	c.Close()
	c2 := New(cfg, log, nil)
	t.Cleanup(c2.Close)
	c2.OnMetadata(owning(2, all()...))
	waitLoaded(t, c2, nParts)
	if got := listed(c2); !slices.Equal(got, []string{"configured", "live"}) {
		t.Fatalf("after the take-over: groups %v, want [configured live]", got)
	}
	if got := committed(t, c2, "gone", "orders", 1); got != -1 {
		t.Fatalf("after the take-over: the expired offset is back: %d", got)
	}
	if got := committed(t, c2, "live", "orders", 1); got != 7 {
		t.Fatalf("after the take-over: the subscribed group's offset is %d, want 7", got)
	}
}

// The retention counts from when the coordinator last saw the topic
// subscribed, not only from the commit: a group whose member left a topic
// (between two checks) keeps an offset committed eight days before for a
// whole retention after the leave.
func TestOffsetsExpireFromTheLastSubscription(t *testing.T) {
	const day = 24 * time.Hour
	clock := &fakeClock{now: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)}
	cfg := testConfig(1)
	cfg.Now = clock.Now
	cfg.Group.MaxSessionTimeout, cfg.Group.DefaultSessionTimeout = 60*day, 30*day
	cfg.OffsetsRetention, cfg.RetentionCheckInterval = 7*day, time.Hour // checks run below, by hand
	c := New(cfg, newMemLog(), nil)
	t.Cleanup(c.Close)
	c.OnMetadata(owning(1, all()...))
	waitLoaded(t, c, nParts)
	p, err := c.partitionFor("app")
	if err != nil {
		t.Fatal(err)
	}

	m := join(t, c, "app", "orders")
	if err := commit(c, "app", m.MemberID, m.MemberEpoch, "orders", 2, 11); err != nil {
		t.Fatal(err)
	}
	clock.advance(8 * day)
	if _, err := c.Heartbeat(context.Background(), "app", group.HeartbeatRequest{MemberID: m.MemberID, MemberEpoch: group.LeaveEpoch}); err != nil {
		t.Fatal(err)
	}
	p.expireOffsets()
	if got := committed(t, c, "app", "orders", 2); got != 11 {
		t.Fatalf("offset %d right after the last member left, want 11", got)
	}
	clock.advance(7*day - time.Millisecond)
	p.expireOffsets()
	if got := committed(t, c, "app", "orders", 2); got != 11 {
		t.Fatalf("offset %d a millisecond before a retention after the leave, want 11", got)
	}
	clock.advance(time.Millisecond)
	p.expireOffsets()
	if got := committed(t, c, "app", "orders", 2); got != -1 {
		t.Fatalf("offset %d a retention after the leave, want none", got)
	}
	if got := listed(c); len(got) != 0 {
		t.Fatalf("groups %v, want none", got)
	}
}

// A group whose expiry write is refused outright (too large, say) does not
// hold up the expiry of the groups after it on the partition; it is tried
// again at the next check.
func TestOffsetsExpireAroundARefusedGroup(t *testing.T) {
	const day = 24 * time.Hour
	clock := &fakeClock{now: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)}
	cfg := testConfig(1)
	cfg.Now = clock.Now
	cfg.OffsetsRetention, cfg.RetentionCheckInterval = 7*day, 1000*day // checks run below, by hand
	log := newMemLog()
	c := New(cfg, log, nil)
	t.Cleanup(c.Close)
	c.OnMetadata(owning(1, all()...))
	waitLoaded(t, c, nParts)
	// Two groups on one partition, the refused one first in the pass.
	first, second := "", ""
	for i := 0; second == ""; i++ {
		g := fmt.Sprintf("g%03d", i)
		switch {
		case metadata.CoordinatorPartition(g, nParts) != 0:
		case first == "":
			first = g
		default:
			second = g
		}
	}
	for _, id := range []string{first, second} {
		if err := commit(c, id, "", -1, "orders", 1, 7); err != nil {
			t.Fatal(err)
		}
	}
	p, err := c.partitionFor(first)
	if err != nil {
		t.Fatal(err)
	}
	clock.advance(8 * day)
	log.failWith(memFailure{err: errs.Errorf(errs.MessageTooLarge, "injected")})
	p.expireOffsets()
	if got := committed(t, c, first, "orders", 1); got != 7 {
		t.Fatalf("%s: offset %d after its refused expiry, want 7", first, got)
	}
	if got := committed(t, c, second, "orders", 1); got != -1 {
		t.Fatalf("%s: offset %d, want it expired in the same pass", second, got)
	}
	p.expireOffsets()
	if got := committed(t, c, first, "orders", 1); got != -1 {
		t.Fatalf("%s: offset %d at the next check, want it expired", first, got)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting: %s", what)
		}
	}
}
