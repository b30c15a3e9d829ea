package api

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"google.golang.org/protobuf/proto"

	skeinv1 "skein/gen/skein/v1"
	"skein/libs/client"
	"skein/libs/record"
)

// randomBytes is nil, empty, UTF-8 text or bytes that are not UTF-8.
func randomBytes(r *rand.Rand) []byte {
	switch r.IntN(5) {
	case 0:
		return nil
	case 1:
		return []byte{}
	case 2:
		return []byte(fmt.Sprintf("text é %d", r.Int64()))
	case 3:
		return bytes.Repeat([]byte("v"), r.IntN(300)) // a length above one varint byte
	}
	b := make([]byte, 1+r.IntN(40))
	for i := range b {
		b[i] = byte(r.UintN(256))
	}
	b[0] = 0xff // never UTF-8
	return b
}

func randomInt(r *rand.Rand) int64 {
	switch r.IntN(4) {
	case 0:
		return 0
	case 1:
		return -1 - r.Int64N(1<<40)
	}
	return r.Int64()
}

func randomFetchResult(r *rand.Rand) *client.FetchResult {
	res := &client.FetchResult{NextOffset: randomInt(r), HighWatermark: randomInt(r), LastStableOffset: randomInt(r), LogStartOffset: randomInt(r)}
	for range r.IntN(6) {
		cr := client.ConsumedRecord{
			Partition: int32(randomInt(r)), Offset: randomInt(r), Timestamp: randomInt(r),
			Key: randomBytes(r), Value: randomBytes(r), LeaderEpoch: int32(randomInt(r)), LogAppendTime: r.IntN(2) == 0,
		}
		if r.IntN(4) > 0 {
			cr.Topic = fmt.Sprint("topic-", r.IntN(100))
		}
		for range r.IntN(3) {
			k := ""
			if r.IntN(3) > 0 {
				k = fmt.Sprint("h", r.IntN(10))
			}
			cr.Headers = append(cr.Headers, record.Header{Key: k, Value: randomBytes(r)})
		}
		res.Records = append(res.Records, cr)
	}
	return res
}

// The wire form written from a fetch's records is byte for byte what
// protobuf-go marshals from the message Fetch builds, in both encodings.
func TestFetchResponseWireFormIsTheMessages(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 2000 {
		res := randomFetchResult(r)
		for _, enc := range []skeinv1.Encoding{skeinv1.Encoding_TEXT, skeinv1.Encoding_BYTES} {
			want, err := proto.Marshal(toFetchResponse(res, enc))
			if err != nil {
				t.Fatal(err)
			}
			got := appendFetchResponse([]byte("prefix"), res, enc)
			if !bytes.Equal(got[len("prefix"):], want) {
				t.Fatalf("case %d, %v: wire form\n%x\nwant\n%x", i, enc, got[len("prefix"):], want)
			}
			if n := fetchResponseSize(res, enc); n != len(want) {
				t.Fatalf("case %d, %v: size %d, want %d", i, enc, n, len(want))
			}
			if !wireFetchable(res) {
				t.Fatalf("case %d: UTF-8 header keys refused", i)
			}
		}
	}
}

// A header key that is not UTF-8 is left to the message path, which
// protobuf refuses to marshal: the wire form never carries one.
func TestFetchResponseWireFormRefusesABadHeaderKey(t *testing.T) {
	res := &client.FetchResult{Records: []client.ConsumedRecord{{Value: []byte("v"), Headers: []record.Header{{Key: "\xff"}}}}}
	if wireFetchable(res) {
		t.Fatal("a header key that is not UTF-8 was taken for the wire form")
	}
	if _, err := proto.Marshal(toFetchResponse(res, skeinv1.Encoding_BYTES)); err == nil {
		t.Fatal("protobuf marshalled a header key that is not UTF-8")
	}
}
