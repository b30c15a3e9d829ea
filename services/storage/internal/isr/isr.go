package isr

import (
	"slices"
	"time"
)

// ReplicaID is a broker id hosting a replica.
type ReplicaID int32

// Offset is a position in a partition log.
type Offset int64

// HighWatermark is the smallest log end offset over the ISR: every record
// below it is on every in-sync replica. An ISR member whose LEO is unknown
// counts as 0, so an unknown never lets the HW pass what it has not confirmed.
// The caller keeps the HW monotonic (see Advance).
func HighWatermark(leo map[ReplicaID]Offset, isr []ReplicaID) Offset {
	if len(isr) == 0 {
		return 0
	}
	hw := Offset(-1)
	for _, r := range isr {
		l := leo[r] // 0 when unknown
		if hw < 0 || l < hw {
			hw = l
		}
	}
	return hw
}

// Advance returns the new HW and whether it moved: the HW never goes
// backwards, even when the ISR grows to include a replica that is behind
// (which Evaluate never proposes) or a LEO report is stale.
func Advance(current Offset, leo map[ReplicaID]Offset, isr []ReplicaID) (Offset, bool) {
	if hw := HighWatermark(leo, isr); hw > current {
		return hw, true
	}
	return current, false
}

// Follower is what a leader knows of one follower replica.
type Follower struct {
	ID  ReplicaID
	LEO Offset
	// LastCaughtUp is the last time the follower had everything the leader
	// had (see CaughtUp); zero if never.
	LastCaughtUp time.Time
	InISR        bool
}

// FetchState remembers the leader's LEO at a follower's previous fetch, so a
// follower that keeps up under steady load still counts as caught up.
type FetchState struct {
	At        time.Time
	LeaderLEO Offset
}

// CaughtUp computes a follower's new last-caught-up time after a fetch at
// fetchOffset at time now, when the leader's LEO is leaderLEO (Kafka's rule):
// the fetch reached the leader's current LEO → now; else it reached the LEO
// the leader had at the previous fetch → the previous fetch's time; else the
// old value stands.
func CaughtUp(last time.Time, prev FetchState, fetchOffset, leaderLEO Offset, now time.Time) time.Time {
	switch {
	case fetchOffset >= leaderLEO:
		return now
	case !prev.At.IsZero() && fetchOffset >= prev.LeaderLEO && prev.At.After(last):
		return prev.At
	}
	return last
}

// Evaluate decides the ISR changes a leader should propose: shrink the
// followers in the ISR that have not caught up within maxLag; expand the
// followers outside it whose LEO reached both the HW and the start of the
// leader's current epoch (so a rejoining replica holds no stale tail).
// Results are sorted; the leader itself is never proposed.
func Evaluate(now time.Time, followers []Follower, hw, leaderEpochStart Offset, maxLag time.Duration) (shrink, expand []ReplicaID) {
	for _, f := range followers {
		switch {
		case f.InISR && now.Sub(f.LastCaughtUp) > maxLag:
			shrink = append(shrink, f.ID)
		case !f.InISR && f.LEO >= hw && f.LEO >= leaderEpochStart:
			expand = append(expand, f.ID)
		}
	}
	slices.Sort(shrink)
	slices.Sort(expand)
	return shrink, expand
}

// Apply returns the ISR after removing shrink and adding expand, sorted,
// without duplicates. The input is not modified.
func Apply(isr, shrink, expand []ReplicaID) []ReplicaID {
	out := make([]ReplicaID, 0, len(isr)+len(expand))
	for _, r := range isr {
		if !slices.Contains(shrink, r) {
			out = append(out, r)
		}
	}
	out = append(out, expand...)
	slices.Sort(out)
	return slices.Compact(out)
}
