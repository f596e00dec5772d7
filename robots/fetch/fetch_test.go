package fetch

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"robotsgate/robots"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/iotest"
	"time"
)

const testRules = "User-agent: *\nDisallow: /private/\nAllow: /private/ok\n"

// newTestFetcher returns a Fetcher closed when the test ends.
func newTestFetcher(t *testing.T, opts Options) *Fetcher {
	t.Helper()
	f := New(opts)
	t.Cleanup(f.Close)
	return f
}

// serve starts a real HTTP origin on 127.0.0.1.
func serve(t *testing.T, h http.HandlerFunc) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

// serveTLS starts a real HTTPS origin on 127.0.0.1 and returns a pool that
// trusts it.
func serveTLS(t *testing.T, h http.HandlerFunc) (*httptest.Server, *x509.CertPool) {
	t.Helper()
	srv := httptest.NewUnstartedServer(h)
	// Some tests refuse its certificate on purpose; the server need not
	// log each refusal.
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())
	return srv, pool
}

// serveBody answers every request with status and body.
func serveBody(t *testing.T, status int, body string) *httptest.Server {
	t.Helper()
	return serve(t, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(status)
		io.WriteString(w, body)
	})
}

// rawServer is an origin that misbehaves below HTTP: it accepts on
// 127.0.0.1, reads each request and hands the connection to handle.
func rawServer(t *testing.T, handle func(c net.Conn, req *http.Request)) string {
	t.Helper()
	return "http://" + rawListener(t, func(c net.Conn) {
		req, err := http.ReadRequest(bufio.NewReader(c))
		if err != nil {
			return
		}
		handle(c, req)
	})
}

// rawListener accepts TCP connections on 127.0.0.1 and hands each to
// handle. Every connection is closed and every handler waited for when the
// test ends. It returns the listening address.
func rawListener(t *testing.T, handle func(c net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		conns  = map[net.Conn]bool{}
		closed bool
	)
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			if closed {
				c.Close()
			} else {
				conns[c] = true
			}
			mu.Unlock()
			wg.Go(func() {
				defer c.Close()
				// No handler outlives a test by much, whatever the client does.
				c.SetDeadline(time.Now().Add(20 * time.Second))
				handle(c)
			})
		}
	})
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		closed = true
		for c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}

// freePort returns the address of a port nobody listens on.
func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// wantOutcome checks a result's outcome, detail and error, and logs the
// error for people reading -v output.
func wantOutcome(t *testing.T, res *Result, outcome robots.Outcome, detail string) {
	t.Helper()
	if res.Outcome != outcome || res.Detail != detail {
		t.Errorf("outcome %v, detail %q (err %v); want %v, %q", res.Outcome, res.Detail, res.Err, outcome, detail)
	}
	if (outcome == robots.OutcomeOK) != (res.Err == nil) {
		t.Errorf("outcome %v with err %v", res.Outcome, res.Err)
	}
	if (outcome == robots.OutcomeOK) != (res.Robots != nil) {
		t.Errorf("outcome %v with Robots %v", res.Outcome, res.Robots)
	}
	if res.Err != nil {
		t.Logf("err: %v", res.Err)
	}
}

func TestFetchRules(t *testing.T) {
	var mu sync.Mutex
	var got []string
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Method+" "+r.RequestURI)
		mu.Unlock()
		io.WriteString(w, testRules)
	})
	f := newTestFetcher(t, Options{})
	res, timing := f.FetchTimed(t.Context(), srv.URL+"/some/page?q=1")
	wantOutcome(t, res, robots.OutcomeOK, "")
	if res.Origin != srv.URL || res.FinalURL != srv.URL+"/robots.txt" || res.Status != 200 ||
		res.Redirects != 0 || int(res.Bytes) != len(testRules) || res.Truncated {
		t.Errorf("result %+v", res)
	}
	if timing.FetchedAt.IsZero() || timing.Duration <= 0 {
		t.Errorf("FetchedAt %v, Duration %v", timing.FetchedAt, timing.Duration)
	}
	if len(got) != 1 || got[0] != "GET /robots.txt" {
		t.Errorf("origin saw %q, want one GET /robots.txt", got)
	}
	for _, c := range []struct {
		path    string
		allowed bool
		reason  string
	}{
		{"/private/x", false, "disallow: /private/ (line 2)"},
		{"/private/ok", true, "allow: /private/ok (line 3)"},
		{"/public", true, "no matching rule"},
		{"/robots.txt", true, "robots.txt is always allowed"},
	} {
		v := res.Check("AnyBot", c.path)
		if v.Allowed != c.allowed || v.Reason() != c.reason {
			t.Errorf("Check(%q) = %v %q, want %v %q", c.path, v.Allowed, v.Reason(), c.allowed, c.reason)
		}
	}
}

func TestFetchBodies(t *testing.T) {
	for _, c := range []struct {
		name   string
		status int
		body   string
	}{
		{"empty", http.StatusOK, ""},
		{"no content", http.StatusNoContent, ""},
		{"HTML page", http.StatusOK, "<!doctype html>\n<html><head><title>Welcome</title></head>\n<body><p>Disallow all robots!</p></body></html>\n"},
		{"other 2xx", http.StatusAccepted, "# nothing here\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := serveBody(t, c.status, c.body)
			res := newTestFetcher(t, Options{}).Fetch(t.Context(), srv.URL)
			wantOutcome(t, res, robots.OutcomeOK, "")
			if int(res.Status) != c.status || int(res.Bytes) != len(c.body) {
				t.Errorf("status %d, bytes %d; want %d, %d", res.Status, res.Bytes, c.status, len(c.body))
			}
			for _, path := range []string{"/", "/private/", "/index.html"} {
				if v := res.Check("AnyBot", path); !v.Allowed || v.Cause != robots.CauseNoGroup {
					t.Errorf("Check(%q) = %v (%s), want allowed: no group", path, v.Allowed, v.Reason())
				}
			}
		})
	}
}

// The proxy's Fetcher keeps only the number of ignored lines; one made
// with KeepIgnored, as the check command's, keeps the lines.
func TestFetchKeepIgnored(t *testing.T) {
	srv := serveBody(t, http.StatusOK, "<html>\nUser-agent: *\nDisallow: /private/\nUnicorns: yes\n")
	res := newTestFetcher(t, Options{}).Fetch(t.Context(), srv.URL)
	wantOutcome(t, res, robots.OutcomeOK, "")
	if res.Robots.Ignored() != nil || res.Robots.IgnoredCount() != 2 {
		t.Errorf("default: ignored %v, count %d; want none kept, 2 counted", res.Robots.Ignored(), res.Robots.IgnoredCount())
	}
	res = newTestFetcher(t, Options{KeepIgnored: true}).Fetch(t.Context(), srv.URL)
	wantOutcome(t, res, robots.OutcomeOK, "")
	want := []robots.IgnoredLine{
		{Line: 1, Reason: robots.IgnoredNotRecord},
		{Line: 4, Reason: robots.IgnoredUnknownKey, Key: "Unicorns"},
	}
	if got := res.Robots.Ignored(); !slices.Equal(got, want) {
		t.Errorf("KeepIgnored: ignored %v, want %v", got, want)
	}
}

// Load's debug record counts the ignored lines, which the proxy's Fetcher
// does not keep.
func TestLoadLogsIgnoredCount(t *testing.T) {
	srv := serveBody(t, http.StatusOK, "<html>\nUser-agent: *\nUnicorns: yes\n")
	var records bytes.Buffer
	f := newTestFetcher(t, Options{Logger: slog.New(slog.NewTextHandler(&records, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	f.Load(t.Context(), srv.URL)
	if !strings.Contains(records.String(), " ignored=2 ") {
		t.Errorf("debug record %q does not say ignored=2", records.String())
	}
}

func TestFetchParseLimit(t *testing.T) {
	const limit = 1024
	body := "User-agent: *\nDisallow: /early/\n" + strings.Repeat("# padding padding padding\n", 100) + "Disallow: /late/\n"
	srv := serveBody(t, http.StatusOK, body)
	res := newTestFetcher(t, Options{MaxBytes: limit}).Fetch(t.Context(), srv.URL)
	wantOutcome(t, res, robots.OutcomeOK, "")
	if !res.Truncated || res.Bytes != limit+1 || !res.Robots.Truncated() || res.Robots.ParsedBytes() != limit {
		t.Errorf("truncated %v, bytes %d, parsed %d; want true, %d, %d", res.Truncated, res.Bytes, res.Robots.ParsedBytes(), limit+1, limit)
	}
	if v := res.Check("bot", "/early/x"); v.Allowed {
		t.Errorf("/early/x allowed (%s): the rule before the limit must apply", v.Reason())
	}
	if v := res.Check("bot", "/late/x"); !v.Allowed {
		t.Errorf("/late/x disallowed (%s): the rule past the limit must not apply", v.Reason())
	}

	// A body exactly at the limit is whole.
	exact := serveBody(t, http.StatusOK, body[:limit])
	res = newTestFetcher(t, Options{MaxBytes: limit}).Fetch(t.Context(), exact.URL)
	if res.Outcome != robots.OutcomeOK || res.Truncated || res.Bytes != limit {
		t.Errorf("body of exactly the limit: outcome %v, truncated %v, bytes %d", res.Outcome, res.Truncated, res.Bytes)
	}
}

// TestParseLimitBounds: the parse limit is the parser's (no more is read
// than it parses), and Result.Bytes holds any body it allows.
func TestParseLimitBounds(t *testing.T) {
	for _, c := range []struct{ set, want int }{
		{0, robots.DefaultMaxBytes},
		{-1, robots.DefaultMaxBytes},
		{1024, 1024},
		{robots.MaxParseBytes, robots.MaxParseBytes},
		{robots.MaxParseBytes + 1, robots.MaxParseBytes},
		{math.MaxInt, robots.MaxParseBytes},
	} {
		got := newTestFetcher(t, Options{MaxBytes: c.set}).Options().MaxBytes
		if got != c.want {
			t.Errorf("MaxBytes %d: the Fetcher's is %d, want %d", c.set, got, c.want)
		}
		if int64(got)+1 > math.MaxInt32 {
			t.Errorf("MaxBytes %d: a body of %d bytes does not fit Result.Bytes", c.set, got+1)
		}
	}
}

// endlessRules streams chunks of rules until the client goes away (or 256
// MiB, so that the server stops whatever happens).
func endlessRules(c net.Conn) {
	chunk := strings.Repeat("Disallow: /endless/\n", 200)
	frame := fmt.Sprintf("%x\r\n%s\r\n", len(chunk), chunk)
	for sent := 0; sent < 256<<20; sent += len(chunk) {
		if _, err := io.WriteString(c, frame); err != nil {
			return
		}
	}
}

func TestFetchEndlessBody(t *testing.T) {
	const limit = 64 << 10
	origin := rawServer(t, func(c net.Conn, _ *http.Request) {
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n")
		head := "User-agent: *\n"
		fmt.Fprintf(c, "%x\r\n%s\r\n", len(head), head)
		endlessRules(c)
	})
	res := newTestFetcher(t, Options{MaxBytes: limit}).Fetch(t.Context(), origin)
	wantOutcome(t, res, robots.OutcomeOK, "")
	if !res.Truncated || res.Bytes != limit+1 {
		t.Errorf("truncated %v, bytes %d; want true, %d", res.Truncated, res.Bytes, limit+1)
	}
	if v := res.Check("bot", "/endless/x"); v.Allowed {
		t.Errorf("/endless/x allowed (%s)", v.Reason())
	}
}

func TestFetchGzip(t *testing.T) {
	compress := func(body []byte) []byte {
		var b bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&b, gzip.BestSpeed)
		zw.Write(body)
		zw.Close()
		return b.Bytes()
	}
	serveGzip := func(t *testing.T, gz []byte) *httptest.Server {
		return serve(t, func(w http.ResponseWriter, r *http.Request) {
			if !strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
				http.Error(w, "gzip only", http.StatusNotAcceptable)
				return
			}
			w.Header().Set("Content-Encoding", "gzip")
			w.Header().Set("Content-Length", strconv.Itoa(len(gz)))
			w.Write(gz)
		})
	}

	t.Run("rules", func(t *testing.T) {
		srv := serveGzip(t, compress([]byte(testRules)))
		res := newTestFetcher(t, Options{}).Fetch(t.Context(), srv.URL)
		wantOutcome(t, res, robots.OutcomeOK, "")
		if int(res.Bytes) != len(testRules) {
			t.Errorf("bytes %d, want the %d decoded bytes", res.Bytes, len(testRules))
		}
		if v := res.Check("bot", "/private/x"); v.Allowed {
			t.Errorf("/private/x allowed (%s)", v.Reason())
		}
	})

	t.Run("bomb", func(t *testing.T) {
		// 16 MiB of rules compress to a few dozen KiB; the limit counts
		// decoded bytes.
		const limit = 64 << 10
		bomb := compress(bytes.Repeat([]byte("Disallow: /\n"), 16<<20/12))
		srv := serveGzip(t, bomb)
		res := newTestFetcher(t, Options{MaxBytes: limit}).Fetch(t.Context(), srv.URL)
		wantOutcome(t, res, robots.OutcomeOK, "")
		if !res.Truncated || res.Bytes != limit+1 {
			t.Errorf("truncated %v, bytes %d; want true, %d", res.Truncated, res.Bytes, limit+1)
		}
	})
}

// TestReadLimited: a body is read up to the limit, into a buffer that
// grows with what arrived, never more than twice it plus firstReadBytes,
// whatever length was announced.
func TestReadLimited(t *testing.T) {
	x := func(n int) io.Reader { return strings.NewReader(strings.Repeat("x", n)) }
	for _, c := range []struct {
		name      string
		body      io.Reader
		limit     int
		sizeHint  int64
		wantBytes int
		wantCap   int // 0: not checked beyond the bounds
	}{
		{"endless, unknown length", x(1 << 20), 100_001, -1, 100_001, 0},
		{"endless, lying length", x(1 << 20), 100_001, 10, 100_001, 0},
		{"endless, huge length", x(1 << 20), 100_001, 1 << 40, 100_001, 0},
		{"endless, large limit", x(1 << 20), 500<<10 + 1, 500 << 10, 500<<10 + 1, 0},
		{"short, huge length", strings.NewReader("hello"), 500<<10 + 1, 500 << 10, 5, firstReadBytes},
		{"short, known length", strings.NewReader("hello"), 100_001, 5, 5, 6},
		{"short, unknown length", strings.NewReader("hello"), 100_001, -1, 5, 8 << 10},
		{"one byte past the first buffer", x(firstReadBytes + 1), 500<<10 + 1, -1, firstReadBytes + 1, 0},
		{"trickle", iotest.OneByteReader(x(3000)), 100_001, 500 << 10, 3000, firstReadBytes},
		{"empty", strings.NewReader(""), 100_001, 0, 0, 1},
		{"exactly the limit", strings.NewReader("abcd"), 4, 4, 4, 4},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := readLimited(c.body, c.limit, c.sizeHint)
			if err != nil || len(got) != c.wantBytes || cap(got) > c.limit || cap(got) > 2*len(got)+firstReadBytes ||
				c.wantCap != 0 && cap(got) != c.wantCap {
				t.Errorf("read %d bytes (cap %d), %v; want %d bytes, cap at most %d and %d (exactly %d if not 0)", len(got), cap(got), err,
					c.wantBytes, c.limit, 2*c.wantBytes+firstReadBytes, c.wantCap)
			}
		})
	}
	broken := io.MultiReader(strings.NewReader("part"), iotestErrReader{})
	if got, err := readLimited(broken, 100, -1); !errors.Is(err, errBroken) || string(got) != "part" {
		t.Errorf("broken body: %q, %v", got, err)
	}
}

var errBroken = errors.New("broken")

type iotestErrReader struct{}

func (iotestErrReader) Read([]byte) (int, error) { return 0, errBroken }

// Origins that hold a fetch open: it must end, unreachable, at the
// Timeout. These tests take the Timeout (300ms) each, by design.
func TestFetchTimeouts(t *testing.T) {
	const timeout = 300 * time.Millisecond
	for _, c := range []struct {
		name   string
		handle func(c net.Conn, req *http.Request)
	}{
		{"silent", func(c net.Conn, _ *http.Request) {
			io.Copy(io.Discard, c) // until the client hangs up
		}},
		{"trickling headers", func(c net.Conn, _ *http.Request) {
			io.WriteString(c, "HTTP/1.1 200 OK\r\n")
			for range 1000 {
				if _, err := io.WriteString(c, "X"); err != nil {
					return
				}
				time.Sleep(10 * time.Millisecond) // the origin's pace, not a wait of the test's
			}
		}},
		{"trickling body", func(c net.Conn, _ *http.Request) {
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 100000\r\n\r\n")
			for range 1000 {
				if _, err := io.WriteString(c, "#"); err != nil {
					return
				}
				time.Sleep(10 * time.Millisecond)
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			origin := rawServer(t, c.handle)
			res, timing := newTestFetcher(t, Options{Timeout: timeout}).FetchTimed(t.Context(), origin)
			wantOutcome(t, res, robots.OutcomeUnreachable, "robots.txt unreachable: timeout")
			if !errors.Is(res.Err, context.DeadlineExceeded) {
				t.Errorf("err %v, want a deadline exceeded", res.Err)
			}
			// A correctness bound, not a speed: the Timeout holds the fetch
			// however the origin drips; the margin absorbs a loaded machine.
			if timing.Duration > timeout+2*time.Second {
				t.Errorf("fetch took %v with a Timeout of %v", timing.Duration, timeout)
			}
			if v := res.Check("bot", "/"); v.Allowed || v.Reason() != "robots.txt unreachable: timeout: complete disallow" {
				t.Errorf("Check = %v %q", v.Allowed, v.Reason())
			}
		})
	}
}

// An origin that accepts the connection but never answers the TLS
// handshake is bounded by the ConnectTimeout, not only the Timeout.
func TestFetchTLSHandshakeTimeout(t *testing.T) {
	addr := rawListener(t, func(c net.Conn) { io.Copy(io.Discard, c) })
	const timeout = time.Minute
	res, timing := newTestFetcher(t, Options{Timeout: timeout, ConnectTimeout: 200 * time.Millisecond}).FetchTimed(t.Context(), "https://"+addr)
	wantOutcome(t, res, robots.OutcomeUnreachable, "robots.txt unreachable: timeout")
	if timing.Duration >= timeout/2 {
		t.Errorf("fetch took %v: the handshake was not bounded by the ConnectTimeout", timing.Duration)
	}
}

func TestFetchBrokenOrigins(t *testing.T) {
	for _, c := range []struct {
		name   string
		handle func(c net.Conn, req *http.Request)
		detail string
	}{
		{"reset mid-body", func(c net.Conn, _ *http.Request) {
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\nUser-agent: *\nDisallow: /a\n")
			c.(*net.TCPConn).SetLinger(0) // close with a RST
			c.Close()
		}, "robots.txt unreachable: connection reset"},
		{"closed mid-body", func(c net.Conn, _ *http.Request) {
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\nUser-agent: *\nDisallow: /a\n")
		}, "robots.txt unreachable: connection closed early"},
		{"closed mid-chunk", func(c net.Conn, _ *http.Request) {
			io.WriteString(c, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n100\r\nUser-agent: *\n")
		}, "robots.txt unreachable: connection closed early"},
		{"closed before answering", func(net.Conn, *http.Request) {}, "robots.txt unreachable: connection closed early"},
		{"huge headers", func(c net.Conn, _ *http.Request) {
			io.WriteString(c, "HTTP/1.1 200 OK\r\nX-Big: "+strings.Repeat("a", 100<<10)+"\r\n\r\nUser-agent: *\n")
		}, "robots.txt unreachable: response headers too large"},
		{"endless header", func(c net.Conn, _ *http.Request) {
			io.WriteString(c, "HTTP/1.1 200 OK\r\n")
			for range 10_000 {
				if _, err := io.WriteString(c, "X-Again: and again and again\r\n"); err != nil {
					return
				}
			}
		}, "robots.txt unreachable: response headers too large"},
		{"not HTTP", func(c net.Conn, _ *http.Request) {
			io.WriteString(c, "SSH-2.0-OpenSSH_9.6\r\n\r\n")
		}, "robots.txt unreachable: malformed response"},
	} {
		t.Run(c.name, func(t *testing.T) {
			origin := rawServer(t, c.handle)
			res := newTestFetcher(t, Options{}).Fetch(t.Context(), origin)
			wantOutcome(t, res, robots.OutcomeUnreachable, c.detail)
			if v := res.Check("bot", "/a"); v.Allowed || v.Cause != robots.CauseUnreachable {
				t.Errorf("Check = %v %q, want complete disallow", v.Allowed, v.Reason())
			}
		})
	}
}

func TestFetchStatus(t *testing.T) {
	for _, c := range []struct {
		status       int
		authDisallow bool
		outcome      robots.Outcome
		allowed      bool
	}{
		{http.StatusBadRequest, false, robots.OutcomeUnavailable, true},
		{http.StatusUnauthorized, false, robots.OutcomeUnavailable, true},
		{http.StatusForbidden, false, robots.OutcomeUnavailable, true},
		{http.StatusNotFound, false, robots.OutcomeUnavailable, true},
		{http.StatusGone, false, robots.OutcomeUnavailable, true},
		{451, false, robots.OutcomeUnavailable, true},
		{http.StatusUnauthorized, true, robots.OutcomeRestricted, false},
		{http.StatusForbidden, true, robots.OutcomeRestricted, false},
		{http.StatusNotFound, true, robots.OutcomeUnavailable, true},
		{http.StatusTooManyRequests, false, robots.OutcomeUnreachable, false},
		{http.StatusInternalServerError, false, robots.OutcomeUnreachable, false},
		{http.StatusServiceUnavailable, false, robots.OutcomeUnreachable, false},
		{http.StatusNotModified, false, robots.OutcomeUnreachable, false},
		{999, false, robots.OutcomeUnreachable, false},
	} {
		t.Run(fmt.Sprintf("%d auth-disallow=%v", c.status, c.authDisallow), func(t *testing.T) {
			srv := serveBody(t, c.status, "User-agent: *\nAllow: /\n")
			res := newTestFetcher(t, Options{AuthDisallow: c.authDisallow}).Fetch(t.Context(), srv.URL)
			detail := "robots.txt " + strconv.Itoa(c.status)
			wantOutcome(t, res, c.outcome, detail)
			var statusErr *StatusError
			if !errors.As(res.Err, &statusErr) || statusErr.Code != c.status || statusErr.URL != srv.URL+"/robots.txt" {
				t.Errorf("err %#v, want a *StatusError for %d", res.Err, c.status)
			}
			if int(res.Status) != c.status || res.Bytes != 0 {
				t.Errorf("status %d, bytes %d", res.Status, res.Bytes)
			}
			cause, word := robots.CauseUnreachable, "complete disallow"
			if c.allowed {
				cause, word = robots.CauseUnavailable, "no restrictions"
			}
			v := res.Check("bot", "/page")
			if v.Allowed != c.allowed || v.Cause != cause || v.Reason() != detail+": "+word {
				t.Errorf("Check = %v %v %q, want %v %v %q", v.Allowed, v.Cause, v.Reason(), c.allowed, cause, detail+": "+word)
			}
			if v := res.Check("bot", "/robots.txt"); !v.Allowed || v.Cause != robots.CauseRobotsTxt {
				t.Errorf("Check(/robots.txt) = %v %q", v.Allowed, v.Reason())
			}
		})
	}
}

// redirectChain serves /robots.txt → /hop1 → ... → /hop<hops>, which
// answers the rules.
func redirectChain(t *testing.T, hops int) *httptest.Server {
	return serve(t, func(w http.ResponseWriter, r *http.Request) {
		n := 0
		if hop, ok := strings.CutPrefix(r.URL.Path, "/hop"); ok {
			n, _ = strconv.Atoi(hop)
		} else if r.URL.Path != "/robots.txt" {
			http.NotFound(w, r)
			return
		}
		if n < hops {
			w.Header().Set("Location", "/hop"+strconv.Itoa(n+1))
			w.WriteHeader([]int{301, 302, 303, 307, 308}[n%5])
			io.WriteString(w, "moved\n")
			return
		}
		io.WriteString(w, testRules)
	})
}

func TestFetchRedirects(t *testing.T) {
	t.Run("5 followed", func(t *testing.T) {
		srv := redirectChain(t, 5)
		res := newTestFetcher(t, Options{}).Fetch(t.Context(), srv.URL)
		wantOutcome(t, res, robots.OutcomeOK, "")
		if res.Redirects != 5 || res.FinalURL != srv.URL+"/hop5" || res.Origin != srv.URL || res.Status != 200 {
			t.Errorf("redirects %d, final %s, origin %s, status %d", res.Redirects, res.FinalURL, res.Origin, res.Status)
		}
		if v := res.Check("bot", "/private/x"); v.Allowed {
			t.Errorf("/private/x allowed (%s)", v.Reason())
		}
	})
	t.Run("6 are too many", func(t *testing.T) {
		srv := redirectChain(t, 6)
		res := newTestFetcher(t, Options{}).Fetch(t.Context(), srv.URL)
		wantOutcome(t, res, robots.OutcomeUnavailable, "robots.txt: more than 5 redirects")
		if !errors.Is(res.Err, ErrTooManyRedirects) || res.Redirects != 5 || res.FinalURL != srv.URL+"/hop5" || res.Status != 301 {
			t.Errorf("err %v, redirects %d, final %s, status %d", res.Err, res.Redirects, res.FinalURL, res.Status)
		}
		if v := res.Check("bot", "/private/x"); !v.Allowed || v.Reason() != "robots.txt: more than 5 redirects: no restrictions" {
			t.Errorf("Check = %v %q", v.Allowed, v.Reason())
		}
	})

	for _, c := range []struct {
		name      string
		locations map[string]string // path → Location; other paths 404
		outcome   robots.Outcome
		detail    string
		target    error
		redirects int
	}{
		{"to itself", map[string]string{"/robots.txt": "/robots.txt"}, robots.OutcomeUnavailable, "robots.txt: redirect loop", ErrRedirectLoop, 0},
		{"loop", map[string]string{"/robots.txt": "/a", "/a": "/b", "/b": "/robots.txt"}, robots.OutcomeUnavailable, "robots.txt: redirect loop", ErrRedirectLoop, 2},
		{"loop spelled differently", map[string]string{"/robots.txt": "/a", "/a": "HTTP://127.0.0.1:{port}/robots.txt#x"}, robots.OutcomeUnavailable, "robots.txt: redirect loop", ErrRedirectLoop, 1},
		{"no Location", map[string]string{"/robots.txt": ""}, robots.OutcomeUnreachable, "robots.txt 302 without a usable Location", ErrBadRedirect, 0},
		{"bad Location", map[string]string{"/robots.txt": "http://[::1"}, robots.OutcomeUnreachable, "robots.txt 302 without a usable Location", ErrBadRedirect, 0},
		{"to ftp", map[string]string{"/robots.txt": "ftp://127.0.0.1/robots.txt"}, robots.OutcomeUnreachable, "robots.txt: redirect to a non-HTTP URL", ErrBadRedirect, 0},
		{"to no host", map[string]string{"/robots.txt": "http:///robots.txt"}, robots.OutcomeUnreachable, "robots.txt 302 without a usable Location", ErrBadRedirect, 0},
		{"to mailto", map[string]string{"/robots.txt": "mailto:webmaster@example.com"}, robots.OutcomeUnreachable, "robots.txt: redirect to a non-HTTP URL", ErrBadRedirect, 0},
		{"relative, then 404", map[string]string{"/robots.txt": "new/../robots-v2.txt?x=1"}, robots.OutcomeUnavailable, "robots.txt 404", nil, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			var srv *httptest.Server
			srv = serve(t, func(w http.ResponseWriter, r *http.Request) {
				loc, ok := c.locations[r.URL.Path]
				if !ok {
					http.NotFound(w, r)
					return
				}
				if loc != "" {
					_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
					w.Header().Set("Location", strings.ReplaceAll(loc, "{port}", port))
				}
				w.WriteHeader(http.StatusFound)
			})
			res := newTestFetcher(t, Options{}).Fetch(t.Context(), srv.URL)
			wantOutcome(t, res, c.outcome, c.detail)
			if c.target != nil && !errors.Is(res.Err, c.target) {
				t.Errorf("err %v, want %v", res.Err, c.target)
			}
			if int(res.Redirects) != c.redirects {
				t.Errorf("redirects %d, want %d", res.Redirects, c.redirects)
			}
		})
	}
}

func TestFetchCrossOriginRedirects(t *testing.T) {
	var hostSeen string
	var mu sync.Mutex
	target := serve(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hostSeen = r.Host
		mu.Unlock()
		io.WriteString(w, testRules)
	})
	_, targetPort, _ := net.SplitHostPort(target.Listener.Addr().String())
	tlsTarget, pool := serveTLS(t, func(w http.ResponseWriter, _ *http.Request) {
		io.WriteString(w, "User-agent: *\nDisallow: /tls/\n")
	})
	redirectTo := func(location string) *httptest.Server {
		return serve(t, func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, location, http.StatusMovedPermanently)
		})
	}

	t.Run("another host", func(t *testing.T) {
		// localhost is 127.0.0.1 by /etc/hosts: another authority, same machine.
		srv := redirectTo("http://localhost:" + targetPort + "/robots.txt")
		res := newTestFetcher(t, Options{}).Fetch(t.Context(), srv.URL)
		wantOutcome(t, res, robots.OutcomeOK, "")
		if res.Origin != srv.URL || res.FinalURL != "http://localhost:"+targetPort+"/robots.txt" || res.Redirects != 1 {
			t.Errorf("origin %s, final %s, redirects %d", res.Origin, res.FinalURL, res.Redirects)
		}
		mu.Lock()
		if hostSeen != "localhost:"+targetPort {
			t.Errorf("target saw Host %q", hostSeen)
		}
		mu.Unlock()
		if v := res.Check("bot", "/private/x"); v.Allowed {
			t.Errorf("the target's rules must apply to the original origin: /private/x allowed (%s)", v.Reason())
		}
	})
	t.Run("http to https", func(t *testing.T) {
		srv := redirectTo(tlsTarget.URL + "/robots.txt")
		res := newTestFetcher(t, Options{RootCAs: pool}).Fetch(t.Context(), srv.URL)
		wantOutcome(t, res, robots.OutcomeOK, "")
		if res.FinalURL != tlsTarget.URL+"/robots.txt" || res.Origin != srv.URL {
			t.Errorf("origin %s, final %s", res.Origin, res.FinalURL)
		}
		if v := res.Check("bot", "/tls/x"); v.Allowed {
			t.Errorf("/tls/x allowed (%s)", v.Reason())
		}
	})
	t.Run("https to http", func(t *testing.T) {
		srv, pool := serveTLS(t, func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, target.URL+"/robots.txt", http.StatusFound)
		})
		res := newTestFetcher(t, Options{RootCAs: pool}).Fetch(t.Context(), srv.URL)
		wantOutcome(t, res, robots.OutcomeOK, "")
		if res.FinalURL != target.URL+"/robots.txt" || res.Origin != srv.URL {
			t.Errorf("origin %s, final %s", res.Origin, res.FinalURL)
		}
	})
}

func TestFetchNetworkErrors(t *testing.T) {
	tlsSrv, pool := serveTLS(t, func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, testRules) })
	_, tlsPort, _ := net.SplitHostPort(tlsSrv.Listener.Addr().String())
	plain := serveBody(t, http.StatusOK, testRules)
	for _, c := range []struct {
		name   string
		origin string
		opts   Options
		detail string
	}{
		{"refused", "http://" + freePort(t), Options{}, "robots.txt unreachable: connection refused"},
		// RFC 6761: no resolver is asked about .invalid names.
		{"no such host", "http://robotsgate-test.invalid", Options{}, "robots.txt unreachable: host not found"},
		{"untrusted certificate", tlsSrv.URL, Options{}, "robots.txt unreachable: TLS certificate not trusted"},
		// The test certificate names example.com and 127.0.0.1, not localhost.
		{"certificate for another host", "https://localhost:" + tlsPort, Options{RootCAs: pool}, "robots.txt unreachable: TLS certificate names another host"},
		{"TLS to a plain HTTP origin", strings.Replace(plain.URL, "http:", "https:", 1), Options{}, "robots.txt unreachable: TLS handshake failed"},
		{"invalid origin", "ftp://127.0.0.1/", Options{}, "robots.txt: invalid origin"},
	} {
		t.Run(c.name, func(t *testing.T) {
			res := newTestFetcher(t, c.opts).Fetch(t.Context(), c.origin)
			wantOutcome(t, res, robots.OutcomeUnreachable, c.detail)
			if res.Status != 0 || res.Bytes != 0 {
				t.Errorf("status %d, bytes %d", res.Status, res.Bytes)
			}
			if v := res.Check("bot", "/"); v.Allowed || v.Reason() != c.detail+": complete disallow" {
				t.Errorf("Check = %v %q", v.Allowed, v.Reason())
			}
		})
	}
	// Trusting the server's certificate makes the same origin work.
	if res := newTestFetcher(t, Options{RootCAs: pool}).Fetch(t.Context(), tlsSrv.URL); res.Outcome != robots.OutcomeOK {
		t.Errorf("trusted TLS origin: %v, %v", res.Outcome, res.Err)
	}
}

func TestFetchHTTP2(t *testing.T) {
	var proto string
	var mu sync.Mutex
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		proto = r.Proto
		mu.Unlock()
		io.WriteString(w, testRules)
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())
	res := newTestFetcher(t, Options{RootCAs: pool}).Fetch(t.Context(), srv.URL)
	wantOutcome(t, res, robots.OutcomeOK, "")
	mu.Lock()
	defer mu.Unlock()
	if proto != "HTTP/2.0" {
		t.Errorf("origin saw %s, want HTTP/2.0", proto)
	}
}

// The origin sees who is asking, and nothing of anyone else: no cookie
// (even one it set), no credentials (even ones in a Location), no Referer.
func TestFetchSendsOnlyItsIdentity(t *testing.T) {
	type seen struct{ path, ua, accept, cookie, auth, referer string }
	var mu sync.Mutex
	var got []seen
	var srv *httptest.Server
	srv = serve(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, seen{r.URL.Path, r.UserAgent(), r.Header.Get("Accept"), r.Header.Get("Cookie"), r.Header.Get("Authorization"), r.Referer()})
		mu.Unlock()
		if r.URL.Path == "/robots.txt" {
			http.SetCookie(w, &http.Cookie{Name: "session", Value: "secret"})
			w.Header().Set("Location", "http://user:password@"+srv.Listener.Addr().String()+"/final")
			w.WriteHeader(http.StatusFound)
			return
		}
		io.WriteString(w, testRules)
	})
	ua := DefaultUserAgent("1.2.3")
	res := newTestFetcher(t, Options{UserAgent: ua}).Fetch(t.Context(), "http://someone:pw@"+srv.Listener.Addr().String())
	wantOutcome(t, res, robots.OutcomeOK, "")
	if res.FinalURL != srv.URL+"/final" {
		t.Errorf("final URL %s keeps credentials or lost its path", res.FinalURL)
	}
	mu.Lock()
	if len(got) != 2 {
		t.Errorf("origin saw %d requests, want 2", len(got))
	}
	for _, s := range got {
		if s.ua != ua || s.accept != acceptHeader || s.cookie != "" || s.auth != "" || s.referer != "" {
			t.Errorf("origin saw %+v", s)
		}
	}
	got = nil
	mu.Unlock()

	// Without a User-Agent, robotsgate still says who it is; control
	// characters cannot split a header.
	for _, c := range []struct{ given, want string }{
		{"", DefaultUserAgent("")},
		{"mybot/1.0\r\nX-Injected: 1", "mybot/1.0X-Injected: 1"},
	} {
		newTestFetcher(t, Options{UserAgent: c.given}).Fetch(t.Context(), srv.URL)
		mu.Lock()
		if len(got) == 0 || got[0].ua != c.want {
			t.Errorf("UserAgent %q: origin saw %+v, want %q", c.given, got, c.want)
		}
		got = nil
		mu.Unlock()
	}
}

func TestDefaultUserAgent(t *testing.T) {
	for _, c := range []struct{ version, want string }{
		{"1.2.3", "robotsgate/1.2.3 (+https://github.com/robotsgate/robotsgate#for-site-owners)"},
		{"v0.4.0-rc.1+dirty", "robotsgate/v0.4.0-rc.1+dirty (+https://github.com/robotsgate/robotsgate#for-site-owners)"},
		{"(devel)", "robotsgate/devel (+https://github.com/robotsgate/robotsgate#for-site-owners)"},
		{"", "robotsgate (+https://github.com/robotsgate/robotsgate#for-site-owners)"},
		{" /() ", "robotsgate (+https://github.com/robotsgate/robotsgate#for-site-owners)"},
	} {
		got := DefaultUserAgent(c.version)
		if got != c.want {
			t.Errorf("DefaultUserAgent(%q) = %q, want %q", c.version, got, c.want)
		}
		// Site owners write "User-agent: robotsgate": the UA starts with it.
		if name, _ := robots.ProductName(got); name != "robotsgate" {
			t.Errorf("ProductName(%q) = %q", got, name)
		}
	}
}

func TestFetchContext(t *testing.T) {
	t.Run("cancelled before", func(t *testing.T) {
		srv := serveBody(t, http.StatusOK, testRules)
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		res := newTestFetcher(t, Options{}).Fetch(ctx, srv.URL)
		wantOutcome(t, res, robots.OutcomeUnreachable, "robots.txt unreachable: cancelled")
		if !errors.Is(res.Err, context.Canceled) {
			t.Errorf("err %v, want context.Canceled", res.Err)
		}
	})
	t.Run("cancelled while waiting", func(t *testing.T) {
		asked := make(chan struct{})
		origin := rawServer(t, func(c net.Conn, _ *http.Request) {
			close(asked)
			io.Copy(io.Discard, c)
		})
		ctx, cancel := context.WithCancel(t.Context())
		go func() {
			<-asked
			cancel()
		}()
		const timeout = time.Minute
		res, timing := newTestFetcher(t, Options{Timeout: timeout}).FetchTimed(ctx, origin)
		wantOutcome(t, res, robots.OutcomeUnreachable, "robots.txt unreachable: cancelled")
		if !errors.Is(res.Err, context.Canceled) {
			t.Errorf("err %v, want context.Canceled", res.Err)
		}
		// Returned on the cancel, not at the Timeout.
		if timing.Duration >= timeout/2 {
			t.Errorf("fetch took %v after a cancel", timing.Duration)
		}
	})
	t.Run("caller's deadline", func(t *testing.T) {
		origin := rawServer(t, func(c net.Conn, _ *http.Request) { io.Copy(io.Discard, c) })
		ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
		defer cancel()
		res, timing := newTestFetcher(t, Options{Timeout: time.Minute}).FetchTimed(ctx, origin)
		wantOutcome(t, res, robots.OutcomeUnreachable, "robots.txt unreachable: timeout")
		if timing.Duration >= 30*time.Second {
			t.Errorf("fetch took %v past the caller's deadline", timing.Duration)
		}
	})
}

func TestFetchFreshness(t *testing.T) {
	date := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	srv := serve(t, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Cache-Control", "public, max-age=600")
		w.Header().Set("Age", "100")
		w.Header().Set("Date", date.Format(http.TimeFormat))
		io.WriteString(w, testRules)
	})
	_, timing := newTestFetcher(t, Options{}).FetchTimed(t.Context(), srv.URL)
	ttl, ok := timing.Freshness.TTL()
	if !ok || ttl != 500*time.Second || !timing.Freshness.Date.Equal(date) {
		t.Errorf("freshness %+v: TTL %v %v, want 500s", timing.Freshness, ttl, ok)
	}

	// A 404 says how long it lasts too.
	gone := serve(t, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(http.StatusNotFound)
	})
	_, timing = newTestFetcher(t, Options{}).FetchTimed(t.Context(), gone.URL)
	if ttl, ok := timing.Freshness.TTL(); !ok || ttl != 0 || !timing.Freshness.NoStore {
		t.Errorf("404 freshness %+v: TTL %v %v", timing.Freshness, ttl, ok)
	}
}

func TestFreshnessOf(t *testing.T) {
	received := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	date := received.Add(-2 * time.Second) // the origin's clock is a little behind
	httpDate := func(t time.Time) string { return t.Format(http.TimeFormat) }
	for _, c := range []struct {
		name    string
		headers map[string][]string
		ttl     time.Duration
		has     bool
	}{
		{"none", nil, 0, false},
		{"max-age", map[string][]string{"Cache-Control": {"max-age=3600"}}, time.Hour, true},
		{"max-age, case and spaces", map[string][]string{"Cache-Control": {" Public ,  MAX-AGE = 60 "}}, time.Minute, true},
		{"quoted max-age", map[string][]string{"Cache-Control": {`max-age="60"`}}, time.Minute, true},
		{"s-maxage wins", map[string][]string{"Cache-Control": {"max-age=60, s-maxage=7200"}}, 2 * time.Hour, true},
		{"s-maxage wins in any order", map[string][]string{"Cache-Control": {"s-maxage=7200", "max-age=60"}}, 2 * time.Hour, true},
		{"first max-age counts", map[string][]string{"Cache-Control": {"max-age=60, max-age=7200"}}, time.Minute, true},
		{"max-age=0", map[string][]string{"Cache-Control": {"max-age=0"}}, 0, true},
		{"invalid max-age is stale", map[string][]string{"Cache-Control": {"max-age=soon"}}, 0, true},
		{"negative max-age is stale", map[string][]string{"Cache-Control": {"max-age=-5"}}, 0, true},
		{"huge max-age is capped", map[string][]string{"Cache-Control": {"max-age=99999999999999999999999"}}, maxDeltaSeconds * time.Second, true},
		{"no-store", map[string][]string{"Cache-Control": {"max-age=3600, no-store"}}, 0, true},
		{"no-cache", map[string][]string{"Cache-Control": {"no-cache, max-age=3600"}}, 0, true},
		{"no-cache naming fields", map[string][]string{"Cache-Control": {`no-cache="Set-Cookie, X-Foo", max-age=60`}}, time.Minute, true},
		{"private is ignored", map[string][]string{"Cache-Control": {"private, max-age=60"}}, time.Minute, true},
		{"must-revalidate keeps the lifetime", map[string][]string{"Cache-Control": {"must-revalidate, max-age=60"}}, time.Minute, true},
		{"Age is deducted", map[string][]string{"Cache-Control": {"max-age=600"}, "Age": {"100"}}, 500 * time.Second, true},
		{"Age past the lifetime", map[string][]string{"Cache-Control": {"max-age=600"}, "Age": {"900"}}, 0, true},
		{"garbage Age is ignored", map[string][]string{"Cache-Control": {"max-age=600"}, "Age": {"old"}}, 600 * time.Second, true},
		{"Expires from Date", map[string][]string{"Date": {httpDate(date)}, "Expires": {httpDate(date.Add(90 * time.Minute))}}, 90 * time.Minute, true},
		{"Expires without Date counts from arrival", map[string][]string{"Expires": {httpDate(received.Add(time.Hour))}}, time.Hour, true},
		{"Expires in an old format", map[string][]string{"Date": {httpDate(date)}, "Expires": {date.Add(time.Hour).Format(time.RFC850)}}, time.Hour, true},
		{"Expires in the past", map[string][]string{"Date": {httpDate(date)}, "Expires": {httpDate(date.Add(-time.Hour))}}, 0, true},
		{"Expires: 0", map[string][]string{"Expires": {"0"}}, 0, true},
		{"garbage Expires is expired", map[string][]string{"Expires": {"next tuesday"}}, 0, true},
		{"max-age beats Expires", map[string][]string{"Cache-Control": {"max-age=60"}, "Date": {httpDate(date)}, "Expires": {httpDate(date.Add(time.Hour))}}, time.Minute, true},
		{"garbage Cache-Control", map[string][]string{"Cache-Control": {`foo, bar="baz, qux", =, ,,`}}, 0, false},
		{"unterminated quote", map[string][]string{"Cache-Control": {`foo="bar, max-age=60`}}, 0, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := freshnessOf(http.Header(c.headers), received)
			ttl, has := f.TTL()
			if ttl != c.ttl || has != c.has {
				t.Errorf("TTL() = %v, %v; want %v, %v (%+v)", ttl, has, c.ttl, c.has, f)
			}
		})
	}
	f := freshnessOf(http.Header{"Cache-Control": {"no-cache, no-store, s-maxage=5"}}, received)
	if !f.NoCache || !f.NoStore || !f.HasMaxAge || f.MaxAge != 5*time.Second || !f.Date.Equal(received) {
		t.Errorf("fields %+v", f)
	}
}

// results builds one Result per outcome as Fetch does, from real
// origins.
func results(t *testing.T) map[string]*Result {
	t.Helper()
	f := newTestFetcher(t, Options{AuthDisallow: true})
	return map[string]*Result{
		"ok":          f.Fetch(t.Context(), serveBody(t, http.StatusOK, testRules).URL),
		"unavailable": f.Fetch(t.Context(), serveBody(t, http.StatusNotFound, "").URL),
		"unreachable": f.Fetch(t.Context(), "http://"+freePort(t)),
		"restricted":  f.Fetch(t.Context(), serveBody(t, http.StatusUnauthorized, "").URL),
		"5xx":         f.Fetch(t.Context(), serveBody(t, http.StatusServiceUnavailable, "").URL),
	}
}

func TestResultCheck(t *testing.T) {
	rs := results(t)
	for _, c := range []struct {
		result  *Result
		outcome string
		allowed bool
		reason  string
	}{
		{rs["ok"], "ok", false, "disallow: /private/ (line 2)"},
		{rs["unavailable"], "unavailable", true, "robots.txt 404: no restrictions"},
		{rs["unreachable"], "unreachable", false, "robots.txt unreachable: connection refused: complete disallow"},
		{rs["restricted"], "restricted", false, "robots.txt 401: complete disallow"},
		{rs["5xx"], "unreachable", false, "robots.txt 503: complete disallow"},
		{&Result{}, "outcome 0", false, "complete disallow"},
	} {
		r := c.result
		if r.Outcome.String() != c.outcome {
			t.Errorf("outcome %q, want %q", r.Outcome, c.outcome)
		}
		if v := r.Check("bot", "/private/x"); v.Allowed != c.allowed || v.Reason() != c.reason {
			t.Errorf("%s: Check = %v %q, want %v %q", c.outcome, v.Allowed, v.Reason(), c.allowed, c.reason)
		}
		for _, path := range []string{"/robots.txt", "/%72obots.txt"} {
			if v := r.Check("bot", path); !v.Allowed || v.Cause != robots.CauseRobotsTxt {
				t.Errorf("%s: Check(%q) = %v %q, want always allowed", c.outcome, path, v.Allowed, v.Reason())
			}
		}
		// With a query it is a URL like any other.
		if v := r.Check("bot", "/robots.txt?x=1"); v.Cause == robots.CauseRobotsTxt {
			t.Errorf("%s: Check(/robots.txt?x=1) exempt: %q", c.outcome, v.Reason())
		}
	}
}

func TestResultCheckDoesNotAllocate(t *testing.T) {
	for name, r := range results(t) {
		for _, path := range []string{"/private/x", "/robots.txt", "/"} {
			if allocs := testing.AllocsPerRun(100, func() { r.Check("Googlebot", path) }); allocs != 0 {
				t.Errorf("%s: Check(%q) allocates %v times", name, path, allocs)
			}
		}
	}
}

func TestResultRetainedBytes(t *testing.T) {
	rs := results(t)
	ok := rs["ok"]
	if got, rules := ok.RetainedBytes(), ok.Robots.RetainedBytes(); got <= rules {
		t.Errorf("RetainedBytes %d, not more than the rules' %d", got, rules)
	}
	failed := rs["unreachable"]
	if got, min := failed.RetainedBytes(), int64(len(failed.Err.Error())+len(failed.FinalURL)); got < min {
		t.Errorf("RetainedBytes %d, below the %d bytes of its strings", got, min)
	}
	var none *Result
	if none.RetainedBytes() != 0 {
		t.Error("nil result retains bytes")
	}
}

func TestOutcomeString(t *testing.T) {
	for o, want := range map[robots.Outcome]string{
		robots.OutcomeOK: "ok", robots.OutcomeUnavailable: "unavailable", robots.OutcomeUnreachable: "unreachable",
		robots.OutcomeRestricted: "restricted", 0: "outcome 0", 42: "outcome 42",
	} {
		if got := o.String(); got != want {
			t.Errorf("robots.Outcome(%d).String() = %q, want %q", o, got, want)
		}
	}
}

// BenchmarkFetch fetches a robots.txt of a big site's size (about 40 KiB,
// a few hundred rules in a few groups) from a local origin, a connection
// reused: the fetcher's own cost, parsing included.
func BenchmarkFetch(b *testing.B) {
	var rules strings.Builder
	for _, agent := range []string{"*", "Googlebot", "bingbot", "GPTBot"} {
		fmt.Fprintf(&rules, "User-agent: %s\n", agent)
		for i := range 150 {
			fmt.Fprintf(&rules, "Disallow: /section-%d/*?sort=\nAllow: /section-%d/public/\n", i, i)
		}
	}
	body := []byte(rules.String())
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write(body) }))
	defer srv.Close()
	f := New(Options{})
	defer f.Close()
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if res := f.Fetch(b.Context(), srv.URL); res.Outcome != robots.OutcomeOK {
			b.Fatal(res.Err)
		}
	}
}

func BenchmarkResultCheck(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(503) }))
	defer srv.Close()
	f := New(Options{})
	defer f.Close()
	res := f.Fetch(b.Context(), srv.URL)
	b.ReportAllocs()
	for b.Loop() {
		res.Check("Googlebot", "/some/path?q=1")
	}
}
