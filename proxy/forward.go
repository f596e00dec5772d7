package proxy

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"syscall"

	"github.com/elazarl/goproxy"
)

// forwardRoundTrip sends an allowed request to the origin. An upstream
// failure becomes a 502 response with a short reason, never an error:
// goproxy drops an intercepted client's connection on a round-trip error.
// The audit record is finished when goproxy closes the response body, so
// it carries the bytes relayed and the whole duration.
func (d *decision) forwardRoundTrip(req *http.Request, _ *goproxy.ProxyCtx) (*http.Response, error) {
	resp, err := d.s.transport.RoundTrip(req)
	if err != nil {
		why := upstreamProblem(err)
		d.rec.Status = http.StatusBadGateway
		d.rec.Error = why
		d.finish()
		return plainResponse(req, http.StatusBadGateway, "robotsgate could not get "+req.URL.Host+": "+why+"\n"), nil
	}
	d.rec.Upstream = resp.StatusCode
	d.rec.Status = resp.StatusCode
	if !d.verdict.Allowed {
		// Audit mode: tell the crawler what enforcement would have done.
		resp.Header.Set(decisionHeader, decisionValue(d))
	}
	if resp.Body == nil || resp.Body == http.NoBody || resp.StatusCode == http.StatusSwitchingProtocols {
		// A 101's body is the upgraded connection: goproxy relays it only
		// as the io.ReadWriter the transport made, so it is not counted.
		d.finish()
		return resp, nil
	}
	if resp.ContentLength < 0 {
		// A body of unknown length may trickle. goproxy flushes each write
		// to a plain-HTTP client only when it sees this header; without it
		// net/http holds the response, headers included, until 4 KiB have
		// come. net/http and Response.Write encode it themselves.
		resp.Header.Set("Transfer-Encoding", "chunked")
	}
	resp.Body = &countingBody{body: resp.Body, done: d}
	return resp, nil
}

// countingBody counts the bytes relayed and finishes the decision when
// goproxy closes it.
type countingBody struct {
	body io.ReadCloser
	done *decision
	n    int64
	err  error
	once sync.Once
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.body.Read(p)
	b.n += int64(n)
	if err != nil && err != io.EOF && b.err == nil {
		b.err = err
	}
	return n, err
}

func (b *countingBody) Close() error {
	err := b.body.Close()
	b.once.Do(func() {
		b.done.rec.Bytes = b.n
		if b.err != nil {
			b.done.rec.Error = "reading the response body: " + upstreamProblem(b.err)
		}
		b.done.finish()
	})
	return err
}

// upstreamProblem says in a few words why an origin could not be reached,
// without internals.
func upstreamProblem(err error) string {
	var dnsErr *net.DNSError
	var certErr *tls.CertificateVerificationError
	var unknownAuthority x509.UnknownAuthorityError
	var hostnameErr x509.HostnameError
	var opErr *net.OpError
	switch {
	case errors.Is(err, context.Canceled):
		return "the request was cancelled"
	case errors.Is(err, context.DeadlineExceeded), isTimeout(err):
		return "the origin did not answer in time"
	case errors.As(err, &dnsErr):
		return "the origin's host name does not resolve"
	case errors.As(err, &certErr), errors.As(err, &unknownAuthority), errors.As(err, &hostnameErr):
		return "the origin's TLS certificate is not trusted"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "the origin refused the connection"
	case errors.As(err, &opErr) && opErr.Op == "dial":
		return "the origin could not be reached"
	case strings.Contains(err.Error(), "tls:"):
		return "the TLS handshake with the origin failed"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "the origin closed the connection"
	}
	return "the request to the origin failed"
}

func isTimeout(err error) bool {
	var t interface{ Timeout() bool }
	return errors.As(err, &t) && t.Timeout()
}
