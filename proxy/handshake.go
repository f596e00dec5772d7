package proxy

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"syscall"
)

// handshakeCause is why an intercepted client's TLS handshake failed: the
// cause label of robotsgate_mitm_client_handshake_failures_total.
type handshakeCause int

const (
	// handshakeUntrustedCA: the client's alert refused robotsgate's
	// certificate (unknown CA, bad certificate, ...): it does not trust
	// the CA.
	handshakeUntrustedCA handshakeCause = iota
	// handshakeHungUp: the client closed the connection once it had
	// robotsgate's certificate, without an alert, which is how some
	// clients refuse a certificate they do not trust.
	handshakeHungUp
	// handshakeTimeout: the handshake did not end within
	// ROBOTSGATE_CLIENT_TLS_TIMEOUT.
	handshakeTimeout
	// handshakeOther: anything else (no common protocol version or
	// cipher, not TLS at all, a client gone before its ClientHello ended).
	handshakeOther
	handshakeCauses // how many there are
)

func (c handshakeCause) String() string {
	switch c {
	case handshakeUntrustedCA:
		return "untrusted_ca"
	case handshakeHungUp:
		return "hung_up"
	case handshakeTimeout:
		return "timeout"
	}
	return "other"
}

// handshakeCauseOf classifies err, the error of a failed handshake with an
// intercepted client; certificateSent says whether robotsgate had sent its
// certificate (its first flight) by then.
func handshakeCauseOf(err error, certificateSent bool) handshakeCause {
	var opErr *net.OpError
	switch {
	case errors.As(err, &opErr) && opErr.Op == "remote error":
		// crypto/tls reports the client's alert so, its description
		// ("tls: unknown certificate authority", "tls: bad certificate",
		// "tls: certificate unknown") as the message only.
		if strings.Contains(opErr.Err.Error(), "certificate") {
			return handshakeUntrustedCA
		}
		return handshakeOther
	case errors.Is(err, context.DeadlineExceeded), isNetTimeout(err):
		return handshakeTimeout
	case certificateSent && (errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)):
		return handshakeHungUp
	}
	return handshakeOther
}

func isNetTimeout(err error) bool {
	var t interface{ Timeout() bool }
	return errors.As(err, &t) && t.Timeout()
}

// sentConn notes whether anything was written to a connection: during a
// server's TLS handshake, its first flight, the certificate included.
type sentConn struct {
	net.Conn
	sent atomic.Bool
}

func (c *sentConn) Write(p []byte) (int, error) {
	if !c.sent.Load() {
		c.sent.Store(true)
	}
	return c.Conn.Write(p)
}

func (c *sentConn) CloseWrite() error { return closeWrite(c.Conn) }

// handshakeFailed counts a failed handshake with an intercepted client and
// warns about it, once a minute per cause at most, with the fix.
func (s *Server) handshakeFailed(client net.Conn, tun *tunnel, err error, certificateSent bool) {
	cause := handshakeCauseOf(err, certificateSent)
	s.metrics.handshakeFailures[cause].Inc()
	ok, held := s.warnings.allow("handshake " + cause.String())
	if !ok {
		return
	}
	attrs := []any{"client", client.RemoteAddr().String(), "host", tun.host, "cause", cause.String(), "err", err.Error()}
	if held > 0 {
		attrs = append(attrs, "suppressed", held)
	}
	// The address the client reached the proxy at: the one it can
	// download the CA from, whatever address the proxy listens on.
	trust := "does the client trust ca.pem? download it from http://" + client.LocalAddr().String() + "/ca.pem" +
		" and add it to the client's trusted CAs (curl --cacert, REQUESTS_CA_BUNDLE, SSL_CERT_FILE, the system's store)"
	switch cause {
	case handshakeUntrustedCA:
		s.log.Warn("an intercepted client refused robotsgate's certificate: "+trust, attrs...)
	case handshakeHungUp:
		s.log.Warn("an intercepted client hung up on robotsgate's certificate: "+trust, attrs...)
	case handshakeTimeout:
		s.log.Warn("an intercepted client did not finish the TLS handshake within ROBOTSGATE_CLIENT_TLS_TIMEOUT", attrs...)
	default:
		s.log.Warn("the TLS handshake with an intercepted client failed", attrs...)
	}
}
