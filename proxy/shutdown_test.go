package proxy

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"robotsgate/proxy/audit"
)

// readAllBounded reads r to the end and fails if that meant waiting for a
// client timeout: the proxy must end the response itself.
func readAllBounded(t *testing.T, r io.Reader) (string, error) {
	t.Helper()
	b, err := io.ReadAll(r)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("reading the response timed out: %v", err)
	}
	return string(b), err
}

// TestShutdownWaitsForRequestsInFlight checks a graceful stop: a response
// still streaming when Shutdown begins is delivered whole and recorded
// before Shutdown returns, plainly and inside an intercepted tunnel; a new
// request inside an open tunnel gets 503; idle tunnels are closed at the
// end.
func TestShutdownWaitsForRequestsInFlight(t *testing.T) {
	for _, tc := range []struct {
		name string
		mitm bool
	}{{"http", false}, {"mitm", true}} {
		t.Run(tc.name, func(t *testing.T) {
			slow := startSlowOrigin(t, tc.mitm)
			p := startProxy(t, proxyConfig{mitm: tc.mitm, roots: slow.roots})

			resp, err := p.client().Get(slow.URL + "/slow")
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			first := make([]byte, len(slowFirst))
			if _, err := io.ReadFull(resp.Body, first); err != nil || string(first) != slowFirst {
				t.Fatalf("first half = %q, %v", first, err)
			}

			// A second tunnel, open and idle when Shutdown begins.
			var second *clientTunnel
			if tc.mitm {
				conn, cresp := connect(t, p.addr, slow.host(), curlUA)
				if cresp.StatusCode != 200 {
					t.Fatalf("CONNECT = %d", cresp.StatusCode)
				}
				second = openTLS(t, conn, "127.0.0.1", p.caPool())
			}

			// The audit log is closed as soon as Shutdown returns, as
			// main does: a record written later would be lost.
			stopped := make(chan error, 1)
			go func() {
				err := p.shutdown(t.Context())
				p.auditW.Close()
				stopped <- err
			}()
			<-p.ln.closed

			if second != nil {
				resp, body := second.do("GET", slow.host(), "/page", curlUA)
				if resp.StatusCode != http.StatusServiceUnavailable || body != "robotsgate is shutting down\n" {
					t.Errorf("request inside a tunnel during shutdown = %d %q, want 503", resp.StatusCode, body)
				}
			}
			select {
			case err := <-stopped:
				t.Fatalf("Shutdown returned (%v) while a request was still in flight", err)
			default:
			}

			slow.releaseOnce()
			if rest, err := readAllBounded(t, resp.Body); err != nil || rest != slowSecond {
				t.Errorf("second half = %q, %v; want it whole", rest, err)
			}
			if err := <-stopped; err != nil {
				t.Errorf("Shutdown = %v, want nil", err)
			}
			if second != nil {
				// Closed by Shutdown, not left to time out.
				second.conn.SetReadDeadline(time.Now().Add(testTimeout))
				readAllBounded(t, second.conn)
			}

			recs := decodeRecords(t, p.auditTo.String())
			rec := recordFor(t, recs, "GET", slow.URL+"/slow")
			if !rec.Forwarded || rec.Status != 200 || rec.Bytes != int64(len(slowFirst+slowSecond)) || rec.Error != "" {
				t.Errorf("record of the request in flight: %+v", rec)
			}
			if tc.mitm {
				want := audit.Record{
					Method: "GET", URL: slow.URL + "/page", Tunnel: slow.host(), UserAgent: curlUA,
					Verdict: "error", Reason: "robotsgate is shutting down", PathsChecked: true, Mode: "enforce", Status: 503,
				}
				checkRecord(t, recordFor(t, recs, "GET", slow.URL+"/page"), want)
			}
		})
	}
}

// TestShutdownGraceExpires checks that once the grace period is over the
// remaining connections are closed, plain and tunnelled, and Shutdown says
// requests were still in flight.
func TestShutdownGraceExpires(t *testing.T) {
	plain := startSlowOrigin(t, false)
	secure := startSlowOrigin(t, true)
	p := startProxy(t, proxyConfig{mitm: true, roots: secure.roots})
	c := p.client()

	var bodies []io.ReadCloser
	for _, u := range []string{plain.URL + "/slow", secure.URL + "/slow"} {
		resp, err := c.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		first := make([]byte, len(slowFirst))
		if _, err := io.ReadFull(resp.Body, first); err != nil {
			t.Fatalf("%s: first half: %v", u, err)
		}
		bodies = append(bodies, resp.Body)
	}

	ctx, cancel := context.WithCancel(t.Context())
	cancel() // the grace period is already over
	err := p.shutdown(ctx)
	if err == nil || !strings.Contains(err.Error(), "requests still in flight") || !errors.Is(err, context.Canceled) {
		t.Fatalf("Shutdown = %v, want an error saying requests were still in flight", err)
	}
	for i, body := range bodies {
		if rest, err := readAllBounded(t, body); err == nil {
			t.Errorf("response %d ended cleanly after %q; want its connection cut", i, rest)
		}
	}
}

func TestInflightRequests(t *testing.T) {
	var r inflightRequests
	isClosed := func(ch <-chan struct{}) bool {
		select {
		case <-ch:
			return true
		default:
			return false
		}
	}
	if !isClosed(r.idle()) {
		t.Fatal("idle() open with nothing in flight")
	}
	r.add()
	r.add()
	idle := r.idle()
	r.done()
	if isClosed(idle) {
		t.Fatal("idle() closed with one request still in flight")
	}
	r.add() // a request arriving while Shutdown waits
	r.done()
	r.done()
	if !isClosed(idle) {
		t.Fatal("idle() still open once every request is done")
	}
	r.add()
	if isClosed(r.idle()) {
		t.Fatal("idle() closed after a new request began")
	}
	r.done()

	// Requests coming and going while Shutdown waits must not upset the
	// count (run with -race).
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 1000 {
				r.add()
				r.idle()
				r.done()
			}
		})
	}
	wg.Wait()
	if !isClosed(r.idle()) || r.n != 0 {
		t.Fatalf("after balanced add/done: n = %d", r.n)
	}
}
