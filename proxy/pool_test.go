package proxy

import (
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"
)

// TestBurstsReuseOriginConnections checks that the connections a burst
// of concurrent requests opened to an origin are kept: by default all of
// them, so a second burst of the same size opens none, over plain HTTP
// and inside intercepted tunnels (where a new connection would cost a TLS
// handshake too). A smaller pool, or a smaller share per origin, keeps
// only that many, and the second burst opens the rest again.
func TestBurstsReuseOriginConnections(t *testing.T) {
	const burst = 48 // more than net/http's default per-origin idle pool, and than robotsgate's before
	for _, tc := range []struct {
		name            string
		tls             bool
		idle, perOrigin int
		wantNew         int // connections the second burst opens
	}{
		{name: "http", wantNew: 0},
		{name: "mitm", tls: true, wantNew: 0},
		{name: "smaller pool", idle: burst / 2, wantNew: burst / 2},
		{name: "smaller share per origin", idle: burst, perOrigin: burst / 4, wantNew: burst - burst/4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := startOrigin(t, originConfig{robots: testRobots, tls: tc.tls})
			// Every request waits at the origin until the whole burst has
			// arrived, so the burst holds that many connections at once.
			// Each connection is known by the proxy's port.
			var mu sync.Mutex
			arrived, release := 0, make(chan struct{})
			conns := map[string]bool{}
			opened := func() int {
				mu.Lock()
				defer mu.Unlock()
				return len(conns)
			}
			o.mux.HandleFunc("/burst/", func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				conns[r.RemoteAddr] = true
				if arrived++; arrived == burst {
					close(release)
				}
				mu.Unlock()
				select {
				case <-release:
				case <-time.After(testTimeout):
				}
				fmt.Fprintln(w, "ok")
			})
			p := startProxy(t, proxyConfig{mitm: tc.tls, roots: o.roots, audit: &lockedBuffer{},
				upstreamIdle: tc.idle, upstreamIdlePerOrigin: tc.perOrigin})
			c := p.client()
			c.Transport.(*http.Transport).MaxIdleConnsPerHost = burst
			if resp, _ := do(t, c, "GET", o.URL+"/warm", ua(curlUA)); resp.StatusCode != 200 { // robots.txt and one connection
				t.Fatalf("warm-up: status %d", resp.StatusCode)
			}

			runBurst := func() {
				t.Helper()
				mu.Lock()
				arrived, release = 0, make(chan struct{})
				mu.Unlock()
				var wg sync.WaitGroup
				for i := range burst {
					wg.Go(func() {
						if resp, body := do(t, c, "GET", fmt.Sprintf("%s/burst/%d", o.URL, i), ua(curlUA)); resp.StatusCode != 200 {
							t.Errorf("burst request %d: status %d %q", i, resp.StatusCode, body)
						}
					})
				}
				wg.Wait()
			}
			runBurst()
			afterFirst := opened()
			if afterFirst != burst {
				t.Fatalf("the first burst came over %d connections, want %d (one per request)", afterFirst, burst)
			}
			runBurst()
			if more := opened() - afterFirst; more != tc.wantNew {
				t.Errorf("the second burst opened %d new connections to the origin, want %d", more, tc.wantNew)
			}
		})
	}
}

// TestOriginSessionsResumed checks that a new connection to an HTTPS
// origin robotsgate has talked to before resumes the TLS session.
func TestOriginSessionsResumed(t *testing.T) {
	o := startOrigin(t, originConfig{robots: testRobots, tls: true})
	resumed := make(chan bool, 4)
	o.mux.HandleFunc("/tls", func(w http.ResponseWriter, r *http.Request) {
		resumed <- r.TLS.DidResume
		fmt.Fprintln(w, "ok")
	})
	p := startProxy(t, proxyConfig{mitm: true, roots: o.roots})
	c := p.client()
	for i, want := range []bool{false, true} {
		if resp, body := do(t, c, "GET", o.URL+"/tls", ua(curlUA)); resp.StatusCode != 200 {
			t.Fatalf("request %d: status %d %q", i+1, resp.StatusCode, body)
		}
		if got := <-resumed; got != want {
			t.Errorf("request %d: the origin saw a resumed session %v, want %v", i+1, got, want)
		}
		p.srv.transport.CloseIdleConnections() // the next request needs a new connection
	}
}

// TestOriginSpeaksHTTP2 checks that an HTTPS origin offering HTTP/2 is
// asked over it from inside an intercepted tunnel, with the path as
// judged; a disallowed one still never reaches it.
func TestOriginSpeaksHTTP2(t *testing.T) {
	o := startOrigin(t, originConfig{robots: testRobots, tls: true, http2: true})
	o.mux.HandleFunc("/h2/", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, r.Proto, r.RequestURI)
	})
	p := startProxy(t, proxyConfig{mitm: true, roots: o.roots})
	c := p.client()
	resp, body := do(t, c, "GET", o.URL+"/h2/a%2Fb?q=1", ua(curlUA))
	if want := "HTTP/2.0 /h2/a%2Fb?q=1\n"; resp.StatusCode != http.StatusOK || body != want {
		t.Errorf("status %d, body %q; want 200 %q", resp.StatusCode, body, want)
	}
	if resp, _ := do(t, c, "GET", o.URL+"/private/x", ua(curlUA)); resp.StatusCode != http.StatusForbidden {
		t.Errorf("GET /private/x: status %d, want 403", resp.StatusCode)
	}
	if o.saw("/private/x") {
		t.Error("the disallowed path reached the origin")
	}
}
