package delivery

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"skein/libs/errs"
	"skein/libs/record"
)

func TestNackSequence(t *testing.T) {
	// One record nacked until it is dead-lettered, then a resumed nack.
	type step struct {
		offset    int64
		committed int64
		max       int32
		want      Action
		nacks     int32
		next      int64
		resumed   bool
		attempt   int32 // Attempt(offset) after the step
	}
	steps := []step{
		{offset: 7, committed: 5, max: 5, want: Redeliver, nacks: 1, next: 7, attempt: 2},
		{offset: 7, committed: 5, max: 5, want: Redeliver, nacks: 2, next: 7, attempt: 3},
		{offset: 7, committed: 5, max: 5, want: Redeliver, nacks: 3, next: 7, attempt: 4},
		{offset: 7, committed: 5, max: 5, want: Redeliver, nacks: 4, next: 7, attempt: 5},
		{offset: 7, committed: 5, max: 5, want: DeadLetter, nacks: 5, next: 8, attempt: 6},
		// The coordinator failed before the group moved past it: resumed, unchanged.
		{offset: 7, committed: 5, max: 5, want: DeadLetter, nacks: 5, next: 8, resumed: true, attempt: 6},
	}
	var p Partition
	for i, s := range steps {
		np, out, err := Nack(p, s.offset, s.committed, s.max, "boom")
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		if out.Action != s.want || out.Entry.Nacks != s.nacks || out.Next != s.next || out.Resumed != s.resumed {
			t.Fatalf("step %d: %+v, want %v nacks %d next %d resumed %v", i, out, s.want, s.nacks, s.next, s.resumed)
		}
		if got := np.Attempt(s.offset); got != s.attempt {
			t.Fatalf("step %d: attempt %d, want %d", i, got, s.attempt)
		}
		p = np
	}
	if e, _ := p.Find(7); e.State != DeadLettering || e.Reason != "boom" {
		t.Fatalf("entry %+v", e)
	}
}

func TestNackDecisions(t *testing.T) {
	base := Partition{{Offset: 3, Nacks: 2, DLQFrom: -1}, {Offset: 9, Nacks: 1, DLQFrom: -1}}
	tests := []struct {
		name      string
		p         Partition
		offset    int64
		committed int64
		max       int32
		reason    string
		want      Action
		code      *errs.Error
		nacks     int32
		left      []int64 // offsets of the entries after
	}{
		{name: "first nack", offset: 0, committed: -1, max: 5, want: Redeliver, nacks: 1, left: []int64{0}},
		{name: "max 1 dead-letters at once", offset: 4, committed: 0, max: 1, want: DeadLetter, nacks: 1, left: []int64{4}},
		{name: "counts per offset", p: base, offset: 9, committed: 3, max: 5, want: Redeliver, nacks: 2, left: []int64{3, 9}},
		{name: "third of max 3", p: base, offset: 3, committed: 3, max: 3, want: DeadLetter, nacks: 3, left: []int64{3, 9}},
		{name: "entries below committed are pruned", p: base, offset: 9, committed: 4, max: 5, want: Redeliver, nacks: 2, left: []int64{9}},
		{name: "zero max means the default", offset: 1, committed: -1, max: 0, want: Redeliver, nacks: 1, left: []int64{1}},
		{name: "below committed", p: base, offset: 2, committed: 3, max: 5, code: errs.OffsetOutOfRange},
		{name: "negative offset", offset: -1, committed: -1, max: 5, code: errs.InvalidRequest},
		{name: "reason too long", offset: 1, committed: -1, max: 5, reason: strings.Repeat("x", MaxReason+1), code: errs.InvalidRequest},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			np, out, err := Nack(tc.p, tc.offset, tc.committed, tc.max, tc.reason)
			if tc.code != nil {
				if errs.Of(err) != tc.code {
					t.Fatalf("err %v, want %v", err, tc.code)
				}
				if len(np) != len(tc.p) {
					t.Fatalf("a refused nack changed the entries: %+v", np)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if out.Action != tc.want || out.Entry.Nacks != tc.nacks {
				t.Fatalf("%+v, want %v with %d nacks", out, tc.want, tc.nacks)
			}
			var left []int64
			for _, e := range np {
				left = append(left, e.Offset)
			}
			if len(left) != len(tc.left) {
				t.Fatalf("entries %v, want %v", left, tc.left)
			}
			for i := range left {
				if left[i] != tc.left[i] {
					t.Fatalf("entries %v, want %v", left, tc.left)
				}
			}
			if got := tc.p; len(got) > 0 && got[0].Nacks != base[0].Nacks {
				t.Fatalf("Nack modified its input: %+v", got)
			}
		})
	}
}

func TestPruneKeepsTheHighest(t *testing.T) {
	var p Partition
	for o := int64(0); o < MaxEntries+10; o++ {
		p, _, _ = Nack(p, o, -1, 5, "")
	}
	if len(p) != MaxEntries || p[0].Offset != 10 {
		t.Fatalf("%d entries from %d", len(p), p[0].Offset)
	}
	if p.Attempt(0) != 1 || p.Attempt(10) != 2 {
		t.Fatalf("attempts %d %d", p.Attempt(0), p.Attempt(10))
	}
	p = p.WithDLQFrom(10, 77)
	if e, _ := p.Find(10); e.DLQFrom != 77 {
		t.Fatalf("%+v", e)
	}
}

func TestHeaders(t *testing.T) {
	own := []record.Header{{Key: "trace", Value: []byte("t1")}, {Key: HeaderGroup, Value: []byte("spoofed")}}
	hs := Headers(own, "billing", "orders", 2, 41, 1700000000123, Entry{Nacks: 5, Reason: "bad json"})
	if len(own) != 2 || hs[0].Key != "trace" || len(hs) != 9 || hs[8].Key != HeaderSourceTimestamp || string(hs[8].Value) != "1700000000123" {
		t.Fatalf("headers %v", hs)
	}
	s, ok := SourceOf(hs)
	if !ok || s != (Source{Group: "billing", Topic: "orders", Partition: 2, Offset: 41, Reason: "bad json", Attempts: 5, Timestamp: 1700000000123, HasTimestamp: true}) {
		t.Fatalf("source %+v %v", s, ok)
	}
	if !Matches(hs, "billing", "orders", 2, 41) || Matches(hs, "billing", "orders", 2, 42) || Matches(hs, "other", "orders", 2, 41) {
		t.Fatal("Matches")
	}
	if _, ok := SourceOf(own); ok {
		t.Fatal("a record without dead-letter headers has no source")
	}
	if _, ok := SourceOf([]record.Header{{Key: HeaderGroup, Value: []byte("g")}, {Key: HeaderSourceTopic, Value: []byte("t")},
		{Key: HeaderSourcePartition, Value: []byte("x")}, {Key: HeaderSourceOffset, Value: []byte("1")}}); ok {
		t.Fatal("a partition that does not parse")
	}
	// A record's own dlq.* headers that do not parse (a producer's text, or
	// an earlier dead-lettering's) come before the coordinator's: the last
	// of each kind counts, so its copy is still found.
	junk := []record.Header{{Key: HeaderSourcePartition, Value: []byte("x")}, {Key: HeaderSourceOffset, Value: []byte("")},
		{Key: HeaderAttempts, Value: []byte("many")}}
	if hs := Headers(junk, "billing", "orders", 2, 41, 0, Entry{Nacks: 5}); !Matches(hs, "billing", "orders", 2, 41) {
		t.Fatal("a copy of a record with its own malformed dlq.* headers is not found")
	}
}

func TestConfig(t *testing.T) {
	tests := []struct {
		name string
		cur  map[string]string
		set  map[string]string
		want Config
		kept map[string]string // the stored map, when the case checks it
		code *errs.Error
	}{
		{name: "defaults", set: map[string]string{KeyMaxAttempts: ""}, want: Config{MaxAttempts: 5}},
		{name: "set both", set: map[string]string{KeyMaxAttempts: "3", KeyTopic: "dead.letters"}, want: Config{MaxAttempts: 3, Topic: "dead.letters"}},
		{name: "reset one", cur: map[string]string{KeyMaxAttempts: "3", KeyTopic: "x"}, set: map[string]string{KeyTopic: ""}, want: Config{MaxAttempts: 3}},
		{name: "zero attempts", set: map[string]string{KeyMaxAttempts: "0"}, code: errs.InvalidConfig},
		{name: "too many attempts", set: map[string]string{KeyMaxAttempts: "1001"}, code: errs.InvalidConfig},
		{name: "not a number", set: map[string]string{KeyMaxAttempts: "five"}, code: errs.InvalidConfig},
		{name: "bad topic", set: map[string]string{KeyTopic: "a/b"}, code: errs.InvalidConfig},
		{name: "the group coordinators' topic", set: map[string]string{KeyTopic: "__consumer_offsets"}, code: errs.InvalidConfig},
		{name: "a reserved name", set: map[string]string{KeyTopic: "__dead"}, code: errs.InvalidConfig},
		{name: "the longest topic name", set: map[string]string{KeyTopic: strings.Repeat("d", 249)}, want: Config{MaxAttempts: 5, Topic: strings.Repeat("d", 249)}},
		{name: "a topic name too long", set: map[string]string{KeyTopic: strings.Repeat("d", 250)}, code: errs.InvalidConfig},
		{name: "unknown key", set: map[string]string{"retention.ms": "1"}, code: errs.InvalidConfig},
		{name: "nothing", set: map[string]string{}, code: errs.InvalidConfig},
		// Spaces around a value are dropped, as for topic configs; spaces
		// alone are refused, not taken for the empty value.
		{name: "spaces around", set: map[string]string{KeyMaxAttempts: " 3 ", KeyTopic: " dead.letters\t"}, want: Config{MaxAttempts: 3, Topic: "dead.letters"}, kept: map[string]string{KeyMaxAttempts: "3", KeyTopic: "dead.letters"}},
		{name: "spaces alone", set: map[string]string{KeyMaxAttempts: "  "}, code: errs.InvalidConfig},
		{name: "a number's other forms", set: map[string]string{KeyMaxAttempts: "+07"}, want: Config{MaxAttempts: 7}, kept: map[string]string{KeyMaxAttempts: "7"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, c, err := Alter(tc.cur, tc.set)
			if tc.code != nil {
				if errs.Of(err) != tc.code {
					t.Fatalf("err %v, want %v", err, tc.code)
				}
				return
			}
			if err != nil || c != tc.want {
				t.Fatalf("%+v %v, want %+v", c, err, tc.want)
			}
			if tc.kept != nil && !maps.Equal(m, tc.kept) {
				t.Fatalf("kept %q, want %q", m, tc.kept)
			}
			if back, err := Parse(m); err != nil || back != c {
				t.Fatalf("parse of %v: %+v %v", m, back, err)
			}
		})
	}
	if got := (Config{}).TopicFor("orders"); got != "orders.dlq" {
		t.Fatal(got)
	}
	if got := (Config{Topic: "dl"}).TopicFor("orders"); got != "dl" {
		t.Fatal(got)
	}
}

func TestUndo(t *testing.T) {
	e5 := Entry{Offset: 5, Nacks: 1, Reason: "a", DLQFrom: -1}
	e5dl := Entry{Offset: 5, Nacks: 2, Reason: "b", State: DeadLettering, DLQFrom: 7}
	e9 := Entry{Offset: 9, Nacks: 1, DLQFrom: -1}
	for _, tc := range []struct {
		name        string
		p           Partition
		after, prev Entry
		had         bool
		want        Partition
	}{
		{"back to the entry before", Partition{e5dl, e9}, e5dl, e5, true, Partition{e5, e9}},
		{"no entry before: removed", Partition{e5, e9}, e5, Entry{}, false, Partition{e9}},
		{"the only entry removed", Partition{e5}, e5, Entry{}, false, Partition{}},
		{"changed since: kept", Partition{e5dl, e9}, Entry{Offset: 5, Nacks: 3}, e5, true, Partition{e5dl, e9}},
		{"gone since: nothing", Partition{e9}, e5, Entry{}, false, Partition{e9}},
	} {
		before := slices.Clone(tc.p)
		got := tc.p.Undo(tc.after, tc.prev, tc.had)
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
		if !slices.Equal(tc.p, before) {
			t.Errorf("%s: Undo changed its receiver: %+v", tc.name, tc.p)
		}
	}
}

func TestUnmarked(t *testing.T) {
	if prev, had := (Entry{Offset: 5, Nacks: 3, Reason: "r", State: DeadLettering, DLQFrom: 7}).Unmarked(); !had || prev != (Entry{Offset: 5, Nacks: 2, Reason: "r", State: Nacked, DLQFrom: -1}) {
		t.Errorf("marked at its third nack: %+v %v", prev, had)
	}
	if _, had := (Entry{Offset: 5, Nacks: 1, State: DeadLettering}).Unmarked(); had {
		t.Error("marked at its first nack: an entry before it")
	}
}

func TestCommitted(t *testing.T) {
	e3 := Entry{Offset: 3, Nacks: 2, Reason: "a", DLQFrom: -1}
	e5 := Entry{Offset: 5, Nacks: 1, Reason: "b", State: DeadLettering, DLQFrom: 7}
	e9 := Entry{Offset: 9, Nacks: 1, DLQFrom: -1}
	for _, tc := range []struct {
		name            string
		p               Partition
		prev, committed int64
		want            Partition
		changed         bool
	}{
		{"nothing held", nil, -1, 4, nil, false},
		{"a first commit past one record", Partition{e3, e5, e9}, -1, 4, Partition{e5, e9}, true},
		{"a commit at a record keeps it", Partition{e3, e5, e9}, 2, 3, Partition{e3, e5, e9}, false},
		{"a commit past a dead-lettering record", Partition{e5, e9}, 3, 6, Partition{e9}, true},
		{"a commit past every record", Partition{e3, e5, e9}, 3, 10, Partition{}, true},
		{"a commit before every record", Partition{e3, e5, e9}, -1, 0, Partition{e3, e5, e9}, false},
		{"a reset below records an earlier commit moved past", Partition{e3, e5, e9}, 6, 0, Partition{e9}, true},
		{"a reset below every record", Partition{e5, e9}, 5, 0, Partition{e5, e9}, false},
		{"the same offset again", Partition{e5, e9}, 5, 5, Partition{e5, e9}, false},
	} {
		before := slices.Clone(tc.p)
		got, changed := tc.p.Committed(tc.prev, tc.committed)
		if !slices.Equal(got, tc.want) || changed != tc.changed {
			t.Errorf("%s: %+v changed=%v, want %+v changed=%v", tc.name, got, changed, tc.want, tc.changed)
		}
		if !slices.Equal(tc.p, before) {
			t.Errorf("%s: Committed changed its receiver: %+v", tc.name, tc.p)
		}
		if changed && len(got) > 0 && len(tc.p) > 0 && &got[0] == &tc.p[len(tc.p)-len(got)] {
			t.Errorf("%s: the answer shares the receiver's array", tc.name)
		}
	}
}
