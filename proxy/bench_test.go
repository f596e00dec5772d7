package proxy

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/elazarl/goproxy"

	"robotsgate/cache"
	"robotsgate/proxy/identity"
	"robotsgate/proxy/pace"
	"robotsgate/proxy/policy"
	"robotsgate/proxy/signing"
)

// benchBody is what the benchmark origin answers: a small page.
var benchBody = bytes.Repeat([]byte("robotsgate"), 1024/10+1)[:1024]

// serveBenchPage answers benchBody.
func serveBenchPage(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain")
	w.Header().Set("Content-Length", strconv.Itoa(len(benchBody)))
	w.Write(benchBody)
}

// startBenchOrigin serves testRobots and a 1 KiB page.
func startBenchOrigin(b *testing.B) *httptest.Server {
	b.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("/robots.txt", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, testRobots)
	})
	mux.HandleFunc("/", serveBenchPage)
	srv := httptest.NewServer(mux)
	b.Cleanup(srv.Close)
	return srv
}

// startBareGoproxy serves goproxy with no handlers, over a transport like
// robotsgate's (no environment proxy), as the baseline. wrapConns hides
// *net.TCPConn behind a plain net.Conn, as robotsgate's idle tracking
// does: net/http then writes a small response in one write instead of
// two (its ReadFrom path flushes the head and first 512 bytes, then the
// rest), which on its own changes the figures.
func startBareGoproxy(b *testing.B, wrapConns bool) *url.URL {
	b.Helper()
	gp := goproxy.NewProxyHttpServer()
	gp.Tr = newTransport(UpstreamOptions{}, &net.Dialer{})
	srv := &http.Server{Handler: gp, ReadHeaderTimeout: 30 * time.Second, ErrorLog: log.New(io.Discard, "", 0)}
	var ln net.Listener
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	if wrapConns {
		ln = wrappingListener{ln}
	}
	go srv.Serve(ln)
	b.Cleanup(func() {
		srv.Close()
		gp.Tr.CloseIdleConnections()
	})
	return &url.URL{Scheme: "http", Host: ln.Addr().String()}
}

// wrappingListener hands out connections that are only net.Conns.
type wrappingListener struct{ net.Listener }

type plainConn struct{ net.Conn }

func (l wrappingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return plainConn{c}, nil
}

// runThroughput sends GET target through proxy from parallel keep-alive
// clients and reports requests per second and latency percentiles.
func runThroughput(b *testing.B, proxy *url.URL, target string) {
	runRequests(b, &http.Transport{Proxy: http.ProxyURL(proxy), MaxIdleConnsPerHost: 64, DisableCompression: true}, target, "req/s")
}

// runRequests sends GET target over tr from parallel clients and reports
// requests per second (named rate) and latency percentiles.
func runRequests(b *testing.B, tr *http.Transport, target, rate string) {
	b.Cleanup(tr.CloseIdleConnections)
	client := &http.Client{Transport: tr}
	get := func(req *http.Request) error {
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		n, err := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err == nil && (resp.StatusCode != 200 || n != int64(len(benchBody))) {
			err = fmt.Errorf("status %d, %d bytes; want 200, %d bytes", resp.StatusCode, n, len(benchBody))
		}
		return err
	}
	warm, _ := http.NewRequest("GET", target, nil)
	warm.Header.Set("User-Agent", curlUA)
	if err := get(warm); err != nil { // loads robots.txt into robotsgate's cache
		b.Fatal(err)
	}

	var mu sync.Mutex
	var latencies []time.Duration
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		req := warm.Clone(warm.Context())
		own := make([]time.Duration, 0, b.N)
		for pb.Next() {
			start := time.Now()
			if err := get(req); err != nil {
				b.Error(err)
				return
			}
			own = append(own, time.Since(start))
		}
		mu.Lock()
		latencies = append(latencies, own...)
		mu.Unlock()
	})
	b.StopTimer()
	if len(latencies) == 0 {
		return
	}
	slices.Sort(latencies)
	micros := func(q float64) float64 {
		return float64(latencies[int(q*float64(len(latencies)-1))].Nanoseconds()) / 1e3
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), rate)
	b.ReportMetric(micros(0.50), "p50-µs")
	b.ReportMetric(micros(0.99), "p99-µs")
}

// BenchmarkThroughput compares requests per second through robotsgate
// (enforce mode, robots.txt cached, an allowed path, 1 KiB answers) with
// the same traffic through goproxy alone. robotsgate-auditfile writes its
// audit log to a real file instead of discarding it; bare-goproxy-connwrap
// is the baseline with robotsgate's write pattern (see startBareGoproxy).
// robotsgate paces as the binary does by default: enforce, origins'
// answers heeded, no delay asked.
func BenchmarkThroughput(b *testing.B) {
	origin := startBenchOrigin(b)
	target := origin.URL + "/page"
	b.Run("robotsgate", func(b *testing.B) {
		p := startProxy(b, proxyConfig{audit: io.Discard, pacePolicy: pace.Policy{Max: time.Minute},
			pacer: pace.New(pace.Options{Mode: pace.ModeEnforce, MaxWait: time.Minute, MaxBackoff: time.Hour})})
		runThroughput(b, p.url, target)
	})
	b.Run("robotsgate-held-elsewhere", func(b *testing.B) {
		// Another origin is held: every request looks its own holds up.
		pacer := pace.New(pace.Options{Mode: pace.ModeEnforce, MaxWait: time.Minute, MaxBackoff: time.Hour})
		held := pacer.Admit(context.Background(), "https://elsewhere.example", "https://elsewhere.example", pace.Identity{Token: "x"}, pace.Delay{})
		held.Observe(context.Background(), pace.Answer{Status: 503, RetryAfter: time.Hour, HasRetryAfter: true, Sent: time.Now()})
		if pacer.Holds() == 0 {
			b.Fatal("nothing held")
		}
		p := startProxy(b, proxyConfig{audit: io.Discard, pacePolicy: pace.Policy{Max: time.Minute}, pacer: pacer})
		runThroughput(b, p.url, target)
	})
	b.Run("robotsgate-auditfile", func(b *testing.B) {
		f, err := os.Create(filepath.Join(b.TempDir(), "audit.jsonl"))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { f.Close() })
		p := startProxy(b, proxyConfig{audit: f})
		runThroughput(b, p.url, target)
	})
	b.Run("bare-goproxy", func(b *testing.B) {
		runThroughput(b, startBareGoproxy(b, false), target)
	})
	b.Run("bare-goproxy-connwrap", func(b *testing.B) {
		runThroughput(b, startBareGoproxy(b, true), target)
	})
}

// BenchmarkThroughputSigned is BenchmarkThroughput's robotsgate row
// (without pacing) for a crawler that does not sign ("unsigned": no key
// anywhere) and one whose every request is signed with the pinned
// token's key ("signed"): their difference is what signing costs a
// request, Ed25519 included.
func BenchmarkThroughputSigned(b *testing.B) {
	origin := startBenchOrigin(b)
	target := origin.URL + "/page"
	key, err := signing.GenerateKey(nil, time.Time{}, time.Time{})
	if err != nil {
		b.Fatal(err)
	}
	id, err := signing.NewIdentity("token curl", "https://crawler.example", []*signing.Key{key})
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name    string
		signing SigningOptions
	}{
		{"unsigned", SigningOptions{}},
		{"signed", SigningOptions{Pinned: id, Token: "curl"}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			runThroughput(b, startProxy(b, proxyConfig{audit: io.Discard, signing: bc.signing}).url, target)
		})
	}
}

// BenchmarkThroughputPolicy is BenchmarkThroughput's robotsgate row under
// an operator's policy of 1,000 site entries (each with a rule and an
// exception) and a few crawler entries, the curl crawler among them:
// "none" without a policy, "elsewhere" with the origin's host named by
// none of the sites, "named" with it named by one whose rule and
// exception are judged on every request (and allow it). An allowed
// request's cost under a policy is measured against "none".
func BenchmarkThroughputPolicy(b *testing.B) {
	origin := startBenchOrigin(b)
	target := origin.URL + "/page"
	for _, bc := range []struct {
		name, host string // host: the site entry naming the origin's host, "" for none
		policy     bool
	}{
		{"none", "", false},
		{"elsewhere", "", true},
		{"named", "127.0.0.1", true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			cfg := proxyConfig{audit: io.Discard}
			if bc.policy {
				cfg.policy = fixedPolicy{thousandSites(b, bc.host)}
			}
			runThroughput(b, startProxy(b, cfg).url, target)
		})
	}
}

// BenchmarkThroughputUsage is BenchmarkThroughput's robotsgate row on
// robots.txt files that state usage preferences, the crawler (curl) in a
// group of its own: "none" on the usual file, without a usage line;
// "signals" with Cloudflare's default Content-Signal line in curl's
// group, curl declaring no purpose (the preferences are recorded);
// "signals-search" the same with curl declaring search (judged, allowed).
func BenchmarkThroughputUsage(b *testing.B) {
	signals := strings.Replace(testRobots, "User-agent: curl\n", "User-agent: curl\nContent-Signal: search=yes, ai-train=no\n", 1)
	searchPolicy, err := policy.Parse("policy.yaml", []byte("crawlers:\n  - token: curl\n    purposes: [search]\n"))
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name, robots string
		policy       *policy.Policy
	}{
		{"none", testRobots, nil},
		{"signals", signals, nil},
		{"signals-search", signals, searchPolicy},
	} {
		b.Run(bc.name, func(b *testing.B) {
			mux := http.NewServeMux()
			mux.HandleFunc("/robots.txt", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, bc.robots) })
			mux.HandleFunc("/", serveBenchPage)
			origin := httptest.NewServer(mux)
			b.Cleanup(origin.Close)
			cfg := proxyConfig{audit: io.Discard}
			if bc.policy != nil {
				cfg.policy = fixedPolicy{bc.policy}
			}
			runThroughput(b, startProxy(b, cfg).url, origin.URL+"/page")
		})
	}
}

// thousandSites is a policy of 1,000 site entries, the last naming host
// too when it is set, and crawler entries for curl (the benchmarks'
// User-Agent) and everyone.
func thousandSites(b *testing.B, host string) *policy.Policy {
	var y strings.Builder
	y.WriteString("crawlers:\n  - token: curl\n    purposes: [search]\n    deny_sites: [\"intranet.example\"]\n  - token: \"*\"\n    deny_sites: [\"admin.example\"]\n")
	y.WriteString("  - user: acme\n    allow_sites: [\"*.acme.example\"]\nsites:\n")
	for i := range 1000 {
		hosts := fmt.Sprintf(`"site%d.example", "*.site%d.example"`, i, i)
		if i == 999 && host != "" {
			hosts += `, "` + host + `"`
		}
		fmt.Fprintf(&y, "  - hosts: [%s]\n    rules: [\"Disallow: /shop/\"]\n    exceptions:\n      - allow: /private/\n        reason: \"written permission %d\"\n", hosts, i)
	}
	p, err := policy.Parse("policy.yaml", []byte(y.String()))
	if err != nil {
		b.Fatal(err)
	}
	return p
}

// BenchmarkIntercepted measures HTTPS through robotsgate to a TLS origin
// serving 1 KiB pages, robots.txt cached, over loopback:
//
//   - keepalive: parallel clients reuse their intercepted tunnels, so each
//     operation is one request judged inside a tunnel and relayed over the
//     proxy's pooled connection to the origin;
//   - handshake: every operation opens a new connection, CONNECT and a full
//     TLS handshake with a leaf from robotsgate's CA (no session
//     resumption), then one request;
//   - resumed: the same, the client resuming its TLS session each time;
//   - blind-keepalive and blind-handshake: the same through a tunnel
//     robotsgate does not intercept (judged by host, bytes relayed), the
//     ceiling interception is measured against.
//
// Client, proxy and origin share the machine's cores: compare the rows of
// one run (benchstat), not absolute figures across machines.
func BenchmarkIntercepted(b *testing.B) {
	o := startOrigin(b, originConfig{tls: true, robots: testRobots})
	o.mux.HandleFunc("/page", serveBenchPage)
	target := o.URL + "/page"
	for _, bc := range []struct {
		name      string
		mitm      bool
		keepAlive bool
		resume    bool
	}{
		{"keepalive", true, true, false},
		{"handshake", true, false, false},
		{"resumed", true, false, true},
		{"blind-keepalive", false, true, false},
		{"blind-handshake", false, false, false},
	} {
		b.Run(bc.name, func(b *testing.B) {
			p := startProxy(b, proxyConfig{mitm: bc.mitm, roots: o.roots, audit: io.Discard})
			roots := o.roots
			if bc.mitm {
				roots = p.caPool()
			}
			tlsConfig := &tls.Config{RootCAs: roots}
			if bc.resume {
				tlsConfig.ClientSessionCache = tls.NewLRUClientSessionCache(1)
			}
			tr := &http.Transport{
				Proxy:               http.ProxyURL(p.url),
				TLSClientConfig:     tlsConfig,
				DisableKeepAlives:   !bc.keepAlive,
				MaxIdleConnsPerHost: 64,
				DisableCompression:  true,
			}
			rate := "req/s"
			if !bc.keepAlive {
				rate = "conns/s"
			}
			b.SetParallelism(16) // 32 clients on 2 cores, as the shared harness's HTTPS suites
			runRequests(b, tr, target, rate)
		})
	}
}

// BenchmarkAuthenticated compares keep-alive plain HTTP through
// robotsgate with no authentication and with a credential required and
// sent on every request (the worst case: inside a tunnel the CONNECT
// carries it once), verified once with bcrypt and then remembered.
func BenchmarkAuthenticated(b *testing.B) {
	origin := startBenchOrigin(b)
	target := origin.URL + "/page"
	b.Run("anonymous", func(b *testing.B) {
		p := startProxy(b, proxyConfig{audit: io.Discard})
		runThroughput(b, p.url, target)
	})
	b.Run("authenticated", func(b *testing.B) {
		p := startProxy(b, proxyConfig{audit: io.Discard, identity: newGate(b, identity.Options{}, "acme-crawler-7:secret:curl")})
		withCredentials := *p.url
		withCredentials.User = url.UserPassword("acme-crawler-7", "secret")
		runThroughput(b, &withCredentials, target)
	})
}

// BenchmarkPaced compares keep-alive plain HTTP through robotsgate with
// pacing off and with a delay in force on every request (1ns, so that each
// one is on time and takes the whole schedule path: lookup, check, move).
// Wait mode, so that two requests in one nanosecond are held for it rather
// than refused.
func BenchmarkPaced(b *testing.B) {
	origin := startBenchOrigin(b)
	target := origin.URL + "/page"
	b.Run("unpaced", func(b *testing.B) {
		p := startProxy(b, proxyConfig{audit: io.Discard})
		runThroughput(b, p.url, target)
	})
	b.Run("paced", func(b *testing.B) {
		p := startProxy(b, proxyConfig{audit: io.Discard, pacer: pace.New(pace.Options{Mode: pace.ModeWait, MaxWait: time.Second}),
			pacePolicy: pace.Policy{Default: time.Nanosecond, Max: time.Minute}})
		runThroughput(b, p.url, target)
	})
}

// BenchmarkDecision measures what robotsgate adds to each request before
// forwarding or refusing it, with robots.txt cached: token, origin, cache
// lookup, verdict; for "disallow" also the audit record (written to a
// discarding writer), the metrics-free finish and the 403 page. An allowed
// request's record is written when its body closes, which this does not
// reach: BenchmarkThroughput covers it.
func BenchmarkDecision(b *testing.B) {
	origin := startBenchOrigin(b)
	p := newTestServer(b, proxyConfig{audit: io.Discard})
	if _, _, err := p.rules.Get(b.Context(), origin.URL); err != nil {
		b.Fatal(err)
	}
	if _, info, _ := p.rules.Get(b.Context(), origin.URL); info.Source != cache.SourceHit {
		b.Fatalf("robots.txt not cached: %v", info.Source)
	}
	// The allowed path with a delay in force, as in BenchmarkPaced.
	paced := newTestServer(b, proxyConfig{audit: io.Discard, pacer: pace.New(pace.Options{}),
		pacePolicy: pace.Policy{Default: time.Nanosecond, Max: time.Minute}})
	if _, _, err := paced.rules.Get(b.Context(), origin.URL); err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name, path string
		allowed    bool
		p          *testProxy
	}{
		{"allow", "/page?id=42", true, p},
		{"allow-paced", "/page?id=42", true, paced},
		{"disallow", "/private/report.pdf", false, p},
	} {
		b.Run(bc.name, func(b *testing.B) {
			// As net/http hands over a plain proxy request: absolute URL
			// and request target.
			req := httptest.NewRequest("GET", origin.URL+bc.path, nil)
			req.Header.Set("User-Agent", gptbotUA)
			if !bc.allowed {
				req.Header.Set("User-Agent", curlUA)
			}
			b.ReportAllocs()
			for b.Loop() {
				_, answer := bc.p.srv.decide(req, nil, nil)
				if bc.allowed != (answer == nil) {
					b.Fatalf("allowed %v, answer %v", bc.allowed, answer)
				}
				if !bc.allowed && answer.status != http.StatusForbidden {
					b.Fatalf("disallowed request answered %d", answer.status)
				}
			}
		})
	}
}

// BenchmarkIdleConnIO measures what idle tracking adds to each read and
// write of a client connection: one read and one write per operation on
// a connection that does nothing else, from parallel connections.
func BenchmarkIdleConnIO(b *testing.B) {
	t := newConnTracker(time.Minute, 0, 0)
	ln := t.listen(&onceListener{conns: make(chan net.Conn, 1024)})
	b.RunParallel(func(pb *testing.PB) {
		ln.(*trackingListener).Listener.(*onceListener).conns <- nopConn{}
		c, err := ln.Accept()
		if err != nil {
			b.Error(err)
			return
		}
		defer c.Close()
		buf := make([]byte, 1)
		for pb.Next() {
			c.Read(buf)
			c.Write(buf)
		}
	})
}

// onceListener hands out the connections put in conns.
type onceListener struct {
	net.Listener
	conns chan net.Conn
}

func (l *onceListener) Accept() (net.Conn, error) { return <-l.conns, nil }

// nopConn reads and writes nothing, at once, from remote (127.0.0.1 when
// nil).
type nopConn struct {
	net.Conn
	remote *net.TCPAddr
}

func (nopConn) Read(p []byte) (int, error)  { return len(p), nil }
func (nopConn) Write(p []byte) (int, error) { return len(p), nil }
func (nopConn) Close() error                { return nil }

func (c nopConn) RemoteAddr() net.Addr {
	if c.remote == nil {
		return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 40000}
	}
	return c.remote
}

// BenchmarkAccept measures what the connection tracker adds to accepting
// a client connection and closing it:
//
//   - tracker: the tracker alone, with 1,000 other connections open from
//     250 addresses, IPv4 and IPv6;
//   - tcp: a whole connection to a Server on loopback, each operation
//     dialling, asking for /healthz and reading until the Server closes.
func BenchmarkAccept(b *testing.B) {
	b.Run("tracker", func(b *testing.B) {
		t := newConnTracker(time.Minute, 4096, 1024)
		queue := &onceListener{conns: make(chan net.Conn, 1)}
		ln := t.listen(queue)
		accept := func(remote *net.TCPAddr) net.Conn {
			queue.conns <- nopConn{remote: remote}
			c, err := ln.Accept()
			if err != nil {
				b.Fatal(err)
			}
			return c
		}
		for i := range 1000 {
			ip := net.IPv4(10, 0, 0, byte(i%125))
			if i%2 == 1 {
				ip = net.ParseIP(fmt.Sprintf("2001:db8:%x::1", i%125))
			}
			defer accept(&net.TCPAddr{IP: ip, Port: 1024 + i}).Close()
		}
		remotes := []*net.TCPAddr{
			{IP: net.IPv4(10, 0, 0, 7), Port: 50000},
			{IP: net.ParseIP("2001:db8:7::2"), Port: 50000},
		}
		b.ResetTimer()
		for i := range b.N {
			accept(remotes[i%2]).Close()
		}
	})
	b.Run("tcp", func(b *testing.B) {
		p := startProxy(b, proxyConfig{audit: io.Discard, client: ClientLimits{MaxConnections: 4096}})
		request := "GET /healthz HTTP/1.1\r\nHost: " + p.addr + "\r\nConnection: close\r\n\r\n"
		buf := make([]byte, 4096)
		for b.Loop() {
			c, err := net.Dial("tcp", p.addr)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := io.WriteString(c, request); err != nil {
				b.Fatal(err)
			}
			for {
				if _, err := c.Read(buf); err != nil {
					break
				}
			}
			c.Close()
		}
	})
}

// BenchmarkNeighbours measures what a client sending paths that are dear
// to judge does to another client's latency: the other client's requests
// (allowed, robots.txt cached) one after another, alone and beside 16
// connections sending 2 KiB paths that 1,000 wildcard rules take
// milliseconds to judge (within robots.MaxDecisionCost). It reports the
// other client's latency percentiles.
func BenchmarkNeighbours(b *testing.B) {
	var rules strings.Builder
	rules.WriteString("User-agent: *\n")
	for i := range 1000 {
		fmt.Fprintf(&rules, "Disallow: /*zq%d\n", i)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/robots.txt", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, rules.String()) })
	mux.HandleFunc("/", serveBenchPage)
	origin := httptest.NewServer(mux)
	b.Cleanup(origin.Close)
	costly := origin.URL + "/" + strings.Repeat("zq", 1<<10)

	for _, hostile := range []int{0, 16} {
		b.Run(fmt.Sprintf("costly-conns=%d", hostile), func(b *testing.B) {
			p := startProxy(b, proxyConfig{audit: io.Discard})
			tr := &http.Transport{Proxy: http.ProxyURL(p.url), MaxIdleConnsPerHost: 64, DisableCompression: true}
			b.Cleanup(tr.CloseIdleConnections)
			client := &http.Client{Transport: tr}
			get := func(target string) error {
				req, _ := http.NewRequest("GET", target, nil)
				req.Header.Set("User-Agent", curlUA)
				resp, err := client.Do(req)
				if err != nil {
					return err
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					return fmt.Errorf("GET %.60s: status %d", target, resp.StatusCode)
				}
				return nil
			}
			if err := get(origin.URL + "/page"); err != nil { // loads robots.txt
				b.Fatal(err)
			}
			stop := make(chan struct{})
			var wg sync.WaitGroup
			for range hostile {
				wg.Go(func() {
					for {
						select {
						case <-stop:
							return
						default:
						}
						if err := get(costly); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			latencies := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for range b.N {
				start := time.Now()
				if err := get(origin.URL + "/page"); err != nil {
					b.Fatal(err)
				}
				latencies = append(latencies, time.Since(start))
			}
			b.StopTimer()
			close(stop)
			wg.Wait()
			slices.Sort(latencies)
			micros := func(q float64) float64 {
				return float64(latencies[int(q*float64(len(latencies)-1))].Nanoseconds()) / 1e3
			}
			b.ReportMetric(micros(0.50), "p50-µs")
			b.ReportMetric(micros(0.99), "p99-µs")
		})
	}
}
