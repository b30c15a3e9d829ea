package grpcopt

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	storagev1 "skein/gen/skein/storage/v1"
)

var _ = storagev1.File_skein_storage_v1_storage_proto // registers the aliased messages

func aliasedTypes(t *testing.T) []protoreflect.MessageType {
	t.Helper()
	var out []protoreflect.MessageType
	for name := range aliased {
		mt, err := protoregistry.GlobalTypes.FindMessageByName(name)
		if err != nil {
			t.Fatalf("%s is decoded aliasing its bytes, but is not a known message: %v", name, err)
		}
		out = append(out, mt)
	}
	return out
}

// fill sets every field of m, recursively, to random values: whatever the
// messages gain later is covered too.
func fill(rng *rand.Rand, m protoreflect.Message, depth int) {
	fds := m.Descriptor().Fields()
	for i := 0; i < fds.Len(); i++ {
		fd := fds.Get(i)
		if rng.IntN(5) == 0 {
			continue
		}
		switch {
		case fd.IsMap():
			mp := m.Mutable(fd).Map()
			for range rng.IntN(3) {
				mp.Set(scalar(rng, fd.MapKey()).MapKey(), value(rng, mp.NewValue(), fd.MapValue(), depth))
			}
		case fd.IsList():
			l := m.Mutable(fd).List()
			for range rng.IntN(4) {
				l.Append(value(rng, l.NewElement(), fd, depth))
			}
		case fd.Kind() == protoreflect.MessageKind:
			if depth < 4 {
				fill(rng, m.Mutable(fd).Message(), depth+1)
			}
		default:
			m.Set(fd, scalar(rng, fd))
		}
	}
}

func value(rng *rand.Rand, v protoreflect.Value, fd protoreflect.FieldDescriptor, depth int) protoreflect.Value {
	if fd.Kind() == protoreflect.MessageKind {
		if depth < 4 {
			fill(rng, v.Message(), depth+1)
		}
		return v
	}
	return scalar(rng, fd)
}

func scalar(rng *rand.Rand, fd protoreflect.FieldDescriptor) protoreflect.Value {
	switch fd.Kind() {
	case protoreflect.BoolKind:
		return protoreflect.ValueOfBool(rng.IntN(2) == 1)
	case protoreflect.EnumKind:
		return protoreflect.ValueOfEnum(protoreflect.EnumNumber(rng.IntN(40) - 2))
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		return protoreflect.ValueOfInt32(int32(rng.Uint32()) >> rng.IntN(32))
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return protoreflect.ValueOfInt64(int64(rng.Uint64()) >> rng.IntN(64))
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return protoreflect.ValueOfUint32(rng.Uint32() >> rng.IntN(32))
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return protoreflect.ValueOfUint64(rng.Uint64() >> rng.IntN(64))
	case protoreflect.FloatKind:
		return protoreflect.ValueOfFloat32(rng.Float32())
	case protoreflect.DoubleKind:
		return protoreflect.ValueOfFloat64(rng.Float64())
	case protoreflect.StringKind:
		return protoreflect.ValueOfString(strings.Repeat("tøpic-", rng.IntN(4)))
	case protoreflect.BytesKind:
		b := make([]byte, rng.IntN(3)*rng.IntN(3000))
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return protoreflect.ValueOfBytes(b)
	}
	panic("unhandled kind " + fd.Kind().String())
}

// decodeBoth decodes b with proto.Unmarshal and with unmarshalAliasing
// (each from its own copy) and fails unless they agree.
func decodeBoth(t *testing.T, mt protoreflect.MessageType, b []byte, what string) (proto.Message, []byte) {
	t.Helper()
	want := mt.New().Interface()
	werr := proto.Unmarshal(bytes.Clone(b), want)
	got := mt.New()
	own := bytes.Clone(b)
	gerr := unmarshalAliasing(own, got)
	if (werr == nil) != (gerr == nil) {
		t.Fatalf("%s %s: proto.Unmarshal says %v, unmarshalAliasing %v", mt.Descriptor().FullName(), what, werr, gerr)
	}
	if werr == nil && !proto.Equal(want, got.Interface()) {
		t.Fatalf("%s %s: decoded differently:\nproto.Unmarshal   %v\nunmarshalAliasing %v", mt.Descriptor().FullName(), what, want, got.Interface())
	}
	return got.Interface(), own
}

// unmarshalAliasing decodes exactly what proto.Unmarshal decodes: random
// messages, two encodings concatenated (a merge), unknown fields, fields
// of the wrong wire type, and truncated or damaged encodings (an error for
// both, or the same message).
func TestUnmarshalAliasingAgreesWithProto(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	for _, mt := range aliasedTypes(t) {
		for i := range 60 {
			m := mt.New()
			fill(rng, m, 0)
			b, err := proto.Marshal(m.Interface())
			if err != nil {
				t.Fatal(err)
			}
			decodeBoth(t, mt, b, "as marshalled")

			m2 := mt.New()
			fill(rng, m2, 0)
			b2, _ := proto.Marshal(m2.Interface())
			decodeBoth(t, mt, append(bytes.Clone(b), b2...), "merged with another")

			var extra []byte
			extra = protowire.AppendTag(extra, 999, protowire.VarintType)
			extra = protowire.AppendVarint(extra, 12345)
			extra = protowire.AppendTag(extra, 1, protowire.Fixed64Type) // field 1 with a wire type it does not have
			extra = protowire.AppendFixed64(extra, 42)
			extra = protowire.AppendTag(extra, 1000, protowire.BytesType)
			extra = protowire.AppendBytes(extra, []byte("unknown"))
			decodeBoth(t, mt, append(bytes.Clone(b), extra...), "with unknown fields")

			if len(b) > 0 {
				cut := rng.IntN(len(b))
				decodeBoth(t, mt, b[:cut], "truncated")
				d := bytes.Clone(b)
				for range 1 + rng.IntN(4) {
					d[rng.IntN(len(d))] = byte(rng.Uint32())
				}
				decodeBoth(t, mt, d, "damaged")
			}
			_ = i
		}
	}
}

// The records a storage message carries are the buffer it was decoded
// from, not a copy of it.
func TestRecordsAliasTheBuffer(t *testing.T) {
	records := bytes.Repeat([]byte("batch"), 1000)
	b, err := proto.Marshal(&storagev1.FetchResponse{Partitions: []*storagev1.PartitionFetchResult{{Topic: "t", Partition: 2, HighWatermark: 9, Records: records}}})
	if err != nil {
		t.Fatal(err)
	}
	got, own := decodeBoth(t, (&storagev1.FetchResponse{}).ProtoReflect().Type(), b, "fetch answer")
	rec := got.(*storagev1.FetchResponse).GetPartitions()[0].GetRecords()
	if !bytes.Equal(rec, records) {
		t.Fatal("records decoded wrong")
	}
	i := bytes.Index(own, records)
	own[i] = 'X'
	if rec[0] != 'X' {
		t.Fatal("the records are a copy, not the decoded buffer")
	}
	if cap(rec) != len(rec) {
		t.Fatalf("the records' capacity %d runs past their %d bytes into the rest of the buffer", cap(rec), len(rec))
	}
}

type fetchServer struct {
	storagev1.UnimplementedStorageServiceServer
	records []byte
}

func (s fetchServer) Fetch(_ context.Context, req *storagev1.FetchRequest) (*storagev1.FetchResponse, error) {
	return &storagev1.FetchResponse{Partitions: []*storagev1.PartitionFetchResult{{
		Topic: req.GetPartitions()[0].GetTopic(), HighWatermark: 7, Records: s.records}}}, nil
}

// A Pooled reply holds what the server sent, its records are slices of the
// pooled buffer until Release, and a reply that is not one of the aliased
// messages keeps no buffer.
func TestPooledReply(t *testing.T) {
	records := bytes.Repeat([]byte("0123456789abcdef"), 40_000)
	hs := health.NewServer()
	cc := serve(t, Server(nil), func(s *grpc.Server) {
		storagev1.RegisterStorageServiceServer(s, fetchServer{records: records})
		healthpb.RegisterHealthServer(s, hs)
	})

	for i := range 3 {
		resp := &storagev1.FetchResponse{}
		reply := &Pooled{Msg: resp}
		err := cc.Invoke(context.Background(), storagev1.StorageService_Fetch_FullMethodName,
			&storagev1.FetchRequest{Partitions: []*storagev1.PartitionFetch{{Topic: fmt.Sprint("t", i)}}}, reply)
		if err != nil {
			t.Fatal(err)
		}
		p := resp.GetPartitions()[0]
		if p.GetTopic() != fmt.Sprint("t", i) || p.GetHighWatermark() != 7 || !bytes.Equal(p.GetRecords(), records) {
			t.Fatalf("fetch %d: topic %q hw %d, %d bytes of records", i, p.GetTopic(), p.GetHighWatermark(), len(p.GetRecords()))
		}
		if reply.buf == nil || &(*reply.buf)[len(*reply.buf)-len(p.GetRecords())] != &p.GetRecords()[0] {
			t.Fatal("the records are not a slice of the pooled buffer")
		}
		reply.Release()
		if reply.buf != nil {
			t.Fatal("Release kept the buffer")
		}
	}

	hs.SetServingStatus("svc", healthpb.HealthCheckResponse_SERVING)
	hresp := &healthpb.HealthCheckResponse{}
	reply := &Pooled{Msg: hresp}
	if err := cc.Invoke(context.Background(), "/grpc.health.v1.Health/Check", &healthpb.HealthCheckRequest{Service: "svc"}, reply); err != nil {
		t.Fatal(err)
	}
	if hresp.GetStatus() != healthpb.HealthCheckResponse_SERVING || reply.buf != nil {
		t.Fatalf("health answer %v, buffer kept %v", hresp, reply.buf != nil)
	}
}

// serve starts a gRPC server with opts on loopback, its services
// registered by register, and answers a client of it with the package's
// dial options and dial; both stop with the test.
func serve(t *testing.T, opts []grpc.ServerOption, register func(*grpc.Server), dial ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer(opts...)
	register(s)
	go s.Serve(lis)
	t.Cleanup(s.Stop)
	cc, err := grpc.NewClient(lis.Addr().String(), append(append(Dial(), grpc.WithTransportCredentials(insecure.NewCredentials())), dial...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return cc
}
