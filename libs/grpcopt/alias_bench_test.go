package grpcopt

import (
	"bytes"
	"testing"

	"google.golang.org/protobuf/proto"

	storagev1 "skein/gen/skein/storage/v1"
	skeinv1 "skein/gen/skein/v1"
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

// produceStreamRequest is a client's request to the gateway: n records of
// size bytes each, as skein-bench sends them.
func produceStreamRequest(n, size int) []byte {
	req := &skeinv1.ProduceStreamRequest{CorrelationId: 7, Topic: "bench-async"}
	for i := range n {
		req.Records = append(req.Records, &skeinv1.ProduceRecord{ValueBytes: bytes.Repeat([]byte{byte(i)}, size)})
	}
	b, err := proto.Marshal(req)
	if err != nil {
		panic(err)
	}
	return b
}

// Decoding a gateway produce request of 10 records of 1 KiB (the
// benchmark's one-stream workload) with protobuf-go and with
// unmarshalAliasing.
func BenchmarkDecodeProduceStreamRequest(b *testing.B) {
	data := produceStreamRequest(10, 1024)
	b.Run("proto", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		b.ReportAllocs()
		for b.Loop() {
			var m skeinv1.ProduceStreamRequest
			if err := proto.Unmarshal(data, &m); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("aliasing", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		b.ReportAllocs()
		for b.Loop() {
			var m skeinv1.ProduceStreamRequest
			if err := unmarshalAliasing(data, m.ProtoReflect()); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// gatewayFetchAnswer is the gateway's answer to a Fetch: n records of
// size bytes each, values as bytes.
func gatewayFetchAnswer(n, size int) []byte {
	resp := &skeinv1.FetchResponse{NextOffset: int64(n), HighWatermark: int64(n)}
	for i := range n {
		resp.Records = append(resp.Records, &skeinv1.ConsumedRecord{Topic: "bench-async", Partition: 1, Offset: int64(i),
			TimestampMs: 1764662400000, ValueBytes: bytes.Repeat([]byte{byte(i)}, size), LeaderEpoch: 3})
	}
	b, err := proto.Marshal(resp)
	if err != nil {
		panic(err)
	}
	return b
}

// Decoding a gateway fetch answer of 2,000 records of 1 KiB (the
// benchmark's consume workload) with protobuf-go and with
// unmarshalAliasing.
func BenchmarkDecodeGatewayFetchAnswer(b *testing.B) {
	data := gatewayFetchAnswer(2000, 1024)
	b.Run("proto", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		b.ReportAllocs()
		for b.Loop() {
			var m skeinv1.FetchResponse
			if err := proto.Unmarshal(data, &m); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("aliasing", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		b.ReportAllocs()
		for b.Loop() {
			var m skeinv1.FetchResponse
			if err := unmarshalAliasing(data, m.ProtoReflect()); err != nil {
				b.Fatal(err)
			}
		}
	})
}
