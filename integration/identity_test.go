package integration

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Issue 9, "identity a bot cannot shed": a crawler can send any
// User-Agent, so robotsgate can judge requests by a credential given in
// Proxy-Authorization (ROBOTSGATE_CREDENTIALS_FILE, ROBOTSGATE_AUTH) or by
// a token pinned for every request (ROBOTSGATE_TOKEN) instead. These tests
// drive the real binary with credentials files made by the real htpasswd.

// browserUA is an ordinary browser's User-Agent. It names no product
// token, so on its own only a robots.txt's "*" group applies to it.
const browserUA = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0 Safari/537.36"

// gptBotUA is GPTBot's own User-Agent; its token is GPTBot.
const gptBotUA = "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; GPTBot/1.2; +https://openai.com/gptbot)"

// identityRobots treats GPTBot and everyone else differently both ways,
// so that the status of a request shows which group judged it: /gpt/ is
// closed to GPTBot only, /others/ to everyone but GPTBot.
const identityRobots = "User-agent: GPTBot\nDisallow: /gpt/\n\nUser-agent: *\nDisallow: /others/\n"

// Statuses by path prefix (see identityCase) for a request judged as
// GPTBot and for one judged by the "*" group of identityRobots.
var (
	judgedAsGPTBot = map[string]int{"/gpt": http.StatusForbidden, "/others": http.StatusOK}
	judgedAsOthers = map[string]int{"/gpt": http.StatusOK, "/others": http.StatusForbidden}
)

// challenge is the one Proxy-Authenticate header of every 407.
const challenge = `Basic realm="robotsgate"`

// TestCurlProxyUser uses a credential as a crawler's operator would, with
// curl -U: over HTTP and through an intercepted tunnel, the request is
// judged as the credential's token, GPTBot, whatever curl's User-Agent (a
// browser's here): allowed where GPTBot is allowed, refused where it is
// refused. The origin never sees the credential.
func TestCurlProxyUser(t *testing.T) {
	t.Parallel()
	curl := tools.Look(t, "apt-get install curl", "curl")
	openai := newCredential("openai-crawler", "GPTBot")
	credsFile := credentialsFile(t, openai)
	pages := map[string]http.HandlerFunc{"/robots.txt": robotsTxt(identityRobots)}
	plain := newOrigin(t, false, pages)
	secure := newOrigin(t, true, pages)
	// No ROBOTSGATE_AUTH: a credentials file alone makes it required.
	p := startProxy(t, "ROBOTSGATE_CREDENTIALS_FILE="+credsFile, upstreamCA(t, secure))
	caFile := filepath.Join(p.caDir, "ca.pem")

	t.Run("requests", func(t *testing.T) {
		for _, c := range []struct {
			name   string
			o      *origin
			path   string
			status string
		}{
			// A browser is refused /others/ and allowed /gpt/: the
			// opposite shows the credential's token was judged.
			{"http allowed", plain, "/others/page", "200"},
			{"http refused", plain, "/gpt/page", "403"},
			{"https allowed", secure, "/others/page", "200"},
			{"https refused", secure, "/gpt/page", "403"},
		} {
			t.Run(c.name, func(t *testing.T) {
				t.Parallel()
				out := filepath.Join(t.TempDir(), "body")
				ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
				defer cancel()
				// -q first: no ~/.curlrc. -U sends Basic credentials to the
				// proxy: on the request over HTTP, on the CONNECT for HTTPS.
				cmd := exec.CommandContext(ctx, curl, "-q", "-sS", "-x", p.url.String(),
					"-U", openai.name+":"+openai.password, "--cacert", caFile,
					"-A", browserUA, "-o", out, "-w", "%{http_code}", c.o.base()+c.path)
				cmd.Env = cleanEnv()
				var stderr bytes.Buffer
				cmd.Stderr = &stderr
				status, err := cmd.Output()
				if err != nil {
					t.Fatalf("curl %s: %v\n%s", c.path, err, stderr.Bytes())
				}
				if string(status) != c.status {
					t.Fatalf("curl %s%s: status %s, want %s", c.o.base(), c.path, status, c.status)
				}
				body, err := os.ReadFile(out)
				if err != nil {
					t.Fatal(err)
				}
				wantHits := 1
				if c.status == "200" {
					if string(body) != c.o.page(c.path) {
						t.Errorf("curl %s: body %q, want the origin's page", c.path, body)
					}
				} else {
					wantHits = 0
					if !bytes.Contains(body, []byte("Disallow: /gpt/ (line 2)")) {
						t.Errorf("curl %s: the 403 does not name GPTBot's rule:\n%s", c.path, body)
					}
				}
				if n := c.o.count(c.path); n != wantHits {
					t.Errorf("the origin received %s %d times, want %d", c.path, n, wantHits)
				}
			})
		}
	})
	checkOriginsClean(t, secretsOf(openai), plain, secure)
}

// TestCredentialTokenIsJudged: the token of the credential a request
// carries is the one judged, over HTTP and inside a tunnel whose CONNECT
// carried it, whatever the User-Agent says; a request without one, in
// optional mode, is judged by its User-Agent. The audit record says who
// was judged and whether the User-Agent agreed.
func TestCredentialTokenIsJudged(t *testing.T) {
	t.Parallel()
	openai := newCredential("openai-crawler", "GPTBot")
	examplebot := newCredential("examplebot", "") // the name is the token
	credsFile := credentialsFile(t, openai, examplebot)
	pages := map[string]http.HandlerFunc{"/robots.txt": robotsTxt(identityRobots)}
	origins := []*origin{newOrigin(t, false, pages), newOrigin(t, true, pages)}
	p := startProxy(t, "ROBOTSGATE_CREDENTIALS_FILE="+credsFile, "ROBOTSGATE_AUTH=optional", upstreamCA(t, origins...))

	runIdentityCases(t, p, origins, []identityCase{
		{name: "browser with GPTBot's credential", cred: &openai, ua: browserUA, want: judgedAsGPTBot,
			// A browser's User-Agent has no token: ua_token is there, empty.
			who: &identity{credential: openai.name, token: "GPTBot", uaToken: "", hasUAToken: true, mismatch: true}},
		{name: "browser anonymously", ua: browserUA, want: judgedAsOthers,
			who: &identity{token: ""}},
		{name: "GPTBot anonymously", ua: gptBotUA, want: judgedAsGPTBot,
			who: &identity{token: "GPTBot"}},
		// The credential wins even when the User-Agent is stricter.
		{name: "GPTBot with examplebot's credential", cred: &examplebot, ua: gptBotUA, want: judgedAsOthers,
			who: &identity{credential: examplebot.name, token: "examplebot", uaToken: "GPTBot", hasUAToken: true, mismatch: true}},
		// Tokens match case-insensitively: no mismatch.
		{name: "GPTBot's credential, User-Agent in lower case", cred: &openai, ua: "gptbot/1.0", want: judgedAsGPTBot,
			who: &identity{credential: openai.name, token: "GPTBot", uaToken: "gptbot", hasUAToken: true}},
	})
	checkOriginsClean(t, secretsOf(openai, examplebot), origins...)
}

// TestProxyAuthentication sends requests and CONNECTs with no, wrong,
// unknown, malformed and valid credentials, in required mode (the default
// with a credentials file) and in optional mode: a credential that does
// not check out is a 407 asking for Basic credentials in both, a missing
// one is a 407 in required mode and the User-Agent's rules in optional
// mode. A 407 reaches no origin, is audited, and the proxy's own
// endpoints need no credential.
func TestProxyAuthentication(t *testing.T) {
	t.Parallel()
	examplebot := newCredential("examplebot", "")
	credsFile := credentialsFile(t, examplebot)
	wrongPassword := credential{name: examplebot.name, password: "wrong-" + examplebot.password}.proxyAuth()
	unknownName := credential{name: "nobody", password: examplebot.password}.proxyAuth()
	rows := []struct {
		name     string
		connect  bool   // a CONNECT, then a request inside when it opens
		ua       string // of the request, and of the CONNECT
		auth     string // Proxy-Authorization; "" sends none
		required int    // the status in each mode
		optional int
	}{
		{"no credential", false, crawlerUA, "", 407, 200},
		{"no credential, User-Agent refused", false, gptBotUA, "", 407, 403},
		{"no credential, CONNECT", true, crawlerUA, "", 407, 200},
		{"wrong password", false, crawlerUA, wrongPassword, 407, 407},
		{"wrong password, CONNECT", true, crawlerUA, wrongPassword, 407, 407},
		{"unknown name", false, crawlerUA, unknownName, 407, 407},
		{"unknown name, CONNECT", true, crawlerUA, unknownName, 407, 407},
		{"not Basic", false, crawlerUA, "Bearer abc123", 407, 407},
		{"not base64", false, crawlerUA, "Basic %%%not-base64%%%", 407, 407},
		{"valid", false, crawlerUA, examplebot.proxyAuth(), 200, 200},
		{"valid, CONNECT", true, crawlerUA, examplebot.proxyAuth(), 200, 200},
	}
	for _, mode := range []string{"required", "optional"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			pages := map[string]http.HandlerFunc{"/robots.txt": robotsTxt(identityRobots)}
			plain, secure := newOrigin(t, false, pages), newOrigin(t, true, pages)
			env := []string{"ROBOTSGATE_CREDENTIALS_FILE=" + credsFile, upstreamCA(t, secure)}
			if mode == "optional" {
				env = append(env, "ROBOTSGATE_AUTH=optional")
			}
			p := startProxy(t, env...)

			var refusedURLs []string // plain requests answered 407
			refusedConnects := 0
			for i, row := range rows {
				want := row.required
				if mode == "optional" {
					want = row.optional
				}
				// /gpt/ is closed to GPTBot only: examplebot, the
				// credential's token, may fetch it, and so may crawlerUA.
				target := fmt.Sprintf("/gpt/%d", i)
				if !row.connect {
					r, _ := sendProxied(t, p, plain.base()+target, row.ua, row.auth)
					if r.status != want {
						t.Errorf("%s: status %d, want %d; body %q", row.name, r.status, want, r.body)
						continue
					}
					if want == http.StatusProxyAuthRequired {
						checkChallenge(t, row.name, r)
						refusedURLs = append(refusedURLs, plain.base()+target)
					}
					wantHits := 0
					if want == http.StatusOK {
						wantHits = 1
					}
					if n := plain.count(target); n != wantHits {
						t.Errorf("%s: the origin received %s %d times, want %d", row.name, target, n, wantHits)
					}
					continue
				}
				conn, r := connectAs(t, p, secure.addr, row.ua, row.auth)
				if r.status != want {
					t.Errorf("%s: status %d, want %d; body %q", row.name, r.status, want, r.body)
					continue
				}
				if want == http.StatusProxyAuthRequired {
					checkChallenge(t, row.name, r)
					refusedConnects++
					continue
				}
				// Nothing inside carries a credential of its own.
				in := p.startTLS(t, conn, secure.addr)
				if r := in.get(t, secure.base()+target, row.ua, ""); r.status != http.StatusOK {
					t.Errorf("%s: inside the tunnel, status %d, want 200; body %q", row.name, r.status, r.body)
				}
			}

			// What the proxy serves itself needs no credential.
			direct := directClient(t)
			for _, path := range []string{"/healthz", "/ca.pem", "/metrics"} {
				if r := get(t, direct, p.url.String()+path, "test"); r.status != http.StatusOK {
					t.Errorf("%s without a credential: status %d, want 200", path, r.status)
				}
			}

			if code := p.stop(); code != 0 {
				t.Fatalf("exit %d after SIGTERM, want 0", code)
			}
			recs := p.audit()
			for _, u := range refusedURLs {
				if rec := auditFor(t, recs, u); rec.Status != http.StatusProxyAuthRequired || rec.Verdict != "error" || rec.Forwarded {
					t.Errorf("audit record for the 407 of %s: status %d, verdict %q, forwarded %v; want 407, error, false",
						u, rec.Status, rec.Verdict, rec.Forwarded)
				}
			}
			connects := 0
			for _, rec := range recs {
				if rec.Method != http.MethodConnect || rec.Status != http.StatusProxyAuthRequired {
					continue
				}
				connects++
				if rec.Verdict != "error" || rec.Forwarded {
					t.Errorf("audit record for a CONNECT answered 407: %+v; want verdict error, not forwarded", rec)
				}
			}
			if connects != refusedConnects {
				t.Errorf("%d audit records of a CONNECT answered 407, want %d: %+v", connects, refusedConnects, recs)
			}
		})
	}
}

// TestAuthFailuresLoggedAndCounted: each failed attempt, by request or
// by CONNECT, is logged on standard error with the client's address and
// counted in /metrics by reason.
func TestAuthFailuresLoggedAndCounted(t *testing.T) {
	t.Parallel()
	examplebot := newCredential("examplebot", "")
	credsFile := credentialsFile(t, examplebot)
	wrong := credential{name: examplebot.name, password: "wrong-" + examplebot.password}
	unknown := newCredential("nobody", "")
	pages := map[string]http.HandlerFunc{"/robots.txt": robotsTxt(privateRobots)}
	plain, secure := newOrigin(t, false, pages), newOrigin(t, true, pages)
	p := startProxy(t, "ROBOTSGATE_CREDENTIALS_FILE="+credsFile, upstreamCA(t, secure))

	var from []string // the client address of each failed attempt
	for _, c := range []credential{wrong, unknown} {
		r, addr := sendProxied(t, p, plain.base()+"/page", crawlerUA, c.proxyAuth())
		checkChallenge(t, "request as "+c.name, r)
		from = append(from, addr)
		conn, r := connectAs(t, p, secure.addr, crawlerUA, c.proxyAuth())
		checkChallenge(t, "CONNECT as "+c.name, r)
		from = append(from, conn.LocalAddr().String())
	}

	// Logged with the client's address, ip:port as the audit log has it, or
	// just the IP, which is what a ban would use.
	deadline := time.Now().Add(10 * time.Second)
	for _, addr := range from {
		_, err := p.output.waitForJSON(time.Until(deadline), p.exited, func(rec map[string]any) bool {
			return namesClient(rec, addr)
		})
		if err != nil {
			t.Errorf("no log line names the client %s of a failed attempt: %v", addr, err)
		}
	}

	// A failure may be counted just after the 407 is written: poll,
	// briefly.
	direct := directClient(t)
	for deadline := time.Now().Add(5 * time.Second); ; {
		r := get(t, direct, p.url.String()+"/metrics", "test")
		if r.status != http.StatusOK {
			t.Fatalf("/metrics: status %d", r.status)
		}
		total := authFailures(t, r.body)
		if total >= float64(len(from)) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("robotsgate_auth_failures_total sums to %v over its reasons, want at least %d:\n%s", total, len(from), r.body)
		}
		time.Sleep(20 * time.Millisecond)
	}
	checkNoSecrets(t, "robotsgate's log", []byte(p.output.String()), secretsOf(examplebot, wrong, unknown))
}

// TestCredentialNeverLeaks: neither the password nor the Proxy-Authorization
// value, right or wrong, appears in the audit log, in the proxy's log
// (debug level, the most it says), in any answer, or at the origin.
func TestCredentialNeverLeaks(t *testing.T) {
	t.Parallel()
	openai := newCredential("openai-crawler", "GPTBot")
	wrong := credential{name: openai.name, password: "wrong-" + rand.Text()}
	credsFile := credentialsFile(t, openai)
	pages := map[string]http.HandlerFunc{"/robots.txt": robotsTxt(identityRobots)}
	plain, secure := newOrigin(t, false, pages), newOrigin(t, true, pages)
	p := startProxy(t, "ROBOTSGATE_CREDENTIALS_FILE="+credsFile, "ROBOTSGATE_AUTH=optional",
		"ROBOTSGATE_LOG_LEVEL=debug", upstreamCA(t, secure))

	var replies []reply
	client := p.clientAs(t, openai)
	for _, o := range []*origin{plain, secure} {
		for path, want := range judgedAsGPTBot {
			r := get(t, client, o.base()+path+"/x", browserUA)
			if r.status != want {
				t.Errorf("%s%s/x with GPTBot's credential: status %d, want %d", o.base(), path, r.status, want)
			}
			replies = append(replies, r)
		}
	}
	r, _ := sendProxied(t, p, plain.base()+"/others/wrong", browserUA, wrong.proxyAuth())
	checkChallenge(t, "request with a wrong password", r)
	replies = append(replies, r)
	_, r = connectAs(t, p, secure.addr, browserUA, wrong.proxyAuth())
	checkChallenge(t, "CONNECT with a wrong password", r)
	replies = append(replies, r)

	secrets := secretsOf(openai, wrong)
	for i, r := range replies {
		var header bytes.Buffer
		r.header.Write(&header)
		checkNoSecrets(t, fmt.Sprintf("answer %d's header", i), header.Bytes(), secrets)
		checkNoSecrets(t, fmt.Sprintf("answer %d's body", i), r.body, secrets)
	}
	checkOriginsClean(t, secrets, plain, secure)

	if code := p.stop(); code != 0 {
		t.Fatalf("exit %d after SIGTERM, want 0", code)
	}
	// Not vacuous: every request was audited.
	if recs := p.audit(); len(recs) < len(replies) {
		t.Errorf("%d audit records, want at least %d: %+v", len(recs), len(replies), recs)
	}
	auditLog, err := os.ReadFile(p.auditLog)
	if err != nil {
		t.Fatal(err)
	}
	checkNoSecrets(t, "the audit log", auditLog, secrets)
	checkNoSecrets(t, "robotsgate's log", []byte(p.output.String()), secrets)
}

// TestCredentialsReloadOnSIGHUP replaces the credentials file as an
// operator would (a new file renamed over the old) and sends SIGHUP: a
// credential added works and one removed gets 407, while connections
// opened before carry on. A file with a line robotsgate cannot use is not
// taken: the credentials before it stay.
func TestCredentialsReloadOnSIGHUP(t *testing.T) {
	t.Parallel()
	alice, bob, carol := newCredential("alice", ""), newCredential("bob", ""), newCredential("carol", "")
	dave := newCredential("dave", "")
	dave.scheme = "-m" // apr1 MD5: not bcrypt
	credsFile := credentialsFile(t, alice, bob)
	pages := map[string]http.HandlerFunc{"/robots.txt": robotsTxt(privateRobots)}
	plain, secure := newOrigin(t, false, pages), newOrigin(t, true, pages)
	// SIGHUP alone reloads: each step counts the reloads it causes.
	p := startProxy(t, "ROBOTSGATE_CREDENTIALS_FILE="+credsFile, "ROBOTSGATE_WATCH_INTERVAL=0", upstreamCA(t, secure))

	// Bob is in every file the proxy takes; his connections stay open
	// across the reloads.
	bobConn := newKeptConn(p.dial(t), true)
	bobTunnel := p.interceptAs(t, secure.addr, crawlerUA, bob.proxyAuth())
	bobUses := 0
	checkBobsConnections := func(step string) {
		t.Helper()
		bobUses++
		target := fmt.Sprintf("/kept/%d", bobUses)
		if r := bobConn.get(t, plain.base()+target, crawlerUA, bob.proxyAuth()); r.status != http.StatusOK {
			t.Errorf("%s: request %d on bob's connection: status %d, want 200", step, bobUses, r.status)
		}
		if r := bobTunnel.get(t, secure.base()+target, crawlerUA, ""); r.status != http.StatusOK {
			t.Errorf("%s: request %d in bob's tunnel: status %d, want 200", step, bobUses, r.status)
		}
	}
	replace := func(creds ...credential) {
		t.Helper()
		next := filepath.Join(filepath.Dir(credsFile), "credentials.next")
		writeCredentials(t, next, creds...)
		if err := os.Rename(next, credsFile); err != nil {
			t.Fatal(err)
		}
		p.hangUp()
	}

	checkAccess(t, p, "before", alice, http.StatusOK, plain, secure)
	checkAccess(t, p, "before", bob, http.StatusOK, plain, secure)
	checkAccess(t, p, "before", carol, http.StatusProxyAuthRequired, plain, secure)
	checkBobsConnections("before")

	replace(bob, carol)
	if _, err := p.output.waitForJSON(requestTimeout, p.exited, func(rec map[string]any) bool {
		return rec["msg"] == "credentials reloaded"
	}); err != nil {
		t.Fatalf(`no "credentials reloaded" after SIGHUP: %v`, err)
	}
	checkAccess(t, p, "reloaded", alice, http.StatusProxyAuthRequired, plain, secure)
	checkAccess(t, p, "reloaded", bob, http.StatusOK, plain, secure)
	checkAccess(t, p, "reloaded", carol, http.StatusOK, plain, secure)
	checkBobsConnections("reloaded")

	// Line 2 of this file is unusable: the whole file is refused, and bob,
	// who is not in it, still gets in.
	replace(carol, dave)
	if _, err := p.output.waitForJSON(requestTimeout, p.exited, func(rec map[string]any) bool {
		msg, _ := rec["msg"].(string)
		return strings.HasPrefix(msg, "credentials file not reloaded")
	}); err != nil {
		t.Fatalf(`no "credentials file not reloaded" after SIGHUP with an apr1 line: %v`, err)
	}
	checkAccess(t, p, "kept", alice, http.StatusProxyAuthRequired, plain, secure)
	checkAccess(t, p, "kept", bob, http.StatusOK, plain, secure)
	checkAccess(t, p, "kept", carol, http.StatusOK, plain, secure)
	checkAccess(t, p, "kept", dave, http.StatusProxyAuthRequired, plain, secure)
	checkBobsConnections("kept")
	if n := countLog(p, func(rec map[string]any) bool { return rec["msg"] == "credentials reloaded" }); n != 1 {
		t.Errorf(`%d "credentials reloaded" log lines, want 1: the broken file was not taken`, n)
	}
}

// TestPinnedToken: ROBOTSGATE_TOKEN judges every request as that token
// whatever its User-Agent, and, with credentials in optional mode, every
// request without one.
func TestPinnedToken(t *testing.T) {
	t.Parallel()
	pages := map[string]http.HandlerFunc{"/robots.txt": robotsTxt(identityRobots)}

	t.Run("alone", func(t *testing.T) {
		t.Parallel()
		origins := []*origin{newOrigin(t, false, pages), newOrigin(t, true, pages)}
		p := startProxy(t, "ROBOTSGATE_TOKEN=GPTBot", upstreamCA(t, origins...))
		runIdentityCases(t, p, origins, []identityCase{
			{name: "browser", ua: browserUA, want: judgedAsGPTBot,
				who: &identity{token: "GPTBot", uaToken: "", hasUAToken: true, mismatch: true}},
			{name: "another crawler", ua: crawlerUA, want: judgedAsGPTBot,
				who: &identity{token: "GPTBot", uaToken: "ExampleBot", hasUAToken: true, mismatch: true}},
			{name: "GPTBot itself", ua: gptBotUA, want: judgedAsGPTBot,
				who: &identity{token: "GPTBot", uaToken: "GPTBot", hasUAToken: true}},
		})
	})

	t.Run("with credentials", func(t *testing.T) {
		t.Parallel()
		examplebot := newCredential("examplebot", "")
		credsFile := credentialsFile(t, examplebot)
		origins := []*origin{newOrigin(t, false, pages), newOrigin(t, true, pages)}
		p := startProxy(t, "ROBOTSGATE_TOKEN=GPTBot", "ROBOTSGATE_CREDENTIALS_FILE="+credsFile,
			"ROBOTSGATE_AUTH=optional", upstreamCA(t, origins...))
		runIdentityCases(t, p, origins, []identityCase{
			{name: "browser anonymously", ua: browserUA, want: judgedAsGPTBot,
				who: &identity{token: "GPTBot", uaToken: "", hasUAToken: true, mismatch: true}},
			{name: "browser with examplebot's credential", cred: &examplebot, ua: browserUA, want: judgedAsOthers,
				who: &identity{credential: examplebot.name, token: "examplebot", uaToken: "", hasUAToken: true, mismatch: true}},
		})
	})
}

// TestIdentityConfigurationErrors: a credentials file with a hash that is
// not bcrypt, or ROBOTSGATE_AUTH at odds with the credentials file, stops
// robotsgate before it listens, with exit status 2 and a message naming
// the variable (and the line of the file), never a password.
func TestIdentityConfigurationErrors(t *testing.T) {
	t.Parallel()
	alice, bob := newCredential("alice", ""), newCredential("bob", "GPTBot")
	apr1, sha, plainText := newCredential("carol", ""), newCredential("dave", ""), newCredential("erin", "")
	apr1.scheme, sha.scheme, plainText.scheme = "-m", "-s", "-p"
	everyone := []credential{alice, bob, apr1, sha, plainText}
	line := func(n int) string { return fmt.Sprintf(`\bline %d\b`, n) }
	const fileVar, authVar = `ROBOTSGATE_CREDENTIALS_FILE`, `ROBOTSGATE_AUTH`

	for _, c := range []struct {
		name  string
		creds []credential // written to ROBOTSGATE_CREDENTIALS_FILE; nil sets no file
		env   []string
		want  []string // regular expressions stderr matches
	}{
		{"apr1 MD5 hash on line 2", []credential{alice, apr1}, nil, []string{fileVar, line(2)}},
		{"SHA-1 hash on line 1", []credential{sha, alice}, nil, []string{fileVar, line(1)}},
		// The "hash" is the password itself here: it must not be quoted.
		{"plain text password on line 3", []credential{alice, bob, plainText}, nil, []string{fileVar, line(3)}},
		{"optional without a file", nil, []string{"ROBOTSGATE_AUTH=optional"}, []string{authVar}},
		{"required without a file", nil, []string{"ROBOTSGATE_AUTH=required"}, []string{authVar}},
		{"off with a file", []credential{alice}, []string{"ROBOTSGATE_AUTH=off"}, []string{authVar}},
		{"unknown mode", []credential{alice}, []string{"ROBOTSGATE_AUTH=sometimes"}, []string{authVar, `"sometimes"`}},
		{"file missing", nil, []string{fileVar + "=/nonexistent/robotsgate-credentials"}, []string{fileVar, "robotsgate-credentials"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var env []string
			if c.creds != nil {
				env = append(env, fileVar+"="+credentialsFile(t, c.creds...))
			}
			stderr := refusedStart(t, append(env, c.env...), c.want...)
			// The variables are known: the error is about their values.
			if strings.Contains(stderr, "unknown variable") {
				t.Errorf("robotsgate does not know a variable:\n%s", stderr)
			}
			checkNoSecrets(t, "stderr", []byte(stderr), secretsOf(everyone...))
		})
	}
}

// TestUserAgentThatIsOneProductToken: a User-Agent that is itself a
// product token is that token exactly, so "GPTBot_" gets the GPTBot_
// group and not GPTBot's, and the other way round.
func TestUserAgentThatIsOneProductToken(t *testing.T) {
	t.Parallel()
	pages := map[string]http.HandlerFunc{
		"/robots.txt": robotsTxt("User-agent: GPTBot\nDisallow: /gpt\n\nUser-agent: GPTBot_\nDisallow: /under\n"),
	}
	origins := []*origin{newOrigin(t, false, pages), newOrigin(t, true, pages)}
	p := startProxy(t, upstreamCA(t, origins...))
	runIdentityCases(t, p, origins, []identityCase{
		{name: "GPTBot_", ua: "GPTBot_", want: map[string]int{"/under": http.StatusForbidden, "/gpt": http.StatusOK},
			who: &identity{token: "GPTBot_"}},
		{name: "GPTBot", ua: "GPTBot", want: map[string]int{"/gpt": http.StatusForbidden, "/under": http.StatusOK},
			who: &identity{token: "GPTBot"}},
	})
}

// credential is one line of a credentials file.
type credential struct {
	name, password string
	token          string // the optional third field; "" leaves it out
	scheme         string // htpasswd's hash option; "" is -B, bcrypt
}

// newCredential is a credential with a fresh random password.
func newCredential(name, token string) credential {
	return credential{name: name, password: "pw-" + rand.Text(), token: token}
}

// proxyAuth is the Proxy-Authorization value that presents c.
func (c credential) proxyAuth() string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(c.name+":"+c.password))
}

// secretsOf is what must never be shown of creds: each password, alone
// and base64-encoded, and each Proxy-Authorization value's base64.
func secretsOf(creds ...credential) []string {
	var s []string
	for _, c := range creds {
		s = append(s, c.password,
			base64.StdEncoding.EncodeToString([]byte(c.password)),
			base64.StdEncoding.EncodeToString([]byte(c.name+":"+c.password)))
	}
	return s
}

// credentialsFile writes creds to a new file; see writeCredentials.
func credentialsFile(t *testing.T, creds ...credential) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "credentials")
	writeCredentials(t, path, creds...)
	return path
}

// writeCredentials writes creds to path, one line each in order, with the
// real htpasswd, then adds the third field to the lines of creds with a
// token. It skips the test when htpasswd is not installed.
func writeCredentials(t *testing.T, path string, creds ...credential) {
	t.Helper()
	htpasswd := tools.Look(t, "apt-get install apache2-utils", "htpasswd")
	for i, c := range creds {
		scheme := c.scheme
		if scheme == "" {
			scheme = "-B"
		}
		args := []string{scheme, "-b"}
		if i == 0 {
			args = append(args, "-c")
		}
		args = append(args, path, c.name, c.password)
		ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
		cmd := exec.CommandContext(ctx, htpasswd, args...)
		cmd.Env = cleanEnv()
		out, err := cmd.CombinedOutput()
		cancel()
		if err != nil {
			t.Fatalf("htpasswd %s for %s: %v\n%s", scheme, c.name, err, out)
		}
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	if len(lines) != len(creds) {
		t.Fatalf("htpasswd wrote %d lines for %d credentials:\n%s", len(lines), len(creds), data)
	}
	for i, c := range creds {
		if !strings.HasPrefix(lines[i], c.name+":") {
			t.Fatalf("line %d of the credentials file is not %s's: %q", i+1, c.name, lines[i])
		}
		if c.token != "" {
			lines[i] += ":" + c.token
		}
	}
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// WriteFile keeps the mode of the file htpasswd made; a credentials
	// file is private.
	if err := os.Chmod(path, 0o600); err != nil {
		t.Fatal(err)
	}
}

// clientAs is p.client with c's credential in the proxy URL, which Go's
// transport sends as Proxy-Authorization on each plain HTTP request and on
// each CONNECT, and never inside a tunnel.
func (p *proxyProcess) clientAs(t *testing.T, c credential) *http.Client {
	t.Helper()
	proxyURL := *p.url
	proxyURL.User = url.UserPassword(c.name, c.password)
	return newClient(t, &http.Transport{
		Proxy:           http.ProxyURL(&proxyURL),
		TLSClientConfig: &tls.Config{RootCAs: p.caPool()},
	})
}

// keptConn is one connection that carries requests one after another:
// to the proxy, the request-target in absolute form, or inside a tunnel.
type keptConn struct {
	conn    net.Conn
	br      *bufio.Reader
	proxied bool
}

func newKeptConn(conn net.Conn, proxied bool) *keptConn {
	return &keptConn{conn: conn, br: bufio.NewReader(conn), proxied: proxied}
}

// get sends a GET for rawURL with userAgent and, unless auth is "",
// Proxy-Authorization: auth, and reads the whole response.
func (c *keptConn) get(t *testing.T, rawURL, userAgent, auth string) reply {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, rawURL, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("User-Agent", userAgent)
	if auth != "" {
		req.Header.Set("Proxy-Authorization", auth)
	}
	c.conn.SetDeadline(time.Now().Add(requestTimeout))
	write := req.Write
	if c.proxied {
		write = req.WriteProxy
	}
	if err := write(c.conn); err != nil {
		t.Fatalf("GET %s: %v", rawURL, err)
	}
	resp, err := http.ReadResponse(c.br, req)
	if err != nil {
		t.Fatalf("GET %s: reading the response: %v", rawURL, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: reading the body: %v", rawURL, err)
	}
	return reply{status: resp.StatusCode, header: resp.Header, body: body}
}

// sendProxied sends one GET for rawURL to the proxy on a new connection,
// as keptConn.get does, and returns the answer and the connection's local
// address: the client address the proxy sees.
func sendProxied(t *testing.T, p *proxyProcess, rawURL, userAgent, auth string) (reply, string) {
	t.Helper()
	conn := p.dial(t)
	return newKeptConn(conn, true).get(t, rawURL, userAgent, auth), conn.LocalAddr().String()
}

// connectAs is p.connect with Proxy-Authorization: auth on the CONNECT,
// unless auth is "".
func connectAs(t *testing.T, p *proxyProcess, target, userAgent, auth string) (net.Conn, reply) {
	t.Helper()
	conn := p.dial(t)
	conn.SetDeadline(time.Now().Add(requestTimeout))
	header := fmt.Sprintf("Host: %s\r\nUser-Agent: %s\r\n", target, userAgent)
	if auth != "" {
		header += "Proxy-Authorization: " + auth + "\r\n"
	}
	fmt.Fprintf(conn, "CONNECT %s HTTP/1.1\r\n%s\r\n", target, header)
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil {
		t.Fatalf("CONNECT %s: reading the answer: %v", target, err)
	}
	var body []byte
	if resp.StatusCode != http.StatusOK {
		// A refusal has a body; a 200 is followed by the tunnel itself.
		if body, err = io.ReadAll(resp.Body); err != nil {
			t.Fatalf("CONNECT %s: reading the answer's body: %v", target, err)
		}
	}
	if br.Buffered() > 0 {
		t.Fatalf("CONNECT %s: %d unexpected bytes after the answer", target, br.Buffered())
	}
	return conn, reply{status: resp.StatusCode, header: resp.Header, body: body}
}

// interceptAs opens a tunnel to target with auth on the CONNECT and starts
// TLS in it.
func (p *proxyProcess) interceptAs(t *testing.T, target, userAgent, auth string) *keptConn {
	t.Helper()
	conn, answer := connectAs(t, p, target, userAgent, auth)
	if answer.status != http.StatusOK {
		t.Fatalf("CONNECT %s: status %d, want 200; body %q", target, answer.status, answer.body)
	}
	return p.startTLS(t, conn, target)
}

// startTLS starts TLS in an open tunnel to target as a client that trusts
// only robotsgate's CA.
func (p *proxyProcess) startTLS(t *testing.T, conn net.Conn, target string) *keptConn {
	t.Helper()
	host, _, _ := net.SplitHostPort(target)
	tlsConn := tls.Client(conn, &tls.Config{ServerName: host, RootCAs: p.caPool()})
	if err := tlsConn.Handshake(); err != nil {
		t.Fatalf("TLS inside the tunnel to %s: %v", target, err)
	}
	return newKeptConn(tlsConn, false)
}

// checkChallenge asserts a 407 asking for Basic credentials in
// robotsgate's realm, and nothing else.
func checkChallenge(t *testing.T, what string, r reply) {
	t.Helper()
	if r.status != http.StatusProxyAuthRequired {
		t.Errorf("%s: status %d, want 407; body %q", what, r.status, r.body)
		return
	}
	if got := r.header.Values("Proxy-Authenticate"); len(got) != 1 || got[0] != challenge {
		t.Errorf("%s: Proxy-Authenticate %q, want exactly [%q]", what, got, challenge)
	}
}

// checkAccess presents c twice on new connections, with a plain request to
// plain and with a CONNECT to secure (then a request inside, when it
// opens); both must be answered want, 200 or 407. step keeps paths apart.
func checkAccess(t *testing.T, p *proxyProcess, step string, c credential, want int, plain, secure *origin) {
	t.Helper()
	target := fmt.Sprintf("/%s/%s", step, c.name)
	what := fmt.Sprintf("%s, %s", step, c.name)
	if r, _ := sendProxied(t, p, plain.base()+target, crawlerUA, c.proxyAuth()); r.status != want {
		t.Errorf("%s: request status %d, want %d", what, r.status, want)
	} else if want == http.StatusProxyAuthRequired {
		checkChallenge(t, what+": request", r)
	}
	conn, r := connectAs(t, p, secure.addr, crawlerUA, c.proxyAuth())
	switch {
	case r.status != want:
		t.Errorf("%s: CONNECT status %d, want %d", what, r.status, want)
	case want == http.StatusProxyAuthRequired:
		checkChallenge(t, what+": CONNECT", r)
	default:
		if r := p.startTLS(t, conn, secure.addr).get(t, secure.base()+target, crawlerUA, ""); r.status != http.StatusOK {
			t.Errorf("%s: inside the tunnel, status %d, want 200", what, r.status)
		}
	}
}

// identity is who an audit record says a request was judged as.
type identity struct {
	credential string // "": anonymous, and no "credential" field
	token      string
	uaToken    string // the "ua_token" field, when hasUAToken
	hasUAToken bool   // the judged token did not come from the User-Agent
	mismatch   bool   // "ua_mismatch": true; false: no such field
}

func checkIdentity(t *testing.T, what string, rec auditRecord, want identity) {
	t.Helper()
	if c, ok := rec.raw["credential"]; want.credential == "" && ok {
		t.Errorf("%s: audit record of an anonymous request has credential %v", what, c)
	} else if want.credential != "" && rec.Credential != want.credential {
		t.Errorf("%s: audit credential %q, want %q", what, rec.Credential, want.credential)
	}
	if rec.Token != want.token {
		t.Errorf("%s: audit token %q, want %q", what, rec.Token, want.token)
	}
	// A ua_token is required when the token came from elsewhere, even "";
	// otherwise it may be there only as the token itself.
	uaToken, ok := rec.raw["ua_token"]
	switch {
	case want.hasUAToken && (!ok || uaToken != want.uaToken):
		t.Errorf("%s: audit ua_token %#v (present %v), want %q", what, uaToken, ok, want.uaToken)
	case !want.hasUAToken && ok && uaToken != rec.Token:
		t.Errorf("%s: audit ua_token %#v differs from the token %q it was taken as", what, uaToken, rec.Token)
	}
	mismatch, ok := rec.raw["ua_mismatch"]
	switch {
	case want.mismatch && mismatch != true:
		t.Errorf("%s: audit ua_mismatch %#v, want true", what, mismatch)
	case !want.mismatch && ok:
		t.Errorf("%s: audit ua_mismatch %#v, want no such field", what, mismatch)
	}
}

// identityCase is one client sending requests to paths that tell who it
// was judged as.
type identityCase struct {
	name string
	cred *credential // presented to the proxy; nil: anonymous
	ua   string
	want map[string]int // status by path prefix; the path is prefix/N, N the case's index
	who  *identity      // in the audit record of each request; nil: not checked
}

// runIdentityCases sends every case to every origin, HTTP directly and
// HTTPS through intercepted tunnels, checks the statuses and what the
// origins received, then stops the proxy and checks the audit records.
func runIdentityCases(t *testing.T, p *proxyProcess, origins []*origin, cases []identityCase) {
	t.Helper()
	path := func(prefix string, i int) string { return fmt.Sprintf("%s/%d", prefix, i) }
	t.Run("requests", func(t *testing.T) {
		for i, c := range cases {
			for _, o := range origins {
				scheme, _, _ := strings.Cut(o.base(), ":")
				t.Run(c.name+" over "+scheme, func(t *testing.T) {
					t.Parallel()
					client := p.client(t)
					if c.cred != nil {
						client = p.clientAs(t, *c.cred)
					}
					for prefix, want := range c.want {
						target := path(prefix, i)
						r := get(t, client, o.base()+target, c.ua)
						wantHits := 0
						switch {
						case r.status != want:
							t.Errorf("%s: status %d, want %d; body %q", target, r.status, want, r.body)
						case want == http.StatusOK:
							wantHits = 1
							if string(r.body) != o.page(target) {
								t.Errorf("%s: body %q, want the origin's page", target, r.body)
							}
						}
						if n := o.count(target); r.status == want && n != wantHits {
							t.Errorf("the origin received %s %d times, want %d", target, n, wantHits)
						}
					}
				})
			}
		}
	})
	if code := p.stop(); code != 0 {
		t.Fatalf("exit %d after SIGTERM, want 0", code)
	}
	recs := p.audit()
	for i, c := range cases {
		if c.who == nil {
			continue
		}
		for _, o := range origins {
			for prefix := range c.want {
				u := o.base() + path(prefix, i)
				checkIdentity(t, c.name+": "+u, auditFor(t, recs, u), *c.who)
			}
		}
	}
}

// checkOriginsClean asserts that no origin received a Proxy-Authorization
// header, or a secret in any header.
func checkOriginsClean(t *testing.T, secrets []string, origins ...*origin) {
	t.Helper()
	for _, o := range origins {
		for _, h := range o.received() {
			if v := h.Values("Proxy-Authorization"); len(v) > 0 {
				t.Errorf("%s received Proxy-Authorization %q", o.base(), v)
			}
			var buf bytes.Buffer
			h.Write(&buf)
			checkNoSecrets(t, o.base()+" received a header that", buf.Bytes(), secrets)
		}
	}
}

// checkNoSecrets fails for each secret in text.
func checkNoSecrets(t *testing.T, where string, text []byte, secrets []string) {
	t.Helper()
	for _, s := range secrets {
		if bytes.Contains(text, []byte(s)) {
			t.Errorf("%s shows the secret %q", where, s)
		}
	}
}

// authFailuresTotal matches a robotsgate_auth_failures_total sample.
var authFailuresTotal = regexp.MustCompile(`(?m)^robotsgate_auth_failures_total\{([^}]*)\} (\S+)$`)

// authFailures sums robotsgate_auth_failures_total over its samples in a
// /metrics page, each of which must have a reason.
func authFailures(t *testing.T, metrics []byte) float64 {
	t.Helper()
	total := 0.0
	for _, m := range authFailuresTotal.FindAllSubmatch(metrics, -1) {
		if !regexp.MustCompile(`(^|,)reason="[^"]+"`).Match(m[1]) {
			t.Errorf("robotsgate_auth_failures_total{%s} has no reason", m[1])
		}
		v, err := strconv.ParseFloat(string(m[2]), 64)
		if err != nil {
			t.Errorf("robotsgate_auth_failures_total{%s}: %v", m[1], err)
		}
		total += v
	}
	return total
}

// namesClient reports whether a value in a JSON log record, nested or
// not, is the client address addr or its IP.
func namesClient(v any, addr string) bool {
	switch v := v.(type) {
	case string:
		host, _, _ := net.SplitHostPort(addr)
		return v == addr || v == host
	case map[string]any:
		for _, x := range v {
			if namesClient(x, addr) {
				return true
			}
		}
	case []any:
		for _, x := range v {
			if namesClient(x, addr) {
				return true
			}
		}
	}
	return false
}

// countLog counts robotsgate's JSON log lines so far that match accepts.
func countLog(p *proxyProcess, match func(map[string]any) bool) int {
	n := 0
	for line := range strings.SplitSeq(p.output.String(), "\n") {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) == nil && match(rec) {
			n++
		}
	}
	return n
}
