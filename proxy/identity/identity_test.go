package identity

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// basic is a Proxy-Authorization value.
func basic(name, password string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(name+":"+password))
}

// syncBuffer collects log output from several goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// writeCredentials writes a credentials file of name:password[:token]
// entries, hashed with bcrypt, and returns its path.
func writeCredentials(t testing.TB, path string, entries ...string) string {
	t.Helper()
	var b strings.Builder
	for _, e := range entries {
		name, rest, _ := strings.Cut(e, ":")
		password, token, hasToken := strings.Cut(rest, ":")
		b.WriteString(name + ":" + hashOf(t, password))
		if hasToken {
			b.WriteString(":" + token)
		}
		b.WriteString("\n")
	}
	if path == "" {
		path = filepath.Join(t.TempDir(), "credentials")
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func newGate(t testing.TB, opts Options) (*Gate, *syncBuffer) {
	t.Helper()
	logs := &syncBuffer{}
	opts.Logger = slog.New(slog.NewJSONHandler(logs, nil))
	g, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return g, logs
}

const client = "192.0.2.7:40000"

func TestAuthenticate(t *testing.T) {
	t.Parallel()
	file := writeCredentials(t, "", "acme:right:GPTBot", "bingbot:other")
	tests := []struct {
		mode   Mode
		header []string
		want   string // credential name, "" for anonymous
		reason Reason // "" for success
	}{
		{ModeOff, nil, "", ""},
		{ModeOff, []string{basic("acme", "wrong")}, "", ""}, // off ignores the header
		{ModeOptional, nil, "", ""},
		{ModeOptional, []string{basic("acme", "right")}, "acme", ""},
		{ModeOptional, []string{basic("acme", "wrong")}, "", ReasonWrongPassword},
		{ModeRequired, nil, "", ReasonMissing},
		{ModeRequired, []string{basic("acme", "right")}, "acme", ""},
		{ModeRequired, []string{"basic " + base64.StdEncoding.EncodeToString([]byte("bingbot:other"))}, "bingbot", ""},
		{ModeRequired, []string{basic("acme", "wrong")}, "", ReasonWrongPassword},
		{ModeRequired, []string{basic("acme", "")}, "", ReasonWrongPassword},
		{ModeRequired, []string{basic("nobody", "right")}, "", ReasonUnknownName},
		{ModeRequired, []string{basic("ACME", "right")}, "", ReasonUnknownName},
		{ModeRequired, []string{"Bearer abc"}, "", ReasonMalformed},
		{ModeRequired, []string{"Basic !!!"}, "", ReasonMalformed},
		{ModeRequired, []string{"Basic " + base64.StdEncoding.EncodeToString([]byte("acme"))}, "", ReasonMalformed},
		{ModeRequired, []string{"Basic"}, "", ReasonMalformed},
		{ModeRequired, []string{basic("acme", "right"), basic("acme", "right")}, "", ReasonMalformed},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%s %q", tc.mode, tc.header), func(t *testing.T) {
			opts := Options{Mode: tc.mode}
			if tc.mode != ModeOff {
				opts.CredentialsFile = file
			}
			g, _ := newGate(t, opts)
			cred, failure := g.Authenticate(context.Background(), tc.header, client)
			switch {
			case tc.reason != "":
				if failure == nil || failure.Reason != tc.reason {
					t.Fatalf("got %v, %v; want failure %s", cred, failure, tc.reason)
				}
				if cred != nil {
					t.Errorf("a failure came with credential %q", cred.Name)
				}
			case failure != nil:
				t.Fatalf("failed: %s", failure.Reason)
			case tc.want == "" && cred != nil:
				t.Fatalf("credential %q, want anonymous", cred.Name)
			case tc.want != "" && (cred == nil || cred.Name != tc.want):
				t.Fatalf("credential %v, want %q", cred, tc.want)
			}
		})
	}
}

func TestFailureWordsDoNotTellNameFromPassword(t *testing.T) {
	t.Parallel()
	wrong, unknown := &Failure{Reason: ReasonWrongPassword}, &Failure{Reason: ReasonUnknownName}
	if wrong.Error() != unknown.Error() {
		t.Errorf("a client can tell a wrong password (%q) from an unknown name (%q)", wrong, unknown)
	}
}

func TestNilGateIsAnonymous(t *testing.T) {
	t.Parallel()
	var g *Gate
	if cred, failure := g.Authenticate(context.Background(), []string{basic("a", "b")}, client); cred != nil || failure != nil {
		t.Errorf("nil gate: %v, %v", cred, failure)
	}
	if token, fromUA := g.Token(nil, "curl"); token != "curl" || !fromUA {
		t.Errorf("nil gate judges as %q (from UA %v)", token, fromUA)
	}
	if g.Mode() != ModeOff || g.Reload() != nil {
		t.Error("nil gate is not off")
	}
}

func TestToken(t *testing.T) {
	t.Parallel()
	cred := &Credential{Name: "acme", Token: "GPTBot"}
	pinned, _ := newGate(t, Options{Token: "CCBot"})
	plain, _ := newGate(t, Options{})
	tests := []struct {
		g      *Gate
		cred   *Credential
		want   string
		fromUA bool
	}{
		{plain, nil, "curl", true},
		{plain, cred, "GPTBot", false},
		{pinned, nil, "CCBot", false},
		{pinned, cred, "GPTBot", false}, // the credential names its own
	}
	for _, tc := range tests {
		if got, fromUA := tc.g.Token(tc.cred, "curl"); got != tc.want || fromUA != tc.fromUA {
			t.Errorf("Token(%v) = %q, %v; want %q, %v", tc.cred, got, fromUA, tc.want, tc.fromUA)
		}
	}
}

func TestNewRejects(t *testing.T) {
	t.Parallel()
	if _, err := New(Options{Mode: ModeRequired}); err == nil {
		t.Error("required without a file")
	}
	if _, err := New(Options{Mode: "sometimes"}); err == nil {
		t.Error("an unknown mode")
	}
	bad := filepath.Join(t.TempDir(), "bad")
	os.WriteFile(bad, []byte("acme:{SHA}x\n"), 0o600)
	if _, err := New(Options{CredentialsFile: bad}); err == nil || !strings.Contains(err.Error(), "line 1") {
		t.Errorf("a bad file: %v", err)
	}
	g, err := New(Options{CredentialsFile: writeCredentials(t, "", "a:b")})
	if err != nil || g.Mode() != ModeRequired {
		t.Errorf("a file without a mode: %v, mode %s; want required", err, g.Mode())
	}
}

// TestVerifiedCredentialIsRemembered: bcrypt runs once per credential;
// later requests are recognised by the keyed hash of their header.
func TestVerifiedCredentialIsRemembered(t *testing.T) {
	t.Parallel()
	g, _ := newGate(t, Options{CredentialsFile: writeCredentials(t, "", "acme:right")})
	for range 5 {
		if _, failure := g.Authenticate(context.Background(), []string{basic("acme", "right")}, client); failure != nil {
			t.Fatal(failure)
		}
	}
	if v, r := testutil.ToFloat64(g.metrics.verified), testutil.ToFloat64(g.metrics.remembered); v != 1 || r != 4 {
		t.Errorf("bcrypt ran %v times, remembered %v; want 1 and 4", v, r)
	}
	// Nothing of the password is kept: the key is a MAC of the header.
	st := g.current()
	for _, key := range st.known.Keys() {
		if bytes.Contains(key[:], []byte("right")) {
			t.Error("the remembered key holds the password")
		}
	}
}

func TestRememberedCredentialExpires(t *testing.T) {
	file := writeCredentials(t, "", "acme:right")
	synctest.Test(t, func(t *testing.T) {
		g, _ := newGate(t, Options{CredentialsFile: file, Remember: time.Minute})
		auth := func() {
			t.Helper()
			if _, failure := g.Authenticate(t.Context(), []string{basic("acme", "right")}, client); failure != nil {
				t.Fatal(failure)
			}
		}
		auth()
		time.Sleep(time.Minute)
		auth() // exactly at the bound: still remembered
		time.Sleep(time.Second)
		auth()
		if v := testutil.ToFloat64(g.metrics.verified); v != 2 {
			t.Errorf("bcrypt ran %v times; want 2 (once more after a minute)", v)
		}
	})
}

func TestRememberedCredentialsAreBounded(t *testing.T) {
	t.Parallel()
	g, _ := newGate(t, Options{CredentialsFile: writeCredentials(t, "", "a:1", "b:2", "c:3"), RememberMax: 2})
	for _, h := range []string{basic("a", "1"), basic("b", "2"), basic("c", "3"), basic("a", "1")} {
		if _, failure := g.Authenticate(context.Background(), []string{h}, client); failure != nil {
			t.Fatal(failure)
		}
	}
	if n := g.current().known.Len(); n != 2 {
		t.Errorf("%d remembered, want the bound, 2", n)
	}
	if v := testutil.ToFloat64(g.metrics.verified); v != 4 {
		t.Errorf("bcrypt ran %v times; want 4 (a was forgotten for c)", v)
	}
}

// TestFailedCredentialIsRemembered: repeating a wrong password costs no
// bcrypt, and fails again.
func TestFailedCredentialIsRemembered(t *testing.T) {
	t.Parallel()
	g, _ := newGate(t, Options{CredentialsFile: writeCredentials(t, "", "acme:right")})
	h := []string{basic("acme", "wrong")}
	g.Authenticate(context.Background(), h, client)
	v, ok := g.current().recall(g.key.sum(h[0]), time.Now())
	if !ok || v.cred != nil || v.reason != ReasonWrongPassword {
		t.Fatalf("the failure is not remembered: %+v %v", v, ok)
	}
	_, failure := g.Authenticate(context.Background(), h, "198.51.100.1:1")
	if failure == nil || failure.Reason != ReasonWrongPassword {
		t.Errorf("a remembered failure gave %v", failure)
	}
	if n := testutil.ToFloat64(g.metrics.failures.WithLabelValues(string(ReasonWrongPassword))); n != 2 {
		t.Errorf("%v failures counted, want 2", n)
	}
}

// TestRepeatedFailuresAreSlowedDown: from the third failure in a row an
// address waits before each attempt, doubling to a bound; other addresses
// and remembered credentials do not; success forgives.
func TestRepeatedFailuresAreSlowedDown(t *testing.T) {
	file := writeCredentials(t, "", "acme:right")
	synctest.Test(t, func(t *testing.T) {
		g, _ := newGate(t, Options{CredentialsFile: file})
		attempt := func(addr, password string) time.Duration {
			t.Helper()
			start := time.Now()
			g.Authenticate(t.Context(), []string{basic("acme", password)}, addr)
			return time.Since(start)
		}
		attempt(client, "right") // remembered from now on
		want := []time.Duration{0, 0, 0, 250 * time.Millisecond, 500 * time.Millisecond, time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 8 * time.Second}
		for i, w := range want {
			if got := attempt(client, fmt.Sprint("wrong", i)); got != w {
				t.Errorf("attempt %d waited %v, want %v", i+1, got, w)
			}
		}
		if got := attempt(client, "right"); got != 0 {
			t.Errorf("a remembered credential waited %v", got)
		}
		if got := attempt("198.51.100.1:5", "wrong-elsewhere"); got != 0 {
			t.Errorf("another address waited %v", got)
		}
		if err := testutil.CollectAndCompare(g, strings.NewReader(`
# HELP robotsgate_auth_slowed_addresses Client addresses whose authentication attempts are being slowed down after repeated failures.
# TYPE robotsgate_auth_slowed_addresses gauge
robotsgate_auth_slowed_addresses 1
`), "robotsgate_auth_slowed_addresses"); err != nil {
			t.Error(err)
		}
		time.Sleep(forgetAfter + time.Second)
		if got := attempt(client, "wrong-later"); got != 0 {
			t.Errorf("after %v without failures an attempt waited %v", forgetAfter, got)
		}
	})
}

func TestSuccessForgivesFailures(t *testing.T) {
	file := writeCredentials(t, "", "acme:right", "other:pass")
	synctest.Test(t, func(t *testing.T) {
		g, _ := newGate(t, Options{CredentialsFile: file})
		for i := range 5 {
			g.Authenticate(t.Context(), []string{basic("acme", fmt.Sprint(i))}, client)
		}
		if _, failure := g.Authenticate(t.Context(), []string{basic("other", "pass")}, client); failure != nil {
			t.Fatal(failure)
		}
		start := time.Now()
		g.Authenticate(t.Context(), []string{basic("acme", "again")}, client)
		if d := time.Since(start); d != 0 {
			t.Errorf("after a success the address still waits %v", d)
		}
	})
}

func TestSlowedClientThatLeavesIsLetGo(t *testing.T) {
	file := writeCredentials(t, "", "acme:right")
	synctest.Test(t, func(t *testing.T) {
		g, _ := newGate(t, Options{CredentialsFile: file})
		for i := range 6 {
			g.Authenticate(t.Context(), []string{basic("acme", fmt.Sprint(i))}, client)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
		defer cancel()
		start := time.Now()
		_, failure := g.Authenticate(ctx, []string{basic("acme", "right")}, client)
		if failure == nil || failure.Reason != ReasonGone || time.Since(start) != 100*time.Millisecond {
			t.Errorf("got %v after %v; want client_gone when the client left", failure, time.Since(start))
		}
	})
}

func TestFailuresAreLoggedSparingly(t *testing.T) {
	file := writeCredentials(t, "", "acme:right")
	synctest.Test(t, func(t *testing.T) {
		g, logs := newGate(t, Options{CredentialsFile: file})
		for i := range 8 {
			g.Authenticate(t.Context(), []string{basic("acme", fmt.Sprint("wrong", i))}, client)
		}
		out := logs.String()
		if n := strings.Count(out, `"msg":"proxy authentication failed"`); n != 4 {
			t.Errorf("%d log lines for 8 failures, want 4 (1st, 2nd, 4th, 8th):\n%s", n, out)
		}
		for _, w := range []string{`"client":"192.0.2.7"`, `"name":"acme"`, `"reason":"wrong_password"`, `"failures":8`} {
			if !strings.Contains(out, w) {
				t.Errorf("the log does not say %s:\n%s", w, out)
			}
		}
		if strings.Contains(out, "wrong0") || strings.Contains(out, base64.StdEncoding.EncodeToString([]byte("acme:wrong0"))) {
			t.Errorf("the log holds a password:\n%s", out)
		}
	})
}

func TestFailureTrackerIsBounded(t *testing.T) {
	t.Parallel()
	ft := newFailureTracker()
	now := time.Now()
	for i := range trackedAddresses + 1000 {
		ft.add(fmt.Sprintf("10.%d.%d.%d", i>>16, (i>>8)&255, i&255), now)
	}
	if n := ft.byAddr.Len(); n != trackedAddresses {
		t.Errorf("%d addresses tracked, want the bound %d", n, trackedAddresses)
	}
}

func TestAddressOf(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"192.0.2.7:40000":           "192.0.2.7",
		"[::ffff:192.0.2.7]:1":      "192.0.2.7",
		"[2001:db8:1:2:3:4:5:6]:80": "2001:db8:1:2::/64",
		"[2001:db8:1:2::9]:81":      "2001:db8:1:2::/64",
		"[fe80::1%eth0]:80":         "fe80::/64",
		"not an address":            "not an address",
	} {
		if got := addressOf(in); got != want {
			t.Errorf("addressOf(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestReload(t *testing.T) {
	t.Parallel()
	path := writeCredentials(t, "", "old:pass")
	g, logs := newGate(t, Options{CredentialsFile: path})
	ok := func(name, password string) bool {
		_, failure := g.Authenticate(context.Background(), []string{basic(name, password)}, client)
		return failure == nil
	}
	if !ok("old", "pass") {
		t.Fatal("old credential refused")
	}
	writeCredentials(t, path, "new:pass")
	if err := g.Reload(); err != nil {
		t.Fatal(err)
	}
	if ok("old", "pass") {
		t.Error("a removed credential still works, remembered from before the reload")
	}
	if !ok("new", "pass") {
		t.Error("the new credential is refused")
	}
	os.WriteFile(path, []byte("broken:$apr1$x$y\n"), 0o600)
	if err := g.Reload(); err == nil {
		t.Error("a broken file reloaded")
	}
	if !ok("new", "pass") {
		t.Error("a broken file replaced the credentials in force")
	}
	out := logs.String()
	for _, w := range []string{`"msg":"credentials reloaded"`, `"credentials":1`, `"msg":"credentials file not reloaded; keeping the previous one"`, "line 1"} {
		if !strings.Contains(out, w) {
			t.Errorf("the log does not say %s:\n%s", w, out)
		}
	}
	if err := testutil.CollectAndCompare(g, strings.NewReader(`
# HELP robotsgate_auth_reloads_total Reloads of the credentials file (SIGHUP or a change seen), by result: ok; unchanged, the bytes in force again; failed, the previous one stays in force.
# TYPE robotsgate_auth_reloads_total counter
robotsgate_auth_reloads_total{result="failed"} 1
robotsgate_auth_reloads_total{result="ok"} 1
robotsgate_auth_reloads_total{result="unchanged"} 0
`), "robotsgate_auth_reloads_total"); err != nil {
		t.Error(err)
	}
}

// TestReloadUnchanged: reloading the bytes in force keeps the
// verifications remembered, and says it reloaded.
func TestReloadUnchanged(t *testing.T) {
	t.Parallel()
	path := writeCredentials(t, "", "acme:right")
	g, logs := newGate(t, Options{CredentialsFile: path})
	h := []string{basic("acme", "right")}
	if _, failure := g.Authenticate(context.Background(), h, client); failure != nil {
		t.Fatal(failure)
	}
	if err := g.Reload(); err != nil {
		t.Fatal(err)
	}
	if _, failure := g.Authenticate(context.Background(), h, client); failure != nil {
		t.Fatal(failure)
	}
	if v, r := testutil.ToFloat64(g.metrics.verified), testutil.ToFloat64(g.metrics.remembered); v != 1 || r != 1 {
		t.Errorf("after an unchanged reload bcrypt ran %v times, remembered %v; want 1 and 1", v, r)
	}
	if out := logs.String(); !strings.Contains(out, `"msg":"credentials reloaded"`) || !strings.Contains(out, `"unchanged":true`) {
		t.Errorf("the log does not say the unchanged file was reloaded:\n%s", out)
	}
}

// TestWatch: a credentials file replaced while the Gate watches it is put
// in force without a SIGHUP, and FileState names its version.
func TestWatch(t *testing.T) {
	t.Parallel()
	off, _ := newGate(t, Options{})
	off.Watch(t.Context(), time.Millisecond) // returns at once: nothing to watch
	if s := off.FileState().String(); s != "credentials: none" {
		t.Errorf("without a credentials file FileState says %q", s)
	}
	path := writeCredentials(t, "", "old:pass")
	g, _ := newGate(t, Options{CredentialsFile: path})
	before := g.FileState()
	if before.Name != "credentials" || before.Path != path || len(before.Version) != 12 || before.Err != nil {
		t.Fatalf("FileState = %+v", before)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		g.Watch(ctx, 10*time.Millisecond)
	}()
	defer func() {
		cancel()
		<-done
	}()
	next := writeCredentials(t, path+".next", "new:pass")
	if err := os.Rename(next, path); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); g.FileState().Version == before.Version; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("after 5s the replaced file is not in force")
		}
	}
	if _, failure := g.Authenticate(context.Background(), []string{basic("new", "pass")}, client); failure != nil {
		t.Errorf("the credential of the replaced file: %v", failure)
	}
	if _, failure := g.Authenticate(context.Background(), []string{basic("old", "pass")}, client); failure == nil {
		t.Error("a credential the replaced file removed still works")
	}
}

func TestVerificationsAreBounded(t *testing.T) {
	t.Parallel()
	g, _ := newGate(t, Options{CredentialsFile: writeCredentials(t, "", "acme:right")})
	for range cap(g.verifying) {
		g.verifying <- struct{}{}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, failure := g.Authenticate(ctx, []string{basic("acme", "right")}, client); failure == nil || failure.Reason != ReasonGone {
		t.Errorf("with every verifier busy and the client gone: %v", failure)
	}
}

func TestMACIsHMACSHA256(t *testing.T) {
	t.Parallel()
	key := bytes.Repeat([]byte{7}, 32)
	k := macKeyFrom(key)
	for n := range 400 {
		s := strings.Repeat("x", n)
		m := hmac.New(sha256.New, key)
		m.Write([]byte(s))
		if got := k.sum(s); !bytes.Equal(got[:], m.Sum(nil)) {
			t.Fatalf("sum of %d bytes differs from crypto/hmac", n)
		}
	}
}

func TestMetricsCollect(t *testing.T) {
	t.Parallel()
	g, _ := newGate(t, Options{CredentialsFile: writeCredentials(t, "", "a:b", "c:d")})
	g.Authenticate(context.Background(), nil, client)
	if err := testutil.CollectAndCompare(g, strings.NewReader(`
# HELP robotsgate_auth_credentials Credentials in force, from ROBOTSGATE_CREDENTIALS_FILE.
# TYPE robotsgate_auth_credentials gauge
robotsgate_auth_credentials 2
# HELP robotsgate_auth_failures_total Proxy authentications that failed, by reason (missing, malformed, unknown_name, wrong_password, client_gone).
# TYPE robotsgate_auth_failures_total counter
robotsgate_auth_failures_total{reason="missing"} 1
`), "robotsgate_auth_credentials", "robotsgate_auth_failures_total"); err != nil {
		t.Error(err)
	}
}

func BenchmarkAuthenticateRemembered(b *testing.B) {
	g, _ := newGate(b, Options{CredentialsFile: writeCredentials(b, "", "acme-crawler-7:secret:GPTBot")})
	h := []string{basic("acme-crawler-7", "secret")}
	g.Authenticate(context.Background(), h, client)
	b.ReportAllocs()
	for b.Loop() {
		if _, failure := g.Authenticate(context.Background(), h, client); failure != nil {
			b.Fatal(failure)
		}
	}
}

func FuzzAuthenticate(f *testing.F) {
	f.Add(basic("acme", "right"), "192.0.2.1:1")
	f.Add("Basic "+base64.StdEncoding.EncodeToString([]byte(":")), "[::1]:2")
	f.Add("basic   YWNtZTpyaWdodA==  ", "x")
	file := writeCredentials(f, "", "acme:right")
	f.Fuzz(func(t *testing.T, header, addr string) {
		// In a bubble, so that slowing repeated failures down costs no
		// real time.
		synctest.Test(t, func(t *testing.T) {
			g, _ := newGate(t, Options{CredentialsFile: file})
			for range 4 {
				cred, failure := g.Authenticate(t.Context(), []string{header}, addr)
				if (cred == nil) == (failure == nil) {
					t.Fatalf("%q: credential %v and failure %v", header, cred, failure)
				}
				if cred != nil {
					if name, password, ok := parseBasic(header); !ok || name != "acme" || password != "right" {
						t.Fatalf("%q accepted", header)
					}
				}
			}
		})
	})
}
