package k6

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/dop251/goja"
	_ "google.golang.org/genproto/googleapis/rpc/errdetails" // status details render by name
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"
)

// grpcClient is one grpc.Client of a VU. load() only records which .proto
// files the script names (and that they exist); connect() asks the server's
// reflection service for its descriptors, and a method is callable when its
// file is one the script loaded, as in k6, where a method the script did not
// load is not found.
type grpcClient struct {
	v      *vu
	loaded map[string]bool
	addr   string
	conn   *grpc.ClientConn
	files  *protoregistry.Files
	types  *dynamicpb.Types
}

// grpcModule: the Status* constants, Client and Stream.
func grpcModule(v *vu) *goja.Object {
	m := v.rt.NewObject()
	for c := codes.OK; c <= codes.Unauthenticated; c++ {
		_ = m.Set("Status"+c.String(), int(c))
	}
	clients := map[*goja.Object]*grpcClient{}
	_ = m.Set("Client", func(call goja.ConstructorCall) *goja.Object {
		c := &grpcClient{v: v, loaded: map[string]bool{}}
		clients[call.This] = c
		_ = call.This.Set("load", c.load)
		_ = call.This.Set("connect", c.connect)
		_ = call.This.Set("invoke", c.invoke)
		_ = call.This.Set("close", c.close)
		return nil
	})
	_ = m.Set("Stream", func(call goja.ConstructorCall) *goja.Object {
		c := clients[call.Argument(0).ToObject(v.rt)]
		if c == nil {
			v.throw("new grpc.Stream needs a grpc.Client")
		}
		c.stream(call.This, call.Argument(1).String(), call.Argument(2))
		return nil
	})
	return withDefault(m)
}

func (c *grpcClient) load(call goja.FunctionCall) goja.Value {
	v := c.v
	v.initOnly("client.load()")
	var paths []string
	if a := call.Argument(0); !goja.IsUndefined(a) && !goja.IsNull(a) {
		if err := v.rt.ExportTo(a, &paths); err != nil {
			v.throw("load: import paths: %v", err)
		}
	}
	if len(paths) == 0 {
		paths = []string{"."}
	}
	for _, f := range call.Arguments[1:] {
		name := f.String()
		found := false
		for _, p := range paths {
			if !filepath.IsAbs(p) {
				p = filepath.Join(v.dir, p)
			}
			if _, err := os.Stat(filepath.Join(p, name)); err == nil {
				found = true
				break
			}
		}
		if !found {
			v.throw("load: %s not found under %v", name, paths)
		}
		c.loaded[name] = true
	}
	return v.rt.NewArray()
}

func (c *grpcClient) connect(call goja.FunctionCall) goja.Value {
	v := c.v
	v.notInit("client.connect()")
	addr := call.Argument(0).String()
	plaintext, timeout := false, 60*time.Second
	if p := call.Argument(1); !goja.IsUndefined(p) && !goja.IsNull(p) {
		o := p.ToObject(v.rt)
		if x := o.Get("plaintext"); x != nil {
			plaintext = x.ToBoolean()
		}
		if x := o.Get("timeout"); x != nil && !goja.IsUndefined(x) {
			timeout = k6Duration(v, x)
		}
	}
	if !plaintext {
		v.throw("connect %s: only {plaintext: true} is shimmed", addr)
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		v.throw("connect %s: %v", addr, err)
	}
	ctx, cancel := context.WithTimeout(v.ctx, timeout)
	defer cancel()
	conn.Connect()
	for s := conn.GetState(); s != connectivity.Ready; s = conn.GetState() {
		if !conn.WaitForStateChange(ctx, s) {
			_ = conn.Close()
			v.throw("connect %s: %v", addr, ctx.Err())
		}
	}
	files, err := reflectFiles(ctx, conn)
	if err != nil {
		_ = conn.Close()
		v.throw("connect %s: server reflection: %v", addr, err)
	}
	for name := range c.loaded {
		if _, err := files.FindFileByPath(name); err != nil {
			_ = conn.Close()
			v.throw("connect %s: the script loaded %s, which the server does not serve", addr, name)
		}
	}
	c.addr, c.conn, c.files, c.types = addr, conn, files, dynamicpb.NewTypes(files)
	v.closers = append(v.closers, func() { c.closeConn() })
	return v.rt.ToValue(true)
}

func (c *grpcClient) closeConn() {
	if c.conn != nil {
		_ = c.conn.Close()
		c.conn = nil
	}
}

func (c *grpcClient) close(goja.FunctionCall) goja.Value {
	c.closeConn()
	return goja.Undefined()
}

// method resolves "package.Service/Method" among the reflected descriptors.
func (c *grpcClient) method(name string) (string, protoreflect.MethodDescriptor) {
	v := c.v
	if c.conn == nil {
		v.throw("%s: the client is not connected", name)
	}
	name = strings.TrimPrefix(name, "/")
	i := strings.LastIndex(name, "/")
	if i < 0 {
		v.throw("method %q is not package.Service/Method", name)
	}
	d, err := c.files.FindDescriptorByName(protoreflect.FullName(name[:i]))
	sd, ok := d.(protoreflect.ServiceDescriptor)
	if err != nil || !ok {
		v.throw("method %q not found: no service %s at %s", name, name[:i], c.addr)
	}
	md := sd.Methods().ByName(protoreflect.Name(name[i+1:]))
	if md == nil {
		v.throw("method %q not found in %s", name, sd.FullName())
	}
	if len(c.loaded) > 0 && !c.loaded[sd.ParentFile().Path()] {
		v.throw("method %q not found: %s is in %s, which the script did not load()", name, sd.FullName(), sd.ParentFile().Path())
	}
	return "/" + name, md
}

// request builds md's input from a JavaScript object, strictly (an unknown
// field is an error, as in k6).
func (c *grpcClient) request(md protoreflect.MethodDescriptor, val goja.Value) proto.Message {
	in := dynamicpb.NewMessage(md.Input())
	js := "{}"
	if !goja.IsUndefined(val) && !goja.IsNull(val) {
		s, err := c.v.stringify(val)
		if err != nil {
			panic(err)
		}
		js = s
	}
	if err := (protojson.UnmarshalOptions{Resolver: c.types}).Unmarshal([]byte(js), in); err != nil {
		c.v.throw("%s request: %v", md.FullName(), err)
	}
	return in
}

// marshal renders a message as k6 does: protojson with every field.
func (c *grpcClient) marshal(m proto.Message) string {
	b, err := (protojson.MarshalOptions{EmitUnpopulated: true, Resolver: c.types}).Marshal(m)
	if err != nil {
		return fmt.Sprintf(`{"error": %q}`, err.Error())
	}
	return string(b)
}

// callContext applies params.metadata and params.timeout.
func (c *grpcClient) callContext(params goja.Value) (context.Context, context.CancelFunc) {
	v := c.v
	timeout := 60 * time.Second
	md := metadata.MD{}
	if !goja.IsUndefined(params) && !goja.IsNull(params) {
		o := params.ToObject(v.rt)
		if x := o.Get("metadata"); x != nil && !goja.IsUndefined(x) && !goja.IsNull(x) {
			mo := x.ToObject(v.rt)
			for _, k := range mo.Keys() {
				md.Append(k, mo.Get(k).String())
			}
		}
		if x := o.Get("timeout"); x != nil && !goja.IsUndefined(x) {
			timeout = k6Duration(v, x)
		}
	}
	ctx, cancel := context.WithTimeout(v.ctx, timeout)
	return metadata.NewOutgoingContext(ctx, md), cancel
}

func (c *grpcClient) invoke(call goja.FunctionCall) goja.Value {
	v := c.v
	v.notInit("client.invoke()")
	full, md := c.method(call.Argument(0).String())
	if md.IsStreamingClient() || md.IsStreamingServer() {
		v.throw("%s streams: use grpc.Stream", full)
	}
	in := c.request(md, call.Argument(1))
	ctx, cancel := c.callContext(call.Argument(2))
	defer cancel()
	out := dynamicpb.NewMessage(md.Output())
	var header, trailer metadata.MD
	err := c.conn.Invoke(ctx, full, in, out, grpc.Header(&header), grpc.Trailer(&trailer))
	resp := v.rt.NewObject()
	_ = resp.Set("headers", mdObject(v.rt, header))
	_ = resp.Set("trailers", mdObject(v.rt, trailer))
	if err != nil {
		st := status.Convert(err)
		_ = resp.Set("status", int(st.Code()))
		_ = resp.Set("message", goja.Null())
		_ = resp.Set("error", c.statusObject(st))
		return resp
	}
	msg, perr := v.parse(c.marshal(out))
	if perr != nil {
		panic(perr)
	}
	_ = resp.Set("status", int(codes.OK))
	_ = resp.Set("message", msg)
	_ = resp.Set("error", goja.Null())
	return resp
}

// statusObject is k6's error value: {code, message, details}.
func (c *grpcClient) statusObject(st *status.Status) goja.Value {
	v := c.v
	o := v.rt.NewObject()
	_ = o.Set("code", int(st.Code()))
	_ = o.Set("message", st.Message())
	details := v.rt.NewArray()
	for i, a := range st.Proto().GetDetails() {
		b, err := protojson.Marshal(a)
		var d goja.Value
		if err == nil {
			d, err = v.parse(string(b))
		}
		if err != nil {
			d = v.rt.ToValue(map[string]any{"@type": a.GetTypeUrl()})
		}
		_ = details.Set(fmt.Sprint(i), d)
	}
	_ = o.Set("details", details)
	return o
}

func mdObject(rt *goja.Runtime, md metadata.MD) goja.Value {
	o := rt.NewObject()
	for k, vals := range md {
		_ = o.Set(k, vals)
	}
	return o
}

// stream opens a streaming call for a new grpc.Stream: write() sends,
// end() half-closes, and each answer, the end or the error is delivered to
// the on() handlers on the VU's event loop, after the iteration's code has
// returned, as k6 does.
func (c *grpcClient) stream(obj *goja.Object, method string, params goja.Value) {
	v := c.v
	v.notInit("new grpc.Stream()")
	full, md := c.method(method)
	if !md.IsStreamingClient() && !md.IsStreamingServer() {
		v.throw("%s is unary: use client.invoke", full)
	}
	ctx, cancel := c.callContext(params)
	cs, err := c.conn.NewStream(ctx, &grpc.StreamDesc{
		StreamName: string(md.Name()), ServerStreams: md.IsStreamingServer(), ClientStreams: md.IsStreamingClient(),
	}, full)
	if err != nil {
		cancel()
		v.throw("%s: %v", full, err)
	}
	v.loop.pending++
	handlers := map[string][]goja.Callable{}
	emit := func(event string, arg goja.Value) error {
		hs := handlers[event]
		if event == "error" && len(hs) == 0 {
			return fmt.Errorf("%s: unhandled stream error: %s", full, arg)
		}
		for _, h := range hs {
			if _, err := h(goja.Undefined(), arg); err != nil {
				return err
			}
		}
		return nil
	}
	_ = obj.Set("on", func(event string, fn goja.Value) goja.Value {
		h, ok := goja.AssertFunction(fn)
		if !ok {
			v.throw("stream.on(%q): not a function", event)
		}
		handlers[event] = append(handlers[event], h)
		return obj
	})
	_ = obj.Set("write", func(msg goja.Value) {
		// A send after the server ended the stream answers io.EOF; the
		// status then comes from the receiving side.
		if err := cs.SendMsg(c.request(md, msg)); err != nil && !errors.Is(err, io.EOF) {
			v.throw("%s write: %v", full, err)
		}
	})
	_ = obj.Set("end", func() {
		_ = cs.CloseSend()
	})
	go func() {
		for {
			out := dynamicpb.NewMessage(md.Output())
			err := cs.RecvMsg(out)
			if errors.Is(err, io.EOF) {
				v.loop.post(func() error {
					v.loop.pending--
					cancel()
					return emit("end", goja.Undefined())
				})
				return
			}
			if err != nil {
				st := status.Convert(err)
				v.loop.post(func() error {
					v.loop.pending--
					cancel()
					return emit("error", c.statusObject(st))
				})
				return
			}
			raw := c.marshal(out)
			v.loop.post(func() error {
				val, err := v.parse(raw)
				if err != nil {
					return err
				}
				return emit("data", val)
			})
		}
	}()
}

// reflectFiles asks the server's reflection service for the files of every
// service it lists and their dependencies.
func reflectFiles(ctx context.Context, conn *grpc.ClientConn) (*protoregistry.Files, error) {
	stream, err := reflectionpb.NewServerReflectionClient(conn).ServerReflectionInfo(ctx)
	if err != nil {
		return nil, err
	}
	defer func() { _ = stream.CloseSend() }()
	ask := func(req *reflectionpb.ServerReflectionRequest) (*reflectionpb.ServerReflectionResponse, error) {
		if err := stream.Send(req); err != nil {
			return nil, err
		}
		resp, err := stream.Recv()
		if err != nil {
			return nil, err
		}
		if e := resp.GetErrorResponse(); e != nil {
			return nil, fmt.Errorf("%s (code %d)", e.GetErrorMessage(), e.GetErrorCode())
		}
		return resp, nil
	}
	protos := map[string]*descriptorpb.FileDescriptorProto{}
	add := func(resp *reflectionpb.ServerReflectionResponse) error {
		for _, b := range resp.GetFileDescriptorResponse().GetFileDescriptorProto() {
			fd := &descriptorpb.FileDescriptorProto{}
			if err := proto.Unmarshal(b, fd); err != nil {
				return err
			}
			protos[fd.GetName()] = fd
		}
		return nil
	}
	list, err := ask(&reflectionpb.ServerReflectionRequest{
		MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{ListServices: "*"},
	})
	if err != nil {
		return nil, err
	}
	for _, s := range list.GetListServicesResponse().GetService() {
		resp, err := ask(&reflectionpb.ServerReflectionRequest{
			MessageRequest: &reflectionpb.ServerReflectionRequest_FileContainingSymbol{FileContainingSymbol: s.GetName()},
		})
		if err == nil {
			err = add(resp)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", s.GetName(), err)
		}
	}
	for {
		var missing []string
		for _, fd := range protos {
			for _, dep := range fd.GetDependency() {
				if protos[dep] == nil {
					missing = append(missing, dep)
				}
			}
		}
		if len(missing) == 0 {
			break
		}
		for _, dep := range missing {
			if protos[dep] != nil {
				continue
			}
			resp, err := ask(&reflectionpb.ServerReflectionRequest{
				MessageRequest: &reflectionpb.ServerReflectionRequest_FileByFilename{FileByFilename: dep},
			})
			if err == nil {
				err = add(resp)
			}
			if err != nil {
				return nil, fmt.Errorf("%s: %w", dep, err)
			}
			if protos[dep] == nil {
				return nil, fmt.Errorf("the server did not send %s", dep)
			}
		}
	}
	set := &descriptorpb.FileDescriptorSet{}
	for _, fd := range protos {
		set.File = append(set.File, fd)
	}
	return protodesc.NewFiles(set)
}
