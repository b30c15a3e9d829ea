package assign

import (
	"fmt"
	"maps"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

func mustParse(t testing.TB, s string) Partitions {
	t.Helper()
	p, err := ParsePartitions(s)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// render writes an answer as "a=t:0,1 b=-", members in id order.
func render(out map[MemberID]Partitions) string {
	var s string
	for i, id := range slices.Sorted(maps.Keys(out)) {
		if i > 0 {
			s += " "
		}
		s += fmt.Sprintf("%s=%s", id, out[id])
	}
	return s
}

func TestPartitionsSetOps(t *testing.T) {
	a := mustParse(t, "t:0,1,2;u:5")
	b := mustParse(t, "t:2,3;u:5;v:1")
	for _, c := range []struct{ name, got, want string }{
		{"intersect", a.Intersect(b).String(), "t:2;u:5"},
		{"minus", a.Minus(b).String(), "t:0,1"},
		{"union", a.Union(b).String(), "t:0,1,2,3;u:5;v:1"},
		{"empty", Partitions(nil).String(), "-"},
		{"of", Of(map[string][]int32{"t": {3, 1, 3}, "x": nil}).String(), "t:1,3"},
	} {
		if c.got != c.want {
			t.Errorf("%s: got %s, want %s", c.name, c.got, c.want)
		}
	}
	if !a.Intersects(b) || a.Minus(b).Intersects(b) {
		t.Error("Intersects")
	}
	if !mustParse(t, "t:1").SubsetOf(a) || a.SubsetOf(b) {
		t.Error("SubsetOf")
	}
	if !Partitions(nil).Equal(Partitions{}) || a.Equal(b) || !a.Equal(a.Clone()) {
		t.Error("Equal")
	}
	for _, bad := range []string{"t", "t:x", ":1", "t:-1"} {
		if _, err := ParsePartitions(bad); err == nil {
			t.Errorf("ParsePartitions(%q) succeeded", bad)
		}
	}
}

func TestAssignors(t *testing.T) {
	type m struct{ id, instance, topics, current string }
	mk := func(t *testing.T, ms []m) []Member {
		var out []Member
		for _, x := range ms {
			var topics []string
			for _, tp := range splitComma(x.topics) {
				topics = append(topics, tp)
			}
			out = append(out, Member{ID: MemberID(x.id), InstanceID: x.instance, Topics: topics, Current: mustParse(t, x.current)})
		}
		return out
	}
	cases := []struct {
		name     string
		assignor Assignor
		members  []m
		topics   map[string]int32
		want     string
	}{
		{"range: first members take the extra", Range{}, []m{{id: "b", topics: "t"}, {id: "a", topics: "t"}, {id: "c", topics: "t"}},
			map[string]int32{"t": 7}, "a=t:0,1,2 b=t:3,4 c=t:5,6"},
		{"range: per topic, so the first member gets every extra", Range{}, []m{{id: "a", topics: "t,u"}, {id: "b", topics: "t,u"}},
			map[string]int32{"t": 3, "u": 3}, "a=t:0,1;u:0,1 b=t:2;u:2"},
		{"range: static members first, by instance id", Range{}, []m{{id: "a", topics: "t"}, {id: "z", instance: "i1", topics: "t"}},
			map[string]int32{"t": 2}, "a=t:1 z=t:0"},
		{"range: only subscribers; unknown topics ignored", Range{}, []m{{id: "a", topics: "t,x"}, {id: "b", topics: "u"}},
			map[string]int32{"t": 2, "u": 1}, "a=t:0,1 b=u:0"},
		{"range: more members than partitions", Range{}, []m{{id: "a", topics: "t"}, {id: "b", topics: "t"}, {id: "c", topics: "t"}},
			map[string]int32{"t": 2}, "a=t:0 b=t:1 c=-"},
		{"uniform: fresh group spreads evenly", Uniform{}, []m{{id: "a", topics: "t"}, {id: "b", topics: "t"}, {id: "c", topics: "t"}},
			map[string]int32{"t": 6}, "a=t:0,3 b=t:1,4 c=t:2,5"},
		{"uniform: across topics, balanced overall", Uniform{}, []m{{id: "a", topics: "t,u"}, {id: "b", topics: "t,u"}},
			map[string]int32{"t": 3, "u": 3}, "a=t:0,2;u:1 b=t:1;u:0,2"},
		{"uniform: a new member takes only what balance needs", Uniform{}, []m{
			{id: "a", topics: "t", current: "t:0,1,2"}, {id: "b", topics: "t", current: "t:3,4,5"}, {id: "c", topics: "t"}},
			map[string]int32{"t": 6}, "a=t:0,1 b=t:3,4 c=t:2,5"},
		{"uniform: a leaver's partitions go to the others, nothing else moves", Uniform{}, []m{
			{id: "a", topics: "t", current: "t:0,1"}, {id: "c", topics: "t", current: "t:4,5"}},
			map[string]int32{"t": 6}, "a=t:0,1,2 c=t:3,4,5"},
		{"uniform: unsubscribed and vanished partitions are dropped", Uniform{}, []m{
			{id: "a", topics: "t", current: "t:0,1,7;u:0"}, {id: "b", topics: "t", current: "t:2"}},
			map[string]int32{"t": 4, "u": 1}, "a=t:0,1 b=t:2,3"},
		{"uniform: a partition two members claim stays with the first", Uniform{}, []m{
			{id: "a", topics: "t", current: "t:0"}, {id: "b", topics: "t", current: "t:0,1"}},
			map[string]int32{"t": 2}, "a=t:0 b=t:1"},
		{"uniform: heterogeneous subscriptions", Uniform{}, []m{
			{id: "a", topics: "t"}, {id: "b", topics: "t,u"}, {id: "c", topics: "u"}},
			map[string]int32{"t": 4, "u": 2}, "a=t:0,2 b=t:1,3 c=u:0,1"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := render(c.assignor.Assign(mk(t, c.members), c.topics))
			if got != c.want {
				t.Errorf("got  %s\nwant %s", got, c.want)
			}
		})
	}
}

func splitComma(s string) []string {
	var out []string
	start := 0
	for i := 0; i <= len(s); i++ {
		if i == len(s) || s[i] == ',' {
			if i > start {
				out = append(out, s[start:i])
			}
			start = i + 1
		}
	}
	return out
}

// checkContract checks the rules every assignor keeps (see doc.go).
func checkContract(t *rapid.T, ms []Member, topics map[string]int32, out map[MemberID]Partitions) {
	if len(out) != len(ms) {
		t.Fatalf("%d members in, %d out", len(ms), len(out))
	}
	owner := map[TopicPartition]MemberID{}
	for _, m := range ms {
		p, ok := out[m.ID]
		if !ok {
			t.Fatalf("member %s has no entry", m.ID)
		}
		for _, tp := range p.List() {
			if !slices.Contains(m.Topics, tp.Topic) {
				t.Fatalf("%s given %s without subscribing", m.ID, tp)
			}
			if tp.Partition < 0 || tp.Partition >= topics[tp.Topic] {
				t.Fatalf("%s given %s, which does not exist", m.ID, tp)
			}
			if o, dup := owner[tp]; dup {
				t.Fatalf("%s given to %s and %s", tp, o, m.ID)
			}
			owner[tp] = m.ID
		}
	}
	for _, m := range ms {
		for _, topic := range m.Topics {
			for p := range topics[topic] {
				if _, ok := owner[TopicPartition{topic, p}]; !ok {
					t.Fatalf("%s:%d is subscribed but unassigned", topic, p)
				}
			}
		}
	}
}

func spread(out map[MemberID]Partitions) (lo, hi int) {
	lo = -1
	for _, p := range out {
		n := p.Count()
		if lo < 0 || n < lo {
			lo = n
		}
		hi = max(hi, n)
	}
	return lo, hi
}

// moved counts partitions whose owner differs between two answers, among
// partitions owned in both.
func moved(a, b map[MemberID]Partitions) int {
	n := 0
	for id, p := range a {
		n += p.Intersect(unionAll(b)).Minus(b[id]).Count()
	}
	return n
}

func unionAll(m map[MemberID]Partitions) Partitions {
	var u Partitions
	for _, p := range m {
		u = u.Union(p)
	}
	return u
}

func genTopics(t *rapid.T) map[string]int32 {
	topics := map[string]int32{}
	for _, name := range []string{"t", "u", "v"} {
		if n := rapid.Int32Range(0, 12).Draw(t, "partitions-"+name); n > 0 {
			topics[name] = n
		}
	}
	return topics
}

func genMembers(t *rapid.T, homogeneous bool) []Member {
	n := rapid.IntRange(1, 7).Draw(t, "members")
	var ms []Member
	all := []string{"t", "u", "v", "x"} // x never exists
	for i := range n {
		m := Member{ID: MemberID(fmt.Sprintf("m%d", i))}
		if rapid.Bool().Draw(t, "static") {
			m.InstanceID = fmt.Sprintf("i%d", rapid.IntRange(0, 99).Draw(t, "instance"))
			for _, o := range ms {
				if o.InstanceID == m.InstanceID {
					m.InstanceID = ""
				}
			}
		}
		if homogeneous {
			m.Topics = all
		} else {
			m.Topics = rapid.SliceOfNDistinct(rapid.SampledFrom(all), 1, 4, rapid.ID[string]).Draw(t, "topics")
		}
		ms = append(ms, m)
	}
	return ms
}

func TestAssignorContract(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		topics := genTopics(t)
		ms := genMembers(t, rapid.Bool().Draw(t, "homogeneous"))
		for _, a := range []Assignor{Range{}, Uniform{}} {
			out := a.Assign(ms, topics)
			checkContract(t, ms, topics, out)
			// Deterministic, whatever the input order.
			rev := slices.Clone(ms)
			slices.Reverse(rev)
			if again := a.Assign(rev, topics); render(again) != render(out) {
				t.Fatalf("%s: answer depends on member order:\n%s\n%s", a.Name(), render(out), render(again))
			}
		}
	})
}

func TestUniformBalancedAndSticky(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		topics := genTopics(t)
		ms := genMembers(t, true)
		u := Uniform{}
		withCurrent := func(ms []Member, out map[MemberID]Partitions) []Member {
			ms = slices.Clone(ms)
			for i := range ms {
				ms[i].Current = out[ms[i].ID]
			}
			return ms
		}
		first := u.Assign(ms, topics)
		checkContract(t, ms, topics, first)
		if lo, hi := spread(first); hi-lo > 1 {
			t.Fatalf("unbalanced: %s", render(first))
		}
		total := unionAll(first).Count()
		ms = withCurrent(ms, first)
		// Nothing changes: nothing moves.
		if again := u.Assign(ms, topics); render(again) != render(first) {
			t.Fatalf("stable input moved partitions:\n%s\n%s", render(first), render(again))
		}
		// A new member: only what it needs moves, and only to it.
		joined := append(slices.Clone(ms), Member{ID: "new", Topics: ms[0].Topics})
		afterJoin := u.Assign(joined, topics)
		checkContract(t, joined, topics, afterJoin)
		if lo, hi := spread(afterJoin); hi-lo > 1 {
			t.Fatalf("unbalanced after a join: %s", render(afterJoin))
		}
		if got, want := moved(first, afterJoin), total/len(joined); got != want || afterJoin["new"].Count() != want {
			t.Fatalf("a join moved %d partitions (new member has %d), want %d:\n%s\n%s",
				got, afterJoin["new"].Count(), want, render(first), render(afterJoin))
		}
		// A member leaves: only its partitions move.
		if len(ms) < 2 {
			return
		}
		gone := rapid.IntRange(0, len(ms)-1).Draw(t, "leaver")
		left := slices.Delete(slices.Clone(ms), gone, gone+1)
		afterLeave := u.Assign(left, topics)
		checkContract(t, left, topics, afterLeave)
		if lo, hi := spread(afterLeave); hi-lo > 1 {
			t.Fatalf("unbalanced after a leave: %s", render(afterLeave))
		}
		for _, m := range left {
			if !first[m.ID].SubsetOf(afterLeave[m.ID]) {
				t.Fatalf("%s lost partitions when %s left:\n%s\n%s", m.ID, ms[gone].ID, render(first), render(afterLeave))
			}
		}
	})
}

// With different subscriptions no member can give a partition to a
// subscriber holding 2 fewer.
func TestUniformHeterogeneousNoImprovingMove(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		topics := genTopics(t)
		ms := genMembers(t, false)
		out := Uniform{}.Assign(ms, topics)
		checkContract(t, ms, topics, out)
		for _, from := range ms {
			for _, tp := range out[from.ID].List() {
				for _, to := range ms {
					if slices.Contains(to.Topics, tp.Topic) && out[to.ID].Count()+1 < out[from.ID].Count() {
						t.Fatalf("%s could go from %s to %s: %s", tp, from.ID, to.ID, render(out))
					}
				}
			}
		}
	})
}
