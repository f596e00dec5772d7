package integration

import (
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// rotationRounds is how often the rotation tests rotate the audit log.
const rotationRounds = 2

// rotator rotates p's audit log for the round'th time (from 1), as
// logrotate's create mode does: afterwards auditLog.N is the log as it
// was N rotations ago, and robotsgate has had its SIGHUP.
type rotator func(t *testing.T, p *proxyProcess, round int)

// TestAuditLogReopenOnSIGHUP rotates the audit log by hand while
// clients keep crawling: the older files are shifted, the log is renamed,
// and robotsgate gets a SIGHUP.
func TestAuditLogReopenOnSIGHUP(t *testing.T) {
	t.Parallel()
	testAuditRotation(t, func(t *testing.T, p *proxyProcess, round int) {
		t.Helper()
		for n := round - 1; n >= 1; n-- {
			if err := os.Rename(fmt.Sprintf("%s.%d", p.auditLog, n), fmt.Sprintf("%s.%d", p.auditLog, n+1)); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Rename(p.auditLog, p.auditLog+".1"); err != nil {
			t.Fatal(err)
		}
		p.hangUp()
	})
}

// TestAuditLogRotatedByLogrotate has the real logrotate rotate the audit
// log while clients keep crawling, with the configuration
// proxy/audit/README.md gives (create mode, kill -HUP of the pid in ROBOTSGATE_PID_FILE in
// postrotate, delaycompress), for this proxy's log and pid file.
func TestAuditLogRotatedByLogrotate(t *testing.T) {
	t.Parallel()
	// Debian installs it in /usr/sbin, which only root's PATH has.
	logrotate := tools.Look(t, "apt-get install logrotate", "logrotate", "/usr/sbin/logrotate")
	readme, err := os.ReadFile("../proxy/audit/README.md")
	if err != nil {
		t.Fatal(err)
	}
	const readmePath, readmePIDFile = "/var/log/robotsgate/audit.log", "/run/robotsgate.pid"
	const readmeKill = `kill -HUP "$(cat ` + readmePIDFile + `)"`
	_, snippet, _ := strings.Cut(string(readme), "\n"+readmePath+" {\n")
	snippet, _, ok := strings.Cut(snippet, "\n}\n")
	if !ok || !strings.Contains(snippet, readmeKill) {
		t.Fatalf("proxy/audit/README.md has no logrotate configuration for %s that runs %s", readmePath, readmeKill)
	}
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "robotsgate.pid")
	testAuditRotation(t, func(t *testing.T, p *proxyProcess, round int) {
		t.Helper()
		conf := filepath.Join(dir, "robotsgate.logrotate")
		config := fmt.Sprintf("%q {\n%s\n}\n", p.auditLog, strings.ReplaceAll(snippet, readmePIDFile, pidFile))
		// Mode 0644: logrotate ignores a configuration others may write.
		if err := os.WriteFile(conf, []byte(config), 0o644); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
		defer cancel()
		cmd := exec.CommandContext(ctx, logrotate, "-f", "-s", filepath.Join(dir, "state"), conf)
		cmd.Env = cleanEnv()
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("logrotate, round %d: %v\n%s", round, err, out)
		}
	}, "ROBOTSGATE_PID_FILE="+pidFile)
}

// testAuditRotation has a few clients crawl through robotsgate without a
// pause while rotate rotates its audit log rotationRounds times, each
// time once the newest file has records, then stops the clients and
// robotsgate. Every request a client completed has exactly one record
// across the files, each line whole; each file has records, the newest
// ones written after the last SIGHUP; and robotsgate said it reopened
// the log each time. env goes to robotsgate.
func testAuditRotation(t *testing.T, rotate rotator, env ...string) {
	const clients = 4
	o := newOrigin(t, false, map[string]http.HandlerFunc{"/robots.txt": robotsTxt(privateRobots)})
	p := startProxy(t, env...)

	var (
		mu        sync.Mutex
		completed = make(map[string]bool)
		failure   error
	)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	stopClients := sync.OnceFunc(func() {
		close(stop)
		wg.Wait()
	})
	defer stopClients() // also when the test fails early
	for c := range clients {
		client := p.client(t)
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				u := fmt.Sprintf("%s/c%d/%d", o.base(), c, i)
				r, err := tryGet(client, u, crawlerUA)
				if err == nil && r.status != http.StatusOK {
					err = fmt.Errorf("%s: status %d, want 200", u, r.status)
				}
				mu.Lock()
				if err != nil {
					failure = err
				} else {
					completed[u] = true
				}
				mu.Unlock()
				if err != nil {
					return
				}
			}
		})
	}

	waitForAudit(t, p, p.auditLog, "}\n") // a whole record
	for round := 1; round <= rotationRounds; round++ {
		rotate(t, p, round)
		seen := 0
		if _, err := p.output.waitForJSON(requestTimeout, p.exited, func(rec map[string]any) bool {
			if rec["msg"] == "reopened the audit log" && rec["path"] == p.auditLog && rec["level"] == "INFO" {
				seen++
			}
			return seen == round
		}); err != nil {
			t.Fatalf(`round %d: no "reopened the audit log" after SIGHUP: %v`, round, err)
		}
		// The file at the path now was opened by that SIGHUP (the old one
		// was renamed away): whatever it holds came after it.
		waitForAudit(t, p, p.auditLog, "}\n")
	}
	stopClients()
	if code := p.stop(); code != 0 {
		t.Fatalf("exit %d after SIGTERM, want 0", code)
	}
	mu.Lock()
	defer mu.Unlock()
	if failure != nil {
		t.Fatalf("a client failed: %v", failure)
	}

	seen := make(map[string]int)
	total := 0
	for n := rotationRounds; n >= 0; n-- { // oldest first
		file := p.auditLog
		if n > 0 {
			file = fmt.Sprintf("%s.%d", p.auditLog, n)
		}
		if _, err := os.Stat(file); errors.Is(err, fs.ErrNotExist) {
			file = gunzip(t, file+".gz") // logrotate's compress
		}
		recs := readAudit(t, file)
		if len(recs) == 0 {
			t.Errorf("%s holds no record", file)
		}
		for _, rec := range recs {
			seen[rec.URL]++
			if seen[rec.URL] > 1 {
				t.Errorf("%s: %s has a second record", file, rec.URL)
			}
			if !completed[rec.URL] {
				t.Errorf("%s: a record of %s, which no client completed", file, rec.URL)
			}
		}
		total += len(recs)
	}
	t.Logf("%d requests completed, their records in %d files", len(completed), rotationRounds+1)
	if total != len(completed) {
		t.Errorf("%d records across the files, for %d requests the clients completed", total, len(completed))
	}
	for u := range completed {
		if seen[u] == 0 {
			t.Errorf("no record of %s", u)
		}
	}
	if n := countLog(p, func(rec map[string]any) bool { return rec["msg"] == "audit log not reopened" }); n != 0 {
		t.Errorf(`%d "audit log not reopened" lines, want none`, n)
	}
}

// gunzip decompresses a gzip file into a new file, and returns its path.
func gunzip(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	data, err := io.ReadAll(zr)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	out := filepath.Join(t.TempDir(), strings.TrimSuffix(filepath.Base(path), ".gz"))
	if err := os.WriteFile(out, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return out
}

// waitForAudit waits until file, an audit log of p, holds want.
func waitForAudit(t *testing.T, p *proxyProcess, file, want string) {
	t.Helper()
	deadline := time.Now().Add(requestTimeout)
	for {
		data, err := os.ReadFile(file)
		if err == nil && strings.Contains(string(data), want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s does not hold %q after %v (read: %v)", file, want, requestTimeout, err)
		}
		select {
		case <-p.exited:
			t.Fatalf("robotsgate exited with %d", p.exitCode)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// TestAuditLogReopenFailure: when the audit log's path cannot be opened
// on SIGHUP (its directory was moved away), robotsgate says so, keeps
// serving and writes on to the file it had; once the directory is back, a
// SIGHUP moves it to a new file there. No record is lost or repeated.
func TestAuditLogReopenFailure(t *testing.T) {
	t.Parallel()
	o := newOrigin(t, false, map[string]http.HandlerFunc{"/robots.txt": robotsTxt(privateRobots)})
	dir := filepath.Join(t.TempDir(), "logs")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	p := startProxy(t, "ROBOTSGATE_AUDIT_LOG="+filepath.Join(dir, "audit.log"))
	p.auditLog = filepath.Join(dir, "audit.log")
	client := p.client(t)
	crawl := func(path string) {
		t.Helper()
		if r := get(t, client, o.base()+path, crawlerUA); r.status != http.StatusOK {
			t.Fatalf("%s: status %d, want 200", path, r.status)
		}
	}
	logLine := func(msg, level string) map[string]any {
		t.Helper()
		rec, err := p.output.waitForJSON(requestTimeout, p.exited, func(rec map[string]any) bool {
			return rec["msg"] == msg && rec["level"] == level
		})
		if err != nil {
			t.Fatalf("no %s %q after SIGHUP: %v", level, msg, err)
		}
		return rec
	}

	crawl("/before")
	if err := os.Rename(dir, dir+".old"); err != nil {
		t.Fatal(err)
	}
	p.hangUp()
	rec := logLine("audit log not reopened", "ERROR")
	if e, _ := rec["err"].(string); rec["path"] != p.auditLog || !strings.Contains(e, p.auditLog) {
		t.Errorf("the error says %v; want the path %s and why", rec, p.auditLog)
	}
	crawl("/kept")
	// The record is written once the response is relayed, which the
	// client may see end first.
	waitForAudit(t, p, filepath.Join(dir+".old", "audit.log"), fmt.Sprintf(`"url":%q`, o.base()+"/kept"))
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	p.hangUp()
	logLine("reopened the audit log", "INFO")
	crawl("/after")
	if code := p.stop(); code != 0 {
		t.Fatalf("exit %d after SIGTERM, want 0", code)
	}

	for file, want := range map[string][]string{
		filepath.Join(dir+".old", "audit.log"): {"/before", "/kept"},
		p.auditLog:                             {"/after"},
	} {
		var got []string
		for _, rec := range readAudit(t, file) {
			got = append(got, strings.TrimPrefix(rec.URL, o.base()))
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s holds records of %q, want %q", file, got, want)
		}
	}
}

// TestHangupLogsWhatItDid: SIGHUP re-reads the credentials file and
// reopens the audit log file, each whatever becomes of the other, and
// says what it did; with neither, it says there was nothing to do. It
// never stops robotsgate.
func TestHangupLogsWhatItDid(t *testing.T) {
	t.Parallel()
	const (
		nothing     = "SIGHUP: no credentials or policy file to reload, and the audit log is standard output: nothing to do"
		reloaded    = "credentials reloaded"
		notReloaded = "credentials file not reloaded; keeping the previous one"
		reopened    = "reopened the audit log"
		notReopened = "audit log not reopened"
		credsOK     = "ok"
		credsBroken = "broken" // replaced by a file robotsgate cannot use
		auditStdout = "-"
		auditFile   = "file"
		auditNoDir  = "directory gone"
		hangupsSent = 2 // the second one is handled once the first is done
	)
	for _, c := range []struct {
		creds, audit string // "" for no credentials file
		want         []string
	}{
		{"", auditStdout, []string{nothing}},
		{"", auditFile, []string{reopened}},
		{credsOK, auditStdout, []string{reloaded}},
		{credsOK, auditFile, []string{reloaded, reopened}},
		{credsBroken, auditFile, []string{notReloaded, reopened}},
		{credsOK, auditNoDir, []string{reloaded, notReopened}},
	} {
		t.Run(fmt.Sprintf("credentials %q, audit log %s", c.creds, c.audit), func(t *testing.T) {
			t.Parallel()
			dir := filepath.Join(t.TempDir(), "logs")
			if err := os.Mkdir(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			// SIGHUP alone reloads here: the watcher would see the broken
			// file too, and say so once more.
			env := []string{"ROBOTSGATE_WATCH_INTERVAL=0", "ROBOTSGATE_AUDIT_LOG=" + filepath.Join(dir, "audit.log")}
			if c.audit == auditStdout {
				env = []string{"ROBOTSGATE_WATCH_INTERVAL=0", "ROBOTSGATE_AUDIT_LOG=-"}
			}
			var credsFile string
			if c.creds != "" {
				credsFile = credentialsFile(t, newCredential("alice", ""))
				env = append(env, "ROBOTSGATE_CREDENTIALS_FILE="+credsFile)
			}
			p := startProxy(t, env...)
			if c.creds == credsBroken {
				broken := newCredential("dave", "")
				broken.scheme = "-m" // apr1 MD5: not bcrypt
				writeCredentials(t, credsFile, broken)
			}
			if c.audit == auditNoDir {
				if err := os.Rename(dir, dir+".old"); err != nil {
					t.Fatal(err)
				}
			}

			// Each SIGHUP is sent once the one before has said its last
			// words, so none coalesce; then every SIGHUP but the last is
			// over, and what one says that it should not is in the log.
			last := c.want[len(c.want)-1]
			for n := 1; n <= hangupsSent; n++ {
				p.hangUp()
				seen := 0
				if _, err := p.output.waitForJSON(requestTimeout, p.exited, func(rec map[string]any) bool {
					if rec["msg"] == last {
						seen++
					}
					return seen == n
				}); err != nil {
					t.Fatalf("SIGHUP %d: no %q: %v", n, last, err)
				}
			}
			for _, msg := range []string{nothing, reloaded, notReloaded, reopened, notReopened} {
				want := 0
				if slices.Contains(c.want, msg) {
					want = hangupsSent
				}
				if got := countLog(p, func(rec map[string]any) bool { return rec["msg"] == msg }); got != want {
					t.Errorf("%q said %d times after %d SIGHUPs, want %d", msg, got, hangupsSent, want)
				}
			}
			p.waitHealthy()
		})
	}
}
