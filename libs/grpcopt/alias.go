package grpcopt

import (
	"errors"
	"sync"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// aliased names the messages that carry record batches in bytes fields,
// megabytes at a time: a storage node's produce requests, and the fetch
// and replication answers its clients and followers receive. The codec
// decodes them with unmarshalAliasing into a buffer of their own, so those
// bytes are copied once off the connection instead of twice (protobuf-go
// copies every bytes field it decodes). Messages whose bytes come as many
// small fields (the gateway's produce requests, records of 1 KiB each;
// its fetch answers, thousands of them) are not here: the walk through
// protoreflect and the fresh, zeroed buffer the message must own cost
// more than protobuf-go's copies (10 records: 13.5 µs against 11 µs a
// request; 2,000 records: 2.3-2.7 ms against 1.4-1.5 ms an answer).
var aliased = map[protoreflect.FullName]bool{
	"skein.storage.v1.ProduceRequest":       true,
	"skein.storage.v1.ProduceStreamRequest": true,
	"skein.storage.v1.FetchResponse":        true,
	"skein.storage.v1.FollowResponse":       true,
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

// Pooled is a reply to pass to ClientConn.Invoke, for a caller that is done
// with the answer's bytes soon after it arrives: the answer is decoded into
// a buffer from the codec's pool and, for the messages that carry record
// batches, its bytes fields are slices of that buffer. They are valid only
// until Release, which gives the buffer back; a megabyte answer then costs
// no fresh allocation. Without Release the buffer is left to the GC.
type Pooled struct {
	Msg proto.Message
	buf *[]byte
}

// ProtoReflect makes p a message to interceptors that look at replies.
func (p *Pooled) ProtoReflect() protoreflect.Message { return p.Msg.ProtoReflect() }

// Release gives the buffer back: Msg's bytes must not be used after it.
func (p *Pooled) Release() {
	if p.buf != nil {
		pool.Put(p.buf)
		p.buf = nil
	}
}

func (p *Pooled) unmarshal(data mem.BufferSlice) error {
	p.Release()
	proto.Reset(p.Msg)
	b := pool.Get(data.Len())
	data.CopyTo(*b)
	if !aliased[p.Msg.ProtoReflect().Descriptor().FullName()] {
		defer pool.Put(b)
		return proto.Unmarshal(*b, p.Msg)
	}
	if err := unmarshalAliasing(*b, p.Msg.ProtoReflect()); err != nil {
		pool.Put(b)
		return err
	}
	p.buf = b
	return nil
}
