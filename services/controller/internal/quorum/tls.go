package quorum

import (
	"crypto/tls"
	"net"
	"time"

	"github.com/hashicorp/raft"
)

// tlsStream is a Raft stream layer over mutual TLS: the listener requires a
// client certificate signed by the cluster's CA, and a dial checks the
// peer's certificate against the same CA and the address it dialled, so a
// process without the right certificate can neither join the quorum nor
// pose as a voter.
type tlsStream struct {
	net.Listener
	advertise net.Addr
	client    *tls.Config
}

func newTLSStream(bind string, advertise net.Addr, server, client *tls.Config) (*tlsStream, error) {
	l, err := net.Listen("tcp", bind)
	if err != nil {
		return nil, err
	}
	return &tlsStream{Listener: tls.NewListener(l, server), advertise: advertise, client: client}, nil
}

// Dial implements raft.StreamLayer.
func (s *tlsStream) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: timeout}, "tcp", string(addr), s.client)
	if err != nil {
		return nil, err
	}
	return c, nil
}

// Addr implements raft.StreamLayer: the address the others dial.
func (s *tlsStream) Addr() net.Addr { return s.advertise }
