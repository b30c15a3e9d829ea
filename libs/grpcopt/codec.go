package grpcopt

import (
	"fmt"

	"google.golang.org/grpc/encoding"
	_ "google.golang.org/grpc/encoding/proto" // registered first, so the codec below replaces it
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/protoadapt"
)

// codec is gRPC's protobuf codec with one change: the buffers messages are
// marshalled into and received messages are gathered in come from pool, not
// gRPC's default pool, which zeroes a buffer's whole capacity on every Get
// and jumps from 32 KiB to 1 MiB tiers (a 256 KiB batch cleared a megabyte
// before being written over). The codec is process-wide: gRPC picks codecs
// by content subtype, not per connection.
type codec struct{}

func init() { encoding.RegisterCodecV2(codec{}) }

func (codec) Name() string { return "proto" }

func (codec) Marshal(v any) (mem.BufferSlice, error) {
	if e, ok := v.(*Encoded); ok {
		return e.marshal()
	}
	m := messageOf(v)
	if m == nil {
		return nil, fmt.Errorf("proto: cannot marshal %T, want proto.Message", v)
	}
	size := proto.Size(m)
	opts := proto.MarshalOptions{UseCachedSize: true} // safe: the size was just computed
	if mem.IsBelowBufferPoolingThreshold(size) {
		b, err := opts.Marshal(m)
		if err != nil {
			return nil, err
		}
		return mem.BufferSlice{mem.SliceBuffer(b)}, nil
	}
	buf := pool.Get(size)
	if _, err := opts.MarshalAppend((*buf)[:0], m); err != nil {
		pool.Put(buf)
		return nil, err
	}
	return mem.BufferSlice{mem.NewBuffer(buf, pool)}, nil
}

func (codec) Unmarshal(data mem.BufferSlice, v any) error {
	if p, ok := v.(*Pooled); ok {
		return p.unmarshal(data)
	}
	m := messageOf(v)
	if m == nil {
		return fmt.Errorf("proto: cannot unmarshal into %T, want proto.Message", v)
	}
	if aliased[m.ProtoReflect().Descriptor().FullName()] {
		proto.Reset(m)
		return unmarshalAliasing(data.Materialize(), m.ProtoReflect())
	}
	buf := data.MaterializeToBuffer(pool)
	defer buf.Free()
	// proto.Unmarshal copies bytes fields out of buf, so it may be reused.
	return proto.Unmarshal(buf.ReadOnlyData(), m)
}

func messageOf(v any) proto.Message {
	switch v := v.(type) {
	case protoadapt.MessageV2:
		return v
	case protoadapt.MessageV1:
		return protoadapt.MessageV2Of(v)
	}
	return nil
}
