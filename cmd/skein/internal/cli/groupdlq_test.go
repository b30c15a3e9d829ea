package cli

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	skeinv1 "skein/gen/skein/v1"
	"skein/libs/dlqtopic"
)

func TestParseDeadLetter(t *testing.T) {
	h := func(k, v string) *skeinv1.Header { return &skeinv1.Header{Key: k, ValueBytes: []byte(v)} }
	r := &skeinv1.ConsumedRecord{Partition: 1, Offset: 9, KeyBytes: []byte("k"), ValueBytes: []byte("v"), TimestampMs: 5,
		Headers: []*skeinv1.Header{h("own", "x"), h(dlqtopic.HeaderSourceTopic, "orders"), h(dlqtopic.HeaderSourcePartition, "2"), h(dlqtopic.HeaderSourceOffset, "41"),
			h(dlqtopic.HeaderReason, "bad"), h(dlqtopic.HeaderAttempts, "5"), h(dlqtopic.HeaderGroup, "billing")}}
	d, src, ok := parseDeadLetter("orders.dlq", r)
	if !ok || d.Topic != "orders" || d.Partition != 2 || d.Offset != 41 || d.Reason != "bad" || d.Attempts != 5 ||
		d.DLQPartition != 1 || d.DLQOffset != 9 || string(d.Value) != "v" || d.null || src.Group != "billing" ||
		d.TimestampMs != 5 || d.DeadLetteredMs != nil {
		t.Fatalf("%+v %v", d, ok)
	}
	// A copy written with the record's own time in dlq.source.timestamp.
	r.Headers = append(r.Headers, h(dlqtopic.HeaderSourceTimestamp, "3"))
	if d, _, ok := parseDeadLetter("orders.dlq", r); !ok || d.TimestampMs != 3 || d.DeadLetteredMs == nil || *d.DeadLetteredMs != 5 || len(d.Headers) != 1 {
		t.Fatalf("with dlq.source.timestamp: %+v %v, want the record's time 3, dead-lettered at 5", d, ok)
	}
	r.Headers[len(r.Headers)-1] = h(dlqtopic.HeaderSourceTimestamp, "yesterday")
	if _, _, ok := parseDeadLetter("orders.dlq", r); ok {
		t.Fatal("a dlq.source.timestamp that does not parse")
	}
	// The record's own dlq.* headers (a producer's text) come before the
	// coordinator's, and the last of each kind counts.
	r.Headers = append([]*skeinv1.Header{h(dlqtopic.HeaderSourceTimestamp, "junk"), h(dlqtopic.HeaderSourcePartition, "p"), h(dlqtopic.HeaderSourceOffset, "")}, r.Headers...)
	r.Headers[len(r.Headers)-1] = h(dlqtopic.HeaderSourceTimestamp, "3")
	if d, _, ok := parseDeadLetter("orders.dlq", r); !ok || d.Partition != 2 || d.Offset != 41 || d.TimestampMs != 3 {
		t.Fatalf("with the record's own malformed dlq.* headers first: %+v %v", d, ok)
	} else if len(d.Headers) != 4 || d.Headers[0].GetKey() != dlqtopic.HeaderSourceTimestamp || d.Headers[1].GetKey() != dlqtopic.HeaderSourcePartition ||
		d.Headers[2].GetKey() != dlqtopic.HeaderSourceOffset || d.Headers[3].GetKey() != "own" {
		t.Fatalf("own headers %v: the record's own dlq.* headers stay, the coordinator's go", d.Headers)
	}
	// Copies written before dlq.source.timestamp carry the record's time
	// and say nothing of when they were dead-lettered.
	r.Headers = r.Headers[3 : len(r.Headers)-1]
	if d, _, ok := parseDeadLetter("orders.dlq", r); !ok || d.TimestampMs != 5 || d.DeadLetteredMs != nil {
		t.Fatalf("an older copy: %+v %v", d, ok)
	}
	if len(d.Headers) != 1 || d.Headers[0].GetKey() != "own" {
		t.Fatalf("own headers %v: the dlq.* ones are left out", d.Headers)
	}
	if _, _, ok := parseDeadLetter("x", &skeinv1.ConsumedRecord{Headers: []*skeinv1.Header{h(dlqtopic.HeaderSourceTopic, "t"), h(dlqtopic.HeaderSourcePartition, "p"), h(dlqtopic.HeaderSourceOffset, "1")}}); ok {
		t.Fatal("a partition that does not parse")
	}
	if _, _, ok := parseDeadLetter("x", &skeinv1.ConsumedRecord{}); ok {
		t.Fatal("a record without dlq headers")
	}
	if code, _, _ := run(t, "", "group", "dlq", "g"); code != 2 {
		t.Fatalf("dlq without --topic: exit %d, want 2", code)
	}
}

// deadLetterOf is the record the coordinator writes to a dead-letter topic
// when group gives up on topic's record at partition p, offset off.
func deadLetterOf(group, topic string, p int32, off int64) *skeinv1.ConsumedRecord {
	h := func(k, v string) *skeinv1.Header { return &skeinv1.Header{Key: k, ValueBytes: []byte(v)} }
	return &skeinv1.ConsumedRecord{KeyBytes: []byte("k"), ValueBytes: []byte("v"), TimestampMs: 1_800_000_000_000,
		Headers: []*skeinv1.Header{h("own", "x"), h(dlqtopic.HeaderSourceTopic, topic), h(dlqtopic.HeaderSourcePartition, fmt.Sprint(p)),
			h(dlqtopic.HeaderSourceOffset, fmt.Sprint(off)), h(dlqtopic.HeaderReason, "bad"), h(dlqtopic.HeaderAttempts, "5"), h(dlqtopic.HeaderGroup, group),
			h(dlqtopic.HeaderSourceTimestamp, "1700000000001")}}
}

// startDeadLetters serves topic t, and old-dead holding what group g
// dead-lettered from t:1@7 before its dlq.topic became new-dead (not
// created yet: nothing dead-lettered since), beside what another group and
// another topic left there.
func startDeadLetters(t *testing.T) (*fakeGateway, *fakeGroups, string) {
	g, f, addr := startFakeGatewayWithGroups(t)
	f.dlqTopic = "new-dead"
	var old []*skeinv1.ConsumedRecord
	for i, r := range []*skeinv1.ConsumedRecord{deadLetterOf("g", "t", 1, 7), deadLetterOf("other", "t", 0, 3), deadLetterOf("g", "u", 0, 4)} {
		r.Topic, r.Offset = "old-dead", int64(i)
		old = append(old, r)
	}
	g.mu.Lock()
	g.topics["old-dead"] = [][]*skeinv1.ConsumedRecord{old}
	g.mu.Unlock()
	return g, f, addr
}

// Records a group dead-lettered into a topic its config no longer names
// (its dlq.topic changed since, or its config was deleted) are listed and
// replayed from the topic --dlq-topic (or its environment twin) names,
// without asking the group's config.
func TestGroupDLQFromANamedDeadLetterTopic(t *testing.T) {
	g, f, addr := startDeadLetters(t)
	code, out, errOut := run(t, "", "group", "dlq", "g", "--topic", "t", "--gateway", addr)
	if code != 0 || strings.Count(out, "\n") != 1 || !strings.Contains(errOut, "0 record(s) of group g from t in new-dead") {
		t.Fatalf("group dlq without --dlq-topic: %d %q %q, want none, from the group's dlq.topic", code, out, errOut)
	}

	f.mu.Lock()
	f.configReads = 0
	f.mu.Unlock()
	code, out, errOut = run(t, "", "group", "dlq", "g", "--topic", "t", "--dlq-topic", "old-dead", "--gateway", addr)
	if code != 0 || !strings.Contains(out, "old-dead:0@0  t:1@7") || strings.Count(out, "\n") != 2 ||
		!strings.Contains(errOut, "1 record(s) of group g from t in old-dead") {
		t.Fatalf("group dlq --dlq-topic old-dead: %d %q %q, want g's record from t alone", code, out, errOut)
	}
	code, out, _ = run(t, "", "group", "dlq", "g", "--topic", "t", "--dlq-topic=old-dead", "--json", "--gateway", addr)
	var list []deadLetter
	if err := json.Unmarshal([]byte(out), &list); code != 0 || err != nil || len(list) != 1 || list[0].DLQTopic != "old-dead" || list[0].Offset != 7 {
		t.Fatalf("group dlq --dlq-topic old-dead --json: %d %q (%v)", code, out, err)
	}
	// Bytes as the API names them: key_bytes and value_bytes are base64,
	// key and value would be text.
	if !strings.Contains(out, `"key_bytes": "aw=="`) || !strings.Contains(out, `"value_bytes": "dg=="`) {
		t.Fatalf("group dlq --json: %s, want key_bytes and value_bytes in base64", out)
	}

	code, out, errOut = run(t, "", "group", "dlq-replay", "g", "--topic", "t", "--dlq-topic", "old-dead", "--gateway", addr)
	if code != 0 || !strings.Contains(out, "old-dead:0@0  t:1@0") || !strings.Contains(errOut, "replayed 1 record(s) of group g from old-dead to t") {
		t.Fatalf("group dlq-replay --dlq-topic old-dead: %d %q %q", code, out, errOut)
	}
	g.mu.Lock()
	back := g.topics["t"][1]
	g.mu.Unlock()
	if len(back) != 1 || string(back[0].GetKeyBytes()) != "k" || string(back[0].GetValueBytes()) != "v" || back[0].GetTimestampMs() != 1_700_000_000_001 ||
		len(back[0].GetHeaders()) != 1 || back[0].GetHeaders()[0].GetKey() != "own" {
		t.Fatalf("replayed to t:1: %v, want the record with its own header alone", back)
	}
	f.mu.Lock()
	reads := f.configReads
	f.mu.Unlock()
	if reads != 0 {
		t.Errorf("the group's config was read %d time(s) with --dlq-topic given", reads)
	}

	t.Setenv("SKEIN_DLQ_TOPIC", "old-dead")
	if code, _, errOut := run(t, "", "group", "dlq", "g", "--topic", "t", "--gateway", addr); code != 0 || !strings.Contains(errOut, "1 record(s) of group g from t in old-dead") {
		t.Errorf("group dlq with SKEIN_DLQ_TOPIC=old-dead: %d %q", code, errOut)
	}
	t.Setenv("SKEIN_DLQ_TOPIC", "")
	if code, _, errOut := run(t, "", "group", "dlq", "g", "--topic", "t", "--gateway", addr); code != 0 || !strings.Contains(errOut, "in new-dead") {
		t.Errorf("group dlq with SKEIN_DLQ_TOPIC empty: %d %q, want the group's dlq.topic", code, errOut)
	}
}

// --dlq-topic is checked as --topic is: given, it names a topic (given
// empty it is a usage error, not the group's own), and not --topic itself,
// where the coordinator never dead-letters. One that does not exist is its
// UNKNOWN_TOPIC_OR_PARTITION, not "no dead letters": it was named to be
// read. The flag is only dlq's and dlq-replay's.
func TestGroupDLQTopicFlagChecks(t *testing.T) {
	g, _, addr := startDeadLetters(t)
	for _, sub := range []string{"dlq", "dlq-replay"} {
		for _, tc := range []struct {
			args []string
			want string
		}{
			{[]string{"--dlq-topic", ""}, "--dlq-topic is empty"},
			{[]string{"--dlq-topic="}, "--dlq-topic is empty"},
			{[]string{"--dlq-topic", "t"}, "--dlq-topic t is --topic itself"},
		} {
			code, out, errOut := run(t, "", append([]string{"group", sub, "g", "--topic", "t", "--gateway", addr}, tc.args...)...)
			if code != 2 || out != "" || !strings.Contains(errOut, tc.want) {
				t.Errorf("group %s %q: %d %q %q, want a usage error: %s", sub, tc.args, code, out, errOut, tc.want)
			}
		}
		code, out, errOut := run(t, "", "group", sub, "g", "--topic", "t", "--dlq-topic", "nosuch", "--gateway", addr)
		if code != 1 || out != "" || !strings.Contains(errOut, "UNKNOWN_TOPIC_OR_PARTITION") || !strings.Contains(errOut, `"nosuch"`) {
			t.Errorf("group %s --dlq-topic nosuch: %d %q %q", sub, code, out, errOut)
		}
	}
	g.mu.Lock()
	replayed := len(g.topics["t"][0]) + len(g.topics["t"][1])
	g.mu.Unlock()
	if replayed != 0 {
		t.Errorf("%d record(s) replayed by refused commands", replayed)
	}
	if code, _, errOut := run(t, "", "group", "describe", "g", "--dlq-topic", "old-dead", "--gateway", addr); code != 2 || !strings.Contains(errOut, "dlq-topic") {
		t.Errorf("group describe --dlq-topic: %d %q, want an unknown flag", code, errOut)
	}
}

// Keys and reasons are any member's text: control characters are escaped,
// so that they neither break the table nor reach the terminal.
func TestPrintableEscapesControlCharacters(t *testing.T) {
	for in, want := range map[string]string{
		"plain text":                "plain text",
		"a\nb\tc\rd":                `a\nb\tc\rd`,
		"\x1b[31mred\x1b[0m":        `\x1b[31mred\x1b[0m`,
		"nul\x00del\x7f":            `nul\x00del\x7f`,
		"c1\u0085ls\u2028rlo\u202e": `c1\u0085ls\u2028rlo\u202e`,
		"naïve café":                "naïve café",
	} {
		if got := printable([]byte(in)); got != want {
			t.Errorf("printable(%q) = %q, want %q", in, got, want)
		}
	}
	if got := printable([]byte{0xff, 0xfe}); got != "<2 bytes>" {
		t.Errorf("printable of bytes that are not UTF-8: %q", got)
	}
	if got := printable(nil); got != "-" {
		t.Errorf("printable(nil) = %q", got)
	}
}
