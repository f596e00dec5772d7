package config

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io/fs"
	"log/slog"
	"math/big"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"robotsgate/proxy"
	"robotsgate/proxy/identity"
	"robotsgate/proxy/pace"
	"robotsgate/proxy/signing"
	"strings"
	"testing"
	"time"
)

// defaults is the brief's table of defaults, written out independently of
// the struct tags (CADir excepted: it depends on the user).
func defaults() Config {
	return Config{
		Listen:                        "127.0.0.1:8080",
		Mode:                          proxy.ModeEnforce,
		CrawlDelay:                    pace.ModeEnforce,
		MaxCrawlDelay:                 time.Minute,
		MaxWait:                       time.Minute,
		MaxSchedulesPerClient:         pace.DefaultMaxSchedules / 16,
		MaxBackoff:                    time.Hour,
		BackoffBase:                   time.Second,
		PaceBy:                        pace.ByHost,
		MITM:                          true,
		LogFormat:                     LogFormatAuto,
		LogLevel:                      slog.LevelInfo,
		AuditLog:                      "-",
		FetchTimeout:                  5 * time.Second,
		FetchConnectTimeout:           3 * time.Second,
		MaxFetches:                    256,
		MaxFetchesPerClient:           64,
		RobotsAuthStatus:              RobotsAuthAllow,
		ParseLimit:                    500 * 1024,
		CacheMaxBytes:                 64 * 1024 * 1024,
		CacheMaxAge:                   24 * time.Hour,
		CacheMinAge:                   time.Minute,
		UnreachableRetry:              time.Minute,
		MaxStale:                      720 * time.Hour,
		UpstreamDialTimeout:           10 * time.Second,
		UpstreamTLSTimeout:            10 * time.Second,
		UpstreamResponseHeaderTimeout: 30 * time.Second,
		UpstreamIdleTimeout:           90 * time.Second,
		UpstreamIdleConns:             1024,
		ClientIdleTimeout:             2 * time.Minute,
		ClientHeaderTimeout:           10 * time.Second,
		ClientTLSTimeout:              10 * time.Second,
		MaxHeaderBytes:                64 * 1024,
		MaxURLBytes:                   8 * 1024,
		MaxConnections:                4096,
		MaxConnectionsPerClient:       1024,
		DenyDestinations: DestinationList{
			netip.MustParsePrefix("169.254.0.0/16"), netip.MustParsePrefix("fe80::/10"),
			netip.MustParsePrefix("0.0.0.0/8"), netip.MustParsePrefix("::/128"),
		},
		Usage:          proxy.UsageEnforce,
		UsageResponses: proxy.ResponsesRecord,
		SignatureTTL:   time.Minute,
		Auth:           identity.ModeOff,
		AuditOnError:   proxy.AuditRefuse,
		ShutdownGrace:  10 * time.Second,
		WatchInterval:  5 * time.Second,
		RedisTimeout:   200 * time.Millisecond,
		RedisPrefix:    "robotsgate:",
	}
}

// variableErrors returns the VariableErrors joined in err.
func variableErrors(t *testing.T, err error) []*VariableError {
	t.Helper()
	joined, ok := err.(interface{ Unwrap() []error })
	if !ok {
		t.Fatalf("error %q is not a joined error", err)
	}
	var out []*VariableError
	for _, e := range joined.Unwrap() {
		ve, ok := errors.AsType[*VariableError](e)
		if !ok {
			t.Fatalf("problem %q is not a *VariableError", e)
		}
		out = append(out, ve)
	}
	return out
}

// writeFile creates a file in dir and returns its path.
// writeSigningKey writes a new Ed25519 signing key with mode perm.
func writeSigningKey(t *testing.T, dir, name string, perm os.FileMode) string {
	t.Helper()
	k, err := signing.GenerateKey(nil, time.Time{}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	data, err := k.MarshalPEM()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, data, perm); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, perm); err != nil { // past the umask
		t.Fatal(err)
	}
	return path
}

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// testCA returns a freshly made self-signed CA certificate and key, PEM.
func testCA(t *testing.T) (certPEM, keyPEM string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "robotsgate test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})),
		string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}))
}

func TestLoadFromEmptyGivesDefaults(t *testing.T) {
	t.Parallel()
	cfg, err := LoadFrom(map[string]string{})
	if err != nil {
		t.Fatalf("LoadFrom(empty) = %v", err)
	}
	want := defaults()
	userDir, dirErr := os.UserConfigDir()
	if dirErr != nil {
		t.Fatalf("this test needs a user config directory: %v", dirErr)
	}
	want.CADir = filepath.Join(userDir, "robotsgate")
	if !strings.HasSuffix(cfg.CADir, "robotsgate") {
		t.Errorf("CADir = %q, want it to end with robotsgate", cfg.CADir)
	}
	if !reflect.DeepEqual(*cfg, want) {
		t.Errorf("LoadFrom(empty) =\n%+v\nwant\n%+v", *cfg, want)
	}
}

func TestEmptyValueMeansDefault(t *testing.T) {
	t.Parallel()
	environ := map[string]string{}
	for _, v := range Variables() {
		environ[v.Name] = ""
	}
	got, err := LoadFrom(environ)
	if err != nil {
		t.Fatalf("LoadFrom(all empty) = %v", err)
	}
	want, err := LoadFrom(map[string]string{})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(*got, *want) {
		t.Errorf("all variables empty =\n%+v\nwant the defaults\n%+v", *got, *want)
	}
}

// TestLoadFromNilIgnoresProcessEnvironment guards against env.Options
// reading os.Environ when its Environment is nil. It sets a process variable,
// so it cannot run in parallel.
func TestLoadFromNilIgnoresProcessEnvironment(t *testing.T) {
	t.Setenv("ROBOTSGATE_MODE", "audit")
	cfg, err := LoadFrom(nil)
	if err != nil {
		t.Fatalf("LoadFrom(nil) = %v", err)
	}
	if cfg.Mode != proxy.ModeEnforce {
		t.Errorf("LoadFrom(nil).Mode = %q, want %q: the process environment leaked in", cfg.Mode, proxy.ModeEnforce)
	}
	cfg, err = Load()
	if err != nil {
		t.Fatalf("Load() = %v", err)
	}
	if cfg.Mode != proxy.ModeAudit {
		t.Errorf("Load().Mode = %q, want %q from the process environment", cfg.Mode, proxy.ModeAudit)
	}
}

func TestLoadFromValidValues(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	certPEM, keyPEM := testCA(t)
	certFile := writeFile(t, dir, "ca.pem", certPEM)
	keyFile := writeFile(t, dir, "ca-key.pem", keyPEM)
	bundle := writeFile(t, dir, "bundle.pem", "# extra roots\n"+certPEM+certPEM)
	auditFile := filepath.Join(dir, "audit.jsonl") // need not exist yet
	caDir := filepath.Join(dir, "not-yet", "ca")   // created later by the proxy
	// Its lines are checked when the proxy loads it (package identity).
	credentials := writeFile(t, dir, "credentials", "crawler:$2y$05$abcdefghijklmnopqrstuuM3FT5yAaZpQ8hQ2z5l5Z3Yc1u5Yy0n6\n")

	tests := []struct {
		name    string
		environ map[string]string
		want    func(*Config)
	}{
		{"listen any interface", map[string]string{"ROBOTSGATE_LISTEN": ":3128"}, func(c *Config) { c.Listen = ":3128" }},
		{"listen IPv6 port 0", map[string]string{"ROBOTSGATE_LISTEN": "[::1]:0"}, func(c *Config) { c.Listen = "[::1]:0" }},
		{"listen top port", map[string]string{"ROBOTSGATE_LISTEN": "localhost:65535"}, func(c *Config) { c.Listen = "localhost:65535" }},
		{"mode audit audits the pace too", map[string]string{"ROBOTSGATE_MODE": "audit"}, func(c *Config) { c.Mode, c.CrawlDelay = proxy.ModeAudit, pace.ModeAudit }},
		{"mode upper case", map[string]string{"ROBOTSGATE_MODE": "AUDIT"}, func(c *Config) { c.Mode, c.CrawlDelay = proxy.ModeAudit, pace.ModeAudit }},
		{"mode audit, pace enforced", map[string]string{"ROBOTSGATE_MODE": "audit", "ROBOTSGATE_CRAWL_DELAY": "enforce"},
			func(c *Config) { c.Mode, c.CrawlDelay = proxy.ModeAudit, pace.ModeEnforce }},
		{"crawl delay wait", map[string]string{"ROBOTSGATE_CRAWL_DELAY": "Wait", "ROBOTSGATE_MAX_WAIT": "90s"},
			func(c *Config) { c.CrawlDelay, c.MaxWait = pace.ModeWait, 90*time.Second }},
		{"short idle timeout shortens the default wait", map[string]string{"ROBOTSGATE_CLIENT_IDLE_TIMEOUT": "30s"},
			func(c *Config) { c.ClientIdleTimeout, c.MaxWait = 30*time.Second, 15*time.Second }},
		{"crawl delay off", map[string]string{"ROBOTSGATE_CRAWL_DELAY": "off", "ROBOTSGATE_DEFAULT_CRAWL_DELAY": "0s"},
			func(c *Config) { c.CrawlDelay = pace.ModeOff }},
		{"a fleet", map[string]string{"ROBOTSGATE_REDIS_URL": "redis://:s3cret@redis.internal:6379/2", "ROBOTSGATE_REDIS_TIMEOUT": "50ms", "ROBOTSGATE_REDIS_PREFIX": "crawl-a:"},
			func(c *Config) {
				c.RedisURL, c.RedisTimeout, c.RedisPrefix = "redis://:s3cret@redis.internal:6379/2", 50*time.Millisecond, "crawl-a:"
			}},
		{"a fleet over TLS with its own CA", map[string]string{"ROBOTSGATE_REDIS_URL": "rediss://redis.internal", "ROBOTSGATE_REDIS_CA_FILE": bundle},
			func(c *Config) { c.RedisURL, c.RedisCAFile = "rediss://redis.internal", bundle }},
		{"pace settings", map[string]string{"ROBOTSGATE_DEFAULT_CRAWL_DELAY": "1.5s", "ROBOTSGATE_MAX_CRAWL_DELAY": "24h", "ROBOTSGATE_MAX_CONNS_PER_ORIGIN": "4"},
			func(c *Config) {
				c.DefaultCrawlDelay, c.MaxCrawlDelay, c.MaxConnsPerOrigin = 1500*time.Millisecond, 24*time.Hour, 4
			}},
		{"one bot's proxy: the whole schedule table for its client", map[string]string{"ROBOTSGATE_MAX_SCHEDULES_PER_CLIENT": "1048576"},
			func(c *Config) { c.MaxSchedulesPerClient = 1 << 20 }},
		{"the least share of the schedule table", map[string]string{"ROBOTSGATE_MAX_SCHEDULES_PER_CLIENT": "64"},
			func(c *Config) { c.MaxSchedulesPerClient = 64 }},
		{"politeness to origins", map[string]string{"ROBOTSGATE_MAX_BACKOFF": "24h", "ROBOTSGATE_BACKOFF_BASE": "250ms",
			"ROBOTSGATE_DELAY_FACTOR": "2.5", "ROBOTSGATE_MIN_DELAY": "1s", "ROBOTSGATE_PACE_BY": "Address"},
			func(c *Config) {
				c.MaxBackoff, c.BackoffBase, c.DelayFactor, c.MinDelay, c.PaceBy = 24*time.Hour, 250*time.Millisecond, 2.5, time.Second, pace.ByAddress
			}},
		{"origins' answers unheeded", map[string]string{"ROBOTSGATE_MAX_BACKOFF": "0"}, func(c *Config) { c.MaxBackoff = 0 }},
		{"pace by domain", map[string]string{"ROBOTSGATE_PACE_BY": "domain"}, func(c *Config) { c.PaceBy = pace.ByDomain }},
		{"default delay at the cap", map[string]string{"ROBOTSGATE_DEFAULT_CRAWL_DELAY": "5s", "ROBOTSGATE_MAX_CRAWL_DELAY": "5s"},
			func(c *Config) { c.DefaultCrawlDelay, c.MaxCrawlDelay = 5*time.Second, 5*time.Second }},
		{"mode enforce mixed case", map[string]string{"ROBOTSGATE_MODE": "Enforce"}, func(c *Config) { c.Mode = proxy.ModeEnforce }},
		{"pinned token", map[string]string{"ROBOTSGATE_TOKEN": "GPTBot"}, func(c *Config) { c.Token = "GPTBot" }},
		{"pinned token with digits and dots", map[string]string{"ROBOTSGATE_TOKEN": "Mail.RU_Bot"}, func(c *Config) { c.Token = "Mail.RU_Bot" }},
		{"credentials make auth required", map[string]string{"ROBOTSGATE_CREDENTIALS_FILE": credentials},
			func(c *Config) { c.CredentialsFile, c.Auth = credentials, identity.ModeRequired }},
		{"credentials with optional auth", map[string]string{"ROBOTSGATE_CREDENTIALS_FILE": credentials, "ROBOTSGATE_AUTH": "Optional"},
			func(c *Config) { c.CredentialsFile, c.Auth = credentials, identity.ModeOptional }},
		{"auth off alone", map[string]string{"ROBOTSGATE_AUTH": "off"}, func(c *Config) { c.Auth = identity.ModeOff }},
		{"mitm false", map[string]string{"ROBOTSGATE_MITM": "false"}, func(c *Config) { c.MITM = false }},
		{"mitm 0", map[string]string{"ROBOTSGATE_MITM": "0"}, func(c *Config) { c.MITM = false }},
		{"mitm 1", map[string]string{"ROBOTSGATE_MITM": "1"}, func(c *Config) { c.MITM = true }},
		{"ca pair", map[string]string{"ROBOTSGATE_CA_CERT": certFile, "ROBOTSGATE_CA_KEY": keyFile},
			func(c *Config) { c.CACertFile, c.CAKeyFile = certFile, keyFile }},
		{"ca dir not yet made", map[string]string{"ROBOTSGATE_CA_DIR": caDir}, func(c *Config) { c.CADir = caDir }},
		{"ca dir existing", map[string]string{"ROBOTSGATE_CA_DIR": dir}, func(c *Config) { c.CADir = dir }},
		{"upstream bundle", map[string]string{"ROBOTSGATE_UPSTREAM_CA_FILE": bundle}, func(c *Config) { c.UpstreamCAFile = bundle }},
		{"log format json", map[string]string{"ROBOTSGATE_LOG_FORMAT": "JSON"}, func(c *Config) { c.LogFormat = LogFormatJSON }},
		{"log format text", map[string]string{"ROBOTSGATE_LOG_FORMAT": "text"}, func(c *Config) { c.LogFormat = LogFormatText }},
		{"log level debug", map[string]string{"ROBOTSGATE_LOG_LEVEL": "DEBUG"}, func(c *Config) { c.LogLevel = slog.LevelDebug }},
		{"log level warn", map[string]string{"ROBOTSGATE_LOG_LEVEL": "warn"}, func(c *Config) { c.LogLevel = slog.LevelWarn }},
		{"log level error", map[string]string{"ROBOTSGATE_LOG_LEVEL": "Error"}, func(c *Config) { c.LogLevel = slog.LevelError }},
		{"log level offset", map[string]string{"ROBOTSGATE_LOG_LEVEL": "info+2"}, func(c *Config) { c.LogLevel = slog.LevelInfo + 2 }},
		{"audit log file", map[string]string{"ROBOTSGATE_AUDIT_LOG": auditFile}, func(c *Config) { c.AuditLog = auditFile }},
		{"audit log stdout", map[string]string{"ROBOTSGATE_AUDIT_LOG": "-"}, func(c *Config) { c.AuditLog = "-" }},
		{"fetch timeout at its limit", map[string]string{"ROBOTSGATE_FETCH_TIMEOUT": "5m"}, func(c *Config) { c.FetchTimeout = 5 * time.Minute }},
		{"connect timeout equal to fetch timeout",
			map[string]string{"ROBOTSGATE_FETCH_TIMEOUT": "4s", "ROBOTSGATE_FETCH_CONNECT_TIMEOUT": "4s"},
			func(c *Config) { c.FetchTimeout, c.FetchConnectTimeout = 4*time.Second, 4*time.Second }},
		{"connect timeout default follows a shorter fetch timeout",
			map[string]string{"ROBOTSGATE_FETCH_TIMEOUT": "1500ms"},
			func(c *Config) { c.FetchTimeout, c.FetchConnectTimeout = 1500*time.Millisecond, 1500*time.Millisecond }},
		{"connect timeout default kept under a longer fetch timeout",
			map[string]string{"ROBOTSGATE_FETCH_TIMEOUT": "1m30s"},
			func(c *Config) { c.FetchTimeout = 90 * time.Second }},
		{"user agent", map[string]string{"ROBOTSGATE_FETCH_USER_AGENT": "ExampleBot/2.1 (+https://example.com/bot)"},
			func(c *Config) { c.FetchUserAgent = "ExampleBot/2.1 (+https://example.com/bot)" }},
		{"robots 401/403 disallow", map[string]string{"ROBOTSGATE_ROBOTS_401_403": "DISALLOW"},
			func(c *Config) { c.RobotsAuthStatus = RobotsAuthDisallow }},
		{"parse limit exact minimum in bytes", map[string]string{"ROBOTSGATE_PARSE_LIMIT": "512000"}, func(c *Config) { c.ParseLimit = 512000 }},
		{"parse limit maximum", map[string]string{"ROBOTSGATE_PARSE_LIMIT": "64MiB"}, func(c *Config) { c.ParseLimit = 64 << 20 }},
		{"parse limit decimal", map[string]string{"ROBOTSGATE_PARSE_LIMIT": "1.5MB"}, func(c *Config) { c.ParseLimit = 1_500_000 }},
		{"cache bytes minimum", map[string]string{"ROBOTSGATE_CACHE_MAX_BYTES": "1 MiB"}, func(c *Config) { c.CacheMaxBytes = 1 << 20 }},
		{"cache bytes large", map[string]string{"ROBOTSGATE_CACHE_MAX_BYTES": "2GiB"}, func(c *Config) { c.CacheMaxBytes = 2 << 30 }},
		{"cache max age shorter, min age default follows",
			map[string]string{"ROBOTSGATE_CACHE_MAX_AGE": "30s"},
			func(c *Config) { c.CacheMaxAge, c.CacheMinAge = 30*time.Second, 30*time.Second }},
		{"cache min age zero", map[string]string{"ROBOTSGATE_CACHE_MIN_AGE": "0s"}, func(c *Config) { c.CacheMinAge = 0 }},
		{"cache min age equal to max age",
			map[string]string{"ROBOTSGATE_CACHE_MAX_AGE": "1h", "ROBOTSGATE_CACHE_MIN_AGE": "1h"},
			func(c *Config) { c.CacheMaxAge, c.CacheMinAge = time.Hour, time.Hour }},
		{"fetch slots, the share's default follows", map[string]string{"ROBOTSGATE_MAX_FETCHES": "8"},
			func(c *Config) { c.MaxFetches, c.MaxFetchesPerClient = 8, 2 }},
		{"one fetch slot", map[string]string{"ROBOTSGATE_MAX_FETCHES": "1"},
			func(c *Config) { c.MaxFetches, c.MaxFetchesPerClient = 1, 1 }},
		{"fetch slots and share", map[string]string{"ROBOTSGATE_MAX_FETCHES": "8", "ROBOTSGATE_MAX_FETCHES_PER_CLIENT": "8"},
			func(c *Config) { c.MaxFetches, c.MaxFetchesPerClient = 8, 8 }},
		{"fetch share alone", map[string]string{"ROBOTSGATE_MAX_FETCHES_PER_CLIENT": "1"},
			func(c *Config) { c.MaxFetchesPerClient = 1 }},
		{"connections, the share's default follows", map[string]string{"ROBOTSGATE_MAX_CONNECTIONS": "8"},
			func(c *Config) { c.MaxConnections, c.MaxConnectionsPerClient = 8, 2 }},
		{"connections and share", map[string]string{"ROBOTSGATE_MAX_CONNECTIONS": "8", "ROBOTSGATE_MAX_CONNECTIONS_PER_CLIENT": "8"},
			func(c *Config) { c.MaxConnections, c.MaxConnectionsPerClient = 8, 8 }},
		{"connection share alone", map[string]string{"ROBOTSGATE_MAX_CONNECTIONS_PER_CLIENT": "1"},
			func(c *Config) { c.MaxConnectionsPerClient = 1 }},
		{"unreachable retry", map[string]string{"ROBOTSGATE_UNREACHABLE_RETRY": "10s"}, func(c *Config) { c.UnreachableRetry = 10 * time.Second }},
		{"unreachable retry at the backoff cap", map[string]string{"ROBOTSGATE_UNREACHABLE_RETRY": "15m"}, func(c *Config) { c.UnreachableRetry = 15 * time.Minute }},
		{"deny nothing", map[string]string{"ROBOTSGATE_DENY_DESTINATIONS": "None"}, func(c *Config) { c.DenyDestinations = DestinationList{} }},
		{"purposes of the pinned token, deduplicated", map[string]string{"ROBOTSGATE_TOKEN": "MyBot", "ROBOTSGATE_PURPOSES": " ai-train, search,ai-train,"},
			func(c *Config) { c.Token, c.Purposes = "MyBot", PurposeList{"ai-train", "search"} }},
		{"usage audit, responses withheld, tdmrep", map[string]string{"ROBOTSGATE_USAGE": "Audit", "ROBOTSGATE_USAGE_RESPONSES": "withhold", "ROBOTSGATE_TDMREP": "true"},
			func(c *Config) {
				c.Usage, c.UsageResponses, c.TDMRep = proxy.UsageAudit, proxy.ResponsesWithhold, true
			}},
		{"deny addresses and ranges", map[string]string{"ROBOTSGATE_DENY_DESTINATIONS": " 10.0.0.0/8, 192.168.1.7 ,::1,10.1.2.3/16"},
			func(c *Config) {
				c.DenyDestinations = DestinationList{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("192.168.1.7/32"),
					netip.MustParsePrefix("::1/128"), netip.MustParsePrefix("10.1.0.0/16")}
			}},
		{"audit on error continue", map[string]string{"ROBOTSGATE_AUDIT_ON_ERROR": "Continue"}, func(c *Config) { c.AuditOnError = proxy.AuditContinue }},
		{"client limits", map[string]string{
			"ROBOTSGATE_MAX_HEADER_BYTES": "4KiB", "ROBOTSGATE_MAX_URL_BYTES": "4KiB", "ROBOTSGATE_MAX_CONNECTIONS": "1",
			"ROBOTSGATE_CLIENT_HEADER_TIMEOUT": "1s", "ROBOTSGATE_CLIENT_TLS_TIMEOUT": "2s",
		}, func(c *Config) {
			c.MaxHeaderBytes, c.MaxURLBytes, c.MaxConnections, c.MaxConnectionsPerClient = 4<<10, 4<<10, 1, 1
			c.ClientHeaderTimeout, c.ClientTLSTimeout = time.Second, 2*time.Second
		}},
		{"max stale zero", map[string]string{"ROBOTSGATE_MAX_STALE": "0"}, func(c *Config) { c.MaxStale = 0 }},
		{"upstream timeouts", map[string]string{
			"ROBOTSGATE_UPSTREAM_DIAL_TIMEOUT":   "1s",
			"ROBOTSGATE_UPSTREAM_TLS_TIMEOUT":    "2s",
			"ROBOTSGATE_UPSTREAM_HEADER_TIMEOUT": "3s",
			"ROBOTSGATE_UPSTREAM_IDLE_TIMEOUT":   "4s",
			"ROBOTSGATE_UPSTREAM_IDLE_CONNS":     "16",
		}, func(c *Config) {
			c.UpstreamDialTimeout, c.UpstreamTLSTimeout = time.Second, 2*time.Second
			c.UpstreamResponseHeaderTimeout, c.UpstreamIdleTimeout = 3*time.Second, 4*time.Second
			c.UpstreamIdleConns = 16
		}},
		{"upstream proxy", map[string]string{"ROBOTSGATE_UPSTREAM_PROXY": "http://proxy.example:3128"},
			func(c *Config) { c.UpstreamProxy = &url.URL{Scheme: "http", Host: "proxy.example:3128"} }},
		{"upstream proxy credentials percent-decoded, trailing slash",
			map[string]string{"ROBOTSGATE_UPSTREAM_PROXY": "http://crawl%40acme:p%40ss%3Aw%2Frd@10.0.0.1:3128/"},
			func(c *Config) {
				c.UpstreamProxy = &url.URL{Scheme: "http", User: url.UserPassword("crawl@acme", "p@ss:w/rd"), Host: "10.0.0.1:3128", Path: "/"}
			}},
		{"upstream proxy user without password, IPv6, upper-case scheme", map[string]string{"ROBOTSGATE_UPSTREAM_PROXY": "HTTP://crawler@[::1]:65535"},
			func(c *Config) {
				c.UpstreamProxy = &url.URL{Scheme: "http", User: url.User("crawler"), Host: "[::1]:65535"}
			}},
		{"client idle timeout", map[string]string{"ROBOTSGATE_CLIENT_IDLE_TIMEOUT": "5m"}, func(c *Config) { c.ClientIdleTimeout = 5 * time.Minute }},
		{"shutdown grace zero", map[string]string{"ROBOTSGATE_SHUTDOWN_GRACE": "0s"}, func(c *Config) { c.ShutdownGrace = 0 }},
		{"other variables ignored", map[string]string{"HOME_ROBOTSGATE_X": "1", "ROBOTSGATEWAY": "1", "PATH": "/bin"}, func(*Config) {}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := LoadFrom(tt.environ)
			if err != nil {
				t.Fatalf("LoadFrom(%v) = %v", tt.environ, err)
			}
			want := defaults()
			want.CADir = got.CADir // checked in its own cases and in TestLoadFromEmptyGivesDefaults
			tt.want(&want)
			if _, set := tt.environ["ROBOTSGATE_CA_DIR"]; set && got.CADir != want.CADir {
				t.Errorf("CADir = %q, want %q", got.CADir, want.CADir)
			}
			if !reflect.DeepEqual(*got, want) {
				t.Errorf("LoadFrom(%v) =\n%+v\nwant\n%+v", tt.environ, *got, want)
			}
		})
	}
}

func TestLoadFromInvalidValues(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	certPEM, keyPEM := testCA(t)
	certFile := writeFile(t, dir, "ca.pem", certPEM)
	keyFile := writeFile(t, dir, "ca-key.pem", keyPEM)
	notPEM := writeFile(t, dir, "notes.txt", "not a certificate\n")
	keyOnly := writeFile(t, dir, "key-only.pem", keyPEM)
	missing := filepath.Join(dir, "missing.pem")
	signingKey := writeSigningKey(t, dir, "signing.pem", 0o600)
	exposedKey := writeSigningKey(t, dir, "exposed.pem", 0o644)

	tests := []struct {
		name     string
		environ  map[string]string
		variable string   // the one variable expected to be reported
		want     []string // fragments of its message
	}{
		{"listen without port", map[string]string{"ROBOTSGATE_LISTEN": "localhost"},
			"ROBOTSGATE_LISTEN", []string{`"localhost" is not a host:port address`, "missing port", `"127.0.0.1:8080"`}},
		{"listen port too large", map[string]string{"ROBOTSGATE_LISTEN": "127.0.0.1:65536"},
			"ROBOTSGATE_LISTEN", []string{`"127.0.0.1:65536" has port "65536"`, "0 to 65535"}},
		{"listen named port", map[string]string{"ROBOTSGATE_LISTEN": "127.0.0.1:http"},
			"ROBOTSGATE_LISTEN", []string{`has port "http"`, "0 to 65535"}},
		{"listen empty port", map[string]string{"ROBOTSGATE_LISTEN": "127.0.0.1:"},
			"ROBOTSGATE_LISTEN", []string{`has port ""`}},
		{"redis URL scheme", map[string]string{"ROBOTSGATE_REDIS_URL": "http://:s3cret@redis.internal:6379"},
			"ROBOTSGATE_REDIS_URL", []string{"redis", "rediss"}},
		{"redis URL database", map[string]string{"ROBOTSGATE_REDIS_URL": "redis://:s3cret@redis.internal:6379/zero"},
			"ROBOTSGATE_REDIS_URL", []string{"zero"}},
		{"redis timeout zero", map[string]string{"ROBOTSGATE_REDIS_URL": "redis://redis.internal", "ROBOTSGATE_REDIS_TIMEOUT": "0s"},
			"ROBOTSGATE_REDIS_TIMEOUT", []string{`"0s" is not positive`}},
		{"redis timeout long", map[string]string{"ROBOTSGATE_REDIS_TIMEOUT": "1m"},
			"ROBOTSGATE_REDIS_TIMEOUT", []string{`"1m" is longer than 5s`, "holds every request"}},
		{"redis prefix control", map[string]string{"ROBOTSGATE_REDIS_PREFIX": "a\nb"},
			"ROBOTSGATE_REDIS_PREFIX", []string{"control characters"}},
		{"redis CA without TLS", map[string]string{"ROBOTSGATE_REDIS_URL": "redis://redis.internal", "ROBOTSGATE_REDIS_CA_FILE": certFile},
			"ROBOTSGATE_REDIS_CA_FILE", []string{"is not a rediss:// URL"}},
		{"redis CA not PEM", map[string]string{"ROBOTSGATE_REDIS_URL": "rediss://redis.internal", "ROBOTSGATE_REDIS_CA_FILE": notPEM},
			"ROBOTSGATE_REDIS_CA_FILE", []string{"holds no PEM certificate"}},
		{"mode", map[string]string{"ROBOTSGATE_MODE": "enforcing"},
			"ROBOTSGATE_MODE", []string{`ROBOTSGATE_MODE: "enforcing" is not valid; use "enforce" or "audit"`}},
		{"token with a space", map[string]string{"ROBOTSGATE_TOKEN": "GPT Bot"},
			"ROBOTSGATE_TOKEN", []string{`ROBOTSGATE_TOKEN: "GPT Bot" is not a product token`, `"GPTBot"`}},
		{"token star", map[string]string{"ROBOTSGATE_TOKEN": "*"},
			"ROBOTSGATE_TOKEN", []string{`"*" is not a product token`}},
		{"token with a version", map[string]string{"ROBOTSGATE_TOKEN": "GPTBot/1.0"},
			"ROBOTSGATE_TOKEN", []string{`"GPTBot/1.0" is not a product token`}},
		{"credentials file missing", map[string]string{"ROBOTSGATE_CREDENTIALS_FILE": missing},
			"ROBOTSGATE_CREDENTIALS_FILE", []string{"cannot be read", "missing.pem"}},
		{"auth required without credentials", map[string]string{"ROBOTSGATE_AUTH": "required"},
			"ROBOTSGATE_AUTH", []string{"ROBOTSGATE_AUTH: is required, but no credentials are set", "ROBOTSGATE_CREDENTIALS_FILE"}},
		{"auth optional without credentials", map[string]string{"ROBOTSGATE_AUTH": "optional"},
			"ROBOTSGATE_AUTH", []string{"is optional, but no credentials are set"}},
		{"auth off with credentials", map[string]string{"ROBOTSGATE_AUTH": "off", "ROBOTSGATE_CREDENTIALS_FILE": notPEM},
			"ROBOTSGATE_AUTH", []string{"is off, but ROBOTSGATE_CREDENTIALS_FILE is set"}},
		{"purposes without a pinned token", map[string]string{"ROBOTSGATE_PURPOSES": "ai-train"},
			"ROBOTSGATE_PURPOSES", []string{"ROBOTSGATE_PURPOSES: declares the purposes of the crawler ROBOTSGATE_TOKEN names, and it is unset"}},
		{"purpose not a word", map[string]string{"ROBOTSGATE_TOKEN": "MyBot", "ROBOTSGATE_PURPOSES": "search, AI Train"},
			"ROBOTSGATE_PURPOSES", []string{`"AI Train" is not a purpose`}},
		{"withhold without usage", map[string]string{"ROBOTSGATE_USAGE_RESPONSES": "withhold", "ROBOTSGATE_USAGE": "off"},
			"ROBOTSGATE_USAGE_RESPONSES", []string{"ROBOTSGATE_USAGE_RESPONSES: is withhold, but ROBOTSGATE_USAGE is off"}},
		{"tdmrep without usage", map[string]string{"ROBOTSGATE_TDMREP": "true", "ROBOTSGATE_USAGE": "off"},
			"ROBOTSGATE_TDMREP", []string{"ROBOTSGATE_TDMREP: is on, but ROBOTSGATE_USAGE is off"}},
		{"signing key without a pinned token", map[string]string{"ROBOTSGATE_SIGNING_KEY": signingKey, "ROBOTSGATE_SIGNATURE_AGENT": "https://bot.example"},
			"ROBOTSGATE_SIGNING_KEY", []string{"signs the requests of the crawler ROBOTSGATE_TOKEN names, and it is unset"}},
		{"signing key without an agent", map[string]string{"ROBOTSGATE_TOKEN": "MyBot", "ROBOTSGATE_SIGNING_KEY": signingKey},
			"ROBOTSGATE_SIGNING_KEY", []string{"is set, but ROBOTSGATE_SIGNATURE_AGENT is not"}},
		{"signing key list empty", map[string]string{"ROBOTSGATE_TOKEN": "MyBot", "ROBOTSGATE_SIGNING_KEY": " , ", "ROBOTSGATE_SIGNATURE_AGENT": "https://bot.example"},
			"ROBOTSGATE_SIGNING_KEY", []string{"names no file"}},
		{"signing key missing", map[string]string{"ROBOTSGATE_TOKEN": "MyBot", "ROBOTSGATE_SIGNING_KEY": missing, "ROBOTSGATE_SIGNATURE_AGENT": "https://bot.example"},
			"ROBOTSGATE_SIGNING_KEY", []string{"missing.pem: no such file"}},
		{"signing key not a key", map[string]string{"ROBOTSGATE_TOKEN": "MyBot", "ROBOTSGATE_SIGNING_KEY": notPEM, "ROBOTSGATE_SIGNATURE_AGENT": "https://bot.example"},
			"ROBOTSGATE_SIGNING_KEY", []string{"notes.txt: neither PEM nor a JWK"}},
		{"signing key readable by others", map[string]string{"ROBOTSGATE_TOKEN": "MyBot", "ROBOTSGATE_SIGNING_KEY": exposedKey, "ROBOTSGATE_SIGNATURE_AGENT": "https://bot.example"},
			"ROBOTSGATE_SIGNING_KEY", []string{"signing key readable by group or others", "chmod 600"}},
		{"signing key an RSA CA key", map[string]string{"ROBOTSGATE_TOKEN": "MyBot", "ROBOTSGATE_SIGNING_KEY": keyFile, "ROBOTSGATE_SIGNATURE_AGENT": "https://bot.example"},
			"ROBOTSGATE_SIGNING_KEY", []string{"Web Bot Auth signs with Ed25519"}},
		{"signature agent with a path", map[string]string{"ROBOTSGATE_SIGNATURE_AGENT": "https://bot.example/keys.json"},
			"ROBOTSGATE_SIGNATURE_AGENT", []string{"an origin is needed, without a path"}},
		{"signature agent not http", map[string]string{"ROBOTSGATE_SIGNATURE_AGENT": "ftp://bot.example"},
			"ROBOTSGATE_SIGNATURE_AGENT", []string{"an http or https URL is needed"}},
		{"signature ttl too long", map[string]string{"ROBOTSGATE_SIGNATURE_TTL": "2h"},
			"ROBOTSGATE_SIGNATURE_TTL", []string{`"2h" is out of range; use 10s to 1h`}},
		{"signature ttl too short", map[string]string{"ROBOTSGATE_SIGNATURE_TTL": "1s"},
			"ROBOTSGATE_SIGNATURE_TTL", []string{`"1s" is out of range`}},
		{"usage mode", map[string]string{"ROBOTSGATE_USAGE": "block"},
			"ROBOTSGATE_USAGE", []string{`ROBOTSGATE_USAGE: "block" is not valid; use "enforce", "audit" or "off"`}},
		{"usage responses", map[string]string{"ROBOTSGATE_USAGE_RESPONSES": "drop"},
			"ROBOTSGATE_USAGE_RESPONSES", []string{`"drop" is not valid; use "record" or "withhold"`}},
		{"auth unknown", map[string]string{"ROBOTSGATE_AUTH": "basic"},
			"ROBOTSGATE_AUTH", []string{`"basic" is not valid; use "off", "optional" or "required"`}},
		{"crawl delay mode", map[string]string{"ROBOTSGATE_CRAWL_DELAY": "hold"},
			"ROBOTSGATE_CRAWL_DELAY", []string{`ROBOTSGATE_CRAWL_DELAY: "hold" is not valid; use "enforce", "wait", "audit" or "off"`}},
		{"default delay negative", map[string]string{"ROBOTSGATE_DEFAULT_CRAWL_DELAY": "-1s"},
			"ROBOTSGATE_DEFAULT_CRAWL_DELAY", []string{"is negative"}},
		{"default delay past the cap", map[string]string{"ROBOTSGATE_DEFAULT_CRAWL_DELAY": "2m"},
			"ROBOTSGATE_DEFAULT_CRAWL_DELAY", []string{`"2m" is longer than ROBOTSGATE_MAX_CRAWL_DELAY (1m0s)`}},
		{"default delay in seconds", map[string]string{"ROBOTSGATE_DEFAULT_CRAWL_DELAY": "10"},
			"ROBOTSGATE_DEFAULT_CRAWL_DELAY", []string{`"10" is not a duration`}},
		{"max delay zero", map[string]string{"ROBOTSGATE_MAX_CRAWL_DELAY": "0s"},
			"ROBOTSGATE_MAX_CRAWL_DELAY", []string{"is not positive"}},
		{"max delay past a day", map[string]string{"ROBOTSGATE_MAX_CRAWL_DELAY": "25h"},
			"ROBOTSGATE_MAX_CRAWL_DELAY", []string{"longer than 24h"}},
		{"max wait past the idle timeout", map[string]string{"ROBOTSGATE_MAX_WAIT": "2m"},
			"ROBOTSGATE_MAX_WAIT", []string{`"2m" is not shorter than ROBOTSGATE_CLIENT_IDLE_TIMEOUT (2m0s)`}},
		{"max wait zero", map[string]string{"ROBOTSGATE_MAX_WAIT": "0s"},
			"ROBOTSGATE_MAX_WAIT", []string{"is not positive"}},
		{"conns per origin negative", map[string]string{"ROBOTSGATE_MAX_CONNS_PER_ORIGIN": "-1"},
			"ROBOTSGATE_MAX_CONNS_PER_ORIGIN", []string{"out of range"}},
		{"schedules per client below one per shard", map[string]string{"ROBOTSGATE_MAX_SCHEDULES_PER_CLIENT": "63"},
			"ROBOTSGATE_MAX_SCHEDULES_PER_CLIENT", []string{`"63" is out of range; use a number of schedules from 64 to 1048576`}},
		{"schedules per client past the table", map[string]string{"ROBOTSGATE_MAX_SCHEDULES_PER_CLIENT": "1048577"},
			"ROBOTSGATE_MAX_SCHEDULES_PER_CLIENT", []string{"out of range"}},
		{"backoff past a day", map[string]string{"ROBOTSGATE_MAX_BACKOFF": "25h"},
			"ROBOTSGATE_MAX_BACKOFF", []string{"longer than 24h"}},
		{"negative backoff", map[string]string{"ROBOTSGATE_MAX_BACKOFF": "-1s"},
			"ROBOTSGATE_MAX_BACKOFF", []string{"negative"}},
		{"backoff base past the cap", map[string]string{"ROBOTSGATE_BACKOFF_BASE": "2h"},
			"ROBOTSGATE_BACKOFF_BASE", []string{"longer than ROBOTSGATE_MAX_BACKOFF (1h0m0s)"}},
		{"zero backoff base", map[string]string{"ROBOTSGATE_BACKOFF_BASE": "0s"},
			"ROBOTSGATE_BACKOFF_BASE", []string{"not positive"}},
		{"delay factor out of range", map[string]string{"ROBOTSGATE_DELAY_FACTOR": "101"},
			"ROBOTSGATE_DELAY_FACTOR", []string{"out of range; use a number from 0 (off) to 100"}},
		{"negative delay factor", map[string]string{"ROBOTSGATE_DELAY_FACTOR": "-1"},
			"ROBOTSGATE_DELAY_FACTOR", []string{"out of range"}},
		{"delay factor NaN", map[string]string{"ROBOTSGATE_DELAY_FACTOR": "NaN"},
			"ROBOTSGATE_DELAY_FACTOR", []string{"out of range"}},
		{"delay factor not a number", map[string]string{"ROBOTSGATE_DELAY_FACTOR": "twice"},
			"ROBOTSGATE_DELAY_FACTOR", []string{"twice"}},
		{"min delay past the cap", map[string]string{"ROBOTSGATE_MIN_DELAY": "2m"},
			"ROBOTSGATE_MIN_DELAY", []string{"longer than ROBOTSGATE_MAX_CRAWL_DELAY (1m0s)"}},
		{"pace by nothing known", map[string]string{"ROBOTSGATE_PACE_BY": "ip"},
			"ROBOTSGATE_PACE_BY", []string{`"ip" is not valid; use "host", "domain" or "address"`}},
		{"off with a backoff", map[string]string{"ROBOTSGATE_CRAWL_DELAY": "off", "ROBOTSGATE_MAX_BACKOFF": "10m"},
			"ROBOTSGATE_MAX_BACKOFF", []string{"ROBOTSGATE_CRAWL_DELAY=off paces nothing"}},
		{"off with a share of the schedule table", map[string]string{"ROBOTSGATE_CRAWL_DELAY": "off", "ROBOTSGATE_MAX_SCHEDULES_PER_CLIENT": "1024"},
			"ROBOTSGATE_MAX_SCHEDULES_PER_CLIENT", []string{"ROBOTSGATE_CRAWL_DELAY=off paces nothing"}},
		{"off with a default delay", map[string]string{"ROBOTSGATE_CRAWL_DELAY": "off", "ROBOTSGATE_DEFAULT_CRAWL_DELAY": "1s"},
			"ROBOTSGATE_DEFAULT_CRAWL_DELAY", []string{"ROBOTSGATE_CRAWL_DELAY=off paces nothing"}},
		{"off with a connection bound", map[string]string{"ROBOTSGATE_CRAWL_DELAY": "off", "ROBOTSGATE_MAX_CONNS_PER_ORIGIN": "2"},
			"ROBOTSGATE_MAX_CONNS_PER_ORIGIN", []string{"ROBOTSGATE_CRAWL_DELAY=off paces nothing"}},
		{"mitm", map[string]string{"ROBOTSGATE_MITM": "yes"},
			"ROBOTSGATE_MITM", []string{`ROBOTSGATE_MITM: "yes" is not a boolean; use "true" or "false"`}},
		{"ca cert without key", map[string]string{"ROBOTSGATE_CA_CERT": certFile},
			"ROBOTSGATE_CA_KEY", []string{"ROBOTSGATE_CA_KEY: not set, but ROBOTSGATE_CA_CERT is; set both or neither"}},
		{"ca key without cert", map[string]string{"ROBOTSGATE_CA_KEY": keyFile},
			"ROBOTSGATE_CA_CERT", []string{"ROBOTSGATE_CA_CERT: not set, but ROBOTSGATE_CA_KEY is"}},
		{"ca cert missing", map[string]string{"ROBOTSGATE_CA_CERT": missing, "ROBOTSGATE_CA_KEY": keyFile},
			"ROBOTSGATE_CA_CERT", []string{`"` + missing + `" cannot be read: no such file or directory`}},
		{"ca key is a directory", map[string]string{"ROBOTSGATE_CA_CERT": certFile, "ROBOTSGATE_CA_KEY": dir},
			"ROBOTSGATE_CA_KEY", []string{`"` + dir + `" is a directory`}},
		{"ca dir is a file", map[string]string{"ROBOTSGATE_CA_DIR": certFile},
			"ROBOTSGATE_CA_DIR", []string{`"` + certFile + `" is not a directory`}},
		{"upstream ca missing", map[string]string{"ROBOTSGATE_UPSTREAM_CA_FILE": missing},
			"ROBOTSGATE_UPSTREAM_CA_FILE", []string{`"` + missing + `" cannot be read: no such file or directory`}},
		{"upstream ca not PEM", map[string]string{"ROBOTSGATE_UPSTREAM_CA_FILE": notPEM},
			"ROBOTSGATE_UPSTREAM_CA_FILE", []string{`"` + notPEM + `" holds no PEM certificate`, "BEGIN CERTIFICATE"}},
		{"upstream ca only a key", map[string]string{"ROBOTSGATE_UPSTREAM_CA_FILE": keyOnly},
			"ROBOTSGATE_UPSTREAM_CA_FILE", []string{"holds no PEM certificate"}},
		{"log format", map[string]string{"ROBOTSGATE_LOG_FORMAT": "xml"},
			"ROBOTSGATE_LOG_FORMAT", []string{`ROBOTSGATE_LOG_FORMAT: "xml" is not valid; use "auto", "text" or "json"`}},
		{"log level", map[string]string{"ROBOTSGATE_LOG_LEVEL": "verbose"},
			"ROBOTSGATE_LOG_LEVEL", []string{`ROBOTSGATE_LOG_LEVEL: "verbose" is not a log level; use "debug", "info", "warn" or "error"`}},
		{"audit log in missing directory", map[string]string{"ROBOTSGATE_AUDIT_LOG": filepath.Join(dir, "nope", "audit.log")},
			"ROBOTSGATE_AUDIT_LOG", []string{`directory "` + filepath.Join(dir, "nope") + `": no such file or directory`, `"-" for standard output`}},
		{"audit log under a file", map[string]string{"ROBOTSGATE_AUDIT_LOG": filepath.Join(certFile, "audit.log")},
			"ROBOTSGATE_AUDIT_LOG", []string{`"` + certFile + `" is not a directory`}},
		{"audit log is a directory", map[string]string{"ROBOTSGATE_AUDIT_LOG": dir},
			"ROBOTSGATE_AUDIT_LOG", []string{`"` + dir + `" is a directory`}},
		{"deny destinations not CIDRs", map[string]string{"ROBOTSGATE_DENY_DESTINATIONS": "10.0.0.0/8,metadata,10.0.0.0/33"},
			"ROBOTSGATE_DENY_DESTINATIONS", []string{`"metadata", "10.0.0.0/33" are not CIDRs or IP addresses`, `"none"`}},
		{"deny destinations only commas", map[string]string{"ROBOTSGATE_DENY_DESTINATIONS": ",,"},
			"ROBOTSGATE_DENY_DESTINATIONS", []string{"names no range"}},
		{"audit on error", map[string]string{"ROBOTSGATE_AUDIT_ON_ERROR": "ignore"},
			"ROBOTSGATE_AUDIT_ON_ERROR", []string{`"ignore" is not valid; use "refuse"`, `"continue"`}},
		{"upstream idle conns zero", map[string]string{"ROBOTSGATE_UPSTREAM_IDLE_CONNS": "0"},
			"ROBOTSGATE_UPSTREAM_IDLE_CONNS", []string{`"0" is out of range`, "from 1 to 1000000"}},
		{"upstream idle conns not a number", map[string]string{"ROBOTSGATE_UPSTREAM_IDLE_CONNS": "many"},
			"ROBOTSGATE_UPSTREAM_IDLE_CONNS", []string{`"many" is not a whole number`}},
		{"max connections zero", map[string]string{"ROBOTSGATE_MAX_CONNECTIONS": "0"},
			"ROBOTSGATE_MAX_CONNECTIONS", []string{`"0" is out of range`, "from 1 to 1000000"}},
		{"max connections not a number", map[string]string{"ROBOTSGATE_MAX_CONNECTIONS": "lots"},
			"ROBOTSGATE_MAX_CONNECTIONS", []string{`"lots" is not a whole number`}},
		{"connection share zero", map[string]string{"ROBOTSGATE_MAX_CONNECTIONS_PER_CLIENT": "0"},
			"ROBOTSGATE_MAX_CONNECTIONS_PER_CLIENT", []string{`ROBOTSGATE_MAX_CONNECTIONS_PER_CLIENT: "0" is out of range; use a number of connections from 1 to ROBOTSGATE_MAX_CONNECTIONS`}},
		{"connection share above the bound", map[string]string{"ROBOTSGATE_MAX_CONNECTIONS": "8", "ROBOTSGATE_MAX_CONNECTIONS_PER_CLIENT": "9"},
			"ROBOTSGATE_MAX_CONNECTIONS_PER_CLIENT", []string{`"9" is above ROBOTSGATE_MAX_CONNECTIONS (8); use a number of connections from 1 to 8`}},
		{"connection share above the default bound", map[string]string{"ROBOTSGATE_MAX_CONNECTIONS_PER_CLIENT": "5000"},
			"ROBOTSGATE_MAX_CONNECTIONS_PER_CLIENT", []string{`"5000" is above ROBOTSGATE_MAX_CONNECTIONS (4096)`}},
		{"connection share not a number", map[string]string{"ROBOTSGATE_MAX_CONNECTIONS_PER_CLIENT": "some"},
			"ROBOTSGATE_MAX_CONNECTIONS_PER_CLIENT", []string{`"some" is not a whole number`}},
		{"max header bytes too small", map[string]string{"ROBOTSGATE_MAX_HEADER_BYTES": "1KiB"},
			"ROBOTSGATE_MAX_HEADER_BYTES", []string{"out of range", "from 4 KiB to 1 MiB"}},
		{"max URL above the header bound", map[string]string{"ROBOTSGATE_MAX_URL_BYTES": "128KiB"},
			"ROBOTSGATE_MAX_URL_BYTES", []string{"above ROBOTSGATE_MAX_HEADER_BYTES (64 KiB)"}},
		{"client TLS timeout zero", map[string]string{"ROBOTSGATE_CLIENT_TLS_TIMEOUT": "0s"},
			"ROBOTSGATE_CLIENT_TLS_TIMEOUT", []string{"is not positive"}},
		{"max fetches zero", map[string]string{"ROBOTSGATE_MAX_FETCHES": "0"},
			"ROBOTSGATE_MAX_FETCHES", []string{`ROBOTSGATE_MAX_FETCHES: "0" is out of range; use a number of fetches from 1 to 65536`}},
		{"max fetches too many", map[string]string{"ROBOTSGATE_MAX_FETCHES": "100000"},
			"ROBOTSGATE_MAX_FETCHES", []string{`"100000" is out of range`}},
		{"max fetches not a number", map[string]string{"ROBOTSGATE_MAX_FETCHES": "all"},
			"ROBOTSGATE_MAX_FETCHES", []string{`"all" is not a whole number`}},
		{"fetch share zero", map[string]string{"ROBOTSGATE_MAX_FETCHES_PER_CLIENT": "0"},
			"ROBOTSGATE_MAX_FETCHES_PER_CLIENT", []string{`ROBOTSGATE_MAX_FETCHES_PER_CLIENT: "0" is out of range; use a number of fetches from 1 to ROBOTSGATE_MAX_FETCHES`}},
		{"fetch share above the slots", map[string]string{"ROBOTSGATE_MAX_FETCHES": "8", "ROBOTSGATE_MAX_FETCHES_PER_CLIENT": "9"},
			"ROBOTSGATE_MAX_FETCHES_PER_CLIENT", []string{`"9" is above ROBOTSGATE_MAX_FETCHES (8); use a number of fetches from 1 to 8`}},
		{"fetch share above the default slots", map[string]string{"ROBOTSGATE_MAX_FETCHES_PER_CLIENT": "300"},
			"ROBOTSGATE_MAX_FETCHES_PER_CLIENT", []string{`"300" is above ROBOTSGATE_MAX_FETCHES (256)`}},
		{"fetch timeout without unit", map[string]string{"ROBOTSGATE_FETCH_TIMEOUT": "5"},
			"ROBOTSGATE_FETCH_TIMEOUT", []string{`ROBOTSGATE_FETCH_TIMEOUT: "5" is not a duration; use e.g. "5s" or "1m30s"`}},
		{"fetch timeout zero", map[string]string{"ROBOTSGATE_FETCH_TIMEOUT": "0s"},
			"ROBOTSGATE_FETCH_TIMEOUT", []string{`"0s" is not positive`}},
		{"fetch timeout too long", map[string]string{"ROBOTSGATE_FETCH_TIMEOUT": "6m"},
			"ROBOTSGATE_FETCH_TIMEOUT", []string{`"6m" is longer than 5m`, "at most 5m"}},
		{"connect timeout above fetch timeout", map[string]string{"ROBOTSGATE_FETCH_CONNECT_TIMEOUT": "6s"},
			"ROBOTSGATE_FETCH_CONNECT_TIMEOUT", []string{`"6s" is longer than ROBOTSGATE_FETCH_TIMEOUT (the default "5s")`}},
		{"connect timeout above a set fetch timeout",
			map[string]string{"ROBOTSGATE_FETCH_TIMEOUT": "2s", "ROBOTSGATE_FETCH_CONNECT_TIMEOUT": "3s"},
			"ROBOTSGATE_FETCH_CONNECT_TIMEOUT", []string{`"3s" is longer than ROBOTSGATE_FETCH_TIMEOUT ("2s")`}},
		{"connect timeout negative", map[string]string{"ROBOTSGATE_FETCH_CONNECT_TIMEOUT": "-1s"},
			"ROBOTSGATE_FETCH_CONNECT_TIMEOUT", []string{`"-1s" is not positive`}},
		{"user agent with CR LF", map[string]string{"ROBOTSGATE_FETCH_USER_AGENT": "Bot/1\r\nX-Evil: 1"},
			"ROBOTSGATE_FETCH_USER_AGENT", []string{`"Bot/1\r\nX-Evil: 1" has a byte that is not printable ASCII at offset 5`, "no CR, LF"}},
		{"user agent non-ASCII", map[string]string{"ROBOTSGATE_FETCH_USER_AGENT": "Bötli/1"},
			"ROBOTSGATE_FETCH_USER_AGENT", []string{"not printable ASCII at offset 1"}},
		{"robots 401/403", map[string]string{"ROBOTSGATE_ROBOTS_401_403": "deny"},
			"ROBOTSGATE_ROBOTS_401_403", []string{`"deny" is not valid; use "allow"`, `or "disallow"`}},
		{"parse limit not a size", map[string]string{"ROBOTSGATE_PARSE_LIMIT": "big"},
			"ROBOTSGATE_PARSE_LIMIT", []string{`ROBOTSGATE_PARSE_LIMIT: "big" is not a size`, `"500KiB"`}},
		{"parse limit below the RFC floor", map[string]string{"ROBOTSGATE_PARSE_LIMIT": "500KB"},
			"ROBOTSGATE_PARSE_LIMIT", []string{`"500KB" (500 kB) is below 500 KiB`, "RFC 9309 section 2.5", "MUST be at least 500 KiB"}},
		{"parse limit too large", map[string]string{"ROBOTSGATE_PARSE_LIMIT": "65MiB"},
			"ROBOTSGATE_PARSE_LIMIT", []string{`"65MiB" (65 MiB) is above 64 MiB`}},
		{"cache bytes too small", map[string]string{"ROBOTSGATE_CACHE_MAX_BYTES": "1000000"},
			"ROBOTSGATE_CACHE_MAX_BYTES", []string{`"1000000" (1 MB) is below 1 MiB`}},
		{"cache bytes negative", map[string]string{"ROBOTSGATE_CACHE_MAX_BYTES": "-5MiB"},
			"ROBOTSGATE_CACHE_MAX_BYTES", []string{`"-5MiB" is not a size`}},
		{"cache max age above 24h", map[string]string{"ROBOTSGATE_CACHE_MAX_AGE": "25h"},
			"ROBOTSGATE_CACHE_MAX_AGE", []string{`"25h" is longer than 24h`, "RFC 9309 section 2.4", "SHOULD NOT", "24 hours"}},
		{"cache max age zero", map[string]string{"ROBOTSGATE_CACHE_MAX_AGE": "0s"},
			"ROBOTSGATE_CACHE_MAX_AGE", []string{`"0s" is not positive`}},
		{"cache min age above max age",
			map[string]string{"ROBOTSGATE_CACHE_MAX_AGE": "1h", "ROBOTSGATE_CACHE_MIN_AGE": "2h"},
			"ROBOTSGATE_CACHE_MIN_AGE", []string{`"2h" is longer than ROBOTSGATE_CACHE_MAX_AGE ("1h")`}},
		{"cache min age negative", map[string]string{"ROBOTSGATE_CACHE_MIN_AGE": "-1m"},
			"ROBOTSGATE_CACHE_MIN_AGE", []string{`"-1m" is negative`}},
		{"unreachable retry zero", map[string]string{"ROBOTSGATE_UNREACHABLE_RETRY": "0"},
			"ROBOTSGATE_UNREACHABLE_RETRY", []string{`"0" is not positive`}},
		{"unreachable retry beyond the backoff cap", map[string]string{"ROBOTSGATE_UNREACHABLE_RETRY": "16m"},
			"ROBOTSGATE_UNREACHABLE_RETRY", []string{`"16m" is longer than 15m`}},
		{"max stale negative", map[string]string{"ROBOTSGATE_MAX_STALE": "-1h"},
			"ROBOTSGATE_MAX_STALE", []string{`"-1h" is negative`}},
		{"max stale in days", map[string]string{"ROBOTSGATE_MAX_STALE": "30d"},
			"ROBOTSGATE_MAX_STALE", []string{`"30d" is not a duration`}},
		{"dial timeout", map[string]string{"ROBOTSGATE_UPSTREAM_DIAL_TIMEOUT": "0s"},
			"ROBOTSGATE_UPSTREAM_DIAL_TIMEOUT", []string{"is not positive"}},
		{"tls timeout", map[string]string{"ROBOTSGATE_UPSTREAM_TLS_TIMEOUT": "-3s"},
			"ROBOTSGATE_UPSTREAM_TLS_TIMEOUT", []string{"is not positive"}},
		{"header timeout", map[string]string{"ROBOTSGATE_UPSTREAM_HEADER_TIMEOUT": "thirty"},
			"ROBOTSGATE_UPSTREAM_HEADER_TIMEOUT", []string{`"thirty" is not a duration`}},
		{"upstream idle timeout", map[string]string{"ROBOTSGATE_UPSTREAM_IDLE_TIMEOUT": "0m"},
			"ROBOTSGATE_UPSTREAM_IDLE_TIMEOUT", []string{"is not positive"}},
		{"client idle timeout", map[string]string{"ROBOTSGATE_CLIENT_IDLE_TIMEOUT": "0h"},
			"ROBOTSGATE_CLIENT_IDLE_TIMEOUT", []string{"is not positive"}},
		{"upstream proxy https", map[string]string{"ROBOTSGATE_UPSTREAM_PROXY": "https://proxy.example:3128"},
			"ROBOTSGATE_UPSTREAM_PROXY", []string{`has the scheme "https://"`, "plain HTTP", "not supported", "use http://host:port or http://user:password@host:port"}},
		{"upstream proxy socks5", map[string]string{"ROBOTSGATE_UPSTREAM_PROXY": "socks5://u:s3cret@proxy.example:1080"},
			"ROBOTSGATE_UPSTREAM_PROXY", []string{`has the scheme "socks5://"`, "socks5:// and other proxies are not supported"}},
		{"upstream proxy without scheme", map[string]string{"ROBOTSGATE_UPSTREAM_PROXY": "proxy.example:3128"},
			"ROBOTSGATE_UPSTREAM_PROXY", []string{"is not an absolute http:// URL", "http://host:port"}},
		{"upstream proxy without scheme, with credentials", map[string]string{"ROBOTSGATE_UPSTREAM_PROXY": "u:s3cret@proxy.example:3128"},
			"ROBOTSGATE_UPSTREAM_PROXY", []string{"is not an absolute http:// URL"}},
		{"upstream proxy host only", map[string]string{"ROBOTSGATE_UPSTREAM_PROXY": "proxy.example"},
			"ROBOTSGATE_UPSTREAM_PROXY", []string{"is not an absolute http:// URL"}},
		{"upstream proxy without port", map[string]string{"ROBOTSGATE_UPSTREAM_PROXY": "http://u:s3cret@proxy.example"},
			"ROBOTSGATE_UPSTREAM_PROXY", []string{`"http://u:xxxxx@proxy.example" has no port`, "http://proxy.example:3128"}},
		{"upstream proxy empty port", map[string]string{"ROBOTSGATE_UPSTREAM_PROXY": "http://proxy.example:"},
			"ROBOTSGATE_UPSTREAM_PROXY", []string{"has no port"}},
		{"upstream proxy port zero", map[string]string{"ROBOTSGATE_UPSTREAM_PROXY": "http://proxy.example:0"},
			"ROBOTSGATE_UPSTREAM_PROXY", []string{`has port "0"`, "from 1 to 65535"}},
		{"upstream proxy port too large", map[string]string{"ROBOTSGATE_UPSTREAM_PROXY": "http://u:s3cret@proxy.example:65536"},
			"ROBOTSGATE_UPSTREAM_PROXY", []string{`"http://u:xxxxx@proxy.example:65536" has port "65536"`}},
		{"upstream proxy without host", map[string]string{"ROBOTSGATE_UPSTREAM_PROXY": "http://:3128"},
			"ROBOTSGATE_UPSTREAM_PROXY", []string{`"http://:3128" names no host`}},
		{"upstream proxy path", map[string]string{"ROBOTSGATE_UPSTREAM_PROXY": "http://proxy.example:3128/proxy.pac"},
			"ROBOTSGATE_UPSTREAM_PROXY", []string{"has a path, query or fragment", "must be percent-encoded"}},
		{"upstream proxy query", map[string]string{"ROBOTSGATE_UPSTREAM_PROXY": "http://proxy.example:3128?x=1"},
			"ROBOTSGATE_UPSTREAM_PROXY", []string{"has a path, query or fragment"}},
		{"upstream proxy empty query", map[string]string{"ROBOTSGATE_UPSTREAM_PROXY": "http://proxy.example:3128/?"},
			"ROBOTSGATE_UPSTREAM_PROXY", []string{"has a path, query or fragment"}},
		{"upstream proxy fragment", map[string]string{"ROBOTSGATE_UPSTREAM_PROXY": "http://proxy.example:3128#x"},
			"ROBOTSGATE_UPSTREAM_PROXY", []string{"has a path, query or fragment"}},
		// A '/' in the password makes the rest a path: the parser takes
		// "u:1" for the host and port.
		{"upstream proxy password with a slash", map[string]string{"ROBOTSGATE_UPSTREAM_PROXY": "http://u:1/s3cret@proxy.example:3128"},
			"ROBOTSGATE_UPSTREAM_PROXY", []string{"has a path, query or fragment"}},
		{"upstream proxy password with a question mark", map[string]string{"ROBOTSGATE_UPSTREAM_PROXY": "http://u:s3c?ret@proxy.example:3128"},
			"ROBOTSGATE_UPSTREAM_PROXY", []string{"is not a valid URL (not repeated here: it may hold a password)", "percent-encoding any of :@/?#%"}},
		{"upstream proxy bad escape in the password", map[string]string{"ROBOTSGATE_UPSTREAM_PROXY": "http://u:s3cret%zz@proxy.example:3128"},
			"ROBOTSGATE_UPSTREAM_PROXY", []string{"is not a valid URL"}},
		{"upstream proxy password without user name", map[string]string{"ROBOTSGATE_UPSTREAM_PROXY": "http://:s3cret@proxy.example:3128"},
			"ROBOTSGATE_UPSTREAM_PROXY", []string{`"http://:xxxxx@proxy.example:3128" has user information without a user name`}},
		{"upstream proxy user name with a colon", map[string]string{"ROBOTSGATE_UPSTREAM_PROXY": "http://a%3Ab:s3cret@proxy.example:3128"},
			"ROBOTSGATE_UPSTREAM_PROXY", []string{"has a user name with ':'", "Basic authentication"}},
		{"shutdown grace negative", map[string]string{"ROBOTSGATE_SHUTDOWN_GRACE": "-10s"},
			"ROBOTSGATE_SHUTDOWN_GRACE", []string{`"-10s" is negative`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg, err := LoadFrom(tt.environ)
			if err == nil {
				t.Fatalf("LoadFrom(%q) = %+v, want an error about %s", tt.environ, *cfg, tt.variable)
			}
			if cfg != nil {
				t.Errorf("LoadFrom returned a Config with its error")
			}
			problems := variableErrors(t, err)
			if len(problems) != 1 || problems[0].Name != tt.variable {
				t.Fatalf("LoadFrom(%q) problems = %q, want exactly one, about %s", tt.environ, err, tt.variable)
			}
			msg := problems[0].Error()
			if !strings.HasPrefix(msg, tt.variable+": ") {
				t.Errorf("message %q does not start with the variable name", msg)
			}
			// Every password in these rows is s3cret: it must show nowhere,
			// not even in the cause a caller could unwrap.
			if cause := errors.Unwrap(problems[0]); strings.Contains(msg, "s3cret") || cause != nil && strings.Contains(cause.Error(), "s3cret") {
				t.Errorf("message %q, cause %v: a password is shown", msg, cause)
			}
			for _, frag := range tt.want {
				if !strings.Contains(msg, frag) {
					t.Errorf("message %q lacks %q", msg, frag)
				}
			}
		})
	}
}

func TestLoadFromReportsEveryProblemInFieldOrder(t *testing.T) {
	t.Parallel()
	environ := map[string]string{
		"ROBOTSGATE_SHUTDOWN_GRACE":        "-1s",
		"ROBOTSGATE_MODE":                  "enforcing",
		"ROBOTSGATE_FETCH_TIMEOUT":         "5",
		"ROBOTSGATE_PARSE_LIMIT":           "100KiB",
		"ROBOTSGATE_LISTN":                 "0.0.0.0:80",
		"ROBOTSGATE_LISTEN":                "nowhere",
		"ROBOTSGATE_FETCH_CONNECT_TIMEOUT": "10s", // not judged: the limit it depends on is broken
	}
	_, err := LoadFrom(environ)
	if err == nil {
		t.Fatal("LoadFrom accepted five bad settings")
	}
	var names []string
	for _, p := range variableErrors(t, err) {
		names = append(names, p.Name)
	}
	want := []string{
		"ROBOTSGATE_LISTEN", "ROBOTSGATE_MODE", "ROBOTSGATE_FETCH_TIMEOUT",
		"ROBOTSGATE_PARSE_LIMIT", "ROBOTSGATE_SHUTDOWN_GRACE", "ROBOTSGATE_LISTN",
	}
	if !reflect.DeepEqual(names, want) {
		t.Errorf("problems reported for %q, want %q; error:\n%v", names, want, err)
	}
	if lines := strings.Count(err.Error(), "\n") + 1; lines != len(want) {
		t.Errorf("error has %d lines, want one per problem:\n%v", lines, err)
	}
}

func TestLoadFromUnknownVariables(t *testing.T) {
	t.Parallel()
	tests := []struct {
		variable string
		want     string // the whole problem text
	}{
		{"ROBOTSGATE_LISTN", "unknown variable; did you mean ROBOTSGATE_LISTEN?"},
		{"ROBOTSGATE_FECTH_TIMEOUT", "unknown variable; did you mean ROBOTSGATE_FETCH_TIMEOUT?"},
		{"ROBOTSGATE_AUDITLOG", "unknown variable; did you mean ROBOTSGATE_AUDIT_LOG?"},
		{"robotsgate_mode", "unknown variable; did you mean ROBOTSGATE_MODE? (names are upper-case)"},
		{"ROBOTSGATE_UPSTREAM_RESPONSE_HEADER_TIMEOUT", "unknown variable; did you mean ROBOTSGATE_UPSTREAM_HEADER_TIMEOUT?"},
		{"ROBOTSGATE_CACHE_MAX", "unknown variable; did you mean ROBOTSGATE_CACHE_MAX_BYTES or ROBOTSGATE_CACHE_MAX_AGE?"},
		{"ROBOTSGATE_ENABLE_TELEMETRY", "unknown variable, not a robotsgate setting"},
		{"ROBOTSGATE_TIMEOUT", "unknown variable, not a robotsgate setting"},
		{"ROBOTSGATE_", "unknown variable, not a robotsgate setting"},
	}
	for _, tt := range tests {
		t.Run(tt.variable, func(t *testing.T) {
			t.Parallel()
			// An empty value is still a typo worth reporting.
			_, err := LoadFrom(map[string]string{tt.variable: ""})
			if err == nil {
				t.Fatalf("LoadFrom accepted unknown variable %s", tt.variable)
			}
			problems := variableErrors(t, err)
			if len(problems) != 1 {
				t.Fatalf("problems = %q, want one", err)
			}
			if got := problems[0]; got.Name != tt.variable || got.Problem != tt.want {
				t.Errorf("problem = %s: %s, want %s: %s", got.Name, got.Problem, tt.variable, tt.want)
			}
		})
	}
}

// TestCADirWithoutUserConfigDir removes every variable os.UserConfigDir
// could use, so it cannot run in parallel.
func TestCADirWithoutUserConfigDir(t *testing.T) {
	for _, v := range []string{"HOME", "XDG_CONFIG_HOME", "AppData", "home"} {
		t.Setenv(v, "")
	}
	if _, err := os.UserConfigDir(); err == nil {
		t.Skip("os.UserConfigDir still finds a directory on this platform with no HOME")
	}
	dir := t.TempDir()
	certPEM, keyPEM := testCA(t)
	certFile := writeFile(t, dir, "ca.pem", certPEM)
	keyFile := writeFile(t, dir, "ca-key.pem", keyPEM)

	_, err := LoadFrom(map[string]string{})
	if err == nil {
		t.Fatal("LoadFrom accepted MITM with no CA and no CA directory")
	}
	problems := variableErrors(t, err)
	if len(problems) != 1 || problems[0].Name != "ROBOTSGATE_CA_DIR" {
		t.Fatalf("problems = %q, want one about ROBOTSGATE_CA_DIR", err)
	}
	for _, frag := range []string{"not set, and there is no default", "ROBOTSGATE_CA_CERT and ROBOTSGATE_CA_KEY", "ROBOTSGATE_MITM=false"} {
		if !strings.Contains(problems[0].Error(), frag) {
			t.Errorf("message %q lacks %q", problems[0].Error(), frag)
		}
	}

	// A command that does not serve needs no CA directory.
	if _, err := LoadForCommand(); err != nil {
		t.Errorf("LoadForCommand = %v, want no error: a command does not intercept", err)
	}

	for name, environ := range map[string]map[string]string{
		"mitm off":  {"ROBOTSGATE_MITM": "false"},
		"ca given":  {"ROBOTSGATE_CA_CERT": certFile, "ROBOTSGATE_CA_KEY": keyFile},
		"dir given": {"ROBOTSGATE_CA_DIR": dir},
	} {
		cfg, err := LoadFrom(environ)
		if err != nil {
			t.Errorf("%s: LoadFrom = %v, want no error: the CA directory is not needed", name, err)
			continue
		}
		if want := environ["ROBOTSGATE_CA_DIR"]; cfg.CADir != want {
			t.Errorf("%s: CADir = %q, want %q", name, cfg.CADir, want)
		}
	}
}

func TestLogFormatRobotsAuthStatusUnmarshalText(t *testing.T) {
	t.Parallel()
	var f LogFormat
	if err := f.UnmarshalText([]byte("Text")); err != nil || f != LogFormatText {
		t.Errorf("LogFormat.UnmarshalText(Text) = %q, %v", f, err)
	}
	if err := f.UnmarshalText([]byte("logfmt")); err == nil || f != LogFormatText {
		t.Errorf("LogFormat.UnmarshalText(logfmt) = %v and changed the value to %q", err, f)
	}
	var s RobotsAuthStatus
	if err := s.UnmarshalText([]byte("Disallow")); err != nil || s != RobotsAuthDisallow {
		t.Errorf("RobotsAuthStatus.UnmarshalText(Disallow) = %q, %v", s, err)
	}
	if err := s.UnmarshalText([]byte("deny")); err == nil {
		t.Error("RobotsAuthStatus.UnmarshalText accepted deny")
	}
}

func TestSuggestAndEditDistance(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		a, b string
		want int
	}{
		{"", "", 0}, {"abc", "", 3}, {"", "abc", 3}, {"kitten", "sitting", 3}, {"LISTN", "LISTEN", 1}, {"MODE", "MDOE", 2},
	} {
		if got := editDistance(tt.a, tt.b); got != tt.want {
			t.Errorf("editDistance(%q, %q) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
	}
}

func TestVariableErrorUnwrapsItsCause(t *testing.T) {
	t.Parallel()
	missing := filepath.Join(t.TempDir(), "roots.pem")
	_, err := LoadFrom(map[string]string{"ROBOTSGATE_UPSTREAM_CA_FILE": missing})
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("LoadFrom with a missing file = %v, want it to wrap fs.ErrNotExist", err)
	}
	ve, ok := errors.AsType[*VariableError](err)
	if !ok || ve.Name != "ROBOTSGATE_UPSTREAM_CA_FILE" {
		t.Errorf("errors.AsType[*VariableError] = %+v, %v", ve, ok)
	}
}

// TestRedisURLErrorsHideThePassword: a mistyped URL is reported without
// the password it holds, which would otherwise reach the logs.
func TestRedisURLErrorsHideThePassword(t *testing.T) {
	t.Parallel()
	for _, raw := range []string{
		"http://:s3cret@redis.internal:6379",
		"redis://user:s3cret@redis.internal:6379/zero",
		"redis://user:s3cret@:6379",
		"redis://user:s3cret@redis.internal:99999",
		"redis://user:s3cret@redis.internal:6379/0?dial_timeout=1s",
	} {
		_, err := LoadFrom(map[string]string{"ROBOTSGATE_REDIS_URL": raw})
		if err == nil {
			t.Errorf("%s: accepted", raw)
			continue
		}
		if msg := err.Error(); !strings.Contains(msg, "ROBOTSGATE_REDIS_URL") || strings.Contains(msg, "s3cret") {
			t.Errorf("%s: error %q; want one naming ROBOTSGATE_REDIS_URL without the password", raw, msg)
		}
	}
}
