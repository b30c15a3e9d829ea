package txn

import (
	"bytes"
	"encoding/binary"
	"math"
	"strings"
	"testing"
	"time"

	"skein/libs/errs"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// rec answers a valid record in state s, changed by opts.
func rec(s State, opts ...func(*Record)) Record {
	r := Record{TransactionalID: "tx", ProducerID: 42, ProducerEpoch: 3, PrevProducerID: NoProducerID, PrevProducerEpoch: NoEpoch,
		NextProducerID: NoProducerID, Timeout: time.Minute, State: s, UpdateTime: t0}
	switch s {
	case Ongoing, PrepareCommit, PrepareAbort, PrepareEpochFence:
		r.StartTime = t0.Add(-time.Second)
		r.Partitions = []TopicPartition{{"a", 0}, {"a", 7}, {"b", 2}}
		r.Groups = []string{"g1", "g2"}
	case CompleteCommit, CompleteAbort:
		r.StartTime = t0.Add(-time.Second)
	}
	for _, o := range opts {
		o(&r)
	}
	return r
}

func TestEncodeRoundTrip(t *testing.T) {
	cases := map[string]Record{
		"empty":            rec(Empty),
		"empty retry":      rec(Empty, func(r *Record) { r.PrevProducerID, r.PrevProducerEpoch = 42, 2 }),
		"ongoing":          rec(Ongoing),
		"ongoing groups":   rec(Ongoing, func(r *Record) { r.Partitions = nil }),
		"ongoing parts":    rec(Ongoing, func(r *Record) { r.Groups = nil }),
		"prepare commit":   rec(PrepareCommit, func(r *Record) { r.PrevProducerID, r.PrevProducerEpoch = 42, 2 }),
		"prepare rotation": rec(PrepareCommit, func(r *Record) { r.ProducerEpoch, r.NextProducerID = math.MaxInt16, 43 }),
		"prepare abort":    rec(PrepareAbort),
		"epoch fence":      rec(PrepareEpochFence),
		"complete commit":  rec(CompleteCommit, func(r *Record) { r.PrevProducerID, r.PrevProducerEpoch = 41, MaxHandedEpoch }),
		"complete abort":   rec(CompleteAbort, func(r *Record) { r.ProducerEpoch = math.MaxInt16 }),
		"long id":          rec(Empty, func(r *Record) { r.TransactionalID = strings.Repeat("x", maxString) }),
		"unicode":          rec(Ongoing, func(r *Record) { r.TransactionalID, r.Groups = "tx-é", []string{"gé"} }),
		"old times":        rec(Ongoing, func(r *Record) { r.StartTime, r.UpdateTime = time.UnixMilli(-5).UTC(), time.UnixMilli(0).UTC() }),
		"longest timeout":  rec(Empty, func(r *Record) { r.Timeout = math.MaxInt32 * time.Millisecond }),
	}
	for name, r := range cases {
		t.Run(name, func(t *testing.T) {
			key, value, err := Encode(r)
			if err != nil {
				t.Fatalf("encode: %v", err)
			}
			got, err := Decode(key, value)
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			if !got.Equal(r) {
				t.Fatalf("round trip:\n got %+v\nwant %+v", got, r)
			}
			if _, err := Load(Config{}, got); err != nil {
				t.Fatalf("load: %v", err)
			}
		})
	}
}

// TestEncodeGolden pins the format: a change of layout must come with a
// new version.
func TestEncodeGolden(t *testing.T) {
	r := rec(PrepareCommit, func(r *Record) {
		r.PrevProducerID, r.PrevProducerEpoch = 42, 2
		r.Partitions, r.Groups = []TopicPartition{{"a", 0}, {"a", 7}, {"b", 2}}, []string{"g"}
	})
	key, value, err := Encode(r)
	if err != nil {
		t.Fatal(err)
	}
	if want := []byte{0, 0, 0, 2, 't', 'x'}; !bytes.Equal(key, want) {
		t.Fatalf("key % x, want % x", key, want)
	}
	var w []byte
	be := binary.BigEndian
	w = be.AppendUint16(w, 1)                                        // version
	w = be.AppendUint64(w, 42)                                       // producer id
	w = be.AppendUint16(w, 3)                                        // epoch
	w = be.AppendUint64(w, 42)                                       // previous producer id
	w = be.AppendUint16(w, 2)                                        // previous epoch
	w = be.AppendUint64(w, math.MaxUint64)                           // next producer id: -1
	w = be.AppendUint32(w, 60000)                                    // timeout ms
	w = append(w, 2)                                                 // PREPARE_COMMIT
	w = be.AppendUint64(w, uint64(t0.Add(-time.Second).UnixMilli())) // start
	w = be.AppendUint64(w, uint64(t0.UnixMilli()))                   // update
	w = be.AppendUint32(w, 2)                                        // topics
	w = append(be.AppendUint16(w, 1), 'a')
	w = be.AppendUint32(be.AppendUint32(be.AppendUint32(w, 2), 0), 7)
	w = append(be.AppendUint16(w, 1), 'b')
	w = be.AppendUint32(be.AppendUint32(w, 1), 2)
	w = be.AppendUint32(w, 1) // groups
	w = append(be.AppendUint16(w, 1), 'g')
	if !bytes.Equal(value, w) {
		t.Fatalf("value\n % x\nwant\n % x", value, w)
	}
}

func TestEncodeDead(t *testing.T) {
	r := rec(Dead)
	key, value, err := Encode(r)
	if err != nil || value != nil {
		t.Fatalf("DEAD: value %v, err %v; want a tombstone", value, err)
	}
	got, err := Decode(key, nil)
	if err != nil || got.State != Dead || got.TransactionalID != "tx" {
		t.Fatalf("decode tombstone: %+v, %v", got, err)
	}
	if _, err := Load(Config{}, got); errs.Of(err) != errs.CorruptMessage {
		t.Fatalf("load of a tombstone: %v", err)
	}
}

// TestEncodeRefuses: a record this package would never write is not
// encoded either.
func TestEncodeRefuses(t *testing.T) {
	cases := map[string]Record{
		"no id":              rec(Empty, func(r *Record) { r.TransactionalID = "" }),
		"id too long":        rec(Empty, func(r *Record) { r.TransactionalID = strings.Repeat("x", maxString+1) }),
		"unknown state":      rec(Empty, func(r *Record) { r.State = "LIMBO" }),
		"no producer id":     rec(Empty, func(r *Record) { r.ProducerID = -1 }),
		"negative epoch":     rec(Empty, func(r *Record) { r.ProducerEpoch = -1 }),
		"exhausted empty":    rec(Empty, func(r *Record) { r.ProducerEpoch = math.MaxInt16 }),
		"exhausted ongoing":  rec(Ongoing, func(r *Record) { r.ProducerEpoch = math.MaxInt16 }),
		"half a prev":        rec(Empty, func(r *Record) { r.PrevProducerID = 4 }),
		"prev below -1":      rec(Empty, func(r *Record) { r.PrevProducerID, r.PrevProducerEpoch = -2, 0 }),
		"next outside prep":  rec(CompleteCommit, func(r *Record) { r.NextProducerID = 43 }),
		"next is the id":     rec(PrepareCommit, func(r *Record) { r.NextProducerID = 42 }),
		"no timeout":         rec(Empty, func(r *Record) { r.Timeout = 0 }),
		"sub-ms timeout":     rec(Empty, func(r *Record) { r.Timeout = time.Minute + time.Microsecond }),
		"huge timeout":       rec(Empty, func(r *Record) { r.Timeout = (math.MaxInt32 + 1) * time.Millisecond }),
		"sub-ms time":        rec(Empty, func(r *Record) { r.UpdateTime = t0.Add(time.Microsecond) }),
		"unsorted":           rec(Ongoing, func(r *Record) { r.Partitions = []TopicPartition{{"b", 0}, {"a", 0}} }),
		"repeated partition": rec(Ongoing, func(r *Record) { r.Partitions = []TopicPartition{{"a", 0}, {"a", 0}} }),
		"negative partition": rec(Ongoing, func(r *Record) { r.Partitions = []TopicPartition{{"a", -1}} }),
		"no topic":           rec(Ongoing, func(r *Record) { r.Partitions = []TopicPartition{{"", 0}} }),
		"repeated group":     rec(Ongoing, func(r *Record) { r.Groups = []string{"g", "g"} }),
		"empty group":        rec(Ongoing, func(r *Record) { r.Groups = []string{""} }),
		"empty not nil":      rec(Ongoing, func(r *Record) { r.Groups = []string{} }),
		"empty with parts":   rec(Empty, func(r *Record) { r.Partitions = []TopicPartition{{"a", 0}} }),
		"empty with start":   rec(Empty, func(r *Record) { r.StartTime = t0 }),
		"complete w/ groups": rec(CompleteAbort, func(r *Record) { r.Groups = []string{"g"} }),
		"ongoing nothing":    rec(Ongoing, func(r *Record) { r.Partitions, r.Groups = nil, nil }),
		"ongoing no start":   rec(Ongoing, func(r *Record) { r.StartTime = time.Time{} }),
		"ongoing with prev":  rec(Ongoing, func(r *Record) { r.PrevProducerID, r.PrevProducerEpoch = 42, 2 }),
		"prepare no start":   rec(PrepareAbort, func(r *Record) { r.StartTime = time.Time{} }),
	}
	for name, r := range cases {
		t.Run(name, func(t *testing.T) {
			if _, _, err := Encode(r); errs.Of(err) != errs.CorruptMessage {
				t.Fatalf("encode: %v, want CORRUPT_MESSAGE", err)
			}
			if _, err := Load(Config{}, r); errs.Of(err) != errs.CorruptMessage {
				t.Fatalf("load: %v, want CORRUPT_MESSAGE", err)
			}
		})
	}
}

func TestDecodeRefuses(t *testing.T) {
	key, value, err := Encode(rec(Ongoing))
	if err != nil {
		t.Fatal(err)
	}
	// Offsets in value: version 0, state 34, topic count 51, first topic
	// name length 55, its partition count 58, its first partition 62.
	set := func(at int, b ...byte) []byte {
		v := bytes.Clone(value)
		copy(v[at:], b)
		return v
	}
	cases := map[string]struct{ key, value []byte }{
		"empty key":           {[]byte{}, value},
		"short key":           {key[:3], value},
		"key version":         {append([]byte{0, 1}, key[2:]...), value},
		"key bytes after":     {append(bytes.Clone(key), 0), value},
		"key negative length": {[]byte{0, 0, 0xff, 0xff}, value},
		"empty key id":        {[]byte{0, 0, 0, 0}, value},
		"empty value":         {key, []byte{}},
		"value version":       {key, set(0, 0, 2)},
		"short value":         {key, value[:20]},
		"cut in the groups":   {key, value[:len(value)-1]},
		"bytes after":         {key, append(bytes.Clone(value), 0)},
		"unknown state":       {key, set(34, 8)},
		"DEAD value":          {key, set(34, 6)},
		"huge topic count":    {key, set(51, 0x7f, 0xff, 0xff, 0xff)},
		"negative count":      {key, set(51, 0xff, 0xff, 0xff, 0xff)},
		"negative name":       {key, set(55, 0xff, 0xff)},
		"no partitions":       {key, set(58, 0, 0, 0, 0)},
		"unsorted partitions": {key, set(62, 0, 0, 0, 9)},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			if _, err := Decode(c.key, c.value); errs.Of(err) != errs.CorruptMessage {
				t.Fatalf("decode: %v, want CORRUPT_MESSAGE", err)
			}
		})
	}
}

func TestReplay(t *testing.T) {
	p := NewReplay(Config{})
	apply := func(r Record) {
		t.Helper()
		key, value, err := Encode(r)
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Apply(key, value); err != nil {
			t.Fatal(err)
		}
	}
	id := func(s string) func(*Record) { return func(r *Record) { r.TransactionalID = s } }
	apply(rec(Empty, id("a")))
	apply(rec(Empty, id("b")))
	apply(rec(Empty, id("c")))
	apply(rec(Ongoing, id("a")))
	apply(rec(PrepareCommit, id("a")))
	apply(rec(Dead, id("b")))
	// A corrupt record is refused and skipped: c keeps its state.
	if err := p.Apply(EncodeKey("c"), []byte{0, 1, 2}); errs.Of(err) != errs.CorruptMessage {
		t.Fatalf("corrupt record: %v", err)
	}
	if err := p.Apply([]byte{9}, nil); errs.Of(err) != errs.CorruptMessage {
		t.Fatalf("corrupt key: %v", err)
	}
	txns := p.Txns()
	if len(txns) != 2 || txns[0].ID() != "a" || txns[1].ID() != "c" {
		t.Fatalf("replayed %d ids", len(txns))
	}
	if txns[0].State() != PrepareCommit || txns[1].State() != Empty {
		t.Fatalf("states %s %s", txns[0].State(), txns[1].State())
	}
	eff := txns[0].Resume(t0)
	if eff.Markers == nil || !eff.Markers.Commit || eff.Markers.ProducerEpoch != 3 || len(eff.Markers.Partitions) != 3 {
		t.Fatalf("resume: %+v", eff)
	}
	if eff := txns[1].Resume(t0); eff.Markers != nil || eff.Write != nil {
		t.Fatalf("resume of EMPTY: %+v", eff)
	}
}

// FuzzDecode: a decode of any bytes never panics, refuses with
// CORRUPT_MESSAGE, and what it accepts encodes back to the same state.
func FuzzDecode(f *testing.F) {
	for _, r := range []Record{rec(Empty), rec(Ongoing), rec(PrepareCommit, func(r *Record) { r.NextProducerID = 7 }), rec(CompleteAbort)} {
		key, value, err := Encode(r)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(key, value)
	}
	f.Add(EncodeKey("tx"), []byte(nil))
	f.Fuzz(func(t *testing.T, key, value []byte) {
		r, err := Decode(key, value)
		if err != nil {
			if errs.Of(err) != errs.CorruptMessage {
				t.Fatalf("error outside the table's CORRUPT_MESSAGE: %v", err)
			}
			return
		}
		k2, v2, err := Encode(r)
		if err != nil {
			t.Fatalf("decoded %+v does not encode: %v", r, err)
		}
		r2, err := Decode(k2, v2)
		if err != nil || !r2.Equal(r) {
			t.Fatalf("re-decode: %+v, %v; want %+v", r2, err, r)
		}
		if r.State != Dead {
			if _, err := Load(Config{}, r); err != nil {
				t.Fatalf("load of a decoded record: %v", err)
			}
		}
	})
}
