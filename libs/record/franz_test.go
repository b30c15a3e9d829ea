package record

// Cross-checks against an independent implementation: franz-go's kmsg types
// and kgo's compressor, decompressor and fetch parser (which verifies CRCs).

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func kgoCodec(c Compression) kgo.CompressionCodec {
	switch c {
	case Gzip:
		return kgo.GzipCompression()
	case Snappy:
		return kgo.SnappyCompression()
	case LZ4:
		return kgo.Lz4Compression()
	case Zstd:
		return kgo.ZstdCompression()
	}
	return kgo.NoCompression()
}

// TestOursDecodedByFranz builds batches with our Builder and parses them with
// kgo.ProcessFetchPartition, the code path a franz-go consumer runs.
func TestOursDecodedByFranz(t *testing.T) {
	for _, c := range codecs {
		t.Run(c.String(), func(t *testing.T) {
			want := sampleRecords()
			var buf []byte
			opts := BatchOptions{BaseOffset: 500, PartitionLeaderEpoch: 3, Compression: c, ProducerID: 9, ProducerEpoch: 2, BaseSequence: 40}
			_, buf, err := NewBuilder(opts).appendAll(buf, want)
			if err != nil {
				t.Fatal(err)
			}
			// A second batch, a transaction commit marker, right after it.
			marker, _, err := BuildMarker(nil, 9, 2, Marker{Type: ControlCommit, CoordinatorEpoch: 1}, 1_700_000_001_000)
			if err != nil {
				t.Fatal(err)
			}
			marker.SetBaseOffset(505)
			buf = append(buf, marker...)

			fp, _ := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{KeepControlRecords: true, Topic: "t"},
				&kmsg.FetchResponseTopicPartition{RecordBatches: buf, HighWatermark: 506}, kgo.DefaultDecompressor(), nil)
			if fp.Err != nil {
				t.Fatal(fp.Err)
			}
			if len(fp.Records) != len(want)+1 {
				t.Fatalf("franz-go decoded %d records, want %d", len(fp.Records), len(want)+1)
			}
			for i, w := range want {
				r := fp.Records[i]
				if r.Offset != int64(500+i) || r.Timestamp.UnixMilli() != w.ts || !sameBytes(r.Key, w.key) || !sameBytes(r.Value, w.value) ||
					r.LeaderEpoch != 3 || r.ProducerID != 9 || r.ProducerEpoch != 2 || int(r.Attrs.CompressionType()) != int(c) {
					t.Fatalf("record %d: %+v, want %+v", i, r, w)
				}
				if len(r.Headers) != len(w.headers) {
					t.Fatalf("record %d: %d headers, want %d", i, len(r.Headers), len(w.headers))
				}
				for j, h := range w.headers {
					if r.Headers[j].Key != h.Key || !bytes.Equal(r.Headers[j].Value, h.Value) {
						t.Fatalf("record %d header %d: %+v", i, j, r.Headers[j])
					}
				}
			}
			m := fp.Records[len(want)]
			if !m.Attrs.IsControl() || !m.Attrs.IsTransactional() || m.Offset != 505 || !bytes.Equal(m.Key, []byte{0, 0, 0, 1}) {
				t.Fatalf("marker: %+v", m)
			}
		})
	}
}

// franzBatch encodes records with kmsg and kgo's compressor, the way a
// franz-go producer lays out a batch.
func franzBatch(t testing.TB, c Compression, base int64, recs []testRec) []byte {
	t.Helper()
	var raw []byte
	maxTS := recs[0].ts
	for i, r := range recs {
		maxTS = max(maxTS, r.ts)
		kr := kmsg.Record{TimestampDelta64: r.ts - recs[0].ts, OffsetDelta: int32(i), Key: r.key, Value: r.value}
		for _, h := range r.headers {
			kr.Headers = append(kr.Headers, kmsg.Header{Key: h.Key, Value: h.Value})
		}
		body := kr.AppendTo(nil)[1:] // drop the placeholder length varint (0)
		kr.Length = int32(len(body))
		raw = append(raw, kr.AppendTo(nil)...)
	}
	payload := raw
	if c != None {
		comp, err := kgo.DefaultCompressor(kgoCodec(c))
		if err != nil {
			t.Fatal(err)
		}
		var used kgo.CompressionCodecType
		payload, used = comp.Compress(new(bytes.Buffer), raw)
		if int(used) != int(c) {
			t.Fatalf("franz-go compressed with %d, want %d", used, c)
		}
		payload = append([]byte(nil), payload...)
	}
	kb := kmsg.RecordBatch{
		FirstOffset: base, PartitionLeaderEpoch: 4, Magic: 2, Attributes: int16(c),
		LastOffsetDelta: int32(len(recs) - 1), FirstTimestamp: recs[0].ts, MaxTimestamp: maxTS,
		ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1, NumRecords: int32(len(recs)), Records: payload,
	}
	kb.Length = int32(len(kb.AppendTo(nil)) - 12)
	out := kb.AppendTo(nil)
	// kmsg leaves the CRC to the caller; it covers attributes..end.
	binary.BigEndian.PutUint32(out[17:], crc32.Checksum(out[21:], crc32.MakeTable(crc32.Castagnoli)))
	return out
}

// TestFranzDecodedByOurs encodes with franz-go and decodes with ours; for
// snappy this is the raw-block form, while our own xerial form is decoded by
// franz-go above.
func TestFranzDecodedByOurs(t *testing.T) {
	for _, c := range codecs {
		t.Run(c.String(), func(t *testing.T) {
			want := sampleRecords()
			buf := franzBatch(t, c, 70, want)
			it := NewBatchIter(buf)
			if !it.Next() {
				t.Fatal(it.Err())
			}
			b := it.Batch()
			if err := b.Verify(); err != nil {
				t.Fatal(err)
			}
			var ri RecordIter
			if err := ValidateRecords(&ri, b, ValidateOptions{Strict: true}); err != nil {
				t.Fatal(err)
			}
			if b.BaseOffset() != 70 || b.LastOffset() != 74 || b.PartitionLeaderEpoch() != 4 || b.Compression() != c {
				t.Fatalf("header: base %d last %d epoch %d codec %v", b.BaseOffset(), b.LastOffset(), b.PartitionLeaderEpoch(), b.Compression())
			}
			sameRecs(t, readAll(t, b), want)

			// And franz-go's own reader agrees with what we read.
			var kb kmsg.RecordBatch
			if err := kb.ReadFrom(buf); err != nil || kb.NumRecords != b.RecordCount() || kb.MaxTimestamp != b.MaxTimestamp() {
				t.Fatalf("kmsg: %v %+v", err, kb)
			}
		})
	}
}

// TestBytesIdenticalToFranz checks that, uncompressed, our encoder produces
// the very bytes franz-go's does (compressed output legitimately differs
// between compressor implementations and settings).
func TestBytesIdenticalToFranz(t *testing.T) {
	want := sampleRecords()
	theirs := franzBatch(t, None, 70, want)
	opts := DefaultBatchOptions()
	opts.BaseOffset, opts.PartitionLeaderEpoch = 70, 4
	ours := build(t, opts, want)
	if !bytes.Equal(ours, theirs) {
		t.Fatalf("encodings differ:\nours   %x\ntheirs %x", []byte(ours), theirs)
	}
}

// TestFranzProducerTimestamps round-trips a timestamp earlier than the base
// through franz-go (negative deltas are zig-zag varlongs).
func TestFranzProducerTimestamps(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_000)
	recs := []testRec{{ts: now.UnixMilli(), value: []byte("a")}, {ts: now.Add(-time.Hour).UnixMilli(), value: []byte("b")}}
	sameRecs(t, readAll(t, Batch(franzBatch(t, Zstd, 0, recs))), recs)
}
