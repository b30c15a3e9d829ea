package client

import (
	"encoding/binary"
	"fmt"
	"strings"
	"testing"

	storagev1 "skein/gen/skein/storage/v1"
	skeinv1 "skein/gen/skein/v1"
	"skein/libs/errs"
	"skein/libs/record"
)

// log builds batches at consecutive offsets: "d" a plain record, "tN" a
// transactional record of producer N, "aN"/"cN" producer N's abort/commit marker.
func buildLog(t *testing.T, steps ...string) []byte {
	t.Helper()
	var buf []byte
	for i, s := range steps {
		var pid int64
		fmt.Sscanf(s[1:], "%d", &pid)
		var b record.Batch
		var err error
		switch s[0] {
		case 'd':
			bld := record.NewBuilder(record.DefaultBatchOptions())
			bld.Append(1000, nil, []byte(fmt.Sprintf("d@%d", i)))
			b, buf, err = bld.Build(buf)
		case 't':
			opts := record.DefaultBatchOptions()
			opts.Transactional, opts.ProducerID, opts.ProducerEpoch, opts.BaseSequence = true, pid, 0, int32(i)
			bld := record.NewBuilder(opts)
			bld.Append(1000, nil, []byte(fmt.Sprintf("t%d@%d", pid, i)))
			b, buf, err = bld.Build(buf)
		case 'a', 'c':
			typ := record.ControlAbort
			if s[0] == 'c' {
				typ = record.ControlCommit
			}
			b, buf, err = record.BuildMarker(buf, pid, 0, record.Marker{Type: typ}, 1000)
		}
		if err != nil {
			t.Fatal(err)
		}
		b.SetBaseOffset(record.Offset(i))
	}
	return buf
}

func TestDecodeFetchIsolation(t *testing.T) {
	data := buildLog(t, "d", "t5", "t6", "a5", "d", "t6", "c6", "t5", "d")
	aborted := []*storagev1.AbortedTransaction{{ProducerId: 5, FirstOffset: 1}}
	for _, tc := range []struct {
		name       string
		iso        skeinv1.IsolationLevel
		offset     int64
		maxRecords int
		want       string
		next       int64
	}{
		{"read_uncommitted sees every data record, never a marker", skeinv1.IsolationLevel_READ_UNCOMMITTED, 0, 0, "[d@0 t5@1 t6@2 d@4 t6@5 t5@7 d@8]", 9},
		{"read_committed drops the aborted transaction up to its marker", skeinv1.IsolationLevel_READ_COMMITTED, 0, 0, "[d@0 t6@2 d@4 t6@5 t5@7 d@8]", 9},
		{"from an offset inside the log", skeinv1.IsolationLevel_READ_COMMITTED, 4, 0, "[d@4 t6@5 t5@7 d@8]", 9},
		{"max records stops early", skeinv1.IsolationLevel_READ_UNCOMMITTED, 0, 2, "[d@0 t5@1]", 2},
		{"control batches at the end still advance", skeinv1.IsolationLevel_READ_COMMITTED, 6, 1, "[t5@7]", 8},
	} {
		for _, view := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/view=%v", tc.name, view), func(t *testing.T) {
				res, err := decodeFetch(FetchRequest{Topic: "t", Offset: tc.offset, MaxRecords: tc.maxRecords, Isolation: tc.iso},
					&storagev1.PartitionFetchResult{Records: data, AbortedTransactions: aborted, HighWatermark: 9}, view)
				if err != nil {
					t.Fatal(err)
				}
				var got []string
				for _, r := range res.Records {
					got = append(got, string(r.Value))
				}
				if fmt.Sprint(got) != tc.want || res.NextOffset != tc.next {
					t.Errorf("got %v next %d, want %s next %d", got, res.NextOffset, tc.want, tc.next)
				}
			})
		}
	}
	// A fetch cut mid-batch (max_bytes) ends cleanly at the last whole batch.
	res, err := decodeFetch(FetchRequest{Topic: "t"}, &storagev1.PartitionFetchResult{Records: data[:len(data)-5]}, false)
	if err != nil || len(res.Records) != 6 || res.NextOffset != 8 {
		t.Fatalf("partial tail: %v records, next %d, %v", len(res.Records), res.NextOffset, err)
	}
}

// A copying decode owns its records' bytes; a view's are the answer's own,
// so what overwrites the answer's buffer shows through a view only.
func TestDecodeFetchViewAliasesTheAnswer(t *testing.T) {
	data := buildLog(t, "d", "d")
	copied, err := decodeFetch(FetchRequest{Topic: "t"}, &storagev1.PartitionFetchResult{Records: data}, false)
	if err != nil {
		t.Fatal(err)
	}
	viewed, err := decodeFetch(FetchRequest{Topic: "t"}, &storagev1.PartitionFetchResult{Records: data}, true)
	if err != nil {
		t.Fatal(err)
	}
	for i := range data {
		data[i] = 'X'
	}
	if got := string(copied.Records[1].Value); got != "d@1" {
		t.Errorf("copied value after the buffer was overwritten: %q, want d@1", got)
	}
	if got := string(viewed.Records[1].Value); got != "XXX" {
		t.Errorf("viewed value after the buffer was overwritten: %q, want the buffer's bytes XXX", got)
	}
}

// The capacity hint counts the batches' data records, stops at maxRecords,
// and cannot be driven past what the bytes could hold by a header's count.
func TestRecordCountHint(t *testing.T) {
	data := buildLog(t, "d", "t5", "a5", "d")
	bld := record.NewBuilder(record.DefaultBatchOptions())
	for i := range 3 {
		bld.Append(1000, nil, []byte{byte(i)})
	}
	b, data, err := bld.Build(data)
	if err != nil {
		t.Fatal(err)
	}
	b.SetBaseOffset(4)
	if got := recordCountHint(data, 0); got != 6 {
		t.Errorf("hint %d, want 6 (three single-record batches and one of three; not the marker)", got)
	}
	if got := recordCountHint(data, 4); got != 4 {
		t.Errorf("hint with max 4: %d", got)
	}
	binary.BigEndian.PutUint32(b[57:], 1<<30) // the record count of the last batch
	if got, limit := recordCountHint(data, 0), len(data)/7; got != limit {
		t.Errorf("hint with a forged count: %d, want the bytes' bound %d", got, limit)
	}
	if got := recordCountHint(nil, 0); got != 0 {
		t.Errorf("hint of nothing: %d", got)
	}
}

// A view of compressed batches: each batch's records are decompressed into
// a buffer of their own, not one that the next batch overwrites.
func TestDecodeFetchViewOfCompressedBatches(t *testing.T) {
	var data []byte
	for i := range 3 {
		opts := record.DefaultBatchOptions()
		opts.Compression = record.Gzip
		bld := record.NewBuilder(opts)
		for j := range 4 {
			bld.Append(1000, nil, []byte(fmt.Sprintf("batch-%d-record-%d", i, j)))
		}
		var b record.Batch
		var err error
		if b, data, err = bld.Build(data); err != nil {
			t.Fatal(err)
		}
		b.SetBaseOffset(record.Offset(i * 4))
	}
	res, err := decodeFetch(FetchRequest{Topic: "t"}, &storagev1.PartitionFetchResult{Records: data}, true)
	if err != nil {
		t.Fatal(err)
	}
	for k, r := range res.Records {
		if want := fmt.Sprintf("batch-%d-record-%d", k/4, k%4); string(r.Value) != want || r.Offset != int64(k) {
			t.Errorf("record %d: %q at %d, want %q", k, r.Value, r.Offset, want)
		}
	}
}

// A batch damaged on the leader's disk: the records before it are
// answered, and a fetch from it fails at once with CORRUPT_MESSAGE naming
// its offset, rather than the whole answer being refused.
func TestDecodeFetchStopsAtACorruptBatch(t *testing.T) {
	data := buildLog(t, "d", "d", "d", "d")
	// Each "d" batch is the same size: flip a byte in the third one's
	// record value (inside what its CRC covers).
	size := len(data) / 4
	data[2*size+size-3] ^= 0xff
	res, err := decodeFetch(FetchRequest{Topic: "t", Partition: 3}, &storagev1.PartitionFetchResult{Records: data}, false)
	if err != nil || len(res.Records) != 2 || res.NextOffset != 2 {
		t.Fatalf("from 0: %v records, next %d, %v; want the 2 before the damaged batch, next 2", len(res.Records), res.NextOffset, err)
	}
	_, err = decodeFetch(FetchRequest{Topic: "t", Partition: 3, Offset: 2}, &storagev1.PartitionFetchResult{Records: data[2*size:]}, false)
	if errs.Of(err) != errs.CorruptMessage || !strings.Contains(err.Error(), "t-3: the record batch at offset 2 (the batch's first)") {
		t.Fatalf("from the damaged batch: %v, want CORRUPT_MESSAGE naming t-3's batch at offset 2", err)
	}
}
