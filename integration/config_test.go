package integration

import (
	"encoding/json"
	"errors"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// acceptLog accepts connections on ln until it closes and sends each
// one's remote address on its channel.
func acceptLog(t *testing.T, ln net.Listener) <-chan string {
	t.Helper()
	remotes := make(chan string, 16)
	go func() {
		defer close(remotes)
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			remotes <- conn.RemoteAddr().String()
			conn.Close()
		}
	}()
	return remotes
}

// TestConfigCommand runs "robotsgate config" as an operator would before
// a deployment: every setting with its value in force and its source,
// the Redis password masked, and nothing started: the address to listen
// on is taken by another process, Redis is a listener that must see no
// connection, and neither the CA directory nor the audit log is created.
func TestConfigCommand(t *testing.T) {
	t.Parallel()
	const password = "Hunter2secret"
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	redis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer redis.Close()
	contacts := acceptLog(t, redis)
	dir := t.TempDir()
	caDir, auditLog := filepath.Join(dir, "ca"), filepath.Join(dir, "audit.log")
	env := []string{
		"ROBOTSGATE_LISTEN=" + taken.Addr().String(),
		"ROBOTSGATE_CA_DIR=" + caDir,
		"ROBOTSGATE_AUDIT_LOG=" + auditLog,
		"ROBOTSGATE_MODE=audit",
		"ROBOTSGATE_MAX_CONNECTIONS=40",
		"ROBOTSGATE_CLIENT_IDLE_TIMEOUT=30s",
		"ROBOTSGATE_REDIS_URL=redis://default:" + password + "@" + redis.Addr().String() + "/0",
	}

	code, text, stderr := runBinary(t, "", env, "config")
	if code != 0 || stderr != "" {
		t.Fatalf("robotsgate config: exit %d, stderr:\n%s", code, stderr)
	}
	for _, want := range []string{
		`^NAME +VALUE +SOURCE$`,
		`^ROBOTSGATE_LISTEN +` + regexp.QuoteMeta(taken.Addr().String()) + ` +environment$`,
		`^ROBOTSGATE_CRAWL_DELAY +audit +derived from ROBOTSGATE_MODE$`,
		`^ROBOTSGATE_MAX_WAIT +15s +derived from ROBOTSGATE_CLIENT_IDLE_TIMEOUT$`,
		`^ROBOTSGATE_MAX_CONNECTIONS_PER_CLIENT +10 +derived from ROBOTSGATE_MAX_CONNECTIONS$`,
		`^ROBOTSGATE_FETCH_TIMEOUT +5s +default$`,
		`^ROBOTSGATE_REDIS_URL +redis://default:\*\*\*\*@` + regexp.QuoteMeta(redis.Addr().String()) + `/0 +environment$`,
	} {
		if !regexp.MustCompile("(?m)" + want).MatchString(text) {
			t.Errorf("no line matches %s:\n%s", want, text)
		}
	}

	code, js, stderr := runBinary(t, "", env, "config", "-json")
	if code != 0 || stderr != "" {
		t.Fatalf("robotsgate config -json: exit %d, stderr:\n%s", code, stderr)
	}
	var out struct {
		Settings []struct{ Name, Value, Source, From string }
	}
	if err := json.Unmarshal([]byte(js), &out); err != nil {
		t.Fatalf("robotsgate config -json printed %q: %v", js, err)
	}
	rows := strings.Split(strings.TrimSuffix(text, "\n"), "\n")[1:]
	if len(out.Settings) != len(rows) || len(rows) < 50 {
		t.Fatalf("%d settings in JSON, %d rows in the table", len(out.Settings), len(rows))
	}
	for i, s := range out.Settings {
		if name, _, _ := strings.Cut(rows[i], " "); name != s.Name || !strings.HasPrefix(s.Name, "ROBOTSGATE_") {
			t.Errorf("setting %d: %q in JSON, %q in the table", i, s.Name, name)
		}
		if s.Name == "ROBOTSGATE_MAX_CONNECTIONS_PER_CLIENT" && (s.Value != "10" || s.Source != "derived" || s.From != "ROBOTSGATE_MAX_CONNECTIONS") {
			t.Errorf("JSON: %+v", s)
		}
	}
	if strings.Contains(text+js, password) {
		t.Errorf("the output shows the Redis password:\n%s\n%s", text, js)
	}

	for _, path := range []string{caDir, auditLog} {
		if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("robotsgate config created %s (%v)", path, err)
		}
	}
	// Connections are accepted in the order they were made: the marker
	// made now comes after any the command made.
	marker, err := net.Dial("tcp", redis.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer marker.Close()
	timeout := time.After(requestTimeout)
	for {
		select {
		case remote := <-contacts:
			if remote == marker.LocalAddr().String() {
				return
			}
			t.Fatalf("robotsgate config connected to Redis (from %s)", remote)
		case <-timeout:
			t.Fatalf("the marker connection was not accepted within %v", requestTimeout)
		}
	}
}

// TestConfigCommandInvalid: an invalid configuration gives exit status 2
// and, word for word, the message "robotsgate serve" gives, which names
// the variable and never shows the password.
func TestConfigCommandInvalid(t *testing.T) {
	t.Parallel()
	const password = "Hunter2secret"
	dir := t.TempDir()
	env := []string{
		"ROBOTSGATE_LISTEN=127.0.0.1:0",
		"ROBOTSGATE_CA_DIR=" + filepath.Join(dir, "ca"),
		"ROBOTSGATE_AUDIT_LOG=" + filepath.Join(dir, "audit.log"),
		"ROBOTSGATE_MODE=bogus",
		"ROBOTSGATE_REDIS_URL=redis://default:" + password + "@127.0.0.1:99999/0",
	}
	serveCode, _, serveErr := runBinary(t, "", env)
	for _, args := range [][]string{{"config"}, {"config", "-json"}} {
		code, stdout, stderr := runBinary(t, "", env, args...)
		if code != 2 || stdout != "" {
			t.Errorf("robotsgate %q: exit %d, stdout %q; want 2 and nothing", args, code, stdout)
		}
		if stderr != serveErr || serveCode != 2 {
			t.Errorf("robotsgate %q says\n%s\nrobotsgate serve (exit %d) says\n%s", args, stderr, serveCode, serveErr)
		}
	}
	for _, want := range []string{"invalid configuration", "ROBOTSGATE_MODE", `"bogus"`, "ROBOTSGATE_REDIS_URL"} {
		if !strings.Contains(serveErr, want) {
			t.Errorf("the message lacks %q:\n%s", want, serveErr)
		}
	}
	if strings.Contains(serveErr, password) {
		t.Errorf("the message shows the password:\n%s", serveErr)
	}
}
