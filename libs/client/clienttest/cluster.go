package clienttest

import (
	"fmt"
	"net"
	"testing"

	"google.golang.org/grpc"

	controllerv1grpc "skein/gen/skein/controller/v1/controllerv1grpc"
	groupv1 "skein/gen/skein/group/v1"
	storagev1 "skein/gen/skein/storage/v1"
	"skein/libs/grpcopt"
	"skein/libs/telemetry"
)

// Cluster is a fake controller and storage nodes, each a gRPC server on its
// own 127.0.0.1 port, stopped when the test ends.
type Cluster struct {
	Controller     *Controller
	ControllerAddr string
	Storage        map[int32]*Storage
	StorageAddr    map[int32]string
}

// Start runs a controller and brokers 1..n, all registered and live.
func Start(t testing.TB, n int) *Cluster {
	t.Helper()
	c := &Cluster{Controller: NewController("test-cluster"), Storage: map[int32]*Storage{}, StorageAddr: map[int32]string{}}
	c.ControllerAddr = serve(t, func(s *grpc.Server) { controllerv1grpc.RegisterControllerServiceServer(s, c.Controller) })
	c.Controller.addr = c.ControllerAddr
	for id := int32(1); id <= int32(n); id++ {
		st := NewStorage(id, c.Controller)
		c.Storage[id] = st
		// With a storage node's flow-control windows: what a client may
		// send a node that stops reading.
		c.StorageAddr[id] = serve(t, func(s *grpc.Server) { storagev1.RegisterStorageServiceServer(s, st) }, grpcopt.ServerDataWindows()...)
		c.Controller.AddBroker(id, c.StorageAddr[id])
	}
	return c
}

// DeadAddr is a loopback address nothing listens on: a controller or
// broker that cannot be reached.
func DeadAddr(t testing.TB) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close()
	return addr
}

// ServeController serves ctrl on one more loopback port (a second
// "controller" of the same quorum) and answers its address and a function
// that stops that server, breaking its watch streams.
func ServeController(t testing.TB, ctrl controllerv1grpc.ControllerServiceServer) (addr string, stop func()) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer(telemetry.GRPCServerOptions(nil)...)
	controllerv1grpc.RegisterControllerServiceServer(s, ctrl)
	go s.Serve(lis)
	t.Cleanup(s.Stop)
	return lis.Addr().String(), s.Stop
}

// serve starts a gRPC server (with the same tracing as the real services)
// on a fresh loopback port.
func serve(t testing.TB, register func(*grpc.Server), opts ...grpc.ServerOption) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer(append(telemetry.GRPCServerOptions(nil), opts...)...)
	register(s)
	go s.Serve(lis)
	t.Cleanup(s.Stop)
	return lis.Addr().String()
}

// Leader is the storage node leading a partition, or nil.
func (c *Cluster) Leader(topic string, partition int32) *Storage {
	leader, _, ok := c.Controller.Leader(topic, partition)
	if !ok {
		return nil
	}
	return c.Storage[leader]
}

// String names the cluster's addresses, for failure messages.
func (c *Cluster) String() string {
	return fmt.Sprintf("controller %s, storage %v", c.ControllerAddr, c.StorageAddr)
}

// StartGroupCoordinator serves a fake group coordinator, registered with the
// controller as coordinator id, and answers it with its address.
func (c *Cluster) StartGroupCoordinator(t testing.TB, id int32) (*GroupCoordinator, string) {
	t.Helper()
	gc := NewGroupCoordinator(c.Controller)
	addr := serve(t, func(s *grpc.Server) { groupv1.RegisterGroupCoordinatorServiceServer(s, gc) })
	c.Controller.AddGroupCoordinator(id, addr)
	return gc, addr
}
