package partition

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"skein/libs/errs"
	"skein/libs/record"
)

// produceAll writes n one-record batches ("0", "1", ...) with acks=1 and
// replicates them to every follower.
func produceAll(t *testing.T, c *cluster, n int) {
	t.Helper()
	for i := range n {
		if _, err := c.replicas[1].Produce(context.Background(), AcksLeader, -1, plain(t, fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	c.replicate()
}

func TestDeleteRecordsRefusals(t *testing.T) {
	c := newCluster(t, 1)
	produceAll(t, c, 5)
	leader := c.replicas[1]
	for _, tc := range []struct {
		name   string
		p      *Partition
		offset record.Offset
		epoch  int32
		want   error
	}{
		{"above the high watermark", leader, 6, -1, errs.OffsetOutOfRange},
		{"negative, not -1", leader, -2, -1, errs.OffsetOutOfRange},
		{"a follower", c.replicas[2], 2, -1, errs.NotLeaderOrFollower},
		{"a newer leader epoch", leader, 2, 7, errs.UnknownLeaderEpoch},
	} {
		_, _, err := tc.p.DeleteRecords(tc.offset, tc.epoch)
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, errs.ForCode(errs.CodeOf(tc.want)).Name)
		}
	}
	if s := leader.Snapshot(); s.Start != 0 || s.LEO != 5 {
		t.Fatalf("a refused deletion moved the log: start %d LEO %d", s.Start, s.LEO)
	}

	// A topic whose cleanup.policy is compact keeps its records.
	cfg := leader.cfg
	cfg.Compacted = true
	leader.SetConfig(cfg)
	if _, _, err := leader.DeleteRecords(2, -1); !errors.Is(err, errs.PolicyViolation) {
		t.Fatalf("compacted topic: %v", err)
	}
	if s := leader.Snapshot(); s.Start != 0 {
		t.Fatalf("a compacted topic's start moved to %d", s.Start)
	}
}

func TestDeleteRecordsReachesTheISR(t *testing.T) {
	c := newCluster(t, 1)
	produceAll(t, c, 5)
	leader := c.replicas[1]
	cut := 0
	leader.cfg.Truncated = func() { cut++ }

	start, epoch, err := leader.DeleteRecords(3, -1)
	if err != nil || start != 3 || epoch != 0 {
		t.Fatalf("DeleteRecords(3) = %d, %d, %v", start, epoch, err)
	}
	if cut != 1 {
		t.Fatalf("the node was told of %d cuts, want 1 (so it saves the log start at once)", cut)
	}
	if _, err := leader.Fetch(2, 1<<20, false, -1); !errors.Is(err, errs.OffsetOutOfRange) {
		t.Fatalf("a fetch below the new log start: %v", err)
	}
	if res, err := leader.Fetch(3, 1<<20, false, -1); err != nil || res.LogStartOffset != 3 {
		t.Fatalf("a fetch at the new log start: %+v, %v", res, err)
	}

	// The followers have not fetched since: the low watermark waits.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	low, err := leader.AwaitLowWatermark(ctx, 3, epoch)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) || low != 0 {
		t.Fatalf("low watermark before the followers fetched: %d, %v", low, err)
	}

	done := make(chan error, 1)
	go func() {
		low, err := leader.AwaitLowWatermark(context.Background(), 3, epoch)
		if err == nil && low != 3 {
			err = fmt.Errorf("low watermark %d, want 3", low)
		}
		done <- err
	}()
	// The wait parks first, so that only the followers' fetches wake it.
	time.Sleep(50 * time.Millisecond)
	c.replicate()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the low watermark did not reach 3 once the followers fetched")
	}
	for _, id := range []int32{2, 3} {
		if s := c.replicas[id].Snapshot(); s.Start != 3 || s.LEO != 5 {
			t.Errorf("follower %d: start %d LEO %d, want 3 and 5", id, s.Start, s.LEO)
		}
		if got := c.logs[id].values(); !slices.Equal(got, []string{"3", "4"}) {
			t.Errorf("follower %d holds %v", id, got)
		}
	}

	// Below the log start changes nothing; -1 is the high watermark.
	if start, _, err := leader.DeleteRecords(1, -1); err != nil || start != 3 || cut != 1 {
		t.Fatalf("DeleteRecords(1) after 3 = %d, %v (cuts %d)", start, err, cut)
	}
	if start, _, err := leader.DeleteRecords(-1, 0); err != nil || start != 5 {
		t.Fatalf("DeleteRecords(-1) = %d, %v, want the high watermark 5", start, err)
	}
	c.replicate()
	if s := c.replicas[2].Snapshot(); s.Start != 5 {
		t.Fatalf("follower 2's start %d, want 5", s.Start)
	}
}

// A follower takes the leader's log start only up to what it knows
// committed.
func TestFollowerTakesTheLeaderStartUpToItsHW(t *testing.T) {
	c := newCluster(t, 1)
	c.cut[2], c.cut[3] = true, true
	for i := range 5 {
		if _, err := c.replicas[1].Produce(context.Background(), AcksLeader, -1, plain(t, fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	f := c.replicas[2]
	fs, _ := f.FollowerState()
	res, err := c.replicas[1].ServeFollower(FollowerFetch{ReplicaID: 2, FetchOffset: fs.FetchOffset, LastFetchedEpoch: fs.LastFetchedEpoch, CurrentLeaderEpoch: fs.CurrentLeaderEpoch, MaxBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	// The answer as it would be once the leader's HW is 2 and its start 4.
	res.HW, res.LogStartOffset = 2, 4
	if err := f.ApplyFetched(fs.CurrentLeaderEpoch, fs.FetchOffset, res); err != nil {
		t.Fatal(err)
	}
	if s := f.Snapshot(); s.LEO != 5 || s.HW != 2 || s.Start != 2 {
		t.Fatalf("follower LEO %d HW %d start %d, want 5, 2 and 2", s.LEO, s.HW, s.Start)
	}
}

// An ISR member that stops fetching holds the low watermark until it
// leaves the ISR.
func TestDeleteRecordsWithAFollowerGone(t *testing.T) {
	c := newCluster(t, 1)
	produceAll(t, c, 4)
	leader := c.replicas[1]
	c.cut[3] = true
	if _, err := leader.Produce(context.Background(), AcksLeader, -1, plain(t, "4")); err != nil {
		t.Fatal(err)
	}
	c.replicate() // follower 2 has offset 4; the HW moves only with 3 gone
	_, epoch, err := leader.DeleteRecords(4, -1)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan record.Offset, 1)
	go func() {
		low, _ := leader.AwaitLowWatermark(context.Background(), 4, epoch)
		done <- low
	}()
	c.replicate()
	select {
	case low := <-done:
		t.Fatalf("the low watermark reached %d with ISR member 3 not fetching", low)
	case <-time.After(50 * time.Millisecond):
	}
	c.advance(11 * time.Second)
	leader.MaybeShrinkISR()
	select {
	case low := <-done:
		if low != 4 {
			t.Fatalf("low watermark %d, want 4", low)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the low watermark did not move once member 3 left the ISR")
	}
	if s := c.replicas[2].Snapshot(); s.Start != 4 {
		t.Fatalf("follower 2's start %d, want 4", s.Start)
	}
}

// A waiting DeleteRecords ends when this replica stops leading or is
// closed.
func TestDeleteRecordsWaitEnds(t *testing.T) {
	for _, tc := range []struct {
		name string
		end  func(c *cluster)
	}{
		{"the leadership moves", func(c *cluster) {
			c.mu.Lock()
			c.state.Leader, c.state.LeaderEpoch = 2, 1
			c.mu.Unlock()
			c.push()
		}},
		{"the replica is closed", func(c *cluster) { c.replicas[1].Close() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t, 1)
			produceAll(t, c, 3)
			leader := c.replicas[1]
			c.cut[2], c.cut[3] = true, true
			_, epoch, err := leader.DeleteRecords(2, -1)
			if err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() {
				_, err := leader.AwaitLowWatermark(context.Background(), 2, epoch)
				done <- err
			}()
			time.Sleep(20 * time.Millisecond) // parked
			tc.end(c)
			select {
			case err := <-done:
				if !errors.Is(err, errs.NotLeaderOrFollower) {
					t.Fatalf("wait ended with %v", err)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("the wait outlived its leader")
			}
		})
	}
}
