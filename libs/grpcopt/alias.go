package grpcopt

import (
	"errors"
	"sync"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// aliased names the messages that carry record batches in bytes fields,
// megabytes at a time: a storage node's produce requests, and the fetch
// and replication answers its clients and followers receive. The codec
// decodes them with unmarshalAliasing into a buffer of their own, so those
// bytes are copied once off the connection instead of twice (protobuf-go
// copies every bytes field it decodes).
var aliased = map[protoreflect.FullName]bool{
	"skein.storage.v1.ProduceRequest":       true,
	"skein.storage.v1.ProduceStreamRequest": true,
	"skein.storage.v1.FetchResponse":        true,
	"skein.storage.v1.ReplicateResponse":    true,
}

var errDecode = errors.New("proto: cannot parse invalid wire-format data")

// unmarshalAliasing decodes b into m as proto.Unmarshal does, except that
// the value of every bytes field outside a oneof is a sub-slice of b
// rather than a copy. b must then never be changed or reused by anyone
// else: the message owns it.
//
// Only bytes and message fields are walked here. Every other field, a
// field whose wire type does not match its declaration, and unknown fields
// are handed to protobuf-go together, in their original order, with merge
// semantics, so that their decoding and validation (UTF-8 of strings,
// packed and unpacked repeated scalars, maps, unknown fields) are
// protobuf-go's own.
func unmarshalAliasing(b []byte, m protoreflect.Message) error {
	var rest []byte // the fields left to protobuf-go
	fields := fieldsOf(m.Descriptor())
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return errDecode
		}
		fd := fields[num]
		if fd == nil || typ != protowire.BytesType {
			vn := protowire.ConsumeFieldValue(num, typ, b[n:])
			if vn < 0 {
				return errDecode
			}
			rest = append(rest, b[:n+vn]...)
			b = b[n+vn:]
			continue
		}
		v, vn := protowire.ConsumeBytes(b[n:])
		if vn < 0 {
			return errDecode
		}
		b = b[n+vn:]
		switch {
		case fd.Kind() == protoreflect.BytesKind && fd.IsList():
			m.Mutable(fd).List().Append(protoreflect.ValueOfBytes(v[:len(v):len(v)]))
		case fd.Kind() == protoreflect.BytesKind:
			m.Set(fd, protoreflect.ValueOfBytes(v[:len(v):len(v)]))
		case fd.IsList():
			list := m.Mutable(fd).List()
			e := list.NewElement()
			if err := unmarshalAliasing(v, e.Message()); err != nil {
				return err
			}
			list.Append(e)
		default:
			if err := unmarshalAliasing(v, m.Mutable(fd).Message()); err != nil {
				return err
			}
		}
	}
	if len(rest) == 0 {
		return nil
	}
	return proto.UnmarshalOptions{Merge: true}.Unmarshal(rest, m.Interface())
}

// fieldsOf answers the fields of a message that unmarshalAliasing walks
// itself: bytes fields and message fields (singular or repeated), none of
// them in a oneof (whose members replace each other, so their order
// against the fields left to protobuf-go would matter) and no map.
func fieldsOf(md protoreflect.MessageDescriptor) map[protoreflect.FieldNumber]protoreflect.FieldDescriptor {
	if f, ok := walked.Load(md.FullName()); ok {
		return f.(map[protoreflect.FieldNumber]protoreflect.FieldDescriptor)
	}
	out := map[protoreflect.FieldNumber]protoreflect.FieldDescriptor{}
	fds := md.Fields()
	for i := 0; i < fds.Len(); i++ {
		fd := fds.Get(i)
		if fd.ContainingOneof() != nil || fd.IsMap() || fd.IsExtension() {
			continue
		}
		switch fd.Kind() {
		case protoreflect.BytesKind, protoreflect.MessageKind:
			out[fd.Number()] = fd
		}
	}
	walked.Store(md.FullName(), out)
	return out
}

// walked caches fieldsOf by message name.
var walked sync.Map
