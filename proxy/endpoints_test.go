package proxy

import (
	"encoding/pem"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"

	"robotsgate/cache"
)

func TestCAPEM(t *testing.T) {
	t.Run("interception on", func(t *testing.T) {
		p := startProxy(t, proxyConfig{mitm: true})
		resp, body := do(t, p.direct(), "GET", p.url.String()+"/ca.pem", nil)
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/x-pem-file" {
			t.Fatalf("GET /ca.pem = %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		block, rest := pem.Decode([]byte(body))
		if block == nil || block.Type != "CERTIFICATE" || len(strings.TrimSpace(string(rest))) != 0 {
			t.Fatalf("/ca.pem is not one PEM certificate:\n%s", body)
		}
		if string(block.Bytes) != string(p.ca.Certificate().Raw) {
			t.Error("/ca.pem is not the CA the proxy signs with")
		}
		if cd := resp.Header.Get("Content-Disposition"); !strings.Contains(cd, "robotsgate-ca.pem") {
			t.Errorf("Content-Disposition %q does not name the file", cd)
		}
	})
	t.Run("interception off", func(t *testing.T) {
		p := startProxy(t, proxyConfig{})
		resp, body := do(t, p.direct(), "GET", p.url.String()+"/ca.pem", nil)
		if resp.StatusCode != 404 || !strings.Contains(body, "HTTPS interception is off") || !strings.Contains(body, "no CA") {
			t.Fatalf("GET /ca.pem without a CA = %d %q; want 404 saying interception is off", resp.StatusCode, body)
		}
	})
}

func TestInfoPage(t *testing.T) {
	for _, mitm := range []bool{false, true} {
		p := startProxy(t, proxyConfig{mitm: mitm})
		c := p.direct()
		resp, body := do(t, c, "GET", p.url.String()+"/", nil)
		if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") {
			t.Fatalf("GET / = %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		for _, want := range []string{
			"robotsgate test: a forward proxy that makes crawlers obey robots.txt (RFC 9309).",
			"HTTP_PROXY=http://" + p.addr + " and HTTPS_PROXY=http://" + p.addr,
			"/ca.pem ", "/healthz ", "/metrics ",
		} {
			if !strings.Contains(body, want) {
				t.Errorf("mitm=%v: the info page lacks %q:\n%s", mitm, want, body)
			}
		}
		caLine := "HTTPS is intercepted: make the crawler trust the CA at http://" + p.addr + "/ca.pem."
		if strings.Contains(body, caLine) != mitm {
			t.Errorf("mitm=%v: the info page says %q: %v", mitm, caLine, !mitm)
		}
		if resp, _ := do(t, c, "GET", p.url.String()+"/nothing-here", nil); resp.StatusCode != 404 {
			t.Errorf("GET /nothing-here = %d, want 404", resp.StatusCode)
		}
		if resp, _ := do(t, c, "POST", p.url.String()+"/", nil); resp.StatusCode != 405 {
			t.Errorf("POST / = %d, want 405", resp.StatusCode)
		}
	}
}

// TestMetrics checks /metrics after one allowed and one refused request
// inside an intercepted tunnel.
func TestMetrics(t *testing.T) {
	o := startOrigin(t, originConfig{robots: testRobots, tls: true})
	p := startProxy(t, proxyConfig{mitm: true, roots: o.roots})
	c := p.client()
	if resp, _ := do(t, c, "GET", o.URL+"/page", ua(curlUA)); resp.StatusCode != 200 {
		t.Fatalf("allowed request = %d", resp.StatusCode)
	}
	// The tunnel reads its next request only once the previous one is
	// finished, recorded and counted; a refused one is counted before it
	// is answered. So after this answer both are in the metrics.
	if resp, _ := do(t, c, "GET", o.URL+"/private/x", ua(curlUA)); resp.StatusCode != 403 {
		t.Fatalf("refused request = %d", resp.StatusCode)
	}

	resp, body := do(t, p.direct(), "GET", p.url.String()+"/metrics", nil)
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") {
		t.Fatalf("GET /metrics = %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	lines := map[string]bool{}
	for _, l := range strings.Split(body, "\n") {
		lines[l] = true
	}
	for _, want := range []string{
		`robotsgate_requests_total{forwarded="true",mode="enforce",verdict="allow"} 1`,
		`robotsgate_requests_total{forwarded="false",mode="enforce",verdict="disallow"} 1`,
		`robotsgate_request_duration_seconds_count{forwarded="true"} 1`,
		`robotsgate_request_duration_seconds_count{forwarded="false"} 1`,
		`robotsgate_upstream_bytes_total 18`, // "origin page /page\n"
		`robotsgate_robots_cache_lookups_total{result="miss"} 1`,
		`robotsgate_robots_cache_lookups_total{result="hit"} 1`,
		`robotsgate_robots_cache_lookups_total{result="stale"} 0`,
		`robotsgate_robots_cache_loads_total{outcome="ok"} 1`,
		`robotsgate_robots_cache_budget_bytes ` + strconv.FormatFloat(float64(cache.DefaultMaxBytes), 'g', -1, 64),
		`robotsgate_build_info{version="test"} 1`,
		`robotsgate_mitm_leaves_signed_total 1`,
		`robotsgate_mitm_cached_hosts 1`,
		`robotsgate_mitm_client_handshake_failures_total{cause="untrusted_ca"} 0`,
		`robotsgate_mitm_client_handshake_failures_total{cause="other"} 0`,
	} {
		if !lines[want] {
			t.Errorf("/metrics lacks the line %s", want)
		}
	}
	for _, prefix := range []string{"go_goroutines ", "process_open_fds "} {
		if !strings.Contains(body, "\n"+prefix) {
			t.Errorf("/metrics lacks %s", prefix)
		}
	}
	if t.Failed() {
		t.Logf("/metrics:\n%s", body)
	}

	// Without interception there is no issuer to report on.
	off := startProxy(t, proxyConfig{})
	resp, body = do(t, off.direct(), "GET", off.url.String()+"/metrics", nil)
	if resp.StatusCode != 200 || strings.Contains(body, "robotsgate_mitm_") || !strings.Contains(body, "robotsgate_robots_cache_lookups_total") {
		t.Errorf("GET /metrics without interception = %d, mitm metrics %v", resp.StatusCode, strings.Contains(body, "robotsgate_mitm_"))
	}
}

// slowOrigin streams a response in two halves and holds the second until
// release is closed, so a test can act while a request is in flight.
type slowOrigin struct {
	*origin
	started     chan struct{} // closed once the first half is sent
	release     chan struct{}
	releaseOnce func()
}

const slowFirst, slowSecond = "first half\n", "second half\n"

func startSlowOrigin(t *testing.T, tls bool) *slowOrigin {
	t.Helper()
	s := &slowOrigin{
		origin:  startOrigin(t, originConfig{robots: testRobots, tls: tls}),
		started: make(chan struct{}),
		release: make(chan struct{}),
	}
	var once sync.Once
	s.mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, slowFirst)
		w.(http.Flusher).Flush()
		once.Do(func() { close(s.started) })
		select {
		case <-s.release:
			io.WriteString(w, slowSecond)
		case <-r.Context().Done():
		}
	})
	s.releaseOnce = sync.OnceFunc(func() { close(s.release) })
	// Release before the origin's own cleanup, which waits for handlers.
	t.Cleanup(s.releaseOnce)
	return s
}

// TestHealthz checks /healthz answers "ok" while the proxy serves.
func TestHealthz(t *testing.T) {
	p := startProxy(t, proxyConfig{})
	if resp, body := do(t, p.direct(), "GET", p.url.String()+"/healthz", nil); resp.StatusCode != 200 || body != "ok\n" {
		t.Fatalf("GET /healthz = %d %q, want 200 ok", resp.StatusCode, body)
	}
}
