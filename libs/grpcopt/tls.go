package grpcopt

import (
	"context"
	"crypto/tls"
	"log/slog"
	"net"
	"time"

	"skein/libs/tlsconf"
)

// ReloadEvery is how often a process checks its certificate files for a
// change (SIGHUP reloads them at once).
const ReloadEvery = 10 * time.Second

// SetupTLS loads f when it names files, makes the process use it (UseTLS)
// and reloads it on SIGHUP or a file change until ctx ends. Named files
// that do not load are an error, so a misconfigured process does not start
// in plaintext; none named is plaintext.
func SetupTLS(ctx context.Context, f tlsconf.Files, log *slog.Logger) error {
	if !f.Enabled() {
		return nil
	}
	src, err := tlsconf.Load(f)
	if err != nil {
		return err
	}
	UseTLS(src)
	log.Info("mutual TLS on every connection", "identity", src.Identity(), "expires", src.NotAfter().UTC().Format(time.RFC3339))
	go src.Watch(ctx, ReloadEvery, func(err error) {
		if err != nil {
			log.Error("certificate reload failed; keeping the previous one", "err", err)
			return
		}
		log.Info("certificate reloaded", "identity", src.Identity(), "expires", src.NotAfter().UTC().Format(time.RFC3339))
	})
	return nil
}

// Listener answers l as it should serve HTTP: with TLS after UseTLS (a
// client certificate required unless optionalClientCert), else as it is.
func Listener(l net.Listener, optionalClientCert bool) net.Listener {
	if src := tlsSource.Load(); src != nil {
		return tls.NewListener(l, src.ServerConfig(optionalClientCert))
	}
	return l
}

// ClientTLS answers the TLS configuration of an HTTP client of another
// Skein process, nil when the process is plaintext.
func ClientTLS() *tls.Config {
	if src := tlsSource.Load(); src != nil {
		return src.ClientConfig()
	}
	return nil
}
