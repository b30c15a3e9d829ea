package dlqtopic

import (
	"slices"
	"testing"
)

func TestParse(t *testing.T) {
	type hd struct{ k, v string }
	coordinator := []hd{{HeaderSourceTopic, "orders"}, {HeaderSourcePartition, "2"}, {HeaderSourceOffset, "41"},
		{HeaderReason, "bad json"}, {HeaderAttempts, "5"}, {HeaderGroup, "billing"}, {HeaderSourceTimestamp, "1700000000123"}}
	full := Source{Group: "billing", Topic: "orders", Partition: 2, Offset: 41, Reason: "bad json", Attempts: 5, Timestamp: 1700000000123, HasTimestamp: true}
	without := func(key string) []hd {
		return slices.DeleteFunc(slices.Clone(coordinator), func(h hd) bool { return h.k == key })
	}
	replaced := func(key, value string) []hd {
		out := slices.Clone(coordinator)
		for i := range out {
			if out[i].k == key {
				out[i].v = value
			}
		}
		return out
	}
	for _, tc := range []struct {
		name    string
		headers []hd
		want    Source
		ok      bool
		own     []int
	}{
		{"the coordinator's headers", coordinator, full, true, nil},
		{"the record's own first, dlq.* among them: the last of each kind counts",
			append([]hd{{"trace", "t1"}, {HeaderSourcePartition, "x"}, {HeaderGroup, "spoofed"}}, coordinator...), full, true, []int{0, 1, 2}},
		{"a copy from before dlq.source.timestamp", without(HeaderSourceTimestamp), Source{Group: "billing", Topic: "orders", Partition: 2, Offset: 41, Reason: "bad json", Attempts: 5}, true, nil},
		{"no attempts", without(HeaderAttempts), Source{Group: "billing", Topic: "orders", Partition: 2, Offset: 41, Reason: "bad json", Timestamp: 1700000000123, HasTimestamp: true}, true, nil},
		{"no group", without(HeaderGroup), Source{}, false, nil},
		{"no source topic", without(HeaderSourceTopic), Source{}, false, nil},
		{"no offset", without(HeaderSourceOffset), Source{}, false, nil},
		{"a partition that does not parse", replaced(HeaderSourcePartition, "p"), Source{}, false, nil},
		{"attempts that do not parse", replaced(HeaderAttempts, "many"), Source{}, false, nil},
		{"a timestamp that does not parse", replaced(HeaderSourceTimestamp, "yesterday"), Source{}, false, nil},
		{"no dead-letter headers", []hd{{"trace", "t1"}}, Source{}, false, []int{0}},
	} {
		got, own, ok := Parse(len(tc.headers), func(i int) (string, []byte) { return tc.headers[i].k, []byte(tc.headers[i].v) })
		if ok != tc.ok || got != tc.want || !slices.Equal(own, tc.own) {
			t.Errorf("%s: Parse = %+v, own %v, %v; want %+v, own %v, %v", tc.name, got, own, ok, tc.want, tc.own, tc.ok)
		}
	}
}
