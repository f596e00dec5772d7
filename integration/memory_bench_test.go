package integration

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// BenchmarkIdleConn measures the memory the robotsgate binary, running as
// its own process, holds per idle keep-alive client connection: b.N
// clients each make one request and then stay connected and silent.
//
//   - plain: GET http://origin/page through the proxy, in absolute form;
//   - intercepted: CONNECT, a TLS handshake with robotsgate's CA inside
//     the tunnel, and GET https://origin/page in it.
//
// It reads the proxy's /metrics before the connections (after one
// warm-up request, so the robots.txt fetch, the leaf certificate and the
// upstream connection are not counted) and once they are all open and
// the proxy's goroutine count has settled, and reports the differences
// per connection (heap+stack-B/conn, rss-B/conn, goroutines/conn) and
// the proxy's whole resident set with b.N connections open (rss-MiB).
// No GC is forced in the proxy, so heap_inuse may include garbage. ns/op
// is the time to open one connection and make its request.
//
// b.N is the number of connections, so give it as a count:
//
//	go test ./integration -run '^$' -bench IdleConn -benchtime 2000x
func BenchmarkIdleConn(b *testing.B) {
	b.Run("plain", func(b *testing.B) { benchIdleConns(b, false) })
	b.Run("intercepted", func(b *testing.B) { benchIdleConns(b, true) })
}

// fdMargin is the file descriptors each process needs beyond one per
// client connection: listeners, pipes, the audit log, the proxy's
// pooled connections to the origin and the origin's ends of them.
const fdMargin = 200

// settleTimeout bounds the wait for the proxy's goroutine count to stop
// changing once all connections are open.
const settleTimeout = 15 * time.Second

func benchIdleConns(b *testing.B, intercepted bool) {
	need := uint64(b.N + fdMargin)
	if limit, err := raiseFileLimit(); err != nil {
		b.Fatal(err)
	} else if limit < need {
		b.Fatalf("%d connections need about %d file descriptors but this process may open %d (the hard RLIMIT_NOFILE); raise it (ulimit -Hn) or ask for fewer", b.N, need, limit)
	}

	o := newOrigin(b, intercepted, map[string]http.HandlerFunc{"/robots.txt": robotsTxt(privateRobots)})
	env := []string{
		"ROBOTSGATE_MAX_CONNECTIONS=" + strconv.Itoa(b.N+100),
		// Every connection comes from 127.0.0.1, one client.
		"ROBOTSGATE_MAX_CONNECTIONS_PER_CLIENT=" + strconv.Itoa(b.N+100),
		// Opening 10000 intercepted connections one by one takes a while:
		// none may be closed as idle before the last is open.
		"ROBOTSGATE_CLIENT_IDLE_TIMEOUT=30m",
	}
	if intercepted {
		env = append(env, upstreamCA(b, o))
	}
	p := startProxy(b, env...)
	metricsClient := &http.Client{Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}, Timeout: requestTimeout}

	open := func() (net.Conn, error) { return openPlain(p.addr, o.addr) }
	if intercepted {
		host, _, _ := net.SplitHostPort(o.addr)
		tlsConfig := &tls.Config{ServerName: host, RootCAs: p.caPool()}
		open = func() (net.Conn, error) { return openIntercepted(p.addr, o.addr, tlsConfig) }
	}

	warm, err := open()
	if err != nil {
		b.Fatalf("warm-up connection: %v", err)
	}
	warm.Close()
	before, err := settledMetrics(metricsClient, p, 0)
	if err != nil {
		b.Fatal(err)
	}
	if maxFDs := before["process_max_fds"]; maxFDs < float64(need) {
		b.Fatalf("%d connections need about %d file descriptors in robotsgate but it may open %v", b.N, need, maxFDs)
	}

	conns := make([]net.Conn, 0, b.N)
	b.Cleanup(func() {
		for _, c := range conns {
			c.Close()
		}
	})
	b.ResetTimer()
	for i := range b.N {
		c, err := open()
		if err != nil {
			b.Fatalf("connection %d of %d: %v", i+1, b.N, err)
		}
		conns = append(conns, c)
	}
	b.StopTimer()

	after, err := settledMetrics(metricsClient, p, b.N)
	if err != nil {
		b.Fatal(err)
	}
	n := float64(b.N)
	delta := func(name string) float64 { return after[name] - before[name] }
	b.ReportMetric((delta("go_memstats_heap_inuse_bytes")+delta("go_memstats_stack_inuse_bytes"))/n, "heap+stack-B/conn")
	b.ReportMetric(delta("process_resident_memory_bytes")/n, "rss-B/conn")
	b.ReportMetric(delta("go_goroutines")/n, "goroutines/conn")
	b.ReportMetric(after["process_resident_memory_bytes"]/(1<<20), "rss-MiB")
	b.Logf("%d conns: heap_inuse %.1f -> %.1f MiB, stack_inuse %.1f -> %.1f MiB, rss %.1f -> %.1f MiB, goroutines %v -> %v, open fds %v -> %v",
		b.N,
		before["go_memstats_heap_inuse_bytes"]/(1<<20), after["go_memstats_heap_inuse_bytes"]/(1<<20),
		before["go_memstats_stack_inuse_bytes"]/(1<<20), after["go_memstats_stack_inuse_bytes"]/(1<<20),
		before["process_resident_memory_bytes"]/(1<<20), after["process_resident_memory_bytes"]/(1<<20),
		before["go_goroutines"], after["go_goroutines"],
		before["process_open_fds"], after["process_open_fds"])
}

// raiseFileLimit raises this process's soft RLIMIT_NOFILE to its hard
// limit, which the Go runtime usually has done already, and returns it.
func raiseFileLimit() (uint64, error) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, fmt.Errorf("get RLIMIT_NOFILE: %w", err)
	}
	if lim.Cur < lim.Max {
		lim.Cur = lim.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
			return 0, fmt.Errorf("raise RLIMIT_NOFILE to %d: %w", lim.Max, err)
		}
	}
	return lim.Cur, nil
}

// openPlain connects to the proxy and asks it for http://target/page in
// absolute form, keeping the connection alive.
func openPlain(proxyAddr, target string) (net.Conn, error) {
	conn, err := net.DialTimeout("tcp", proxyAddr, requestTimeout)
	if err != nil {
		return nil, fmt.Errorf("dial the proxy: %w", err)
	}
	conn.SetDeadline(time.Now().Add(requestTimeout))
	err = idleExchange(conn, "GET http://"+target+"/page HTTP/1.1\r\nHost: "+target+"\r\nUser-Agent: "+crawlerUA+"\r\n\r\n", http.MethodGet)
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("GET http://%s/page: %w", target, err)
	}
	conn.SetDeadline(time.Time{})
	return conn, nil
}

// openIntercepted opens a tunnel to target, starts TLS in it as a client
// that trusts robotsgate's CA, and asks for /page, keeping the connection
// alive.
func openIntercepted(proxyAddr, target string, config *tls.Config) (net.Conn, error) {
	conn, err := net.DialTimeout("tcp", proxyAddr, requestTimeout)
	if err != nil {
		return nil, fmt.Errorf("dial the proxy: %w", err)
	}
	conn.SetDeadline(time.Now().Add(requestTimeout))
	if err := idleExchange(conn, "CONNECT "+target+" HTTP/1.1\r\nHost: "+target+"\r\nUser-Agent: "+crawlerUA+"\r\n\r\n", http.MethodConnect); err != nil {
		conn.Close()
		return nil, fmt.Errorf("CONNECT %s: %w", target, err)
	}
	tlsConn := tls.Client(conn, config)
	if err := tlsConn.Handshake(); err != nil {
		conn.Close()
		return nil, fmt.Errorf("TLS in the tunnel to %s: %w", target, err)
	}
	if err := idleExchange(tlsConn, "GET /page HTTP/1.1\r\nHost: "+target+"\r\nUser-Agent: "+crawlerUA+"\r\n\r\n", http.MethodGet); err != nil {
		conn.Close()
		return nil, fmt.Errorf("GET https://%s/page in the tunnel: %w", target, err)
	}
	conn.SetDeadline(time.Time{})
	return tlsConn, nil
}

// idleExchange writes request on conn and reads the response, which must
// be a 200, body included (but for CONNECT, whose tunnel follows). The
// reader is dropped afterwards, so nothing may follow the response: the
// connection then holds no client-side buffer.
func idleExchange(conn net.Conn, request, method string) error {
	if _, err := io.WriteString(conn, request); err != nil {
		return fmt.Errorf("write the request: %w", err)
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, &http.Request{Method: method})
	if err != nil {
		return fmt.Errorf("read the response: %w", err)
	}
	if method == http.MethodConnect && resp.StatusCode == http.StatusOK {
		// The tunnel follows, not a body; the answer may be HTTP/1.0.
		if br.Buffered() > 0 {
			return fmt.Errorf("%d unexpected bytes after the answer", br.Buffered())
		}
		return nil
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	switch {
	case err != nil:
		return fmt.Errorf("read the body: %w", err)
	case resp.StatusCode != http.StatusOK:
		return fmt.Errorf("status %d, want 200; body %q", resp.StatusCode, body)
	case resp.Close:
		return fmt.Errorf("the proxy will close the connection (Connection: close); it must stay alive")
	case br.Buffered() > 0:
		return fmt.Errorf("%d unexpected bytes after the response", br.Buffered())
	}
	return nil
}

// settledMetrics reads the proxy's /metrics until go_goroutines is the
// same three times in a row, 250ms apart, and returns the last reading;
// robotsgate_client_connections must be at least conns.
func settledMetrics(client *http.Client, p *proxyProcess, conns int) (map[string]float64, error) {
	deadline := time.Now().Add(settleTimeout)
	var last map[string]float64
	same := 0
	for {
		m, err := scrapeMetrics(client, p.url.String()+"/metrics")
		if err != nil {
			return nil, err
		}
		if open := m["robotsgate_client_connections"]; open < float64(conns) {
			return nil, fmt.Errorf("robotsgate has %v client connections open, want at least %d: some were closed", open, conns)
		}
		if last != nil && m["go_goroutines"] == last["go_goroutines"] {
			same++
		} else {
			same = 0
		}
		last = m
		if same == 2 {
			return m, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("robotsgate's go_goroutines still changing after %v (now %v)", settleTimeout, m["go_goroutines"])
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// memoryMetrics are the unlabelled metrics settledMetrics needs.
var memoryMetrics = []string{
	"go_memstats_heap_inuse_bytes", "go_memstats_stack_inuse_bytes", "go_goroutines",
	"process_resident_memory_bytes", "process_open_fds", "process_max_fds",
	"robotsgate_client_connections",
}

// scrapeMetrics reads every unlabelled metric of a Prometheus text page;
// each of memoryMetrics must be there.
func scrapeMetrics(client *http.Client, url string) (map[string]float64, error) {
	resp, err := client.Get(url)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("GET %s: read the body: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: status %d", url, resp.StatusCode)
	}
	m := make(map[string]float64)
	sc := bufio.NewScanner(bytes.NewReader(body))
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) != 2 || strings.HasPrefix(fields[0], "#") || strings.Contains(fields[0], "{") {
			continue
		}
		v, err := strconv.ParseFloat(fields[1], 64)
		if err != nil {
			return nil, fmt.Errorf("%s: %s has the value %q", url, fields[0], fields[1])
		}
		m[fields[0]] = v
	}
	for _, name := range memoryMetrics {
		if _, ok := m[name]; !ok {
			return nil, fmt.Errorf("%s has no %s", url, name)
		}
	}
	return m, nil
}
