package netcause

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// listen answers each connection to a loopback listener with answer.
func listen(t *testing.T, answer func(net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				answer(c)
			}()
		}
	}()
	return ln.Addr().String()
}

func readRequest(c net.Conn) { http.ReadRequest(bufio.NewReader(c)) }

// get makes one request with a transport of its own, the way the fetcher
// and the forwarder do, and returns its error.
func get(t *testing.T, ctx context.Context, tr *http.Transport, url string) error {
	t.Helper()
	t.Cleanup(tr.CloseIdleConnections)
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := tr.RoundTrip(req)
	if err == nil {
		_, err = io.ReadAll(resp.Body)
		resp.Body.Close()
	}
	if err == nil {
		t.Fatalf("GET %s succeeded", url)
	}
	return err
}

// TestOf builds each failure for real, against loopback servers, and
// checks its name and that the name leaks no internals.
func TestOf(t *testing.T) {
	tlsOrigin := httptest.NewTLSServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	t.Cleanup(tlsOrigin.Close)
	trusted := x509.NewCertPool()
	trusted.AddCert(tlsOrigin.Certificate())
	plain := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	t.Cleanup(plain.Close)
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	transport := func(roots *x509.CertPool, serverName string) *http.Transport {
		return &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, ServerName: serverName}}
	}

	tests := []struct {
		name string
		err  func(t *testing.T) error
		want string
	}{
		{"refused", func(t *testing.T) error {
			return get(t, t.Context(), transport(nil, ""), closed.URL)
		}, "connection refused"},
		{"invalid port", func(t *testing.T) error {
			return get(t, t.Context(), transport(nil, ""), "http://127.0.0.1:99999/")
		}, "could not connect"},
		{"name that is not a domain name", func(t *testing.T) error {
			// Go's own resolver refuses it without asking any server.
			tr := transport(nil, "")
			tr.DialContext = (&net.Dialer{Resolver: &net.Resolver{PreferGo: true}}).DialContext
			return get(t, t.Context(), tr, "http://no..such.host/")
		}, "host not found"},
		{"destination denied", func(t *testing.T) error {
			tr := transport(nil, "")
			tr.DialContext = func(context.Context, string, string) (net.Conn, error) {
				return nil, fmt.Errorf("dial 169.254.169.254:80: %w", fs.ErrPermission)
			}
			return get(t, t.Context(), tr, "http://169.254.169.254/")
		}, "destination not permitted"},
		{"unknown authority", func(t *testing.T) error {
			return get(t, t.Context(), transport(x509.NewCertPool(), ""), tlsOrigin.URL)
		}, "TLS certificate not trusted"},
		{"certificate for another host", func(t *testing.T) error {
			return get(t, t.Context(), transport(trusted, "wrong.example"), tlsOrigin.URL)
		}, "TLS certificate names another host"},
		{"TLS to a plain server", func(t *testing.T) error {
			return get(t, t.Context(), transport(nil, ""), strings.Replace(plain.URL, "http:", "https:", 1))
		}, "TLS handshake failed"},
		{"response header timeout", func(t *testing.T) error {
			release := make(chan struct{})
			t.Cleanup(func() { close(release) })
			addr := listen(t, func(net.Conn) { <-release })
			tr := transport(nil, "")
			tr.ResponseHeaderTimeout = 50 * time.Millisecond
			return get(t, t.Context(), tr, "http://"+addr+"/")
		}, "timeout"},
		{"deadline", func(t *testing.T) error {
			ctx, cancel := context.WithDeadline(t.Context(), time.Now().Add(-time.Second))
			defer cancel()
			return get(t, ctx, transport(nil, ""), plain.URL)
		}, "timeout"},
		{"cancelled", func(t *testing.T) error {
			ctx, cancel := context.WithCancel(t.Context())
			cancel()
			return get(t, ctx, transport(nil, ""), plain.URL)
		}, "cancelled"},
		{"closed without answer", func(t *testing.T) error {
			return get(t, t.Context(), transport(nil, ""), "http://"+listen(t, readRequest)+"/")
		}, "connection closed early"},
		{"reset", func(t *testing.T) error {
			addr := listen(t, func(c net.Conn) {
				readRequest(c)
				c.(*net.TCPConn).SetLinger(0) // close with RST
			})
			return get(t, t.Context(), transport(nil, ""), "http://"+addr+"/")
		}, "connection reset"},
		{"malformed answer", func(t *testing.T) error {
			addr := listen(t, func(c net.Conn) {
				readRequest(c)
				io.WriteString(c, "garbage\r\n\r\n")
			})
			return get(t, t.Context(), transport(nil, ""), "http://"+addr+"/")
		}, "malformed response"},
		{"huge response header", func(t *testing.T) error {
			addr := listen(t, func(c net.Conn) {
				readRequest(c)
				io.WriteString(c, "HTTP/1.1 200 OK\r\nX: "+strings.Repeat("x", 2<<10)+"\r\n\r\n")
			})
			tr := transport(nil, "")
			tr.MaxResponseHeaderBytes = 1 << 10
			return get(t, t.Context(), tr, "http://"+addr+"/")
		}, "response headers too large"},
		{"body cut short", func(t *testing.T) error {
			addr := listen(t, func(c net.Conn) {
				readRequest(c)
				io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc")
			})
			return get(t, t.Context(), transport(nil, ""), "http://"+addr+"/")
		}, "connection closed early"},
		{"unknown", func(*testing.T) error { return errors.New("something else") }, "network error"},
	}
	internals := []string{"127.0.0.1", "dial", "tcp", "x509", "tls:", "net/http"}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.err(t)
			got := Of(err)
			if got != tt.want {
				t.Errorf("Of(%v) = %q, want %q", err, got, tt.want)
			}
			// Only a certificate no trusted CA signed is fixed by trusting
			// its CA (ROBOTSGATE_UPSTREAM_CA_FILE).
			if want := tt.want == CertificateNotTrusted; NotTrusted(err) != want {
				t.Errorf("NotTrusted(%v) = %v, want %v", err, !want, want)
			}
			for _, s := range internals {
				if strings.Contains(got, s) {
					t.Errorf("Of(%v) = %q leaks %q", err, got, s)
				}
			}
		})
	}
}

func TestUnanswered(t *testing.T) {
	refused := func() error {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		_, err = net.DialTimeout("tcp", addr, time.Second)
		return err
	}()
	for _, c := range []struct {
		name string
		err  error
		want bool
	}{
		{"refused", refused, true},
		{"timeout", context.DeadlineExceeded, true},
		{"closed early", io.ErrUnexpectedEOF, true},
		{"cancelled by the client", context.Canceled, false},
		{"not found", &net.DNSError{Err: "no such host", Name: "x.invalid", IsNotFound: true}, false},
		{"DNS timeout", &net.OpError{Op: "dial", Net: "tcp", Err: &net.DNSError{Err: "i/o timeout", Name: "x.example", IsTimeout: true}}, false},
		{"no file descriptor", &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("socket", syscall.EMFILE)}, false},
		{"untrusted", x509.UnknownAuthorityError{}, false},
		{"denied", fs.ErrPermission, false},
		{"malformed", errors.New(`net/http: HTTP/1.x transport connection broken: malformed HTTP response "x"`), false},
	} {
		if got := Unanswered(c.err); got != c.want {
			t.Errorf("%s (%v): %v", c.name, c.err, got)
		}
	}
}
