package partition

import (
	"bytes"
	"context"
	"testing"

	"skein/libs/record"
)

// The leader stores a producer batch in the topic's compression.type,
// recompressing one sent in another codec, and keeps it as sent under
// "producer"; the answer counts the bytes stored and uncompressed.
func TestProduceRecompressesToTheTopicCodec(t *testing.T) {
	values := []string{"a", "bb", string(bytes.Repeat([]byte("compressible "), 200))}
	uncompressed := len(batchOf(t, record.DefaultBatchOptions(), values...))
	codecs := []record.Compression{record.None, record.Gzip, record.Snappy, record.LZ4, record.Zstd}
	type topicCodec struct {
		name       string
		recompress bool
		codec      record.Compression
	}
	topics := []topicCodec{{name: "producer"}}
	for _, c := range codecs {
		topics = append(topics, topicCodec{c.String(), true, c})
	}
	for _, tc := range topics {
		for _, sent := range codecs {
			t.Run(tc.name+"/"+sent.String(), func(t *testing.T) {
				c := newCluster(t, 1)
				leader := c.replicas[1]
				cfg := leader.cfg
				cfg.Recompress, cfg.Compression = tc.recompress, tc.codec
				leader.SetConfig(cfg)

				opts := record.DefaultBatchOptions()
				opts.Compression = sent
				in := batchOf(t, opts, values...)
				orig := bytes.Clone(in)
				r, err := leader.Produce(context.Background(), AcksLeader, -1, in)
				if err != nil {
					t.Fatal(err)
				}
				want := sent
				if tc.recompress {
					want = tc.codec
				}
				stored := c.logs[1].batches[0]
				if stored.Compression() != want {
					t.Fatalf("stored as %s, want %s", stored.Compression(), want)
				}
				if want == sent && !bytes.Equal(stored[record.LengthPrefix+4:], orig[record.LengthPrefix+4:]) {
					t.Fatal("a batch in the topic's codec was rewritten")
				}
				if err := stored.Verify(); err != nil {
					t.Fatal(err)
				}
				if r.StoredBytes != len(stored) || r.UncompressedBytes != uncompressed {
					t.Fatalf("stored %d (want %d), uncompressed %d (want %d)", r.StoredBytes, len(stored), r.UncompressedBytes, uncompressed)
				}
				if wantN := map[bool]int{true: 1, false: 0}[want != sent]; r.Recompressed != wantN {
					t.Fatalf("recompressed %d, want %d", r.Recompressed, wantN)
				}
				var it record.RecordIter
				if err := it.Reset(stored); err != nil {
					t.Fatal(err)
				}
				for i := 0; it.Next(); i++ {
					if string(it.Record().Value) != values[i] || it.Offset() != record.Offset(i) {
						t.Fatalf("record %d: offset %d value %q", i, it.Offset(), it.Record().Value)
					}
				}
			})
		}
	}
}

// A batch refused as it is stays refused when recompression is on, with
// the same error, and leaves the log empty.
func TestRecompressionRefusesWhatValidationRefuses(t *testing.T) {
	c := newCluster(t, 1)
	leader := c.replicas[1]
	cfg := leader.cfg
	cfg.Recompress, cfg.Compression, cfg.MaxMessageBytes = true, record.Zstd, 200
	leader.SetConfig(cfg)
	corrupt := plain(t, "x")
	corrupt[len(corrupt)-1] ^= 1
	for name, data := range map[string][]byte{
		"corrupt":   corrupt,
		"too large": plain(t, string(bytes.Repeat([]byte("x"), 300))),
		"two":       append(plain(t, "a"), plain(t, "b")...),
		"truncated": plain(t, "x")[:40],
	} {
		if _, err := leader.Produce(context.Background(), AcksLeader, -1, data); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if n := len(c.logs[1].batches); n != 0 {
		t.Fatalf("%d batches in the log", n)
	}
}
