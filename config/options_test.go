package config

import (
	"context"
	"crypto/x509"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"robotsgate/cache"
	"robotsgate/proxy"
	"robotsgate/robots/fetch"
)

// TestFetcherReceives builds a fetcher from an environment and checks the
// options it actually works with.
func TestFetcherReceives(t *testing.T) {
	t.Parallel()
	cfg, err := LoadFrom(map[string]string{
		"ROBOTSGATE_FETCH_TIMEOUT":     "7s",
		"ROBOTSGATE_PARSE_LIMIT":       "1MiB",
		"ROBOTSGATE_ROBOTS_401_403":    "disallow",
		"ROBOTSGATE_MITM":              "false",
		"ROBOTSGATE_DENY_DESTINATIONS": "none",
	})
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	f := fetch.New(cfg.FetchOptions("1.2.3", roots, cfg.Destinations(), nil))
	defer f.Close()
	got := f.Options()
	if got.UserAgent != fetch.DefaultUserAgent("1.2.3") || got.Timeout != 7*time.Second ||
		got.ConnectTimeout != 3*time.Second || got.MaxBytes != 1<<20 || !got.AuthDisallow ||
		got.RootCAs != roots || got.DialControl != nil || got.MaxConcurrent != fetch.DefaultMaxConcurrent || got.MaxPerClient != 64 ||
		got.KeepIgnored { // the proxy never shows them: cached rules must not hold them
		t.Errorf("the fetcher works with %+v", got)
	}

	// A shorter fetch timeout caps the connect timeout's default; an
	// operator's User-Agent is sent as given.
	cfg, err = LoadFrom(map[string]string{
		"ROBOTSGATE_FETCH_TIMEOUT": "2s", "ROBOTSGATE_FETCH_USER_AGENT": "acme-robots/1.0", "ROBOTSGATE_MITM": "false",
	})
	if err != nil {
		t.Fatal(err)
	}
	got = fetch.New(cfg.FetchOptions("1.2.3", roots, cfg.Destinations(), nil)).Options()
	if got.Timeout != 2*time.Second || got.ConnectTimeout != 2*time.Second || got.UserAgent != "acme-robots/1.0" ||
		got.DialControl == nil { // the default policy denies link-local addresses
		t.Errorf("with a 2s fetch timeout the fetcher works with %+v", got)
	}

	// The fetch slots and each client's share.
	cfg, err = LoadFrom(map[string]string{
		"ROBOTSGATE_MAX_FETCHES": "8", "ROBOTSGATE_MAX_FETCHES_PER_CLIENT": "3", "ROBOTSGATE_MITM": "false",
	})
	if err != nil {
		t.Fatal(err)
	}
	got = fetch.New(cfg.FetchOptions("1.2.3", roots, cfg.Destinations(), nil)).Options()
	if got.MaxConcurrent != 8 || got.MaxPerClient != 3 {
		t.Errorf("with 8 fetch slots, 3 per client, the fetcher works with %d, %d per client", got.MaxConcurrent, got.MaxPerClient)
	}
}

// TestClientLimitsConnections: the proxy gets the connection bound and
// one client's share of it, the share's default following the bound.
func TestClientLimitsConnections(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		env                    map[string]string
		wantMax, wantPerClient int
	}{
		{map[string]string{}, 4096, 1024},
		{map[string]string{"ROBOTSGATE_MAX_CONNECTIONS": "8"}, 8, 2},
		{map[string]string{"ROBOTSGATE_MAX_CONNECTIONS": "8", "ROBOTSGATE_MAX_CONNECTIONS_PER_CLIENT": "3"}, 8, 3},
	} {
		c.env["ROBOTSGATE_MITM"] = "false"
		cfg, err := LoadFrom(c.env)
		if err != nil {
			t.Fatal(err)
		}
		if got := cfg.ClientLimits(); got.MaxConnections != c.wantMax || got.MaxConnectionsPerClient != c.wantPerClient {
			t.Errorf("%v: the proxy bounds %d connections, %d per client; want %d, %d per client",
				c.env, got.MaxConnections, got.MaxConnectionsPerClient, c.wantMax, c.wantPerClient)
		}
	}
}

// TestUpstreamProxyReachesEveryConnection checks that the fetcher and the
// proxy both get the upstream proxy, and neither gets one when it is unset.
func TestUpstreamProxyReachesEveryConnection(t *testing.T) {
	t.Parallel()
	for _, raw := range []string{"", "http://crawler:pw@proxy.example:3128"} {
		cfg, err := LoadFrom(map[string]string{"ROBOTSGATE_UPSTREAM_PROXY": raw, "ROBOTSGATE_MITM": "false"})
		if err != nil {
			t.Fatal(err)
		}
		fetched := fetch.New(cfg.FetchOptions("1.2.3", nil, cfg.Destinations(), nil)).Options().UpstreamProxy
		forwarded := cfg.UpstreamOptions(nil).Proxy
		if raw == "" {
			if fetched != nil || forwarded != nil {
				t.Errorf("unset, the fetcher goes through %v and the proxy through %v; want neither through a proxy", fetched, forwarded)
			}
			continue
		}
		if fetched == nil || fetched.String() != raw || forwarded == nil || forwarded.String() != raw {
			t.Errorf("%s: the fetcher goes through %v and the proxy through %v", raw, fetched, forwarded)
		}
	}
}

// TestUpstreamRootsWithoutSystemRoots runs in a child process, because
// the system roots are loaded once per process: with none to be found, a
// start without ROBOTSGATE_UPSTREAM_CA_FILE fails with a message saying
// what to do, and one with it uses the file alone and says so.
func TestUpstreamRootsWithoutSystemRoots(t *testing.T) {
	if os.Getenv("CONFIG_TEST_NO_SYSTEM_ROOTS") == "1" {
		checkRootsWithoutSystemRoots(t)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestUpstreamRootsWithoutSystemRoots$", "-test.v")
	// A certificate file that cannot be read (a directory) and no
	// certificate directory: loading the system roots fails.
	dir := t.TempDir()
	cmd.Env = append(os.Environ(), "CONFIG_TEST_NO_SYSTEM_ROOTS=1", "SSL_CERT_FILE="+dir, "SSL_CERT_DIR="+dir+"/missing")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS") {
		t.Fatalf("child: %v\n%s", err, out)
	}
}

func checkRootsWithoutSystemRoots(t *testing.T) {
	if _, err := x509.SystemCertPool(); err == nil {
		t.Fatal("the system roots load even with SSL_CERT_FILE unreadable and no SSL_CERT_DIR")
	}
	noWarning := func(msg string, args ...any) { t.Errorf("unexpected warning %q %v", msg, args) }
	_, err := (&Config{}).UpstreamRoots(noWarning)
	if err == nil || !strings.Contains(err.Error(), "ROBOTSGATE_UPSTREAM_CA_FILE") || !strings.Contains(err.Error(), "root certificates") {
		t.Errorf("UpstreamRoots without system roots or a file = %v; want an error naming ROBOTSGATE_UPSTREAM_CA_FILE", err)
	}

	certPEM, _ := testCA(t)
	file := writeFile(t, t.TempDir(), "bundle.pem", certPEM)
	var warned string
	pool, err := (&Config{UpstreamCAFile: file}).UpstreamRoots(func(msg string, _ ...any) { warned = msg })
	if err != nil || pool == nil || !pool.Equal(poolOf(t, []byte(certPEM))) {
		t.Errorf("UpstreamRoots with only a file = %v, %v; want a pool of the file's certificate", pool, err)
	}
	if !strings.Contains(warned, "ROBOTSGATE_UPSTREAM_CA_FILE alone") {
		t.Errorf("warning %q; want one saying the file is used alone", warned)
	}
}

func poolOf(t *testing.T, pemData []byte) *x509.CertPool {
	t.Helper()
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pemData) {
		t.Fatal("no certificate in the test PEM")
	}
	return pool
}

// TestCacheReceives builds the rules cache from an environment and checks
// the options it works with: zero passes as zero, nothing unset is lost.
func TestCacheReceives(t *testing.T) {
	t.Parallel()
	load := func(context.Context, string) cache.Result[int] { return cache.Result[int]{} }
	for _, tt := range []struct {
		name    string
		environ map[string]string
		change  func(*cache.Options)
	}{
		{"defaults", nil, func(*cache.Options) {}},
		{"zero means zero", map[string]string{"ROBOTSGATE_MAX_STALE": "0", "ROBOTSGATE_CACHE_MIN_AGE": "0"},
			func(o *cache.Options) { o.MaxStale, o.MinAge = 0, 0 }},
		{"every value", map[string]string{
			"ROBOTSGATE_CACHE_MAX_BYTES": "2MiB", "ROBOTSGATE_CACHE_MAX_AGE": "2h", "ROBOTSGATE_CACHE_MIN_AGE": "5m",
			"ROBOTSGATE_UNREACHABLE_RETRY": "15m", "ROBOTSGATE_MAX_STALE": "48h",
		}, func(o *cache.Options) {
			o.MaxBytes, o.MaxAge, o.MinAge, o.RetryAfter, o.MaxStale = 2<<20, 2*time.Hour, 5*time.Minute, 15*time.Minute, 48*time.Hour
		}},
		{"a short max age caps the min age's default", map[string]string{"ROBOTSGATE_CACHE_MAX_AGE": "30s"},
			func(o *cache.Options) { o.MaxAge, o.MinAge = 30*time.Second, 30*time.Second }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			environ := map[string]string{"ROBOTSGATE_MITM": "false"}
			maps.Copy(environ, tt.environ)
			cfg, err := LoadFrom(environ)
			if err != nil {
				t.Fatal(err)
			}
			c, err := cache.New(cfg.CacheOptions(nil), load)
			if err != nil {
				t.Fatalf("cache.New rejects what config accepted: %v", err)
			}
			defer c.Close()
			want := cache.DefaultOptions()
			want.MetricsPrefix = proxy.RulesMetricsPrefix
			want.LargestCost = fetch.MaxRetainedBytes(500 << 10)
			tt.change(&want)
			if got := c.Options(); got != want {
				t.Errorf("the cache works with\n%+v\nwant\n%+v", got, want)
			}
		})
	}
}

// TestCacheRoomForTheLargestFile: the cache is told what the costliest
// robots.txt of ROBOTSGATE_PARSE_LIMIT may cost, and a budget that cannot
// keep that much for one origin is warned about at start, naming both
// variables and the budget that is enough.
func TestCacheRoomForTheLargestFile(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		environ   map[string]string
		parse     int
		wantWarn  bool
		wantWords []string
	}{
		{nil, 500 << 10, false, nil},
		{map[string]string{"ROBOTSGATE_CACHE_MAX_BYTES": "8MiB"}, 500 << 10, true,
			[]string{"ROBOTSGATE_CACHE_MAX_BYTES (8 MiB) is too small for ROBOTSGATE_PARSE_LIMIT (500 KiB)", "fetched and parsed again for every request to its origin", "at least 12 MiB"}},
		{map[string]string{"ROBOTSGATE_CACHE_MAX_BYTES": "12MiB"}, 500 << 10, false, nil},
		{map[string]string{"ROBOTSGATE_CACHE_MAX_BYTES": "1MiB"}, 500 << 10, true, []string{"(1 MiB)", "at least 12 MiB"}},
		{map[string]string{"ROBOTSGATE_PARSE_LIMIT": "2MiB"}, 2 << 20, false, nil},
		{map[string]string{"ROBOTSGATE_PARSE_LIMIT": "4MiB"}, 4 << 20, true, []string{"ROBOTSGATE_PARSE_LIMIT (4 MiB)", "ROBOTSGATE_CACHE_MAX_BYTES (64 MiB)"}},
	} {
		environ := map[string]string{"ROBOTSGATE_MITM": "false"}
		maps.Copy(environ, tt.environ)
		cfg, err := LoadFrom(environ)
		if err != nil {
			t.Fatal(err)
		}
		var logs strings.Builder
		o := cfg.CacheOptions(slog.New(slog.NewTextHandler(&logs, nil)))
		if o.LargestCost != fetch.MaxRetainedBytes(tt.parse) {
			t.Errorf("%v: LargestCost %d, want %d", tt.environ, o.LargestCost, fetch.MaxRetainedBytes(tt.parse))
		}
		if warned := strings.Contains(logs.String(), "level=WARN"); warned != tt.wantWarn || !tt.wantWarn && o.LargestKept() < o.LargestCost {
			t.Errorf("%v: warned %v (largest kept %d, largest cost %d); want %v. Log:\n%s", tt.environ, warned, o.LargestKept(), o.LargestCost, tt.wantWarn, logs.String())
		}
		for _, w := range tt.wantWords {
			if !strings.Contains(logs.String(), w) {
				t.Errorf("%v: the warning does not say %q:\n%s", tt.environ, w, logs.String())
			}
		}
	}
}

// TestUpstreamIdleConnsReachTheProxy checks the idle pool the proxy is
// given: the whole of it for one origin, unless requests in flight to
// one origin are bounded, which then bounds its share too.
func TestUpstreamIdleConnsReachTheProxy(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		env                  map[string]string
		wantIdle, wantOrigin int
	}{
		{map[string]string{}, 1024, 0},
		{map[string]string{"ROBOTSGATE_UPSTREAM_IDLE_CONNS": "16"}, 16, 0},
		{map[string]string{"ROBOTSGATE_UPSTREAM_IDLE_CONNS": "16", "ROBOTSGATE_MAX_CONNS_PER_ORIGIN": "4"}, 16, 4},
	} {
		env := maps.Clone(tc.env)
		env["ROBOTSGATE_MITM"] = "false"
		cfg, err := LoadFrom(env)
		if err != nil {
			t.Fatal(err)
		}
		got := cfg.UpstreamOptions(nil)
		if got.MaxIdleConns != tc.wantIdle || got.MaxIdleConnsPerOrigin != tc.wantOrigin {
			t.Errorf("%v: the proxy keeps %d idle connections, %d per origin; want %d, %d",
				tc.env, got.MaxIdleConns, got.MaxIdleConnsPerOrigin, tc.wantIdle, tc.wantOrigin)
		}
	}
}

// TestSigningOptions: the pinned token's keys are read into its identity,
// named after the token, with the agent and lifetime given; without keys
// no identity signs.
func TestSigningOptions(t *testing.T) {
	dir := t.TempDir()
	key := writeSigningKey(t, dir, "a.pem", 0o600)
	later := writeSigningKey(t, dir, "b.pem", 0o600)
	cfg, err := LoadFrom(map[string]string{"ROBOTSGATE_TOKEN": "MyBot", "ROBOTSGATE_SIGNING_KEY": key + ", " + later,
		"ROBOTSGATE_SIGNATURE_AGENT": "https://bot.example", "ROBOTSGATE_SIGNATURE_TTL": "30s"})
	if err != nil {
		t.Fatal(err)
	}
	opts, err := cfg.SigningOptions()
	if err != nil {
		t.Fatal(err)
	}
	id := opts.Pinned
	if id == nil || id.Name != "token MyBot" || id.Agent != "https://bot.example" || len(id.Keys) != 2 || opts.Token != "MyBot" || opts.TTL != 30*time.Second {
		t.Fatalf("SigningOptions() = %+v, identity %+v", opts, id)
	}
	if id.Keys[0].File != key || id.Keys[1].File != later {
		t.Errorf("keys read from %s, %s; want %s, %s", id.Keys[0].File, id.Keys[1].File, key, later)
	}
	if got := cfg.PolicyOptions().SignatureAgent; got != "https://bot.example" {
		t.Errorf("PolicyOptions().SignatureAgent = %q", got)
	}
	none, err := LoadFrom(map[string]string{"ROBOTSGATE_SIGNATURE_AGENT": "https://bot.example"})
	if err != nil {
		t.Fatal(err)
	}
	if opts, err := none.SigningOptions(); err != nil || opts.Pinned != nil {
		t.Errorf("without keys: SigningOptions() = %+v, %v; want no identity", opts, err)
	}
}
