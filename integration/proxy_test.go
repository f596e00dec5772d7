package integration

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// privateRobots disallows /private/ for every crawler, on line 2.
const privateRobots = "User-agent: *\nDisallow: /private/\n"

// checkRefusal asserts the 403 robotsgate answers for a path that
// privateRobots disallows, naming the rule, its line and the robots.txt.
func checkRefusal(t *testing.T, r reply, robotsURL string) {
	t.Helper()
	if r.status != http.StatusForbidden {
		t.Fatalf("status %d, want 403; body %q", r.status, r.body)
	}
	decision := r.header.Get("X-Robotsgate-Decision")
	for _, want := range []string{"disallow", `rule="/private/"`, "line=2", `robots="` + robotsURL + `"`} {
		if !strings.Contains(decision, want) {
			t.Errorf("X-Robotsgate-Decision %q lacks %q", decision, want)
		}
	}
	for _, want := range []string{"Disallow: /private/ (line 2)", robotsURL} {
		if !bytes.Contains(r.body, []byte(want)) {
			t.Errorf("403 body lacks %q:\n%s", want, r.body)
		}
	}
}

func randomBytes(t *testing.T, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	rand.Read(b)
	return b
}

func bytesPage(body []byte) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.Write(body)
	}
}

// lockstepStream writes chunks one at a time, flushing each, and writes
// the next only once the client says, on ack, that it has read the last:
// a proxy that held the response back would never see the second chunk
// asked for.
func lockstepStream(chunks [][]byte, ack <-chan struct{}) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/octet-stream")
		for i, c := range chunks {
			w.Write(c)
			w.(http.Flusher).Flush()
			if i == len(chunks)-1 {
				return
			}
			select {
			case <-ack:
			case <-r.Context().Done():
				return
			case <-time.After(requestTimeout):
				return
			}
		}
	}
}

// readLockstep reads the lockstep stream at rawURL, acknowledging each
// chunk, and checks every chunk and the end.
func readLockstep(t *testing.T, client *http.Client, rawURL string, chunks [][]byte, ack chan<- struct{}) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, rawURL, nil)
	req.Header.Set("User-Agent", crawlerUA)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", rawURL, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: status %d", rawURL, resp.StatusCode)
	}
	for i, want := range chunks {
		got := make([]byte, len(want))
		if _, err := io.ReadFull(resp.Body, got); err != nil {
			t.Fatalf("chunk %d: %v (was the stream held back?)", i, err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("chunk %d differs from what the origin sent", i)
		}
		if i < len(chunks)-1 {
			select {
			case ack <- struct{}{}:
			case <-time.After(requestTimeout):
				t.Fatalf("the origin stopped waiting for chunk %d's acknowledgement", i)
			}
		}
	}
	if rest, err := io.ReadAll(resp.Body); err != nil || len(rest) > 0 {
		t.Fatalf("after the last chunk: %d more bytes, err %v", len(rest), err)
	}
}

// TestProxyRelaysAllowedAndRefusesDisallowed drives HTTP and intercepted
// HTTPS origins through the proxy with a client that trusts only
// robotsgate's CA: allowed responses arrive byte for byte, streamed ones
// chunk by chunk, and disallowed requests are answered 403 without the
// origin hearing of them.
func TestProxyRelaysAllowedAndRefusesDisallowed(t *testing.T) {
	t.Parallel()
	big := randomBytes(t, 8<<20)
	chunks := make([][]byte, 5)
	for i := range chunks {
		chunks[i] = randomBytes(t, 1000+i)
	}
	type site struct {
		name string
		o    *origin
		ack  chan struct{}
	}
	var sites []site
	for _, useTLS := range []bool{false, true} {
		s := site{name: "http", ack: make(chan struct{})}
		if useTLS {
			s.name = "https intercepted"
		}
		s.o = newOrigin(t, useTLS, map[string]http.HandlerFunc{
			"/robots.txt": robotsTxt(privateRobots),
			"/big":        bytesPage(big),
			"/stream":     lockstepStream(chunks, s.ack),
		})
		sites = append(sites, s)
	}
	p := startProxy(t, upstreamCA(t, sites[1].o))

	for _, s := range sites {
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			client := p.client(t)
			base := s.o.base()

			r := get(t, client, base+"/big", crawlerUA)
			if r.status != http.StatusOK {
				t.Fatalf("/big: status %d", r.status)
			}
			if !bytes.Equal(r.body, big) || sha256.Sum256(r.body) != sha256.Sum256(big) {
				t.Fatalf("/big: got %d bytes (sha256 %x), want the origin's %d (sha256 %x)",
					len(r.body), sha256.Sum256(r.body), len(big), sha256.Sum256(big))
			}

			readLockstep(t, client, base+"/stream", chunks, s.ack)

			r = get(t, client, base+"/private/secret?x=1", crawlerUA)
			checkRefusal(t, r, base+"/robots.txt")
			if n := s.o.count("/private/secret"); n != 0 {
				t.Errorf("the origin received the disallowed request %d times", n)
			}
			if n := s.o.count("/big"); n != 1 {
				t.Errorf("the origin received /big %d times, want 1", n)
			}
		})
	}
}

// TestRobotsTxtFetchedOncePerOrigin sends 50 requests, concurrent then
// sequential, to an HTTP origin and through intercepted tunnels to an
// HTTPS one: each origin is asked for robots.txt exactly once.
func TestRobotsTxtFetchedOncePerOrigin(t *testing.T) {
	t.Parallel()
	const concurrent, sequential = 25, 25
	plain := newOrigin(t, false, map[string]http.HandlerFunc{"/robots.txt": robotsTxt(privateRobots)})
	secure := newOrigin(t, true, map[string]http.HandlerFunc{"/robots.txt": robotsTxt(privateRobots)})
	p := startProxy(t, upstreamCA(t, secure))

	for _, c := range []struct {
		name string
		o    *origin
	}{
		{"http", plain},
		{"https intercepted", secure},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			client := p.client(t)
			// Every fifth request is one robots.txt disallows.
			path := func(i int) (string, int) {
				if i%5 == 0 {
					return fmt.Sprintf("/private/%d", i), http.StatusForbidden
				}
				return fmt.Sprintf("/page/%d", i), http.StatusOK
			}
			check := func(i int) error {
				target, want := path(i)
				r, err := tryGet(client, c.o.base()+target, crawlerUA)
				if err != nil {
					return err
				}
				if r.status != want {
					return fmt.Errorf("%s: status %d, want %d", target, r.status, want)
				}
				return nil
			}
			var wg sync.WaitGroup
			for i := range concurrent {
				wg.Go(func() {
					if err := check(i); err != nil {
						t.Error(err)
					}
				})
			}
			wg.Wait()
			for i := concurrent; i < concurrent+sequential; i++ {
				if err := check(i); err != nil {
					t.Fatal(err)
				}
			}
			if n := c.o.count("/robots.txt"); n != 1 {
				t.Errorf("the origin was asked for /robots.txt %d times, want 1", n)
			}
			for i := range concurrent + sequential {
				target, status := path(i)
				wantHits := 0
				if status == http.StatusOK {
					wantHits = 1
				}
				if hits := c.o.count(target); hits != wantHits {
					t.Errorf("the origin received %s %d times, want %d", target, hits, wantHits)
				}
			}
		})
	}
}

// TestRobotsTxtStatus checks what an origin's robots.txt status means
// (RFC 9309 §2.3.1): a server error or 429 disallows everything, a 4xx
// allows everything.
func TestRobotsTxtStatus(t *testing.T) {
	t.Parallel()
	cases := []struct {
		status  int
		allowed bool
	}{
		{http.StatusInternalServerError, false},
		{http.StatusServiceUnavailable, false},
		{http.StatusTooManyRequests, false},
		{http.StatusNotFound, true},
		{http.StatusGone, true},
	}
	origins := make([]*origin, len(cases))
	for i, c := range cases {
		origins[i] = newOrigin(t, i%2 == 1, map[string]http.HandlerFunc{"/robots.txt": statusPage(c.status)})
	}
	p := startProxy(t, upstreamCA(t, origins...))
	for i, c := range cases {
		o := origins[i]
		scheme, _, _ := strings.Cut(o.base(), ":")
		t.Run(fmt.Sprintf("%d over %s", c.status, scheme), func(t *testing.T) {
			t.Parallel()
			client := p.client(t)
			for _, path := range []string{"/", "/private/x", "/any/page?q=1"} {
				r := get(t, client, o.base()+path, crawlerUA)
				if c.allowed {
					if r.status != http.StatusOK {
						t.Errorf("%s: status %d, want 200", path, r.status)
					}
					continue
				}
				if r.status != http.StatusForbidden {
					t.Errorf("%s: status %d, want 403", path, r.status)
				}
				want := fmt.Sprintf("robots.txt %d: complete disallow", c.status)
				if !bytes.Contains(r.body, []byte(want)) {
					t.Errorf("%s: the 403 does not say %q:\n%s", path, want, r.body)
				}
				if h := r.header.Get("X-Robotsgate-Decision"); !strings.Contains(h, want) {
					t.Errorf("%s: X-Robotsgate-Decision %q does not say %q", path, h, want)
				}
				if n := o.count(strings.SplitN(path, "?", 2)[0]); n != 0 {
					t.Errorf("%s: the origin received it %d times", path, n)
				}
			}
			if n := o.count("/robots.txt"); n != 1 {
				t.Errorf("robots.txt fetched %d times, want 1", n)
			}
		})
	}
}

// TestTunnelJudgedOnInnerUserAgent: the User-Agent of a CONNECT is the
// client library's, not the crawler's; each request inside is judged by
// its own.
func TestTunnelJudgedOnInnerUserAgent(t *testing.T) {
	t.Parallel()
	const gptBot = "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; GPTBot/1.2; +https://openai.com/gptbot)"
	const googlebot = "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)"
	o := newOrigin(t, true, map[string]http.HandlerFunc{"/robots.txt": robotsTxt("User-agent: GPTBot\nDisallow: /\n")})
	p := startProxy(t, upstreamCA(t, o))
	for _, c := range []struct {
		name, connectUA, innerUA, path string
		wantStatus                     int
	}{
		{"CONNECT as GPTBot, request as Googlebot", gptBot, googlebot, "/for-googlebot", http.StatusOK},
		{"CONNECT as Googlebot, request as GPTBot", googlebot, gptBot, "/for-gptbot", http.StatusForbidden},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			conn := p.intercept(t, o.addr, c.connectUA)
			req, _ := http.NewRequest(http.MethodGet, "https://"+o.addr+c.path, nil)
			req.Header.Set("User-Agent", c.innerUA)
			r := roundTrip(t, conn, req)
			if r.status != c.wantStatus {
				t.Fatalf("status %d, want %d; body %q", r.status, c.wantStatus, r.body)
			}
			wantHits := 0
			if c.wantStatus == http.StatusOK {
				wantHits = 1
			}
			if n := o.count(c.path); n != wantHits {
				t.Errorf("the origin received %s %d times, want %d", c.path, n, wantHits)
			}
		})
	}
}

// TestUpstreamFailureIsA502: an origin that hangs up or has gone away
// after its robots.txt was cached gives the client a 502 with a short
// reason, inside a tunnel too, never a dropped connection or Go's error
// text.
func TestUpstreamFailureIsA502(t *testing.T) {
	t.Parallel()
	hangUp := func(w http.ResponseWriter, _ *http.Request) {
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			conn.Close()
		}
	}
	type failure struct {
		name    string
		o       *origin
		stop    bool     // close the origin after robots.txt is cached
		reasons []string // one of these is the reason given
	}
	var cases []failure
	for _, useTLS := range []bool{false, true} {
		pages := map[string]http.HandlerFunc{"/robots.txt": statusPage(http.StatusNotFound), "/fail": hangUp}
		hangsUp, gone := newOrigin(t, useTLS, pages), newOrigin(t, useTLS, pages)
		scheme, _, _ := strings.Cut(gone.base(), ":")
		cases = append(cases,
			failure{name: scheme + " origin hangs up", o: hangsUp, reasons: []string{"connection closed early"}},
			// A new connection is refused; the idle one kept from /warm may
			// be taken before its close is noticed, and then it is reset.
			failure{name: scheme + " origin gone", o: gone, stop: true, reasons: []string{"connection refused", "connection reset", "connection closed early"}})
	}
	origins := make([]*origin, len(cases))
	for i, c := range cases {
		origins[i] = c.o
	}
	p := startProxy(t, upstreamCA(t, origins...))

	t.Run("requests", func(t *testing.T) {
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				t.Parallel()
				client := p.client(t)
				base := c.o.base()
				if r := get(t, client, base+"/warm", crawlerUA); r.status != http.StatusOK {
					t.Fatalf("/warm: status %d, want 200", r.status)
				}
				if c.stop {
					c.o.Close()
				}
				r := get(t, client, base+"/fail", crawlerUA)
				if r.status != http.StatusBadGateway {
					t.Fatalf("status %d, want 502; body %q", r.status, r.body)
				}
				if !slices.ContainsFunc(c.reasons, func(reason string) bool { return bytes.Contains(r.body, []byte(reason)) }) {
					t.Errorf("the 502 does not say one of %q: %q", c.reasons, r.body)
				}
				for _, internal := range []string{"dial tcp", "read tcp", "write tcp", "EOF", "connect:", "goroutine", "panic"} {
					if bytes.Contains(r.body, []byte(internal)) {
						t.Errorf("the 502 shows the internal detail %q: %q", internal, r.body)
					}
				}
			})
		}
	})

	if code := p.stop(); code != 0 {
		t.Fatalf("exit %d after SIGTERM, want 0", code)
	}
	recs := p.audit()
	for _, c := range cases {
		rec := auditFor(t, recs, c.o.base()+"/fail")
		// The origin that hangs up had the request; a refused connection
		// carried nothing to the one that has gone.
		forwarded := !c.stop || rec.Error != "connection refused"
		if rec.Status != http.StatusBadGateway || rec.Forwarded != forwarded || rec.Verdict != "allow" || !slices.Contains(c.reasons, rec.Error) {
			t.Errorf("%s: audit record %+v, want an allowed request with status 502, forwarded %v and error one of %q", c.name, rec, forwarded, c.reasons)
		}
	}
}

// TestBlindTunnels turns interception off: a CONNECT to an origin whose
// robots.txt disallows everything for the crawler is refused with 403;
// any other tunnel is opened as is, so the client sees the origin's own
// certificate, and the audit says paths were not checked.
func TestBlindTunnels(t *testing.T) {
	t.Parallel()
	closed := newOrigin(t, true, map[string]http.HandlerFunc{"/robots.txt": robotsTxt("User-agent: ExampleBot\nDisallow: /\n")})
	open := newOrigin(t, true, map[string]http.HandlerFunc{"/robots.txt": robotsTxt(privateRobots)})
	p := startProxy(t, "ROBOTSGATE_MITM=false", upstreamCA(t, closed, open))

	_, refused := p.connect(t, closed.addr, crawlerUA)
	if refused.status != http.StatusForbidden {
		t.Fatalf("CONNECT to an origin closed to the crawler: status %d, want 403; body %q", refused.status, refused.body)
	}
	closedRobots := "https://" + closed.addr + "/robots.txt"
	if h := refused.header.Get("X-Robotsgate-Decision"); !strings.Contains(h, "disallow") || !strings.Contains(h, closedRobots) {
		t.Errorf("X-Robotsgate-Decision %q does not cite %s", h, closedRobots)
	}
	if !bytes.Contains(refused.body, []byte("Disallow: / (line 2)")) {
		t.Errorf("the 403 does not name the rule:\n%s", refused.body)
	}

	// The client trusts the origin's certificate only: interception would
	// fail the handshake.
	originRoots := x509.NewCertPool()
	originRoots.AddCert(open.Certificate())
	client := newClient(t, &http.Transport{
		Proxy:              http.ProxyURL(p.url),
		ProxyConnectHeader: http.Header{"User-Agent": {crawlerUA}},
		TLSClientConfig:    &tls.Config{RootCAs: originRoots},
	})
	// Only the host is judged: a path robots.txt disallows goes through.
	target := "https://" + open.addr + "/private/seen-anyway"
	resp, err := client.Get(target)
	if err != nil {
		t.Fatalf("GET %s through a blind tunnel: %v", target, err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK || string(body) != open.page("/private/seen-anyway") {
		t.Fatalf("GET %s: status %d, body %q, err %v", target, resp.StatusCode, body, err)
	}
	if !resp.TLS.PeerCertificates[0].Equal(open.Certificate()) {
		t.Errorf("the client did not see the origin's own certificate")
	}
	if r := get(t, directClient(t), p.url.String()+"/ca.pem", "test"); r.status != http.StatusNotFound {
		t.Errorf("/ca.pem with interception off: status %d, want 404", r.status)
	}

	if code := p.stop(); code != 0 {
		t.Fatalf("exit %d after SIGTERM, want 0", code)
	}
	recs := p.audit()
	if len(recs) != 2 {
		t.Fatalf("%d audit records, want 2 (one per CONNECT): %+v", len(recs), recs)
	}
	want := map[string]struct {
		verdict   string
		forwarded bool
		status    int
	}{
		closed.addr: {"disallow", false, http.StatusForbidden},
		open.addr:   {"allow", true, http.StatusOK},
	}
	for _, rec := range recs {
		w, ok := want[rec.URL]
		if !ok {
			t.Errorf("audit record for %q, want one of the two CONNECT targets", rec.URL)
			continue
		}
		if rec.Method != http.MethodConnect || rec.PathsChecked || rec.Verdict != w.verdict || rec.Forwarded != w.forwarded || rec.Status != w.status {
			t.Errorf("audit record %+v, want CONNECT, paths_checked false, verdict %s, forwarded %v, status %d",
				rec, w.verdict, w.forwarded, w.status)
		}
		if v, ok := rec.raw["paths_checked"].(bool); !ok || v {
			t.Errorf("audit record for %s: paths_checked is %v, want false", rec.URL, rec.raw["paths_checked"])
		}
	}
}

// requestsTotal matches a robotsgate_requests_total sample.
var requestsTotal = regexp.MustCompile(`(?m)^robotsgate_requests_total\{([^}]*)\} (\S+)$`)

// TestProxyEndpoints checks what the proxy serves itself: /healthz, the
// CA at /ca.pem (the same as the file in the CA directory) and Prometheus
// metrics that count the requests decided.
func TestProxyEndpoints(t *testing.T) {
	t.Parallel()
	o := newOrigin(t, false, map[string]http.HandlerFunc{"/robots.txt": robotsTxt(privateRobots)})
	p := startProxy(t)
	direct := directClient(t)

	if r := get(t, direct, p.url.String()+"/healthz", "test"); r.status != http.StatusOK || string(r.body) != "ok\n" {
		t.Errorf("/healthz: status %d, body %q; want 200 ok", r.status, r.body)
	}

	r := get(t, direct, p.url.String()+"/ca.pem", "test")
	if r.status != http.StatusOK || !bytes.Equal(r.body, p.caPEM()) {
		t.Fatalf("/ca.pem: status %d and %d bytes, want 200 and the %d bytes of ca.pem in the CA directory", r.status, len(r.body), len(p.caPEM()))
	}
	block, rest := pem.Decode(r.body)
	if block == nil || block.Type != "CERTIFICATE" || len(bytes.TrimSpace(rest)) > 0 {
		t.Fatalf("/ca.pem is not one PEM certificate: %q", r.body)
	}
	if cert, err := x509.ParseCertificate(block.Bytes); err != nil || !cert.IsCA {
		t.Fatalf("/ca.pem is not a CA certificate (err %v)", err)
	}

	client := p.client(t)
	for path, want := range map[string]int{"/a": http.StatusOK, "/b": http.StatusOK, "/private/c": http.StatusForbidden} {
		if r := get(t, client, "http://"+o.addr+path, crawlerUA); r.status != want {
			t.Fatalf("%s: status %d, want %d", path, r.status, want)
		}
	}

	// A forwarded request is counted when its body is closed, which may be
	// just after the client has read it: poll, briefly.
	want := map[string]float64{`verdict="allow"`: 2, `verdict="disallow"`: 1}
	var metrics []byte
	for deadline := time.Now().Add(5 * time.Second); ; {
		r := get(t, direct, p.url.String()+"/metrics", "test")
		if r.status != http.StatusOK {
			t.Fatalf("/metrics: status %d", r.status)
		}
		metrics = r.body
		got := map[string]float64{}
		for _, m := range requestsTotal.FindAllSubmatch(metrics, -1) {
			v, _ := strconv.ParseFloat(string(m[2]), 64)
			for label := range want {
				if strings.Contains(string(m[1]), label) {
					got[label] += v
				}
			}
		}
		if fmt.Sprint(got) == fmt.Sprint(want) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("robotsgate_requests_total by verdict is %v, want %v:\n%s", got, want, metrics)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !bytes.Contains(metrics, []byte(`robotsgate_requests_total{forwarded="false",mode="enforce",verdict="disallow"} 1`)) {
		t.Errorf("/metrics lacks the refused request with its labels:\n%s", metrics)
	}
}
