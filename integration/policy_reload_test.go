package integration

import (
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Two versions of a policy and a broken one: the first keeps every
// crawler out of /a/ at 127.0.0.1, the second out of /b/ instead.
const (
	reloadFirst = `sites:
  - hosts: ["127.0.0.1"]
    rules: ["Disallow: /a/"]
    reason: "first"
`
	reloadSecond = `sites:
  - hosts: ["127.0.0.1"]
    rules: ["Disallow: /b/"]
    reason: "second"
`
	// reloadBroken misspells rules on line 3.
	reloadBroken = `sites:
  - hosts: ["127.0.0.1"]
    rulez: ["Disallow: /b/"]
`
)

// healthz is the proxy's /healthz page.
func healthz(t *testing.T, p *proxyProcess) string {
	t.Helper()
	r := get(t, directClient(t), p.url.String()+"/healthz", "test")
	if r.status != http.StatusOK {
		t.Fatalf("/healthz: status %d", r.status)
	}
	return string(r.body)
}

// checkPolicyInForce checks /healthz and /metrics name version as the
// policy in force, and /healthz says whether the last reload failed, and
// where: failedAt is "FILE:LINE:" of the error, "" when it did not fail.
func checkPolicyInForce(t *testing.T, p *proxyProcess, file, version, failedAt string) {
	t.Helper()
	h := healthz(t, p)
	line := regexp.MustCompile(`(?m)^policy: ` + regexp.QuoteMeta(file) + ` version (\S+) loaded [^;\s]+(.*)$`).FindStringSubmatch(h)
	switch {
	case line == nil:
		t.Errorf("/healthz has no line for the policy %s:\n%s", file, h)
	case line[1] != version:
		t.Errorf("/healthz shows the policy version %s, want %s:\n%s", line[1], version, h)
	case (failedAt != "") != strings.HasPrefix(line[2], "; not reloaded at "):
		t.Errorf("/healthz says of the last reload %q; want it to say it failed: %v", line[2], failedAt != "")
	case !strings.Contains(line[2], failedAt):
		t.Errorf("/healthz says of the failed reload %q; want the line of the error, %s", line[2], failedAt)
	}
	m := get(t, directClient(t), p.url.String()+"/metrics", "test")
	info := regexp.MustCompile(`(?m)^robotsgate_policy_info\{[^}]*version="([^"]*)"[^}]*\} 1$`).FindAllStringSubmatch(string(m.body), -1)
	if len(info) != 1 || info[0][1] != version {
		t.Errorf("/metrics robotsgate_policy_info: %q, want one series with version %s", info, version)
	}
}

// checkVerdicts checks the policy in force by the status of /a/ and /b/ on
// conn: which is refused.
func checkVerdicts(t *testing.T, what string, conn *keptConn, base, refused, allowed string) {
	t.Helper()
	if r := conn.get(t, base+refused, crawlerUA, ""); r.status != http.StatusForbidden {
		t.Errorf("%s: %s: status %d, want 403 by the policy in force", what, base+refused, r.status)
	} else if h := r.header.Get("X-Robotsgate-Decision"); !strings.Contains(h, `policy-kind="rule"`) {
		t.Errorf("%s: %s: X-Robotsgate-Decision %q does not name the policy's rule", what, base+refused, h)
	}
	if r := conn.get(t, base+allowed, crawlerUA, ""); r.status != http.StatusOK {
		t.Errorf("%s: %s: status %d, want 200", what, base+allowed, r.status)
	}
}

// replaceFile replaces path's content by text the way an editor or a
// configuration manager does: a new file renamed over it.
func replaceFile(t *testing.T, path, text string) {
	t.Helper()
	tmp := filepath.Join(filepath.Dir(path), ".new-"+filepath.Base(path))
	if err := os.WriteFile(tmp, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// TestPolicyReloadOnHangup: SIGHUP with a broken policy file keeps the
// policy in force (the answers do not change; the log and /healthz say
// why, with the line), and with a good one puts it in force for the next
// request, on a keep-alive connection and in an intercepted tunnel both
// opened before the reloads and kept open across them.
func TestPolicyReloadOnHangup(t *testing.T) {
	t.Parallel()
	polFile := writePolicy(t, "pol.yaml", reloadFirst)
	first, second := policyVersion(reloadFirst), policyVersion(reloadSecond)
	pages := map[string]http.HandlerFunc{"/robots.txt": robotsTxt(policyRobots)}
	plain, secure := newOrigin(t, false, pages), newOrigin(t, true, pages)
	// No watching: only the SIGHUP reloads.
	p := startProxy(t, "ROBOTSGATE_POLICY="+polFile, "ROBOTSGATE_WATCH_INTERVAL=0", upstreamCA(t, secure))

	kept := newKeptConn(p.dial(t), true)
	defer kept.conn.Close()
	tunnel := p.interceptAs(t, secure.addr, crawlerUA, "")
	defer tunnel.conn.Close()
	step := func(name, refused, allowed string) {
		t.Helper()
		checkVerdicts(t, name+", kept connection", kept, plain.base(), refused, allowed)
		checkVerdicts(t, name+", tunnel", tunnel, secure.base(), refused, allowed)
	}
	step("first policy", "/a/1", "/b/1")
	checkPolicyInForce(t, p, polFile, first, "")

	if err := os.WriteFile(polFile, []byte(reloadBroken), 0o644); err != nil {
		t.Fatal(err)
	}
	p.hangUp()
	rec, err := p.output.waitForJSON(requestTimeout, p.exited, func(rec map[string]any) bool {
		return rec["msg"] == "policy file not reloaded; keeping the previous one"
	})
	if err != nil {
		t.Fatalf("no log line of the broken policy refused: %v", err)
	}
	if e, _ := rec["err"].(string); !strings.Contains(e, polFile+":3:") || rec["version"] != first {
		t.Errorf("the refusal's log line %v: want the error at %s:3 and the version kept, %s", rec, polFile, first)
	}
	step("broken policy refused", "/a/2", "/b/2")
	checkPolicyInForce(t, p, polFile, first, polFile+":3:")

	if err := os.WriteFile(polFile, []byte(reloadSecond), 0o644); err != nil {
		t.Fatal(err)
	}
	p.hangUp()
	if _, err := p.output.waitForJSON(requestTimeout, p.exited, func(rec map[string]any) bool {
		return rec["msg"] == "policy reloaded" && rec["version"] == second
	}); err != nil {
		t.Fatalf("no log line of the second policy loaded: %v", err)
	}
	step("second policy", "/b/3", "/a/3")
	checkPolicyInForce(t, p, polFile, second, "")

	recs := stopAndAudit(t, p)
	for _, c := range []struct {
		path, version string
	}{{"/a/1", first}, {"/a/2", first}, {"/b/3", second}, {"/a/3", second}} {
		for _, o := range []*origin{plain, secure} {
			if rec := auditFor(t, recs, o.base()+c.path); rec.raw["policy_version"] != c.version {
				t.Errorf("%s: audit policy_version %v, want %s", o.base()+c.path, rec.raw["policy_version"], c.version)
			}
		}
	}
}

// TestPolicyWatch: with ROBOTSGATE_WATCH_INTERVAL the policy file
// replaced by a rename is put in force without a SIGHUP.
func TestPolicyWatch(t *testing.T) {
	t.Parallel()
	polFile := writePolicy(t, "pol.yaml", reloadFirst)
	o := newOrigin(t, false, map[string]http.HandlerFunc{"/robots.txt": robotsTxt(policyRobots)})
	p := startProxy(t, "ROBOTSGATE_POLICY="+polFile, "ROBOTSGATE_WATCH_INTERVAL=200ms")
	client := p.client(t)
	if r := get(t, client, o.base()+"/b/0", crawlerUA); r.status != http.StatusOK {
		t.Fatalf("/b/0 under the first policy: status %d, want 200", r.status)
	}
	if r := get(t, client, o.base()+"/a/0", crawlerUA); r.status != http.StatusForbidden {
		t.Fatalf("/a/0 under the first policy: status %d, want 403", r.status)
	}
	checkPolicyInForce(t, p, polFile, policyVersion(reloadFirst), "")

	replaceFile(t, polFile, reloadSecond)
	deadline := time.Now().Add(10 * time.Second)
	for i := 1; ; i++ {
		r := get(t, client, o.base()+"/b/"+strconv.Itoa(i), crawlerUA)
		if r.status == http.StatusForbidden {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the replaced policy file was not put in force within 10s (watching every 200ms)")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if r := get(t, client, o.base()+"/a/after", crawlerUA); r.status != http.StatusOK {
		t.Errorf("/a/after under the second policy: status %d, want 200", r.status)
	}
	checkPolicyInForce(t, p, polFile, policyVersion(reloadSecond), "")
}
