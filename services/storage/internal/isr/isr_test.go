package isr

import (
	"slices"
	"testing"
	"time"
)

func TestHighWatermark(t *testing.T) {
	for _, tc := range []struct {
		name string
		leo  map[ReplicaID]Offset
		isr  []ReplicaID
		want Offset
	}{
		{"all equal", map[ReplicaID]Offset{1: 10, 2: 10, 3: 10}, []ReplicaID{1, 2, 3}, 10},
		{"slowest in-sync follower", map[ReplicaID]Offset{1: 10, 2: 7, 3: 9}, []ReplicaID{1, 2, 3}, 7},
		{"out-of-sync replica ignored", map[ReplicaID]Offset{1: 10, 2: 2, 3: 9}, []ReplicaID{1, 3}, 9},
		{"leader alone", map[ReplicaID]Offset{1: 10, 2: 2}, []ReplicaID{1}, 10},
		{"unknown member counts as 0", map[ReplicaID]Offset{1: 10}, []ReplicaID{1, 2}, 0},
		{"empty isr", map[ReplicaID]Offset{1: 10}, nil, 0},
		{"empty log", map[ReplicaID]Offset{1: 0, 2: 0}, []ReplicaID{1, 2}, 0},
	} {
		if got := HighWatermark(tc.leo, tc.isr); got != tc.want {
			t.Errorf("%s: HW = %d, want %d", tc.name, got, tc.want)
		}
	}
}

func TestAdvanceNeverGoesBackwards(t *testing.T) {
	for _, tc := range []struct {
		current Offset
		leo     map[ReplicaID]Offset
		isr     []ReplicaID
		want    Offset
		moved   bool
	}{
		{5, map[ReplicaID]Offset{1: 10, 2: 8}, []ReplicaID{1, 2}, 8, true},
		{8, map[ReplicaID]Offset{1: 10, 2: 8}, []ReplicaID{1, 2}, 8, false},
		{8, map[ReplicaID]Offset{1: 10, 2: 3}, []ReplicaID{1, 2}, 8, false}, // a stale LEO report
		{8, map[ReplicaID]Offset{1: 10}, []ReplicaID{1, 2}, 8, false},       // a member with no report yet
	} {
		got, moved := Advance(tc.current, tc.leo, tc.isr)
		if got != tc.want || moved != tc.moved {
			t.Errorf("Advance(%d, %v, %v) = %d,%v want %d,%v", tc.current, tc.leo, tc.isr, got, moved, tc.want, tc.moved)
		}
	}
}

func TestCaughtUp(t *testing.T) {
	t0 := time.Unix(1000, 0)
	t1, t2 := t0.Add(time.Second), t0.Add(2*time.Second)
	for _, tc := range []struct {
		name        string
		last        time.Time
		prev        FetchState
		fetch, leo  Offset
		now, expect time.Time
	}{
		{"fetch at leader LEO", t0, FetchState{}, 50, 50, t2, t2},
		{"reached LEO of previous fetch", t0, FetchState{At: t1, LeaderLEO: 40}, 45, 50, t2, t1},
		{"behind both", t0, FetchState{At: t1, LeaderLEO: 40}, 30, 50, t2, t0},
		{"first fetch, behind", time.Time{}, FetchState{}, 0, 50, t2, time.Time{}},
		{"previous fetch older than last caught-up", t2, FetchState{At: t1, LeaderLEO: 40}, 45, 50, t2.Add(time.Second), t2},
	} {
		if got := CaughtUp(tc.last, tc.prev, tc.fetch, tc.leo, tc.now); !got.Equal(tc.expect) {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.expect)
		}
	}
}

func TestEvaluate(t *testing.T) {
	now := time.Unix(1000, 0)
	lag := 10 * time.Second
	for _, tc := range []struct {
		name           string
		followers      []Follower
		hw, epochStart Offset
		shrink, expand []ReplicaID
	}{
		{
			name: "healthy",
			followers: []Follower{
				{ID: 2, LEO: 100, LastCaughtUp: now.Add(-time.Second), InISR: true},
				{ID: 3, LEO: 90, LastCaughtUp: now.Add(-9 * time.Second), InISR: true},
			},
			hw: 90,
		},
		{
			name: "follower past max lag leaves",
			followers: []Follower{
				{ID: 2, LEO: 100, LastCaughtUp: now, InISR: true},
				{ID: 3, LEO: 90, LastCaughtUp: now.Add(-11 * time.Second), InISR: true},
			},
			hw: 90, shrink: []ReplicaID{3},
		},
		{
			name: "follower that never caught up leaves",
			followers: []Follower{
				{ID: 3, LEO: 0, InISR: true},
			},
			shrink: []ReplicaID{3},
		},
		{
			name: "follower at the HW rejoins",
			followers: []Follower{
				{ID: 3, LEO: 90, InISR: false},
			},
			hw: 90, expand: []ReplicaID{3},
		},
		{
			name: "follower below the HW stays out",
			followers: []Follower{
				{ID: 3, LEO: 89, InISR: false},
			},
			hw: 90,
		},
		{
			name: "follower must reach the leader epoch's start",
			followers: []Follower{
				{ID: 2, LEO: 95, InISR: false},
				{ID: 3, LEO: 101, InISR: false},
			},
			hw: 90, epochStart: 100, expand: []ReplicaID{3},
		},
	} {
		shrink, expand := Evaluate(now, tc.followers, tc.hw, tc.epochStart, lag)
		if !slices.Equal(shrink, tc.shrink) || !slices.Equal(expand, tc.expand) {
			t.Errorf("%s: shrink %v expand %v, want %v %v", tc.name, shrink, expand, tc.shrink, tc.expand)
		}
	}
}

func TestApply(t *testing.T) {
	for _, tc := range []struct {
		isr, shrink, expand, want []ReplicaID
	}{
		{[]ReplicaID{1, 2, 3}, []ReplicaID{3}, nil, []ReplicaID{1, 2}},
		{[]ReplicaID{1, 2}, nil, []ReplicaID{3}, []ReplicaID{1, 2, 3}},
		{[]ReplicaID{3, 1}, []ReplicaID{3}, []ReplicaID{2}, []ReplicaID{1, 2}},
		{[]ReplicaID{1, 2}, nil, []ReplicaID{2}, []ReplicaID{1, 2}},
	} {
		in := slices.Clone(tc.isr)
		if got := Apply(tc.isr, tc.shrink, tc.expand); !slices.Equal(got, tc.want) {
			t.Errorf("Apply(%v,-%v,+%v) = %v, want %v", tc.isr, tc.shrink, tc.expand, got, tc.want)
		}
		if !slices.Equal(in, tc.isr) {
			t.Error("Apply modified its input")
		}
	}
}
