package grpcopt

import (
	"bytes"
	"math/rand/v2"
	"strings"
	"testing"

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
