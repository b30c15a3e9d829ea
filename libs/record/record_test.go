package record

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"testing"

	"skein/libs/errs"
)

var codecs = []Compression{None, Gzip, Snappy, LZ4, Zstd}

// testRec is a record as the tests write and expect it.
type testRec struct {
	ts      int64
	key     []byte
	value   []byte
	headers []Header
}

func sampleRecords() []testRec {
	return []testRec{
		{ts: 1_700_000_000_000, key: []byte("k1"), value: []byte("v1")},
		{ts: 1_700_000_000_005, key: nil, value: []byte("no key")},
		{ts: 1_699_999_999_990, key: []byte("tomb"), value: nil}, // earlier timestamp: negative delta
		{ts: 1_700_000_000_100, key: []byte{}, value: []byte{}},
		{ts: 1_700_000_000_200, key: []byte("h"), value: bytes.Repeat([]byte("compressible "), 500),
			headers: []Header{{Key: "traceparent", Value: []byte("00-abc-def-01")}, {Key: "null", Value: nil}, {Key: "", Value: []byte{}}}},
	}
}

func build(t testing.TB, opts BatchOptions, recs []testRec) Batch {
	t.Helper()
	b := NewBuilder(opts)
	for _, r := range recs {
		b.Append(r.ts, r.key, r.value, r.headers...)
	}
	batch, _, err := b.Build(nil)
	if err != nil {
		t.Fatal(err)
	}
	return batch
}

func readAll(t testing.TB, b Batch) []testRec {
	t.Helper()
	var it RecordIter
	if err := it.Reset(b); err != nil {
		t.Fatal(err)
	}
	var out []testRec
	for it.Next() {
		r := it.Record()
		out = append(out, testRec{ts: it.Timestamp(), key: r.Key, value: r.Value, headers: r.AppendHeaders(nil)})
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func sameRecs(t testing.TB, got, want []testRec) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d records, want %d", len(got), len(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.ts != w.ts || !sameBytes(g.key, w.key) || !sameBytes(g.value, w.value) || len(g.headers) != len(w.headers) {
			t.Fatalf("record %d: got %+v, want %+v", i, g, w)
		}
		for j := range w.headers {
			if g.headers[j].Key != w.headers[j].Key || !sameBytes(g.headers[j].Value, w.headers[j].Value) {
				t.Fatalf("record %d header %d: got %+v, want %+v", i, j, g.headers[j], w.headers[j])
			}
		}
	}
}

// sameBytes tells null from empty.
func sameBytes(a, b []byte) bool { return (a == nil) == (b == nil) && bytes.Equal(a, b) }

func TestHeaderLayout(t *testing.T) {
	opts := BatchOptions{
		BaseOffset: 0x0102030405060708, PartitionLeaderEpoch: 7, Compression: None, Transactional: true,
		ProducerID: 42, ProducerEpoch: 3, BaseSequence: 99,
	}
	b := build(t, opts, []testRec{{ts: 1000, key: []byte("a"), value: []byte("b")}, {ts: 900, value: []byte("c")}})
	be := binary.BigEndian
	for _, c := range []struct {
		name string
		got  int64
		want int64
	}{
		{"baseOffset@0", int64(be.Uint64(b[0:])), 0x0102030405060708},
		{"batchLength@8", int64(int32(be.Uint32(b[8:]))), int64(len(b) - 12)},
		{"partitionLeaderEpoch@12", int64(int32(be.Uint32(b[12:]))), 7},
		{"magic@16", int64(b[16]), 2},
		{"crc@17", int64(be.Uint32(b[17:])), int64(crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))},
		{"attributes@21", int64(be.Uint16(b[21:])), 0x10},
		{"lastOffsetDelta@23", int64(int32(be.Uint32(b[23:]))), 1},
		{"baseTimestamp@27", int64(be.Uint64(b[27:])), 1000},
		{"maxTimestamp@35", int64(be.Uint64(b[35:])), 1000},
		{"producerId@43", int64(be.Uint64(b[43:])), 42},
		{"producerEpoch@51", int64(int16(be.Uint16(b[51:]))), 3},
		{"baseSequence@53", int64(int32(be.Uint32(b[53:]))), 99},
		{"recordCount@57", int64(int32(be.Uint32(b[57:]))), 2},
		// First record: length, attributes 0, timestampDelta 0, offsetDelta 0,
		// key "a", value "b", no headers: 1+1+1+2+2+1 = 8 bytes -> zig-zag 16.
		{"record0.length@61", int64(b[61]), 16},
		{"record0.keyLength@65", int64(b[65]), 2}, // zig-zag(1)
		// Second record's timestamp delta is -100: zig-zag 199 = 0xc7 0x01.
		{"record1.tsDelta@72", int64(be.Uint16(b[72:])), 0xc701},
	} {
		if c.got != c.want {
			t.Errorf("%s = %#x, want %#x", c.name, c.got, c.want)
		}
	}
	if b.BaseOffset() != 0x0102030405060708 || b.PartitionLeaderEpoch() != 7 || !b.IsTransactional() || b.IsControl() ||
		b.ProducerID() != 42 || b.ProducerEpoch() != 3 || b.BaseSequence() != 99 || b.LastSequence() != 100 ||
		b.RecordCount() != 2 || b.LastOffset() != 0x0102030405060709 || b.MaxTimestamp() != 1000 || b.Compression() != None {
		t.Fatalf("accessors disagree with the layout")
	}
	if err := b.Verify(); err != nil {
		t.Fatal(err)
	}
}

func TestRoundTripEveryCodec(t *testing.T) {
	for _, c := range codecs {
		t.Run(c.String(), func(t *testing.T) {
			opts := DefaultBatchOptions()
			opts.Compression = c
			opts.BaseOffset = 100
			want := sampleRecords()
			b := build(t, opts, want)
			if err := b.Verify(); err != nil {
				t.Fatal(err)
			}
			if b.Compression() != c {
				t.Fatalf("codec %v, want %v", b.Compression(), c)
			}
			var it RecordIter
			if err := ValidateRecords(&it, b, ValidateOptions{Strict: true}); err != nil {
				t.Fatal(err)
			}
			sameRecs(t, readAll(t, b), want)
			if b.LastOffset() != 104 || b.MaxTimestamp() != 1_700_000_000_200 || b.BaseTimestamp() != 1_700_000_000_000 {
				t.Fatalf("last offset %d max ts %d base ts %d", b.LastOffset(), b.MaxTimestamp(), b.BaseTimestamp())
			}
		})
	}
}

func TestEmptyInputsCompress(t *testing.T) {
	for _, c := range codecs {
		out, err := Compress(nil, nil, c)
		if err != nil {
			t.Fatal(c, err)
		}
		back, err := Decompress(nil, out, c, 10)
		if err != nil || len(back) != 0 {
			t.Fatalf("%v: %v %q", c, err, back)
		}
	}
}

func TestSetOutsideCRC(t *testing.T) {
	b := build(t, DefaultBatchOptions(), sampleRecords())
	b.SetBaseOffset(1 << 40)
	b.SetPartitionLeaderEpoch(12)
	if err := b.Verify(); err != nil {
		t.Fatalf("rewriting base offset and epoch broke the batch: %v", err)
	}
	if b.BaseOffset() != 1<<40 || b.PartitionLeaderEpoch() != 12 {
		t.Fatal("setters did not stick")
	}
	b.SetMaxTimestamp(true, 5)
	if err := b.Verify(); err != nil || !b.LogAppendTime() || b.MaxTimestamp() != 5 {
		t.Fatalf("SetMaxTimestamp: %v", err)
	}
}

func TestVerifyErrors(t *testing.T) {
	good := build(t, DefaultBatchOptions(), sampleRecords()[:2])
	mut := func(f func(b Batch) Batch) Batch {
		b := append(Batch(nil), good...)
		return f(b)
	}
	recrc := func(b Batch) Batch { b.updateCRC(); return b }
	cases := []struct {
		name string
		b    Batch
		want *errs.Error
	}{
		{"ok", good, nil},
		{"short", good[:HeaderSize-1], errs.CorruptMessage},
		{"torn", good[:len(good)-1], errs.CorruptMessage},
		{"trailing bytes", append(append(Batch(nil), good...), 0), errs.CorruptMessage},
		{"length below minimum", mut(func(b Batch) Batch { binary.BigEndian.PutUint32(b[8:], 48); return b }), errs.CorruptMessage},
		{"magic 1", mut(func(b Batch) Batch { b[16] = 1; return b }), errs.CorruptMessage},
		{"crc flipped", mut(func(b Batch) Batch { b[18] ^= 1; return b }), errs.CorruptMessage},
		{"payload bit", mut(func(b Batch) Batch { b[len(b)-1] ^= 0x40; return b }), errs.CorruptMessage},
		{"codec 5", mut(func(b Batch) Batch { b[22] |= 5; return recrc(b) }), errs.UnsupportedCompressionType},
		{"negative last delta", mut(func(b Batch) Batch { binary.BigEndian.PutUint32(b[23:], 0xffffffff); return recrc(b) }), errs.CorruptMessage},
		{"count past last delta", mut(func(b Batch) Batch { binary.BigEndian.PutUint32(b[57:], 3); return recrc(b) }), errs.CorruptMessage},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.b.Verify()
			if c.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, c.want) {
				t.Fatalf("got %v, want %s", err, c.want.Name)
			}
		})
	}
}

// rawBatch builds a batch around hand-encoded records, for records our
// Builder would refuse to write.
func rawBatch(count, lastDelta int32, records []byte) Batch {
	b := make(Batch, HeaderSize, HeaderSize+len(records))
	b = append(b, records...)
	binary.BigEndian.PutUint32(b[offBatchLength:], uint32(len(b)-LengthPrefix))
	b[offMagic] = Magic
	binary.BigEndian.PutUint32(b[offLastOffsetDelta:], uint32(lastDelta))
	binary.BigEndian.PutUint64(b[offProducerID:], ^uint64(0))
	binary.BigEndian.PutUint32(b[offRecordCount:], uint32(count))
	b.updateCRC()
	return b
}

func encRecord(offsetDelta int64, key, value []byte, tail ...byte) []byte {
	var body []byte
	body = append(body, 0)
	body = binary.AppendVarint(body, 0)
	body = binary.AppendVarint(body, offsetDelta)
	body = appendBytes(body, key)
	body = appendBytes(body, value)
	body = binary.AppendVarint(body, 0)
	body = append(body, tail...)
	return append(binary.AppendVarint(nil, int64(len(body))), body...)
}

func TestValidateRecordsErrors(t *testing.T) {
	r0, r1, r2 := encRecord(0, []byte("a"), []byte("x")), encRecord(1, []byte("b"), nil), encRecord(2, nil, []byte("z"))
	cat := func(rs ...[]byte) []byte { return bytes.Join(rs, nil) }
	control := func(b Batch) Batch {
		binary.BigEndian.PutUint16(b[offAttributes:], attrControl)
		b.updateCRC()
		return b
	}
	window := func(lo, hi int64) ValidateOptions {
		return ValidateOptions{CheckTimestamps: true, MinTimestamp: lo, MaxTimestamp: hi}
	}
	cases := []struct {
		name string
		b    Batch
		opts ValidateOptions
		want *errs.Error
	}{
		{"strict ok", rawBatch(3, 2, cat(r0, r1, r2)), ValidateOptions{Strict: true}, nil},
		{"gap allowed when not strict", rawBatch(2, 2, cat(r0, r2)), ValidateOptions{}, nil},
		{"gap refused when strict", rawBatch(2, 2, cat(r0, r2)), ValidateOptions{Strict: true}, errs.InvalidRecord},
		{"last delta mismatch", rawBatch(2, 5, cat(r0, r1)), ValidateOptions{Strict: true}, errs.InvalidRecord},
		{"empty batch strict", rawBatch(0, 0, nil), ValidateOptions{Strict: true}, errs.InvalidRecord},
		{"empty batch compacted", rawBatch(0, 4, nil), ValidateOptions{}, nil},
		{"fewer records than count", rawBatch(3, 2, cat(r0, r1)), ValidateOptions{}, errs.InvalidRecord},
		{"bytes after last record", rawBatch(2, 2, cat(r0, r1, r2)), ValidateOptions{}, errs.InvalidRecord},
		{"offsets out of order", rawBatch(2, 2, cat(r1, r0)), ValidateOptions{}, errs.InvalidRecord},
		{"delta past last", rawBatch(3, 1, cat(r0, r1, r2)), ValidateOptions{}, errs.CorruptMessage},
		{"null key on compacted topic", rawBatch(3, 2, cat(r0, r1, r2)), ValidateOptions{RequireKeys: true}, errs.InvalidRecord},
		{"record length past end", rawBatch(1, 0, []byte{0x7e, 0, 0}), ValidateOptions{}, errs.InvalidRecord},
		{"key length past end", rawBatch(1, 0, []byte{0x06, 0, 0, 0, 0x40, 0, 0}), ValidateOptions{}, errs.InvalidRecord},
		{"trailing bytes inside record", rawBatch(1, 0, encRecord(0, nil, nil, 0xaa)), ValidateOptions{}, errs.InvalidRecord},
		{"varint too long", rawBatch(1, 0, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0x01}), ValidateOptions{}, errs.InvalidRecord},
		// Every record of these batches has create time 0.
		{"create times in the window", rawBatch(3, 2, cat(r0, r1, r2)), window(0, 0), nil},
		{"create time before the window", rawBatch(3, 2, cat(r0, r1, r2)), window(1, 10), errs.InvalidTimestamp},
		{"create time after the window", rawBatch(3, 2, cat(r0, r1, r2)), window(-10, -1), errs.InvalidTimestamp},
		{"a control batch's time is the leader's", control(rawBatch(1, 0, r0)), window(1, 10), nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.b.Verify()
			if err == nil {
				var it RecordIter
				err = ValidateRecords(&it, c.b, c.opts)
			}
			if c.want == nil && err != nil {
				t.Fatal(err)
			}
			if c.want != nil && !errors.Is(err, c.want) {
				t.Fatalf("got %v, want %s", err, c.want.Name)
			}
		})
	}
}

func TestBatchIter(t *testing.T) {
	var buf []byte
	for i := range 5 {
		opts := DefaultBatchOptions()
		opts.BaseOffset = Offset(i * 10)
		opts.Compression = codecs[i%len(codecs)]
		_, buf, _ = NewBuilder(opts).appendAll(buf, sampleRecords())
	}
	it := NewBatchIter(buf)
	n := 0
	for it.Next() {
		if err := it.Batch().Verify(); err != nil {
			t.Fatal(err)
		}
		if it.Batch().BaseOffset() != Offset(n*10) {
			t.Fatalf("batch %d at offset %d", n, it.Batch().BaseOffset())
		}
		n++
	}
	if it.Err() != nil || n != 5 || it.Pos() != len(buf) {
		t.Fatalf("n=%d pos=%d err=%v", n, it.Pos(), it.Err())
	}

	// A partial tail is an error unless the caller expects it.
	cut := buf[:len(buf)-3]
	it = NewBatchIter(cut)
	for it.Next() {
	}
	if !errors.Is(it.Err(), errs.CorruptMessage) {
		t.Fatalf("partial tail: %v", it.Err())
	}
	it = NewBatchIter(cut)
	it.AllowPartial = true
	n = 0
	for it.Next() {
		n++
	}
	if it.Err() != nil || n != 4 {
		t.Fatalf("AllowPartial: n=%d err=%v", n, it.Err())
	}
}

func (b *Builder) appendAll(dst []byte, recs []testRec) (Batch, []byte, error) {
	for _, r := range recs {
		b.Append(r.ts, r.key, r.value, r.headers...)
	}
	return b.Build(dst)
}

func TestControlMarker(t *testing.T) {
	for _, typ := range []ControlType{ControlAbort, ControlCommit} {
		b, _, err := BuildMarker(nil, 77, 4, Marker{Type: typ, CoordinatorEpoch: 9}, 1234)
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Verify(); err != nil {
			t.Fatal(err)
		}
		if !b.IsControl() || !b.IsTransactional() || b.ProducerID() != 77 || b.ProducerEpoch() != 4 || b.RecordCount() != 1 {
			t.Fatalf("header: control=%v txn=%v pid=%d", b.IsControl(), b.IsTransactional(), b.ProducerID())
		}
		var it RecordIter
		if err := it.Reset(b); err != nil || !it.Next() {
			t.Fatal(err, it.Err())
		}
		r := it.Record()
		// Key: version 0, type; value: version 0, coordinator epoch.
		if want := []byte{0, 0, 0, byte(typ)}; !bytes.Equal(r.Key, want) {
			t.Fatalf("key %x, want %x", r.Key, want)
		}
		if want := []byte{0, 0, 0, 0, 0, 9}; !bytes.Equal(r.Value, want) {
			t.Fatalf("value %x, want %x", r.Value, want)
		}
		m, err := ParseMarker(r)
		if err != nil || m.Type != typ || m.CoordinatorEpoch != 9 {
			t.Fatalf("marker %+v %v", m, err)
		}
	}
	if _, err := ParseMarker(&Record{Key: []byte{0, 0, 0, 5}, Value: make([]byte, 6)}); !errors.Is(err, errs.InvalidRecord) {
		t.Fatalf("unknown control type: %v", err)
	}
	if _, err := ParseMarker(&Record{Key: []byte{0, 0}}); !errors.Is(err, errs.InvalidRecord) {
		t.Fatalf("short key: %v", err)
	}
}

func TestDecompressLimit(t *testing.T) {
	big := bytes.Repeat([]byte{'x'}, 1<<20)
	for _, c := range codecs[1:] {
		comp, err := Compress(nil, big, c)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Decompress(nil, comp, c, 1<<19); !errors.Is(err, errs.MessageTooLarge) {
			t.Fatalf("%v: got %v, want MESSAGE_TOO_LARGE", c, err)
		}
		out, err := Decompress(nil, comp, c, 1<<20)
		if err != nil || !bytes.Equal(out, big) {
			t.Fatalf("%v at the limit: %v", c, err)
		}
		if _, err := Decompress(nil, comp[:len(comp)/2], c, 1<<20); !errors.Is(err, errs.CorruptMessage) {
			t.Fatalf("%v truncated: got %v, want CORRUPT_MESSAGE", c, err)
		}
	}
}

func TestParseCompression(t *testing.T) {
	for name, want := range map[string]Compression{"none": None, "uncompressed": None, "gzip": Gzip, "snappy": Snappy, "lz4": LZ4, "zstd": Zstd} {
		if got, err := ParseCompression(name); err != nil || got != want || (want != None && got.String() != name) {
			t.Fatalf("%s: %v %v", name, got, err)
		}
	}
	if _, err := ParseCompression("brotli"); !errors.Is(err, errs.UnsupportedCompressionType) {
		t.Fatal(err)
	}
}

func TestRecordIterZeroAlloc(t *testing.T) {
	opts := DefaultBatchOptions()
	b := NewBuilder(opts)
	for i := range 16 {
		b.Append(int64(i), []byte(fmt.Sprint(i)), make([]byte, 1024), Header{Key: "h", Value: []byte("v")})
	}
	batch, _, _ := b.Build(nil)
	var it RecordIter
	allocs := testing.AllocsPerRun(100, func() {
		_ = it.Reset(batch)
		for it.Next() {
			h := it.Record().Headers()
			for h.Next() {
			}
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per batch, want 0", allocs)
	}
}

func TestEmptyBatchKeepsOffsets(t *testing.T) {
	// Compaction keeps a batch whose records were all removed, so that its
	// offsets (and an idempotent producer's sequence) stay covered.
	opts := DefaultBatchOptions()
	opts.BaseOffset = 10
	b := NewBuilder(opts)
	b.SetBaseTimestamp(500)
	b.OverrideLastOffsetDelta(7)
	b.OverrideMaxTimestamp(900)
	batch, _, err := b.Build(nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := batch.Verify(); err != nil {
		t.Fatal(err)
	}
	if batch.RecordCount() != 0 || batch.LastOffset() != 17 || batch.MaxTimestamp() != 900 || batch.BaseTimestamp() != 500 {
		t.Fatalf("count %d last %d max %d", batch.RecordCount(), batch.LastOffset(), batch.MaxTimestamp())
	}
	if got := readAll(t, batch); len(got) != 0 {
		t.Fatalf("%d records", len(got))
	}
}

func TestLogAppendTimeTimestamps(t *testing.T) {
	b := build(t, DefaultBatchOptions(), sampleRecords()[:2])
	b.SetMaxTimestamp(true, 42)
	var it RecordIter
	if err := it.Reset(b); err != nil {
		t.Fatal(err)
	}
	for it.Next() {
		if it.Timestamp() != 42 {
			t.Fatalf("record timestamp %d under log append time", it.Timestamp())
		}
	}
}
