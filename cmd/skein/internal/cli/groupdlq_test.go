package cli

import (
	"testing"

	skeinv1 "skein/gen/skein/v1"
)

func TestParseDeadLetter(t *testing.T) {
	h := func(k, v string) *skeinv1.Header { return &skeinv1.Header{Key: k, ValueBytes: []byte(v)} }
	r := &skeinv1.ConsumedRecord{Partition: 1, Offset: 9, KeyBytes: []byte("k"), ValueBytes: []byte("v"), TimestampMs: 5,
		Headers: []*skeinv1.Header{h("own", "x"), h(dlqSourceTopic, "orders"), h(dlqSourcePartition, "2"), h(dlqSourceOffset, "41"),
			h(dlqReason, "bad"), h(dlqAttempts, "5"), h(dlqGroup, "billing")}}
	d, ok := parseDeadLetter("orders.dlq", r)
	if !ok || d.Topic != "orders" || d.Partition != 2 || d.Offset != 41 || d.Reason != "bad" || d.Attempts != 5 ||
		d.DLQPartition != 1 || d.DLQOffset != 9 || string(d.Value) != "v" || d.null || groupOf(r) != "billing" {
		t.Fatalf("%+v %v", d, ok)
	}
	if len(d.Headers) != 1 || d.Headers[0].GetKey() != "own" {
		t.Fatalf("own headers %v: the dlq.* ones are left out", d.Headers)
	}
	if _, ok := parseDeadLetter("x", &skeinv1.ConsumedRecord{Headers: []*skeinv1.Header{h(dlqSourceTopic, "t"), h(dlqSourcePartition, "p"), h(dlqSourceOffset, "1")}}); ok {
		t.Fatal("a partition that does not parse")
	}
	if _, ok := parseDeadLetter("x", &skeinv1.ConsumedRecord{}); ok {
		t.Fatal("a record without dlq headers")
	}
	if code, _, _ := run(t, "", "group", "dlq", "g"); code != 2 {
		t.Fatalf("dlq without --topic: exit %d, want 2", code)
	}
}
