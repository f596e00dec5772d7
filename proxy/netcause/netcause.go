// Package netcause names, in a few words, why an exchange with an origin
// failed: "connection refused", "timeout", "TLS certificate not trusted".
// The robots.txt fetcher and the forwarder both speak these words, so an
// operator reads the same cause in a 502, a robots.txt verdict and the
// audit log. The words say what happened without internals: no addresses,
// no Go error text.
package netcause

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"io/fs"
	"net"
	"strings"
	"syscall"
)

// Of returns the cause of err, an error from dialing an origin or
// exchanging HTTP with it; "network error" when it is none of those it
// knows.
func Of(err error) string {
	var (
		dnsErr      *net.DNSError
		certErr     *tls.CertificateVerificationError
		unknownCA   x509.UnknownAuthorityError
		wrongHost   x509.HostnameError
		invalidCert x509.CertificateInvalidError
		recordErr   tls.RecordHeaderError
		alertErr    tls.AlertError
		opErr       *net.OpError
	)
	switch {
	case err == nil:
		return "no error"
	case errors.Is(err, context.Canceled):
		return "cancelled"
	case errors.Is(err, fs.ErrPermission):
		return "destination not permitted"
	case errors.As(err, &dnsErr):
		if dnsErr.IsTimeout {
			return "timeout"
		}
		if dnsErr.IsNotFound {
			return "host not found"
		}
		return "DNS failure"
	case errors.Is(err, context.DeadlineExceeded), isTimeout(err):
		return "timeout"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.ECONNRESET):
		return "connection reset"
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return "no route to host"
	case errors.As(err, &unknownCA):
		return CertificateNotTrusted
	case errors.As(err, &wrongHost):
		return "TLS certificate names another host"
	case errors.As(err, &invalidCert), errors.As(err, &certErr):
		return "TLS certificate invalid"
	case errors.As(err, &recordErr), errors.As(err, &alertErr):
		return "TLS handshake failed"
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return "connection closed early"
	case errors.As(err, &opErr) && opErr.Op == "dial":
		return "could not connect"
	}
	// net/http and crypto/tls report these with messages only, no error
	// values.
	switch msg := err.Error(); {
	case strings.Contains(msg, "server response headers exceeded"):
		return "response headers too large"
	case strings.Contains(msg, "malformed HTTP"):
		return "malformed response"
	case strings.Contains(msg, "tls:"):
		return "TLS handshake failed"
	}
	return "network error"
}

// CertificateNotTrusted is the cause of an origin whose certificate no
// trusted CA signed: self-signed, or signed by a private CA. Of all
// causes it is the one the operator fixes by trusting that CA.
const CertificateNotTrusted = "TLS certificate not trusted"

// NotTrusted reports whether err says the origin's certificate was signed
// by no CA robotsgate trusts (the cause CertificateNotTrusted).
func NotTrusted(err error) bool {
	return err != nil && Of(err) == CertificateNotTrusted
}

func isTimeout(err error) bool {
	var t interface{ Timeout() bool }
	return errors.As(err, &t) && t.Timeout()
}

// Unanswered reports whether err says the origin did not answer: a
// connection refused, cut or closed before the answer, no route to it, a
// timeout. Those are signs of a server in trouble, where a name that does
// not resolve (in time or at all), a certificate refused, a malformed
// answer or robotsgate's own trouble connecting (no free port or file
// descriptor: "could not connect") are not.
func Unanswered(err error) bool {
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) {
		return false
	}
	switch Of(err) {
	case "timeout", "connection refused", "connection reset", "no route to host", "connection closed early":
		return true
	}
	return false
}
