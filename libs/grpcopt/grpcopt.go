// Package grpcopt holds the options every Skein gRPC connection and server
// shares, so a peer that was cut off or paused is noticed and reconnected to
// on the same schedule everywhere:
//
//   - reconnect backoff from 100 ms up to 2 s (gRPC's default grows to
//     120 s, so a node that was cut off for a minute would wait up to two
//     more minutes after the heal before dialling again);
//   - a connect attempt bounded at 2 s (default 20 s);
//   - keepalive pings on idle and busy connections every 10 s (the least
//     grpc-go allows a client) with a 2 s answer timeout, so a connection to
//     a paused or unreachable peer is closed in about 12 s even when nothing
//     else notices; metadata changes (a new leader) act sooner;
//   - servers that accept those pings, and ping their clients in turn;
//   - one process-wide buffer pool with a tier for every power of two from
//     256 B to 8 MiB that does not zero the buffers it reuses (see
//     bufferPool), used by the transport and, through the protobuf codec
//     this package registers for the whole process, by marshalling.
//
// Tracing comes with them (telemetry's stats handlers).
package grpcopt

import (
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/experimental"
	"google.golang.org/grpc/keepalive"

	"skein/libs/telemetry"
	"skein/libs/tlsconf"
)

// The schedule; see the package comment.
const (
	ReconnectBaseDelay = 100 * time.Millisecond
	ReconnectMaxDelay  = 2 * time.Second
	ConnectTimeout     = 2 * time.Second
	KeepaliveTime      = 10 * time.Second
	KeepaliveTimeout   = 2 * time.Second
)

// Flow-control windows of the connections that carry record batches
// (produce requests, fetch and replication answers, megabytes at a time).
// gRPC's default starts a stream at 64 KiB and grows it from round-trip
// estimates, which on a fast link means a WINDOW_UPDATE frame, and a wake
// of the sender, every few dozen KiB of a fetch answer.
const (
	StreamWindow = 8 << 20
	ConnWindow   = 32 << 20
)

// Flow-control windows of every other connection: metadata watches,
// heartbeats, coordinator calls. Fixed rather than grown by gRPC's
// bandwidth-delay estimator, which answers every data frame that arrives
// while no estimate is under way with a PING (and a WINDOW_UPDATE): on a
// quiet connection that is every message, so each heartbeat or watch
// heartbeat woke both ends twice more for the PING and its ACK. The
// windows are large enough for a metadata image of a big cluster to
// arrive with a few WINDOW_UPDATEs.
const (
	ControlStreamWindow = 1 << 20
	ControlConnWindow   = 4 << 20
)

// DataWindows answers the dial options that set StreamWindow and
// ConnWindow: what a peer may send this client before it reads.
func DataWindows() []grpc.DialOption {
	return []grpc.DialOption{grpc.WithInitialWindowSize(StreamWindow), grpc.WithInitialConnWindowSize(ConnWindow)}
}

// ServerDataWindows answers the server options that set StreamWindow and
// ConnWindow: what a client may send this server before it reads.
func ServerDataWindows() []grpc.ServerOption {
	return []grpc.ServerOption{grpc.InitialWindowSize(StreamWindow), grpc.InitialConnWindowSize(ConnWindow)}
}

// pool is shared by every connection and server of the process.
var pool = &bufferPool{}

// tlsSource is the process's certificate, once UseTLS was called.
var tlsSource atomic.Pointer[tlsconf.Source]

// UseTLS makes every connection Dial's options make and every server
// Server's options start use mutual TLS with src's certificate and CAs;
// nil goes back to plaintext. Mains call it once, before they dial or
// serve.
func UseTLS(src *tlsconf.Source) { tlsSource.Store(src) }

// TLS answers the process's certificate source, nil when it is plaintext.
func TLS() *tlsconf.Source { return tlsSource.Load() }

// Credentials answers the transport credentials of a connection: mutual
// TLS after UseTLS, else plaintext.
func Credentials() credentials.TransportCredentials {
	if src := tlsSource.Load(); src != nil {
		return credentials.NewTLS(src.ClientConfig())
	}
	return insecure.NewCredentials()
}

// Dial answers the dial options of an internal connection, its transport
// credentials included (add message sizes as the caller needs).
func Dial() []grpc.DialOption {
	return append([]grpc.DialOption{
		grpc.WithTransportCredentials(Credentials()),
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: ReconnectBaseDelay, Multiplier: 1.6, Jitter: 0.2, MaxDelay: ReconnectMaxDelay},
			MinConnectTimeout: ConnectTimeout,
		}),
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: KeepaliveTime, Timeout: KeepaliveTimeout, PermitWithoutStream: true}),
		// DataWindows, appended after these, overrides them.
		grpc.WithStaticStreamWindowSize(ControlStreamWindow), grpc.WithStaticConnWindowSize(ControlConnWindow),
		experimental.WithBufferPool(pool),
	}, telemetry.GRPCDialOptions()...)
}

// Server answers the server options every Skein gRPC server starts with;
// m may be nil (no request metrics).
func Server(m *telemetry.GRPCMetrics) []grpc.ServerOption {
	return append(serverCreds(false), server(m)...)
}

// PublicServer is Server for the gateway's public API: with TLS a client
// certificate is checked when one is given but not required (clients may
// authenticate otherwise).
func PublicServer(m *telemetry.GRPCMetrics) []grpc.ServerOption {
	return append(serverCreds(true), server(m)...)
}

func serverCreds(optionalClientCert bool) []grpc.ServerOption {
	if src := tlsSource.Load(); src != nil {
		return []grpc.ServerOption{grpc.Creds(credentials.NewTLS(src.ServerConfig(optionalClientCert)))}
	}
	return nil
}

func server(m *telemetry.GRPCMetrics) []grpc.ServerOption {
	return append([]grpc.ServerOption{
		// Clients ping every KeepaliveTime; anything at least half as
		// frequent is accepted rather than answered with GOAWAY.
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: KeepaliveTime / 2, PermitWithoutStream: true}),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: KeepaliveTime, Timeout: KeepaliveTimeout}),
		// ServerDataWindows, appended after these, overrides them.
		grpc.StaticStreamWindowSize(ControlStreamWindow), grpc.StaticConnWindowSize(ControlConnWindow),
		experimental.BufferPool(pool),
	}, telemetry.GRPCServerOptions(m)...)
}
