package grpcopt

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	storagev1 "skein/gen/skein/storage/v1"
)

// encodedFetch answers Fetch with the wire form of a FetchResponse whose
// records are as long as the request's max_bytes.
func encodedFetch(_ any, _ context.Context, req *storagev1.FetchRequest) (any, error) {
	want := answerFor(req)
	return NewEncoded(16, func(dst []byte) []byte {
		b, err := proto.MarshalOptions{}.MarshalAppend(dst, want)
		if err != nil {
			panic(err)
		}
		return b
	}), nil
}

func answerFor(req *storagev1.FetchRequest) *storagev1.FetchResponse {
	return &storagev1.FetchResponse{Partitions: []*storagev1.PartitionFetchResult{{
		Topic: "t", HighWatermark: 9, Records: bytes.Repeat([]byte{'r'}, int(req.GetMaxBytes()))}}}
}

// A handler's Encoded answer reaches the client as the message it encodes,
// small (below gRPC's pooling threshold) or large (from the pool, grown
// past the size asked for), through the server's interceptors; an Encoded
// is sent only once.
func TestEncodedAnswer(t *testing.T) {
	var seen []string
	record := grpc.UnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		resp, err := h(ctx, req)
		seen = append(seen, fmt.Sprintf("%s %T %T", info.FullMethod, req, resp))
		return resp, err
	})
	cc := serve(t, append(Server(nil), record), func(s *grpc.Server) {
		s.RegisterService(ReplaceUnary(&storagev1.StorageService_ServiceDesc, "Fetch", encodedFetch), storagev1.UnimplementedStorageServiceServer{})
	})

	for _, n := range []int32{0, 10, 5000, 3 << 20} {
		req := &storagev1.FetchRequest{MaxBytes: n}
		got := &storagev1.FetchResponse{}
		if err := cc.Invoke(context.Background(), storagev1.StorageService_Fetch_FullMethodName, req, got); err != nil {
			t.Fatalf("%d bytes: %v", n, err)
		}
		if !proto.Equal(got, answerFor(req)) {
			t.Fatalf("%d bytes: the answer differs from what was encoded", n)
		}
	}
	if want := "/skein.storage.v1.StorageService/Fetch *storagev1.FetchRequest *grpcopt.Encoded"; len(seen) != 4 || seen[0] != want {
		t.Fatalf("the interceptor saw %q, want 4 of %q", seen, want)
	}
	// The other methods keep their generated handlers.
	err := cc.Invoke(context.Background(), storagev1.StorageService_Produce_FullMethodName, &storagev1.ProduceRequest{}, &storagev1.ProduceResponse{})
	if status.Code(err) != codes.Unimplemented {
		t.Fatalf("Produce: %v, want the generated handler's Unimplemented", err)
	}

	e := NewEncoded(4, func(dst []byte) []byte { return append(dst, 0x08, 0x01) })
	if !bytes.Equal(e.Bytes(), []byte{0x08, 0x01}) {
		t.Fatalf("Bytes %x, want 0801", e.Bytes())
	}
	c := codec{}
	out, err := c.Marshal(e)
	if err != nil || !bytes.Equal(out.Materialize(), []byte{0x08, 0x01}) {
		t.Fatalf("first Marshal: %x, %v", out.Materialize(), err)
	}
	out.Free()
	if _, err := c.Marshal(e); err == nil {
		t.Fatal("a second Marshal of one Encoded succeeded")
	}
	defer func() {
		if recover() == nil {
			t.Fatal("ReplaceUnary of a method the service does not have did not panic")
		}
	}()
	ReplaceUnary(&storagev1.StorageService_ServiceDesc, "NoSuchMethod", encodedFetch)
}
