package grpcopt

import (
	"context"
	"errors"
	"slices"

	"google.golang.org/grpc"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
)

// Encoded is an answer already in its wire form, for a server whose answer
// is cheaper to write as bytes than to build as a message (a fetch of
// thousands of records, each a message of its own otherwise). A handler
// returns it in place of the message; the codec sends its bytes as they
// are, from a buffer of the codec's pool that goes back to the pool once
// gRPC has written them. It is sent once: a second Marshal is an error.
type Encoded struct {
	buf *[]byte
}

// NewEncoded answers the wire form fill appends to an empty slice that
// holds at least n bytes without growing; fill may append more (the slice
// then grows as any other).
func NewEncoded(n int, fill func(dst []byte) []byte) *Encoded {
	b := pool.Get(max(n, 0))
	*b = fill((*b)[:0])
	return &Encoded{buf: b}
}

// Bytes answers the wire form, until the codec has sent it.
func (e *Encoded) Bytes() []byte {
	if e.buf == nil {
		return nil
	}
	return *e.buf
}

var errEncodedSent = errors.New("grpcopt: an Encoded answer is sent only once")

func (e *Encoded) marshal() (mem.BufferSlice, error) {
	b := e.buf
	if b == nil {
		return nil, errEncodedSent
	}
	e.buf = nil
	return mem.BufferSlice{mem.NewBuffer(b, pool)}, nil
}

// ReplaceUnary answers a copy of desc in which the unary method is served
// by call, through the server's interceptors as a generated handler would
// be, so that call may answer an *Encoded in place of the method's message.
// A generated handler cannot: its answer is marshalled only after it
// returns, too late for one built from buffers the handler gives back.
func ReplaceUnary[Req any](desc *grpc.ServiceDesc, method string, call func(srv any, ctx context.Context, req *Req) (any, error)) *grpc.ServiceDesc {
	d := *desc
	d.Methods = slices.Clone(d.Methods)
	full := "/" + d.ServiceName + "/" + method
	for i := range d.Methods {
		if d.Methods[i].MethodName != method {
			continue
		}
		d.Methods[i].Handler = func(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
			in := new(Req)
			if err := dec(in); err != nil {
				return nil, err
			}
			if interceptor == nil {
				return call(srv, ctx, in)
			}
			info := &grpc.UnaryServerInfo{Server: srv, FullMethod: full}
			return interceptor(ctx, in, info, func(ctx context.Context, req any) (any, error) {
				return call(srv, ctx, req.(*Req))
			})
		}
		return &d
	}
	panic("grpcopt: " + d.ServiceName + " has no unary method " + method)
}

// MarshalNow answers m's wire form as an Encoded, marshalled at once: for a
// handler whose message holds bytes it gives back before it returns.
func MarshalNow(m proto.Message) (*Encoded, error) {
	var err error
	e := NewEncoded(proto.Size(m), func(dst []byte) []byte {
		var out []byte
		out, err = proto.MarshalOptions{UseCachedSize: true}.MarshalAppend(dst, m)
		return out
	})
	if err != nil {
		pool.Put(e.buf)
		return nil, err
	}
	return e, nil
}

// GetBuffer answers a buffer of length n from the codec's pool (what it
// holds is whatever was there); PutBuffer gives it back once nothing refers
// to it any more.
func GetBuffer(n int) *[]byte { return pool.Get(n) }

// PutBuffer: see GetBuffer.
func PutBuffer(b *[]byte) { pool.Put(b) }
