package grpcopt

import (
	"bytes"
	"testing"

	"google.golang.org/protobuf/proto"

	storagev1 "skein/gen/skein/storage/v1"
)

// replicateAnswer is a follower's answer carrying n bytes of batches.
func replicateAnswer(n int) []byte {
	b, err := proto.Marshal(&storagev1.ReplicateResponse{Partitions: []*storagev1.ReplicaFetchResult{{
		Topic: "bench-async", Partition: 2, HighWatermark: 123456, LastStableOffset: 123456, Records: bytes.Repeat([]byte{1}, n)}}})
	if err != nil {
		panic(err)
	}
	return b
}

// Decoding a replication answer with protobuf-go and with unmarshalAliasing:
// empty (an idle round's answer) and with 26 KiB of batches (a round under
// one gateway stream's load).
func BenchmarkDecodeReplicateAnswer(b *testing.B) {
	for _, size := range []struct {
		name string
		n    int
	}{{"empty", 0}, {"26KiB", 26 << 10}} {
		data := replicateAnswer(size.n)
		b.Run(size.name+"/proto", func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				var m storagev1.ReplicateResponse
				if err := proto.Unmarshal(data, &m); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(size.name+"/aliasing", func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				var m storagev1.ReplicateResponse
				if err := unmarshalAliasing(data, m.ProtoReflect()); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
