package integration

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// tinyproxyVia is the name the test's tinyproxy gives itself in the Via
// header of what it forwards, so that an origin can tell it went through.
const tinyproxyVia = "robotsgate-test-upstream"

// tinyproxy is a real tinyproxy (Debian's) standing for the corporate
// proxy robotsgate must leave through: on 127.0.0.1, Basic credentials
// user:pass, CONNECT to any port (no ConnectPort line), logging each
// request it is asked.
type tinyproxy struct {
	t    *testing.T
	addr string // 127.0.0.1:port
	log  string // its log file
}

// startTinyproxy starts tinyproxy in the foreground with a configuration
// of its own, plus extra lines, and waits until it accepts connections.
// It is stopped with SIGTERM at cleanup.
func startTinyproxy(t *testing.T, extra ...string) *tinyproxy {
	t.Helper()
	bin := tools.Look(t, "apt-get install tinyproxy", "tinyproxy", "/usr/bin/tinyproxy")
	dir := t.TempDir()
	// The port is picked free, then bound by tinyproxy: another test may
	// take it in between, so a start that fails is tried again.
	for attempt := 1; ; attempt++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		_, port, _ := net.SplitHostPort(addr)
		tp := &tinyproxy{t: t, addr: addr, log: filepath.Join(dir, fmt.Sprintf("tinyproxy-%d.log", attempt))}
		conf := filepath.Join(dir, fmt.Sprintf("tinyproxy-%d.conf", attempt))
		lines := append([]string{
			"Port " + port,
			"Listen 127.0.0.1",
			"Timeout 30",
			"Allow 127.0.0.1",
			"BasicAuth user pass",
			`ViaProxyName "` + tinyproxyVia + `"`,
			`LogFile "` + tp.log + `"`,
			"LogLevel Info",
			`PidFile "` + filepath.Join(dir, fmt.Sprintf("tinyproxy-%d.pid", attempt)) + `"`,
			"MaxClients 50",
		}, extra...)
		if err := os.WriteFile(conf, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		output := newLineLog()
		cmd := exec.Command(bin, "-d", "-c", conf)
		cmd.Stdout, cmd.Stderr = output, output
		cmd.WaitDelay = 5 * time.Second
		dieWithTest(cmd)
		if err := cmd.Start(); err != nil {
			t.Fatalf("start tinyproxy: %v", err)
		}
		exited := make(chan struct{})
		go func() {
			cmd.Wait()
			close(exited)
		}()
		if tp.waitListening(exited) {
			t.Cleanup(func() {
				cmd.Process.Signal(syscall.SIGTERM)
				select {
				case <-exited:
				case <-time.After(stopTimeout):
					t.Errorf("tinyproxy still running %v after SIGTERM; killing it", stopTimeout)
					cmd.Process.Kill()
					<-exited
				}
				if t.Failed() {
					t.Logf("tinyproxy's log:\n%s", tp.logText())
				}
			})
			return tp
		}
		cmd.Process.Kill()
		<-exited
		if attempt == 3 {
			t.Fatalf("tinyproxy did not start on %s\noutput:\n%s\nlog:\n%s", addr, output, tp.logText())
		}
	}
}

// waitListening waits until tinyproxy accepts connections, and says
// whether it does before it exits or startTimeout passes.
func (tp *tinyproxy) waitListening(exited <-chan struct{}) bool {
	deadline := time.Now().Add(startTimeout)
	for time.Now().Before(deadline) {
		if c, err := net.DialTimeout("tcp", tp.addr, time.Second); err == nil {
			c.Close()
			return true
		}
		select {
		case <-exited:
			return false
		case <-time.After(20 * time.Millisecond):
		}
	}
	return false
}

func (tp *tinyproxy) logText() string {
	data, err := os.ReadFile(tp.log)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		tp.t.Fatalf("read tinyproxy's log: %v", err)
	}
	return string(data)
}

// asked counts the requests tinyproxy logged whose request line is
// "METHOD target HTTP/...", waiting up to a few seconds for want of them:
// tinyproxy logs as it goes, from a thread per connection.
func (tp *tinyproxy) asked(method, target string, want int) int {
	line := regexp.MustCompile(`Request \(file descriptor \d+\): ` + regexp.QuoteMeta(method+" "+target+" HTTP/"))
	deadline := time.Now().Add(5 * time.Second)
	for {
		n := len(line.FindAllString(tp.logText(), -1))
		if n >= want || time.Now().After(deadline) {
			return n
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// proxyURL is how robotsgate names tinyproxy, with the given credentials.
func (tp *tinyproxy) proxyURL(userinfo string) string {
	if userinfo == "" {
		return "http://" + tp.addr
	}
	return "http://" + userinfo + "@" + tp.addr
}

// viaTinyproxy reports whether every request the origin received came
// through tinyproxy, robots.txt fetches included, and at least one did.
func viaTinyproxy(o *origin) bool {
	headers := o.received()
	for _, h := range headers {
		if !strings.Contains(h.Get("Via"), tinyproxyVia) {
			return false
		}
	}
	return len(headers) > 0
}

// TestUpstreamProxyTinyproxy sends a crawler's plain requests, intercepted
// HTTPS requests and a blind HTTPS tunnel through robotsgate configured to
// leave through a real tinyproxy: each, and each robots.txt fetch, goes
// through tinyproxy, a disallowed path is refused by robotsgate before
// anything reaches it, and the password shows nowhere.
func TestUpstreamProxyTinyproxy(t *testing.T) {
	t.Parallel()
	tp := startTinyproxy(t)
	const rules = "User-agent: *\nDisallow: /private/\n"
	plain := newOrigin(t, false, map[string]http.HandlerFunc{"/robots.txt": robotsTxt(rules)})
	secure := newOrigin(t, true, map[string]http.HandlerFunc{"/robots.txt": robotsTxt(rules)})
	blind := newOrigin(t, true, map[string]http.HandlerFunc{"/robots.txt": robotsTxt(rules)})
	upstream := "ROBOTSGATE_UPSTREAM_PROXY=" + tp.proxyURL("user:pass")
	p := startProxy(t, upstream, upstreamCA(t, secure))
	client := p.client(t)

	// The crawler's own credential for robotsgate, inside the tunnel too,
	// must not travel further.
	const crawlerSecret = "Basic Y3Jhd2xlcjpzM2NyZXQ=" // crawler:s3cret
	getWithCredential := func(rawURL string) reply {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, rawURL, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("User-Agent", crawlerUA)
		req.Header.Set("Proxy-Authorization", crawlerSecret)
		return roundTripClient(t, client, req)
	}

	if r := getWithCredential(plain.base() + "/page"); r.status != http.StatusOK || string(r.body) != plain.page("/page") {
		t.Errorf("plain GET /page: status %d, body %q", r.status, r.body)
	}
	if !viaTinyproxy(plain) || plain.count("/robots.txt") != 1 {
		t.Errorf("the plain origin got robots.txt %d times and requests with Via %v; want everything through tinyproxy (%s)",
			plain.count("/robots.txt"), viaOf(plain), tinyproxyVia)
	}
	if n := tp.asked("GET", plain.base()+"/page", 1); n != 1 {
		t.Errorf("tinyproxy logged GET %s/page %d times, want 1", plain.base(), n)
	}

	if n := tp.asked("CONNECT", secure.addr, 0); n != 0 {
		t.Fatalf("tinyproxy was asked to CONNECT %s before any request for it", secure.addr)
	}
	if r := getWithCredential(secure.base() + "/page"); r.status != http.StatusOK || string(r.body) != secure.page("/page") {
		t.Errorf("intercepted GET /page: status %d, body %q", r.status, r.body)
	}
	// One tunnel for the robots.txt fetch, one for the request: tinyproxy
	// cannot add its Via inside them, its log shows them.
	if n := tp.asked("CONNECT", secure.addr, 2); n != 2 {
		t.Errorf("tinyproxy logged CONNECT %s %d times, want 2: robots.txt's and the request's", secure.addr, n)
	}

	for _, o := range []*origin{plain, secure} {
		if r := getWithCredential(o.base() + "/private/x"); r.status != http.StatusForbidden || r.header.Get("X-Robotsgate-Decision") == "" {
			t.Errorf("GET %s/private/x: status %d, X-Robotsgate-Decision %q; want robotsgate's 403", o.base(), r.status, r.header.Get("X-Robotsgate-Decision"))
		}
		if n := o.count("/private/x"); n != 0 {
			t.Errorf("%s received /private/x %d times", o.base(), n)
		}
		for _, h := range o.received() {
			if h.Get("Proxy-Authorization") == crawlerSecret {
				t.Errorf("%s received the crawler's own Proxy-Authorization", o.base())
			}
		}
	}
	if n := tp.asked("GET", plain.base()+"/private/x", 0); n != 0 {
		t.Errorf("tinyproxy was asked for a disallowed path %d times", n)
	}

	// Interception off: the tunnel is relayed blind, through tinyproxy.
	blindProxy := startProxy(t, upstream, "ROBOTSGATE_MITM=false", upstreamCA(t, blind))
	originRoots := x509.NewCertPool()
	originRoots.AddCert(blind.Certificate())
	blindClient := newClient(t, &http.Transport{
		Proxy:              http.ProxyURL(blindProxy.url),
		ProxyConnectHeader: http.Header{"User-Agent": {crawlerUA}},
		TLSClientConfig:    &tls.Config{RootCAs: originRoots},
	})
	if r := get(t, blindClient, blind.base()+"/page", crawlerUA); r.status != http.StatusOK || string(r.body) != blind.page("/page") {
		t.Errorf("GET /page through a blind tunnel: status %d, body %q", r.status, r.body)
	}
	if n := tp.asked("CONNECT", blind.addr, 2); n != 2 {
		t.Errorf("tinyproxy logged CONNECT %s %d times, want 2: robots.txt's and the blind tunnel's", blind.addr, n)
	}

	for _, proc := range []*proxyProcess{p, blindProxy} {
		proc.stop()
		if strings.Contains(proc.output.String(), "pass@") {
			t.Errorf("robotsgate's log shows the upstream proxy's password:\n%s", proc.output)
		}
		if !strings.Contains(proc.output.String(), `"upstream_proxy":"http://user:xxxxx@`+tp.addr+`"`) {
			t.Errorf(`"robotsgate listening" does not name the upstream proxy, redacted:\n%s`, proc.output)
		}
		for _, rec := range proc.audit() {
			if rec.Error != "" {
				t.Errorf("audit record %s %s: error %q", rec.Method, rec.URL, rec.Error)
			}
		}
	}
	if rec := auditFor(t, blindProxy.audit(), blind.addr); rec.Method != http.MethodConnect || !rec.Forwarded || rec.PathsChecked {
		t.Errorf("blind tunnel's record: %+v; want a forwarded CONNECT whose paths were not checked", rec)
	}
}

// roundTripClient sends req with client and reads the whole answer.
func roundTripClient(t *testing.T, client *http.Client, req *http.Request) reply {
	t.Helper()
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	var body bytes.Buffer
	if _, err := body.ReadFrom(resp.Body); err != nil {
		t.Fatalf("%s %s: reading the body: %v", req.Method, req.URL, err)
	}
	return reply{status: resp.StatusCode, header: resp.Header, body: body.Bytes()}
}

func viaOf(o *origin) []string {
	var via []string
	for _, h := range o.received() {
		via = append(via, h.Get("Via"))
	}
	return via
}

// TestUpstreamProxyTinyproxyFailures: with a wrong password, no password or
// no proxy listening, the crawler gets a 502 that names the upstream proxy,
// its password redacted, and what it said; so does the audit record.
func TestUpstreamProxyTinyproxyFailures(t *testing.T) {
	t.Parallel()
	tp := startTinyproxy(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	downAddr := ln.Addr().String()
	ln.Close()

	plain := newOrigin(t, false, nil)
	secure := newOrigin(t, true, nil)
	for _, tt := range []struct {
		name    string
		proxy   string
		target  *origin
		problem *regexp.Regexp // what the 502 says after "robotsgate could not get host:port: "
	}{
		// tinyproxy 1.11.1 answers wrong credentials with 401 (fixed to
		// 407 later): in a CONNECT's answer either is the proxy's refusal.
		{"wrong password", tp.proxyURL("user:wr0ng"), secure,
			regexp.MustCompile(`^the upstream proxy ` + regexp.QuoteMeta("http://user:xxxxx@"+tp.addr) + ` refused the CONNECT: 40[17] `)},
		{"no credentials", tp.proxyURL(""), plain,
			regexp.MustCompile(`^the upstream proxy ` + regexp.QuoteMeta("http://"+tp.addr) + ` refused the request: 407 Proxy Authentication Required$`)},
		{"upstream down", "http://user:wr0ng@" + downAddr, plain,
			regexp.MustCompile(`^cannot connect to the upstream proxy ` + regexp.QuoteMeta("http://user:xxxxx@"+downAddr) + `: connection refused$`)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := startProxy(t, "ROBOTSGATE_UPSTREAM_PROXY="+tt.proxy, upstreamCA(t, secure))
			// robots.txt itself is forwarded without being fetched first.
			target := tt.target.base() + "/robots.txt"
			r := get(t, p.client(t), target, crawlerUA)
			prefix := "robotsgate could not get " + tt.target.addr + ": "
			body := strings.TrimSuffix(string(r.body), "\n")
			if r.status != http.StatusBadGateway || !strings.HasPrefix(body, prefix) || !tt.problem.MatchString(strings.TrimPrefix(body, prefix)) {
				t.Errorf("GET %s: status %d, body %q; want 502 %s%s", target, r.status, r.body, prefix, tt.problem)
			}
			p.stop()
			rec := auditFor(t, p.audit(), target)
			if rec.Status != http.StatusBadGateway || !tt.problem.MatchString(rec.Error) {
				t.Errorf("audit record: status %d, error %q; want 502, %s", rec.Status, rec.Error, tt.problem)
			}
			if n := tt.target.count("/robots.txt"); n != 0 {
				t.Errorf("the origin served robots.txt %d times", n)
			}
			log, _ := os.ReadFile(p.auditLog)
			if strings.Contains(string(log)+p.output.String(), "wr0ng") {
				t.Error("the audit log or robotsgate's log shows the upstream proxy's password")
			}
		})
	}
}

// TestUpstreamProxyTinyproxyDestinations denies 127.0.0.0/8 while the
// upstream proxy listens on 127.0.0.1: a request for an address outside
// the range still reaches the proxy (its own address is not judged; a
// tinyproxy filter answers it, so nothing connects out), but an origin
// named localhost resolves into the range and is refused by robotsgate,
// plainly and in a tunnel, with nothing sent to tinyproxy.
func TestUpstreamProxyTinyproxyDestinations(t *testing.T) {
	t.Parallel()
	const outside = "192.0.2.1" // TEST-NET-1, filtered by tinyproxy
	filter := filepath.Join(t.TempDir(), "filter")
	if err := os.WriteFile(filter, []byte(`^192\.0\.2\.1$`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tp := startTinyproxy(t, `Filter "`+filter+`"`)
	plain := newOrigin(t, false, nil)
	secure := newOrigin(t, true, nil)
	_, plainPort, _ := net.SplitHostPort(plain.addr)
	_, securePort, _ := net.SplitHostPort(secure.addr)
	p := startProxy(t, "ROBOTSGATE_UPSTREAM_PROXY="+tp.proxyURL("user:pass"), "ROBOTSGATE_DENY_DESTINATIONS=127.0.0.0/8", upstreamCA(t, secure))
	client := p.client(t)

	for _, target := range []string{
		"http://localhost:" + plainPort + "/page",
		"http://localhost:" + plainPort + "/robots.txt",
		"https://localhost:" + securePort + "/robots.txt",
	} {
		r := get(t, client, target, crawlerUA)
		if r.status != http.StatusForbidden || !bytes.Contains(r.body, []byte("is in the denied range 127.0.0.0/8 (ROBOTSGATE_DENY_DESTINATIONS)")) {
			t.Errorf("GET %s: status %d, body %q; want robotsgate's 403 naming the denied range", target, r.status, r.body)
		}
	}

	target := "http://" + outside + "/robots.txt"
	r := get(t, client, target, crawlerUA)
	if r.status != http.StatusForbidden || r.header.Get("X-Robotsgate-Decision") != "" || !bytes.Contains(r.body, []byte("Filtered")) {
		t.Errorf("GET %s: status %d, X-Robotsgate-Decision %q, body %q; want tinyproxy's own 403 Filtered",
			target, r.status, r.header.Get("X-Robotsgate-Decision"), r.body)
	}
	if n := tp.asked("GET", target, 1); n != 1 {
		t.Errorf("tinyproxy logged GET %s %d times, want 1", target, n)
	}
	// Its log is in order: what came before that request is all there is.
	if strings.Contains(tp.logText(), "localhost") {
		t.Errorf("tinyproxy was asked about localhost:\n%s", tp.logText())
	}
	if n := len(plain.received()) + len(secure.received()); n != 0 {
		t.Errorf("the origins received %d requests", n)
	}
	p.stop()
	for _, rec := range p.audit() {
		host := rec.URL
		if u, err := url.Parse(rec.URL); err == nil {
			host = u.Hostname()
		}
		denied, _ := rec.raw["denied_destination"].(bool)
		if want := host == "localhost"; denied != want {
			t.Errorf("audit record %s: denied_destination %v, want %v", rec.URL, denied, want)
		}
	}
}
