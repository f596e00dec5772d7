package proxy

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"
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
// before Shutdown returns, plainly and inside an intercepted tunnel; an
// idle tunnel is closed at once, as an idle keep-alive connection is.
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
				second.conn.SetReadDeadline(time.Now().Add(testTimeout))
				if n, err := readAllBounded(t, second.conn); n != "" || err != nil {
					t.Errorf("idle tunnel during shutdown: read %q, %v; want it closed", n, err)
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

			recs := decodeRecords(t, p.auditTo.String())
			rec := recordFor(t, recs, "GET", slow.URL+"/slow")
			if !rec.Forwarded || rec.Status != 200 || rec.Bytes != int64(len(slowFirst+slowSecond)) || rec.Error != "" {
				t.Errorf("record of the request in flight: %+v", rec)
			}
			if len(recs) != 1 {
				t.Errorf("%d records, want the one of the request in flight: %+v", len(recs), recs)
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

// TestRunStopsWhenContextEnds: Run serves until its context ends (the
// signal main waits for), then lets the request in flight finish within
// the grace period and returns nil; the listener takes no one after.
func TestRunStopsWhenContextEnds(t *testing.T) {
	slow := startSlowOrigin(t, false)
	p := newTestServer(t, proxyConfig{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.addr = ln.Addr().String()
	ctx, stop := context.WithCancel(t.Context())
	ran := make(chan error, 1)
	go func() { ran <- p.srv.Run(ctx, ln, testTimeout) }()

	resp, err := p.client().Get(slow.URL + "/slow")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	first := make([]byte, len(slowFirst))
	if _, err := io.ReadFull(resp.Body, first); err != nil {
		t.Fatal(err)
	}
	stop()
	slow.releaseOnce()
	if rest, err := readAllBounded(t, resp.Body); err != nil || rest != slowSecond {
		t.Errorf("second half = %q, %v; want it whole", rest, err)
	}
	select {
	case err := <-ran:
		if err != nil {
			t.Errorf("Run = %v, want nil", err)
		}
	case <-time.After(testTimeout):
		t.Fatal("Run did not return after its context ended")
	}
	if c, err := net.DialTimeout("tcp", p.addr, testTimeout); err == nil {
		c.Close()
		t.Error("the listener still accepts after Run returned")
	}
}
