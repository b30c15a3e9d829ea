package quorum

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/hashicorp/raft"

	"skein/libs/peerauth"
)

// tlsStream is a Raft stream layer over mutual TLS: the listener requires a
// client certificate signed by the cluster's CA, and a dial checks the
// peer's certificate against the same CA and the address it dialled, so a
// process without the right certificate can neither join the quorum nor
// pose as a voter. Every certificate of the cluster's CA passes those
// checks — storage nodes', the gateway's, clients' — so both sides also
// refuse a peer whose certificate is not a controller's
// (spiffe://skein/controller/<id>): Raft traffic is the controllers' alone.
type tlsStream struct {
	net.Listener
	advertise net.Addr
	client    *tls.Config
	log       *slog.Logger
}

func newTLSStream(bind string, advertise net.Addr, server, client *tls.Config, log *slog.Logger) (*tlsStream, error) {
	l, err := net.Listen("tcp", bind)
	if err != nil {
		return nil, err
	}
	return &tlsStream{
		Listener:  tls.NewListener(l, controllersOnlyServer(server, log)),
		advertise: advertise,
		client:    client,
		log:       log,
	}, nil
}

// Dial implements raft.StreamLayer.
func (s *tlsStream) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: timeout}, "tcp", string(addr), controllersOnlyClient(s.client, s.log, string(addr)))
	if err != nil {
		return nil, err
	}
	return c, nil
}

// Addr implements raft.StreamLayer: the address the others dial.
func (s *tlsStream) Addr() net.Addr { return s.advertise }

// errNotController is the refusal of a Raft peer of another role.
var errNotController = errors.New("not a controller's certificate")

// controllersOnlyServer answers cfg refusing, once its own checks passed, a
// client whose verified certificate is not a controller's. cfg may choose
// its configuration per connection (GetConfigForClient, as a reloading
// certificate source does): the check is added to each one it answers.
func controllersOnlyServer(cfg *tls.Config, log *slog.Logger) *tls.Config {
	out := cfg.Clone()
	out.VerifyConnection = requireController(out.VerifyConnection, false, log, "accepted", "")
	if get := cfg.GetConfigForClient; get != nil {
		out.GetConfigForClient = func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
			inner, err := get(hello)
			if err != nil || inner == nil {
				return inner, err // nil: out itself serves, with the check
			}
			inner = inner.Clone()
			inner.VerifyConnection = requireController(inner.VerifyConnection, false, log, "accepted", hello.Conn.RemoteAddr().String())
			return inner, nil
		}
	}
	return out
}

// controllersOnlyClient answers cfg refusing, once its own checks passed, a
// server at addr whose certificate is not a controller's.
func controllersOnlyClient(cfg *tls.Config, log *slog.Logger, addr string) *tls.Config {
	out := cfg.Clone()
	out.VerifyConnection = requireController(out.VerifyConnection, true, log, "dialled", addr)
	return out
}

// requireController runs prev, then refuses a peer whose certificate does
// not name the controller role, with a log line naming the peer. The
// certificate checked is the verified chain's leaf. A client configuration
// may verify the server's chain in prev itself (tlsconf's does, against
// CAs that may be reloaded): with prevVerifies, the leaf prev accepted is
// checked. Otherwise nothing verified the certificate: refused.
func requireController(prev func(tls.ConnectionState) error, prevVerifies bool, log *slog.Logger, side, addr string) func(tls.ConnectionState) error {
	return func(cs tls.ConnectionState) error {
		if prev != nil {
			if err := prev(cs); err != nil {
				return err
			}
		}
		var leaf *x509.Certificate
		switch {
		case len(cs.VerifiedChains) > 0 && len(cs.VerifiedChains[0]) > 0:
			leaf = cs.VerifiedChains[0][0]
		case prevVerifies && prev != nil && len(cs.PeerCertificates) > 0:
			leaf = cs.PeerCertificates[0]
		default:
			log.Warn("Raft connection refused: the peer's certificate was not verified", "side", side, "addr", addr)
			return fmt.Errorf("raft: the peer's certificate was not verified: %w", errNotController)
		}
		p := peerauth.FromCertificate(leaf)
		if p.Role != peerauth.RoleController {
			log.Warn("Raft connection refused: the peer's certificate is not a controller's", "side", side, "addr", addr, "peer", p.String())
			return fmt.Errorf("raft: %s: %w", p, errNotController)
		}
		return nil
	}
}
