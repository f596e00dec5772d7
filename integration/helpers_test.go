package integration

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Bounds on everything that waits, generous enough for a race-enabled
// binary on a loaded 2-core machine.
const (
	startTimeout   = 20 * time.Second // process start to a healthy /healthz
	stopTimeout    = 20 * time.Second // SIGTERM to exit; above the 10s grace the proxy gets
	requestTimeout = 30 * time.Second // one request, body included
	commandTimeout = 30 * time.Second // one run of a short-lived subcommand
)

// crawlerUA is the User-Agent of a well-behaved crawler whose token no
// robots.txt in these tests names, so the "*" group applies to it.
const crawlerUA = "ExampleBot/1.0 (+https://example.com/bot)"

// cleanEnv is the test's environment without what would change how
// robotsgate or curl behave (ROBOTSGATE_* settings, proxy variables), plus
// extra. Later entries win, so extra overrides.
func cleanEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		switch upper := strings.ToUpper(name); {
		case strings.HasPrefix(upper, "ROBOTSGATE_"),
			upper == "HTTP_PROXY", upper == "HTTPS_PROXY", upper == "ALL_PROXY", upper == "NO_PROXY":
			continue
		}
		env = append(env, kv)
	}
	if raceEnabled {
		// A race-enabled binary sleeps a second before exiting, to let
		// reports finish; a twentieth is plenty for one process.
		env = append(env, "GORACE="+os.Getenv("GORACE")+" atexit_sleep_ms=50")
	}
	return append(env, extra...)
}

// proxyProcess is one running robotsgate serve.
type proxyProcess struct {
	t        testing.TB
	cmd      *exec.Cmd
	addr     string   // host:port it listens on, from its "robotsgate listening" log line
	url      *url.URL // http://addr
	caDir    string
	auditLog string
	output   *lineLog // stdout and stderr

	exited   chan struct{} // closed once the process has exited
	exitCode int           // set before exited is closed
	termOnce sync.Once
	wantExit int // the exit status cleanup expects after SIGTERM
}

// startProxy starts robotsgate with its own port, CA directory and audit
// log, plus env (which may override those), and waits until /healthz
// answers. It is stopped with SIGTERM at cleanup, which must exit 0.
func startProxy(t testing.TB, env ...string) *proxyProcess {
	t.Helper()
	dir := t.TempDir()
	p := &proxyProcess{
		t:        t,
		caDir:    filepath.Join(dir, "ca"),
		auditLog: filepath.Join(dir, "audit.log"),
		output:   newLineLog(),
		exited:   make(chan struct{}),
	}
	p.cmd = command(context.Background(), t)
	p.cmd.Env = cleanEnv(append([]string{
		"ROBOTSGATE_LISTEN=127.0.0.1:0",
		"ROBOTSGATE_CA_DIR=" + p.caDir,
		"ROBOTSGATE_AUDIT_LOG=" + p.auditLog,
	}, env...)...)
	p.cmd.Stdout, p.cmd.Stderr = p.output, p.output
	p.cmd.WaitDelay = 5 * time.Second
	dieWithTest(p.cmd)
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start robotsgate: %v", err)
	}
	go func() {
		p.cmd.Wait()
		p.exitCode = -1
		if st := p.cmd.ProcessState; st != nil {
			p.exitCode = st.ExitCode()
		}
		close(p.exited)
	}()
	t.Cleanup(p.cleanup)

	rec, err := p.output.waitForJSON(startTimeout, p.exited, func(rec map[string]any) bool {
		return rec["msg"] == "robotsgate listening"
	})
	if err != nil {
		t.Fatalf("robotsgate did not say it was listening: %v\noutput:\n%s", err, p.output)
	}
	addr, _ := rec["addr"].(string)
	if _, _, err := net.SplitHostPort(addr); err != nil {
		t.Fatalf(`"robotsgate listening" has no host:port addr: %v`, rec)
	}
	p.addr = addr
	p.url = &url.URL{Scheme: "http", Host: addr}
	p.waitHealthy()
	return p
}

func (p *proxyProcess) waitHealthy() {
	p.t.Helper()
	// No keep-alive: a test may count the proxy's connections.
	client := newClient(p.t, &http.Transport{Proxy: nil, DisableKeepAlives: true})
	deadline := time.Now().Add(startTimeout)
	for {
		resp, err := client.Get(p.url.String() + "/healthz")
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK && strings.HasPrefix(string(body), "ok\n") {
				return
			}
			err = fmt.Errorf("status %d, body %q", resp.StatusCode, body)
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("robotsgate /healthz not ok after %v: %v\noutput:\n%s", startTimeout, err, p.output)
		}
		select {
		case <-p.exited:
			p.t.Fatalf("robotsgate exited with %d before it was healthy\noutput:\n%s", p.exitCode, p.output)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// terminate sends SIGTERM, once.
func (p *proxyProcess) terminate() {
	p.termOnce.Do(func() {
		select {
		case <-p.exited:
			return
		default:
		}
		if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
			p.t.Errorf("SIGTERM robotsgate: %v", err)
		}
	})
}

// hangUp sends SIGHUP, which makes robotsgate re-read its credentials
// file and reopen its audit log file.
func (p *proxyProcess) hangUp() {
	p.t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		p.t.Fatalf("SIGHUP robotsgate: %v", err)
	}
}

// wait waits for the process to exit and returns its exit code; it kills
// a process still running after stopTimeout.
func (p *proxyProcess) wait() int {
	select {
	case <-p.exited:
	case <-time.After(stopTimeout):
		p.t.Errorf("robotsgate still running %v after SIGTERM; killing it", stopTimeout)
		p.cmd.Process.Kill()
		<-p.exited
	}
	return p.exitCode
}

// stop sends SIGTERM and returns the exit code.
func (p *proxyProcess) stop() int {
	p.terminate()
	return p.wait()
}

func (p *proxyProcess) cleanup() {
	if code := p.stop(); code != p.wantExit {
		p.t.Errorf("robotsgate exited with %d after SIGTERM, want %d", code, p.wantExit)
	}
	if strings.Contains(p.output.String(), "DATA RACE") {
		p.t.Errorf("the race detector found a data race in robotsgate")
	}
	if p.t.Failed() {
		p.t.Logf("robotsgate output:\n%s", p.output)
	}
}

// caPEM is the CA certificate robotsgate created in its CA directory.
func (p *proxyProcess) caPEM() []byte {
	p.t.Helper()
	pemBytes, err := os.ReadFile(filepath.Join(p.caDir, "ca.pem"))
	if err != nil {
		p.t.Fatalf("read the proxy's CA: %v", err)
	}
	return pemBytes
}

// caPool trusts robotsgate's CA and nothing else.
func (p *proxyProcess) caPool() *x509.CertPool {
	p.t.Helper()
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(p.caPEM()) {
		p.t.Fatal("the proxy's ca.pem holds no certificate")
	}
	return pool
}

// client is an HTTP client that uses the proxy for every URL and trusts
// only robotsgate's CA for HTTPS.
func (p *proxyProcess) client(t *testing.T) *http.Client {
	t.Helper()
	return newClient(t, &http.Transport{
		Proxy:           http.ProxyURL(p.url),
		TLSClientConfig: &tls.Config{RootCAs: p.caPool()},
	})
}

// directClient talks to servers directly, never through a proxy.
// clientFrom is an HTTP client that uses the proxy from the source address
// src: robotsgate tells clients apart by address (Linux routes all of
// 127.0.0.0/8 to the loopback interface).
func (p *proxyProcess) clientFrom(t *testing.T, src string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: requestTimeout}
	return newClient(t, &http.Transport{Proxy: http.ProxyURL(p.url), DialContext: d.DialContext, MaxIdleConnsPerHost: 16})
}

func directClient(t *testing.T) *http.Client {
	return newClient(t, &http.Transport{Proxy: nil})
}

func newClient(t testing.TB, tr *http.Transport) *http.Client {
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{
		Transport: tr,
		Timeout:   requestTimeout,
		// A redirect is an answer to check, not to follow.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// reply is a whole response.
type reply struct {
	status int
	header http.Header
	body   []byte
}

// get fetches rawURL with userAgent and reads the whole body.
func get(t *testing.T, client *http.Client, rawURL, userAgent string) reply {
	t.Helper()
	r, err := tryGet(client, rawURL, userAgent)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// tryGet is get for goroutines, which must not call t.Fatal.
func tryGet(client *http.Client, rawURL, userAgent string) (reply, error) {
	r, err := tryFetch(context.Background(), client, rawURL, userAgent, "")
	return r.reply, err
}

// origin is a local HTTP or HTTPS server that counts the requests each
// path receives. Paths without a page answer "page PATH from ADDR".
type origin struct {
	*httptest.Server
	addr string // 127.0.0.1:port

	mu       sync.Mutex
	hits     map[string]int
	headers  []http.Header // of every request received, in order
	arrivals []arrival     // of every request received, in order
}

// arrival is when the origin's handler began a request, to measure the
// pace at which the proxy forwards.
type arrival struct {
	path string
	at   time.Time
}

func newOrigin(t testing.TB, useTLS bool, pages map[string]http.HandlerFunc) *origin {
	t.Helper()
	return newOriginElse(t, useTLS, pages, nil)
}

// newOriginElse is newOrigin whose other paths are served by other (nil:
// the page naming the path and the origin).
func newOriginElse(t testing.TB, useTLS bool, pages map[string]http.HandlerFunc, other http.HandlerFunc) *origin {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("origin listener: %v", err)
	}
	o := &origin{addr: ln.Addr().String(), hits: make(map[string]int)}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		now := time.Now() // first, so the lock does not delay it
		o.mu.Lock()
		o.hits[r.URL.Path]++
		o.headers = append(o.headers, r.Header.Clone())
		o.arrivals = append(o.arrivals, arrival{r.URL.Path, now})
		o.mu.Unlock()
		if page, ok := pages[r.URL.Path]; ok {
			page(w, r)
			return
		}
		if other != nil {
			other(w, r)
			return
		}
		fmt.Fprintf(w, "page %s from %s\n", r.URL.Path, o.addr)
	}))
	srv.Listener.Close()
	srv.Listener = ln
	if useTLS {
		srv.StartTLS()
	} else {
		srv.Start()
	}
	o.Server = srv
	t.Cleanup(srv.Close)
	return o
}

// count is how many requests path has received.
func (o *origin) count(path string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.hits[path]
}

// received is the header of every request the origin has received.
func (o *origin) received() []http.Header {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.headers)
}

// arrived is when each request the origin has received arrived, in order.
func (o *origin) arrived() []arrival {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.arrivals)
}

// base is the origin's URL without a path: http:// or https:// and addr.
func (o *origin) base() string {
	if o.TLS != nil {
		return "https://" + o.addr
	}
	return "http://" + o.addr
}

// page is what the origin's default handler answers for path.
func (o *origin) page(path string) string {
	return fmt.Sprintf("page %s from %s\n", path, o.addr)
}

func robotsTxt(body string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		io.WriteString(w, body)
	}
}

func statusPage(code int) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, http.StatusText(code), code)
	}
}

// upstreamCA makes the proxy trust the certificates of the HTTPS origins
// among origins, by the ROBOTSGATE_UPSTREAM_CA_FILE setting it returns.
func upstreamCA(t testing.TB, origins ...*origin) string {
	t.Helper()
	var buf bytes.Buffer
	for _, o := range origins {
		if o.TLS == nil {
			continue
		}
		pem.Encode(&buf, &pem.Block{Type: "CERTIFICATE", Bytes: o.Certificate().Raw})
	}
	path := filepath.Join(t.TempDir(), "origins.pem")
	if err := os.WriteFile(path, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	return "ROBOTSGATE_UPSTREAM_CA_FILE=" + path
}

// connect opens a CONNECT tunnel to target through the proxy, with
// userAgent on the CONNECT, and returns the connection and the proxy's
// answer, with its body when it is not a 200.
func (p *proxyProcess) connect(t *testing.T, target, userAgent string) (net.Conn, reply) {
	t.Helper()
	return connectAs(t, p, target, userAgent, "")
}

// intercept opens a tunnel to target and starts TLS in it as a client that
// trusts only robotsgate's CA would, with target's host as the server name.
func (p *proxyProcess) intercept(t *testing.T, target, userAgent string) *tls.Conn {
	t.Helper()
	conn, answer := p.connect(t, target, userAgent)
	if answer.status != http.StatusOK {
		t.Fatalf("CONNECT %s: status %d, want 200; body %q", target, answer.status, answer.body)
	}
	host, _, _ := net.SplitHostPort(target)
	tlsConn := tls.Client(conn, &tls.Config{ServerName: host, RootCAs: p.caPool()})
	if err := tlsConn.Handshake(); err != nil {
		t.Fatalf("TLS inside the tunnel to %s: %v", target, err)
	}
	return tlsConn
}

// roundTrip sends one request on conn, a tunnel, and reads the whole
// response.
func roundTrip(t *testing.T, conn net.Conn, req *http.Request) reply {
	t.Helper()
	req.Close = true
	if err := req.Write(conn); err != nil {
		t.Fatalf("%s %s in the tunnel: %v", req.Method, req.URL, err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), req)
	if err != nil {
		t.Fatalf("%s %s in the tunnel: reading the response: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s in the tunnel: reading the body: %v", req.Method, req.URL, err)
	}
	return reply{status: resp.StatusCode, header: resp.Header, body: body}
}

// auditRecord is one line of the audit log, by the field names
// proxy/audit.Record documents.
type auditRecord struct {
	raw map[string]any // every field, to check names and presence

	Method       string `json:"method"`
	URL          string `json:"url"`
	Origin       string `json:"origin"`
	Tunnel       string `json:"tunnel"`
	UserAgent    string `json:"user_agent"`
	Token        string `json:"token"`
	Verdict      string `json:"verdict"`
	Reason       string `json:"reason"`
	Rule         string `json:"rule"`
	RuleLine     int    `json:"rule_line"`
	PathsChecked bool   `json:"paths_checked"`
	Mode         string `json:"mode"`
	Forwarded    bool   `json:"forwarded"`
	Status       int    `json:"status"`
	Bytes        int64  `json:"bytes"`
	Error        string `json:"error"`
	// Who the request was judged as (issue 9); see identity_test.go.
	Credential string `json:"credential"`
	UAToken    string `json:"ua_token"`
	UAMismatch bool   `json:"ua_mismatch"`
	// Politeness (issue 10); see pace_test.go.
	CrawlDelay       float64 `json:"crawl_delay"` // seconds
	CrawlDelaySource string  `json:"crawl_delay_source"`
	CrawlDelayLine   int     `json:"crawl_delay_line"`
	Pace             string  `json:"pace"`
	WaitedMS         float64 `json:"waited_ms"`
	// Where robots.txt came from: hit, loaded, stale, shared (issue 12).
	RobotsCache string `json:"robots_cache"`
	// Sites' AI usage preferences (issue 27); see usage_test.go.
	Purposes    []string     `json:"purposes"`
	Usage       usageFinding `json:"usage"`
	UsageStated []string     `json:"usage_stated"`
}

// usageFinding is an audit record's usage object.
type usageFinding struct {
	Form    string `json:"form"`
	Line    int    `json:"line"`
	Header  string `json:"header"`
	Label   string `json:"label"`
	Value   string `json:"value"`
	Purpose string `json:"purpose"`
	Verdict string `json:"verdict"`
}

// alwaysInAudit are the fields every record carries, even when empty.
var alwaysInAudit = []string{
	"time", "client", "method", "url", "user_agent", "token", "verdict", "reason",
	"paths_checked", "mode", "forwarded", "status", "bytes", "duration_ms",
}

// audit reads the audit log of a proxy that has exited: one JSON object
// per line, each with every field that is never left out.
func (p *proxyProcess) audit() []auditRecord {
	p.t.Helper()
	select {
	case <-p.exited:
	default:
		p.t.Fatal("audit read while robotsgate is running: stop it first so the log is complete")
	}
	return readAudit(p.t, p.auditLog)
}

// readAudit reads an audit log file, which must hold whole lines only:
// one JSON object per line, each with every field that is never left out.
func readAudit(t testing.TB, path string) []auditRecord {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read the audit log: %v", err)
	}
	if len(data) > 0 && !bytes.HasSuffix(data, []byte("\n")) {
		t.Errorf("the audit log %s ends in a partial line: %q", path, data[max(0, len(data)-200):])
	}
	if len(data) == 0 {
		return nil
	}
	var recs []auditRecord
	for i, line := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
		var rec auditRecord
		if err := json.Unmarshal([]byte(line), &rec.raw); err != nil {
			t.Fatalf("%s line %d is not a JSON object: %v\n%s", path, i+1, err, line)
		}
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("%s line %d has a field of the wrong type: %v\n%s", path, i+1, err, line)
		}
		for _, f := range alwaysInAudit {
			if _, ok := rec.raw[f]; !ok {
				t.Errorf("%s line %d has no %q field: %s", path, i+1, f, line)
			}
		}
		recs = append(recs, rec)
	}
	return recs
}

// auditFor returns the one record whose URL is rawURL.
func auditFor(t *testing.T, recs []auditRecord, rawURL string) auditRecord {
	t.Helper()
	var found []auditRecord
	for _, r := range recs {
		if r.URL == rawURL {
			found = append(found, r)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d audit records for %s, want 1; all records: %+v", len(found), rawURL, recs)
	}
	return found[0]
}

// lineLog collects a process's output line by line and lets a test wait
// for a line.
type lineLog struct {
	mu      sync.Mutex
	all     bytes.Buffer
	lines   []string
	partial []byte
	changed chan struct{} // closed and replaced when a line arrives
}

func newLineLog() *lineLog { return &lineLog{changed: make(chan struct{})} }

func (l *lineLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.all.Write(p)
	l.partial = append(l.partial, p...)
	added := false
	for {
		i := bytes.IndexByte(l.partial, '\n')
		if i < 0 {
			break
		}
		l.lines = append(l.lines, string(l.partial[:i]))
		l.partial = l.partial[i+1:]
		added = true
	}
	if added {
		close(l.changed)
		l.changed = make(chan struct{})
	}
	return len(p), nil
}

func (l *lineLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.all.String()
}

// waitForJSON waits up to timeout, or until done is closed, for a JSON
// line that match accepts, and returns it.
func (l *lineLog) waitForJSON(timeout time.Duration, done <-chan struct{}, match func(map[string]any) bool) (map[string]any, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	next, exited := 0, false
	for {
		l.mu.Lock()
		lines, changed := l.lines[next:], l.changed
		next = len(l.lines)
		l.mu.Unlock()
		for _, line := range lines {
			var rec map[string]any
			if json.Unmarshal([]byte(line), &rec) == nil && match(rec) {
				return rec, nil
			}
		}
		if exited {
			return nil, errors.New("the process exited")
		}
		select {
		case <-changed:
		case <-done:
			exited = true // all its output is in: look once more
		case <-ctx.Done():
			return nil, fmt.Errorf("no such line within %v", timeout)
		}
	}
}
