package offsetlog

import (
	"bytes"
	"maps"
	"reflect"
	"slices"
	"testing"
	"time"

	"skein/libs/errs"
	"skein/services/groupcoord/internal/assign"
	"skein/services/groupcoord/internal/delivery"
	"skein/services/groupcoord/internal/group"
)

func TestKeys(t *testing.T) {
	for _, k := range []Key{
		{Kind: KindGroup, Group: "g"},
		{Kind: KindGroup, Group: ""},
		{Kind: KindOffset, Group: "app", Topic: "orders", Partition: 7},
		{Kind: KindOffset, Group: "ünïcode", Topic: "t", Partition: 0},
		{Kind: KindOwner, Partition: 11},
		{Kind: KindPending, Group: "app", ProducerID: 1 << 40, Topic: "orders", Partition: 3},
		{Kind: KindPending, Group: "", ProducerID: 0, Topic: "t", Partition: 0},
	} {
		got, err := DecodeKey(k.Encode())
		if err != nil || got != k {
			t.Errorf("%+v: decoded %+v, %v", k, got, err)
		}
	}
	// Distinct keys never collide: a group key is never an offset key.
	if bytes.Equal(GroupKey("a"), OffsetKey("a", "", 0)) {
		t.Error("group and offset keys collide")
	}
	// A pending offset never shares a key with the committed one, nor
	// with another producer's.
	if bytes.Equal(PendingKey("a", 1, "t", 0), OffsetKey("a", "t", 0)) || bytes.Equal(PendingKey("a", 1, "t", 0), PendingKey("a", 2, "t", 0)) {
		t.Error("pending keys collide")
	}
	// The layout of the doc's table: type 4, group, producer id, topic, partition.
	want := []byte{0, 4, 0, 1, 'g', 0, 0, 0, 0, 0, 0, 0, 9, 0, 1, 't', 0, 0, 0, 2}
	if got := PendingKey("g", 9, "t", 2); !bytes.Equal(got, want) {
		t.Errorf("pending key %v, want %v", got, want)
	}
}

func TestPendingValue(t *testing.T) {
	p := Pending{Epoch: 12, Offset: Offset{Offset: 42, LeaderEpoch: 3, Metadata: "meta", CommitTime: time.UnixMilli(1_700_000_000_123)}}
	b := EncodePending(p)
	got, err := DecodePending(b)
	if err != nil || got.Epoch != 12 || got.Offset.Offset != 42 || got.LeaderEpoch != 3 || got.Metadata != "meta" || !got.CommitTime.Equal(p.CommitTime) {
		t.Fatalf("round trip: %+v, %v", got, err)
	}
	// The layout of the doc's table: version 1, then the producer epoch.
	if !bytes.Equal(b[:4], []byte{0, 1, 0, 12}) || len(b) != 2+2+8+4+2+4+8 {
		t.Fatalf("layout: %v", b)
	}
	// Not an offset value, nor the other way round.
	if _, err := DecodeOffset(b); err == nil {
		t.Error("a pending value decodes as an offset value")
	}
}

func TestOffsetValue(t *testing.T) {
	o := Offset{Offset: 42, LeaderEpoch: -1, Metadata: "m", CommitTime: time.UnixMilli(1_700_000_000_123)}
	got, err := DecodeOffset(EncodeOffset(o))
	if err != nil || !got.CommitTime.Equal(o.CommitTime) || got.Offset != 42 || got.LeaderEpoch != -1 || got.Metadata != "m" {
		t.Fatalf("round trip: %+v, %v", got, err)
	}
}

func TestOwnerValue(t *testing.T) {
	o := Owner{Coordinator: 3, Epoch: 9, Time: time.UnixMilli(1_700_000_000_123)}
	if got, err := DecodeOwner(EncodeOwner(o)); err != nil || got.Coordinator != 3 || got.Epoch != 9 || !got.Time.Equal(o.Time) {
		t.Fatalf("round trip: %+v, %v", got, err)
	}
	if _, err := DecodeOwner(EncodeOwner(o)[:5]); errs.Of(err) != errs.CorruptMessage {
		t.Fatalf("truncated: %v", err)
	}
}

func TestGroupValue(t *testing.T) {
	g := group.New(group.DefaultConfig(), "app")
	now := time.Unix(1000, 0)
	g.SetTopics(map[string]int32{"orders": 4, "other": 1})
	if _, _, err := g.Heartbeat(group.HeartbeatRequest{MemberID: "m-1", InstanceID: "i-1", Rack: "r", Topics: []string{"orders"}}, now); err != nil {
		t.Fatal(err)
	}
	resp, _, err := g.Heartbeat(group.HeartbeatRequest{MemberID: "m-2", Topics: []string{"orders", "other"}, Assignor: "range",
		SessionTimeout: 10 * time.Second}, now)
	if err != nil {
		t.Fatal(err)
	}
	// m-1 is asked to revoke: the snapshot has all three partition sets.
	g.Heartbeat(group.HeartbeatRequest{MemberID: "m-1", MemberEpoch: 1, Owned: assign.Of(map[string][]int32{"orders": {0, 1, 2, 3}})}, now)
	_ = resp
	snap := g.Snapshot()
	back, err := DecodeGroup("app", EncodeGroup(snap))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, snap) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", back, snap)
	}
	r, err := group.Restore(group.DefaultConfig(), back, now)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(r.Snapshot(), snap) {
		t.Fatalf("restored group differs:\n got %+v\nwant %+v", r.Snapshot(), snap)
	}
	// An empty group too.
	empty := group.New(group.DefaultConfig(), "e").Snapshot()
	if back, err := DecodeGroup("e", EncodeGroup(empty)); err != nil || !reflect.DeepEqual(back, empty) {
		t.Fatalf("empty group: %+v, %v", back, err)
	}
}

func TestBadBytes(t *testing.T) {
	valid := EncodeOffset(Offset{Offset: 1, Metadata: "x"})
	for name, b := range map[string][]byte{
		"nil":              nil,
		"one byte":         {0},
		"unknown key type": {0, 9, 0, 1, 'g'},
		"short string":     {0, 2, 0, 5, 'g'},
		"negative length":  {0, 2, 0xff, 0xff},
		"trailing bytes":   append(GroupKey("g"), 1),
		"empty topic":      OffsetKey("g", "", 1),
		"short partition":  OffsetKey("g", "t", 1)[:len(OffsetKey("g", "t", 1))-1],
		"pending no topic": PendingKey("g", 1, "", 1),
		"pending neg pid":  PendingKey("g", -1, "t", 1),
		"pending short":    PendingKey("g", 1, "t", 1)[:9],
	} {
		if _, err := DecodeKey(b); errs.Of(err) != errs.CorruptMessage {
			t.Errorf("key %s: %v", name, err)
		}
	}
	for name, b := range map[string][]byte{
		"nil":             nil,
		"version 9":       append([]byte{0, 9}, valid[2:]...),
		"truncated":       valid[:len(valid)-1],
		"negative offset": EncodeOffset(Offset{Offset: -5}),
	} {
		if _, err := DecodeOffset(b); errs.Of(err) != errs.CorruptMessage {
			t.Errorf("offset %s: %v", name, err)
		}
	}
	validPending := EncodePending(Pending{Epoch: 1, Offset: Offset{Offset: 1, Metadata: "x"}})
	for name, b := range map[string][]byte{
		"nil":             nil,
		"version 2":       append([]byte{0, 2}, validPending[2:]...),
		"truncated":       validPending[:len(validPending)-1],
		"trailing":        append(validPending, 0),
		"negative offset": EncodePending(Pending{Epoch: 1, Offset: Offset{Offset: -1}}),
		"negative epoch":  EncodePending(Pending{Epoch: -1, Offset: Offset{Offset: 1}}),
	} {
		if _, err := DecodePending(b); errs.Of(err) != errs.CorruptMessage {
			t.Errorf("pending %s: %v", name, err)
		}
	}
	for name, b := range map[string][]byte{
		"nil":       nil,
		"version 0": {0, 0, '{', '}'},
		"not json":  {0, 1, 'x'},
		"bad type":  append([]byte{0, 1}, `{"members": 3}`...),
	} {
		if _, err := DecodeGroup("g", b); errs.Of(err) != errs.CorruptMessage {
			t.Errorf("group %s: %v", name, err)
		}
	}
}

func TestDeliveryAndConfigRecords(t *testing.T) {
	for _, k := range []Key{{Kind: KindDelivery, Group: "g", Topic: "orders", Partition: 3}, {Kind: KindConfig, Group: "g"}} {
		if got, err := DecodeKey(k.Encode()); err != nil || got != k {
			t.Fatalf("key %+v decodes to %+v, %v", k, got, err)
		}
	}
	// The key layout is the documented one.
	if got := DeliveryKey("g", "t", 1); !bytes.Equal(got, []byte{0, 5, 0, 1, 'g', 0, 1, 't', 0, 0, 0, 1}) {
		t.Fatalf("delivery key %v", got)
	}
	if got := ConfigKey("g"); !bytes.Equal(got, []byte{0, 6, 0, 1, 'g'}) {
		t.Fatalf("config key %v", got)
	}
	p := delivery.Partition{{Offset: 3, Nacks: 2, Reason: "bad json", DLQFrom: -1}, {Offset: 9, Nacks: 5, State: delivery.DeadLettering, DLQFrom: 120}}
	if got, err := DecodeDeliveries(EncodeDeliveries(p)); err != nil || !slices.Equal(got, p) {
		t.Fatalf("deliveries: %+v %v", got, err)
	}
	if got, err := DecodeDeliveries(EncodeDeliveries(delivery.Partition{})); err != nil || len(got) != 0 {
		t.Fatalf("no deliveries: %+v %v", got, err)
	}
	valid := EncodeDeliveries(p)
	for name, b := range map[string][]byte{
		"truncated":     valid[:len(valid)-1],
		"trailing":      append(slices.Clone(valid), 0),
		"version 2":     append([]byte{0, 2}, valid[2:]...),
		"out of order":  EncodeDeliveries(delivery.Partition{p[1], p[0]}),
		"zero nacks":    EncodeDeliveries(delivery.Partition{{Offset: 1}}),
		"unknown state": EncodeDeliveries(delivery.Partition{{Offset: 1, Nacks: 1, State: 7}}),
		"huge count":    {0, 1, 0x7f, 0xff, 0xff, 0xff},
	} {
		if _, err := DecodeDeliveries(b); errs.Of(err) != errs.CorruptMessage {
			t.Errorf("deliveries %s: %v", name, err)
		}
	}
	m := map[string]string{"max.delivery.attempts": "3", "dlq.topic": "dead"}
	if got, err := DecodeConfig(EncodeConfig(m)); err != nil || !maps.Equal(got, m) {
		t.Fatalf("config: %v %v", got, err)
	}
	for name, b := range map[string][]byte{"nil": nil, "version 0": {0, 0, '{', '}'}, "not json": {0, 1, 'x'}, "not strings": append([]byte{0, 1}, `{"a": 1}`...)} {
		if _, err := DecodeConfig(b); errs.Of(err) != errs.CorruptMessage {
			t.Errorf("config %s: %v", name, err)
		}
	}
}

// FuzzDecode: no input makes a decoder panic, and whatever decodes encodes
// back to something that decodes the same.
func FuzzDecode(f *testing.F) {
	f.Add(GroupKey("g"))
	f.Add(OffsetKey("g", "t", 3))
	f.Add(OwnerKey(2))
	f.Add(DeliveryKey("g", "t", 1))
	f.Add(ConfigKey("g"))
	f.Add(EncodeDeliveries(delivery.Partition{{Offset: 3, Nacks: 2, Reason: "r", DLQFrom: -1}, {Offset: 4, Nacks: 5, State: delivery.DeadLettering, DLQFrom: 9}}))
	f.Add(EncodeConfig(map[string]string{"max.delivery.attempts": "3"}))
	f.Add(PendingKey("g", 5, "t", 1))
	f.Add(EncodePending(Pending{Epoch: 3, Offset: Offset{Offset: 9, LeaderEpoch: 2, Metadata: "meta"}}))
	f.Add(EncodeOwner(Owner{Coordinator: 1, Epoch: 2}))
	f.Add(EncodeOffset(Offset{Offset: 9, LeaderEpoch: 2, Metadata: "meta"}))
	f.Add(EncodeGroup(group.New(group.DefaultConfig(), "g").Snapshot()))
	f.Add([]byte{0, 1, '{', '"', 'm', 'e', 'm', 'b', 'e', 'r', 's', '"', ':', '[', '{', '}', ']', '}'})
	f.Fuzz(func(t *testing.T, b []byte) {
		if k, err := DecodeKey(b); err == nil {
			if k2, err := DecodeKey(k.Encode()); err != nil || k2 != k {
				t.Fatalf("key %+v re-encoded decodes to %+v, %v", k, k2, err)
			}
		}
		if o, err := DecodeOffset(b); err == nil {
			if o2, err := DecodeOffset(EncodeOffset(o)); err != nil || o2.Offset != o.Offset || o2.Metadata != o.Metadata {
				t.Fatalf("offset %+v re-encoded decodes to %+v, %v", o, o2, err)
			}
		}
		if p, err := DecodePending(b); err == nil {
			if p2, err := DecodePending(EncodePending(p)); err != nil || p2.Epoch != p.Epoch || p2.Offset.Offset != p.Offset.Offset || p2.Metadata != p.Metadata {
				t.Fatalf("pending %+v re-encoded decodes to %+v, %v", p, p2, err)
			}
		}
		_, _ = DecodeOwner(b)
		if d, err := DecodeDeliveries(b); err == nil {
			if d2, err := DecodeDeliveries(EncodeDeliveries(d)); err != nil || !slices.Equal(d, d2) {
				t.Fatalf("deliveries %+v re-encoded decode to %+v, %v", d, d2, err)
			}
		}
		if m, err := DecodeConfig(b); err == nil {
			if m2, err := DecodeConfig(EncodeConfig(m)); err != nil || !maps.Equal(m, m2) {
				t.Fatalf("config %v re-encoded decodes to %v, %v", m, m2, err)
			}
		}
		if s, err := DecodeGroup("g", b); err == nil {
			if _, err := DecodeGroup("g", EncodeGroup(s)); err != nil {
				t.Fatalf("group %+v re-encoded does not decode: %v", s, err)
			}
			_, _ = group.Restore(group.DefaultConfig(), s, time.Unix(0, 0)) // must not panic
		}
	})
}
