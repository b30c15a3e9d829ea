package record

import (
	"bytes"
	"testing"

	"skein/libs/errs"
)

// headerFields are the header fields recompression keeps.
type headerFields struct {
	base              Offset
	leaderEpoch       Epoch
	lastDelta, count  int32
	baseTS, maxTS     int64
	pid               int64
	pepoch            int16
	seq               int32
	txn, ctl, logTime bool
}

func fieldsOf(b Batch) headerFields {
	return headerFields{
		base: b.BaseOffset(), leaderEpoch: b.PartitionLeaderEpoch(), lastDelta: b.LastOffsetDelta(), count: b.RecordCount(),
		baseTS: b.BaseTimestamp(), maxTS: b.MaxTimestamp(), pid: b.ProducerID(), pepoch: b.ProducerEpoch(), seq: b.BaseSequence(),
		txn: b.IsTransactional(), ctl: b.IsControl(), logTime: b.LogAppendTime(),
	}
}

func TestRecompress(t *testing.T) {
	idempotent := BatchOptions{BaseOffset: 42, PartitionLeaderEpoch: 7, ProducerID: 1001, ProducerEpoch: 3, BaseSequence: 17}
	transactional := idempotent
	transactional.Transactional = true
	logTime := DefaultBatchOptions()
	logTime.LogAppendTime = true
	headers := []Header{{Key: "traceparent", Value: []byte("00-abc-def-01")}, {Key: "nil", Value: nil}}
	cases := []struct {
		name string
		opts BatchOptions
		recs []testRec
	}{
		{"plain", DefaultBatchOptions(), sampleRecords()},
		{"idempotent", idempotent, sampleRecords()},
		{"transactional", transactional, []testRec{{ts: 5, key: []byte("k"), value: nil, headers: headers}, {ts: 9, key: nil, value: []byte("v")}}},
		{"log append time", logTime, sampleRecords()[:2]},
		{"one nil record", DefaultBatchOptions(), []testRec{{ts: 1, key: nil, value: nil}}},
	}
	for _, tc := range cases {
		for _, from := range codecs {
			for _, to := range codecs {
				t.Run(tc.name+"/"+from.String()+"->"+to.String(), func(t *testing.T) {
					opts := tc.opts
					opts.Compression = from
					in := build(t, opts, tc.recs)
					orig := bytes.Clone(in)
					if got := NeedsRecompress(in, to); got != (from != to) {
						t.Fatalf("NeedsRecompress = %v", got)
					}
					prefix := []byte("kept")
					out, dst, err := Recompress(bytes.Clone(prefix), in, to, 0)
					if err != nil {
						t.Fatal(err)
					}
					if !bytes.Equal(in, orig) {
						t.Fatal("the input batch was modified")
					}
					if from == to {
						if &out[0] != &in[0] || !bytes.Equal(dst, prefix) {
							t.Fatal("a batch already in the codec was copied")
						}
						return
					}
					if !bytes.Equal(dst[:len(prefix)], prefix) || !bytes.Equal(dst[len(prefix):], out) {
						t.Fatal("the batch is not appended to dst")
					}
					if err := out.Verify(); err != nil {
						t.Fatalf("recompressed batch: %v", err)
					}
					if out.Compression() != to {
						t.Fatalf("codec %s, want %s", out.Compression(), to)
					}
					if got, want := fieldsOf(out), fieldsOf(in); got != want {
						t.Fatalf("header fields\n got %+v\nwant %+v", got, want)
					}
					sameRecs(t, readAll(t, out), readAll(t, in))
					if err := ValidateRecords(&RecordIter{}, out, ValidateOptions{Strict: true}); err != nil {
						t.Fatal(err)
					}
				})
			}
		}
	}
}

func TestRecompressKeepsControlBatches(t *testing.T) {
	for _, to := range codecs[1:] {
		marker, _, err := BuildMarker(nil, 9, 2, Marker{Type: ControlCommit, CoordinatorEpoch: 4}, 1234)
		if err != nil {
			t.Fatal(err)
		}
		if NeedsRecompress(marker, to) {
			t.Fatalf("%s: a control batch needs recompressing", to)
		}
		out, dst, err := Recompress(nil, marker, to, 0)
		if err != nil {
			t.Fatal(err)
		}
		if &out[0] != &marker[0] || dst != nil || out.Compression() != None {
			t.Fatalf("%s: the control batch was rewritten", to)
		}
	}
}

func TestRecompressRefuses(t *testing.T) {
	good := build(t, DefaultBatchOptions(), sampleRecords())
	corrupt := bytes.Clone(good)
	corrupt[len(corrupt)-1] ^= 0xff
	big := DefaultBatchOptions()
	big.Compression = Gzip
	bomb := build(t, big, []testRec{{ts: 1, value: make([]byte, 1<<20)}})
	cases := []struct {
		name  string
		b     Batch
		to    Compression
		limit int
		want  *errs.Error
	}{
		{"crc mismatch", corrupt, Zstd, 0, errs.CorruptMessage},
		{"short", good[:30], Zstd, 0, errs.CorruptMessage},
		{"unknown codec", good, Compression(6), 0, errs.UnsupportedCompressionType},
		{"over the decompression limit", bomb, LZ4, 64 << 10, errs.MessageTooLarge},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dst := []byte("x")
			_, got, err := Recompress(dst, tc.b, tc.to, tc.limit)
			if errs.Of(err) != tc.want {
				t.Fatalf("error %v, want %v", err, tc.want)
			}
			if !bytes.Equal(got, dst) {
				t.Fatal("dst changed on error")
			}
		})
	}
}

func TestRecordsSize(t *testing.T) {
	plain := build(t, DefaultBatchOptions(), sampleRecords())
	for _, c := range codecs {
		opts := DefaultBatchOptions()
		opts.Compression = c
		b := build(t, opts, sampleRecords())
		var it RecordIter
		if err := it.Reset(b); err != nil {
			t.Fatal(err)
		}
		if got, want := it.RecordsSize(), len(plain)-HeaderSize; got != want {
			t.Errorf("%s: RecordsSize %d, want %d", c, got, want)
		}
	}
}
