package config

import (
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"robotsgate/cache"
	"robotsgate/cache/fleet"
	"robotsgate/proxy"
	"robotsgate/proxy/identity"
	"robotsgate/proxy/pace"
	"robotsgate/proxy/signing"
	"robotsgate/robots"
	"robotsgate/robots/fetch"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/caarlos0/env/v11"
)

// VariableError is one problem with one environment variable. Its message
// names the variable, the value and what is accepted instead.
type VariableError struct {
	// Name is the variable, e.g. "ROBOTSGATE_MODE".
	Name string
	// Problem says what is wrong and what is accepted, e.g.
	// `"enforcing" is not valid; use "enforce" or "audit"`.
	Problem string
	// Err is the underlying cause, if any (for errors.Is).
	Err error
}

// Error returns "NAME: problem".
func (e *VariableError) Error() string { return e.Name + ": " + e.Problem }

// Unwrap returns the underlying cause.
func (e *VariableError) Unwrap() error { return e.Err }

// checker collects the problems of one LoadFrom call.
type checker struct {
	environ  map[string]string
	fields   []field
	index    map[string]int // variable name → index in fields
	problems [][]error      // per field, so they come out in field order
	other    []error        // problems not tied to one robotsgate variable
	serving  bool           // the proxy will run, not only a command
	origins  []origin       // per field, where an unset variable's value came from, if not its default
}

// origin is where the value of an unset variable came from when it is not
// its default: another setting, or the machine.
type origin struct {
	source Source
	from   string // the variable, or what of the machine
}

func newChecker(environ map[string]string, serving bool) *checker {
	fs := fields()
	index := make(map[string]int, len(fs))
	for i, f := range fs {
		index[f.Name] = i
	}
	return &checker{environ: environ, fields: fs, index: index, problems: make([][]error, len(fs)), serving: serving,
		origins: make([]origin, len(fs))}
}

// derive records that the value of name, unset, was worked out from the
// variable from.
func (c *checker) derive(name, from string) {
	c.origins[c.index[name]] = origin{SourceDerived, from}
}

// report records a problem with the variable name; name must be one of
// Config's variables.
func (c *checker) report(name string, cause error, format string, args ...any) {
	i := c.index[name]
	c.problems[i] = append(c.problems[i], &VariableError{Name: name, Problem: fmt.Sprintf(format, args...), Err: cause})
}

// failed reports whether name already has a problem, so that checks which
// depend on its value are skipped instead of piling up confusing messages.
func (c *checker) failed(name string) bool { return len(c.problems[c.index[name]]) > 0 }

// given returns the variable's value and whether it is set; empty counts as
// unset, as it does for env's defaults.
func (c *checker) given(name string) (string, bool) {
	v := c.environ[name]
	return v, v != ""
}

// shown quotes the value a variable had: as given, or its default.
func (c *checker) shown(name string) string {
	if v, ok := c.given(name); ok {
		return strconv.Quote(v)
	}
	return "the default " + strconv.Quote(c.fields[c.index[name]].envDefault)
}

// err joins every problem: variables in Config order, then the rest.
func (c *checker) err() error {
	var all []error
	for _, ps := range c.problems {
		all = append(all, ps...)
	}
	return errors.Join(append(all, c.other...)...)
}

// addParseErrors rewrites env's errors, which name Go fields and types, into
// messages that name the variable and what it accepts.
func (c *checker) addParseErrors(err error) {
	if err == nil {
		return
	}
	var agg env.AggregateError
	if !errors.As(err, &agg) {
		c.other = append(c.other, fmt.Errorf("config: %w", err))
		return
	}
	byGoName := make(map[string]string, len(c.fields))
	for _, f := range c.fields {
		byGoName[f.goName] = f.Name
	}
	for _, e := range agg.Errors {
		var pe env.ParseError
		name, ok := "", false
		if errors.As(e, &pe) {
			name, ok = byGoName[pe.Name]
		}
		if !ok {
			c.other = append(c.other, fmt.Errorf("config: %w", e))
			continue
		}
		value := c.shown(name)
		switch pe.Type {
		case reflect.TypeFor[time.Duration]():
			c.report(name, pe.Err, `%s is not a duration; use e.g. "5s" or "1m30s"`, value)
		case reflect.TypeFor[int]():
			c.report(name, pe.Err, `%s is not a whole number`, value)
		case reflect.TypeFor[bool]():
			c.report(name, pe.Err, `%s is not a boolean; use "true" or "false"`, value)
		case reflect.TypeFor[slog.Level]():
			c.report(name, pe.Err, `%s is not a log level; use "debug", "info", "warn" or "error"`, value)
		case reflect.TypeFor[*url.URL]():
			// Neither the value nor the parser's words (which quote it,
			// or a piece of it) are repeated: it may hold a password.
			c.report(name, nil, "is not a valid URL (not repeated here: it may hold a password); %s, percent-encoding any of :@/?#%% in the user name or password",
				upstreamProxyForms)
		default:
			// robotsgate's own types already say what they accept.
			c.report(name, pe.Err, "%s", pe.Err)
		}
	}
}

// validate checks what parsing cannot: ranges, files, relations between
// settings. It fills in the defaults that depend on other values.
func (c *checker) validate(cfg *Config) {
	c.checkListen(cfg.Listen)
	c.checkCA(cfg)
	if path, ok := c.given("ROBOTSGATE_UPSTREAM_CA_FILE"); ok {
		c.checkPEMBundle("ROBOTSGATE_UPSTREAM_CA_FILE", path)
	}
	c.checkAuditLog(cfg.AuditLog)
	c.checkIdentity(cfg)
	c.checkSigning(cfg)
	c.checkPace(cfg)

	c.checkFetch(cfg)
	c.checkCacheAges(cfg)
	if c.positive("ROBOTSGATE_UNREACHABLE_RETRY", cfg.UnreachableRetry) {
		limit := fmt.Sprintf("%gm", cache.DefaultMaxRetryAfter.Minutes())
		c.atMost("ROBOTSGATE_UNREACHABLE_RETRY", cfg.UnreachableRetry, cache.DefaultMaxRetryAfter, limit,
			"retries back off from it up to "+limit+", which bounds how long an origin stays disallowed after it comes back")
	}
	c.notNegative("ROBOTSGATE_MAX_STALE", cfg.MaxStale)
	c.positive("ROBOTSGATE_UPSTREAM_DIAL_TIMEOUT", cfg.UpstreamDialTimeout)
	c.positive("ROBOTSGATE_UPSTREAM_TLS_TIMEOUT", cfg.UpstreamTLSTimeout)
	c.positive("ROBOTSGATE_UPSTREAM_HEADER_TIMEOUT", cfg.UpstreamResponseHeaderTimeout)
	c.positive("ROBOTSGATE_UPSTREAM_IDLE_TIMEOUT", cfg.UpstreamIdleTimeout)
	if name := "ROBOTSGATE_UPSTREAM_IDLE_CONNS"; !c.failed(name) && (cfg.UpstreamIdleConns < 1 || cfg.UpstreamIdleConns > 1_000_000) {
		c.report(name, nil, "%s is out of range; use a number of connections from 1 to 1000000", c.shown(name))
	}
	c.checkUpstreamProxy(cfg.UpstreamProxy)
	c.positive("ROBOTSGATE_CLIENT_IDLE_TIMEOUT", cfg.ClientIdleTimeout)
	c.positive("ROBOTSGATE_CLIENT_HEADER_TIMEOUT", cfg.ClientHeaderTimeout)
	c.positive("ROBOTSGATE_CLIENT_TLS_TIMEOUT", cfg.ClientTLSTimeout)
	c.notNegative("ROBOTSGATE_SHUTDOWN_GRACE", cfg.ShutdownGrace)
	if c.notNegative("ROBOTSGATE_WATCH_INTERVAL", cfg.WatchInterval) && cfg.WatchInterval > 0 && cfg.WatchInterval < 100*time.Millisecond {
		c.report("ROBOTSGATE_WATCH_INTERVAL", nil, "%s is too short; use 100ms or more (each check is a stat of each file), or 0 to reload on SIGHUP only", c.shown("ROBOTSGATE_WATCH_INTERVAL"))
	}
	c.checkClientLimits(cfg)

	if ua, ok := c.given("ROBOTSGATE_FETCH_USER_AGENT"); ok {
		c.checkUserAgent(ua)
	}
	c.checkSizes(cfg)
	c.checkRedis(cfg)
}

// checkRedis checks the fleet's settings. A Redis that cannot be reached
// is no configuration error: the instance works alone until it answers.
func (c *checker) checkRedis(cfg *Config) {
	const urlName, timeoutName, prefixName, caName = "ROBOTSGATE_REDIS_URL", "ROBOTSGATE_REDIS_TIMEOUT", "ROBOTSGATE_REDIS_PREFIX", "ROBOTSGATE_REDIS_CA_FILE"
	if raw, ok := c.given(urlName); ok {
		if err := fleet.CheckURL(raw); err != nil {
			c.report(urlName, err, "%v", err) // never the value: it may hold a password
		}
	}
	if c.positive(timeoutName, cfg.RedisTimeout) {
		c.atMost(timeoutName, cfg.RedisTimeout, 5*time.Second, "5s", "a Redis that hangs holds every request that needs it this long")
	}
	if strings.ContainsFunc(cfg.RedisPrefix, unicode.IsControl) {
		c.report(prefixName, nil, "%q holds control characters; use printable text, e.g. \"robotsgate:\"", cfg.RedisPrefix)
	}
	if path, ok := c.given(caName); ok {
		c.checkPEMBundle(caName, path)
		if !c.failed(urlName) && !strings.HasPrefix(strings.ToLower(cfg.RedisURL), "rediss://") {
			c.report(caName, nil, "is set, but %s is not a rediss:// URL, so no certificate is verified; use rediss:// or unset %s", urlName, caName)
		}
	}
}

// upstreamProxyForms are the values ROBOTSGATE_UPSTREAM_PROXY accepts.
const upstreamProxyForms = "use http://host:port or http://user:password@host:port"

// checkUpstreamProxy checks the upstream proxy's URL. A message quotes the
// URL only with its password redacted, and not at all where the parser
// may have taken part of a password for something else: a path, query or
// fragment (a '/', '?' or '#' in it), or the opaque rest of a URL without
// "//".
func (c *checker) checkUpstreamProxy(u *url.URL) {
	const name = "ROBOTSGATE_UPSTREAM_PROXY"
	if u == nil || c.failed(name) {
		return
	}
	port, portErr := strconv.ParseUint(u.Port(), 10, 16)
	switch {
	case u.Scheme == "" || u.Opaque != "":
		c.report(name, nil, "is not an absolute http:// URL; %s", upstreamProxyForms)
	case u.Scheme != "http":
		c.report(name, nil, "has the scheme %q: robotsgate speaks plain HTTP to its upstream proxy (HTTPS to origins still runs end to end, inside CONNECT), and https://, socks5:// and other proxies are not supported; %s",
			u.Scheme+"://", upstreamProxyForms)
	case u.Path != "" && u.Path != "/" || u.RawQuery != "" || u.ForceQuery || u.Fragment != "":
		c.report(name, nil, "has a path, query or fragment, which a proxy's URL cannot have (a '/', '?' or '#' in a user name or password must be percent-encoded); %s",
			upstreamProxyForms)
	case u.Hostname() == "":
		c.report(name, nil, "%s names no host; %s", strconv.Quote(u.Redacted()), upstreamProxyForms)
	case u.Port() == "":
		c.report(name, nil, "%s has no port; write it out, e.g. http://%s:3128", strconv.Quote(u.Redacted()), u.Host)
	case portErr != nil || port == 0:
		c.report(name, portErr, "%s has port %q; use a port number from 1 to 65535", strconv.Quote(u.Redacted()), u.Port())
	case u.User != nil && u.User.Username() == "":
		c.report(name, nil, "%s has user information without a user name; %s", strconv.Quote(u.Redacted()), upstreamProxyForms)
	case u.User != nil && strings.Contains(u.User.Username(), ":"):
		c.report(name, nil, "%s has a user name with ':', which Basic authentication cannot carry", strconv.Quote(u.Redacted()))
	}
}

// checkIdentity checks the pinned token and the credentials settings, and
// works out ROBOTSGATE_AUTH's default. The file's lines are checked when
// it is loaded, each problem with its line number.
func (c *checker) checkIdentity(cfg *Config) {
	const tokenName, fileName, authName = "ROBOTSGATE_TOKEN", "ROBOTSGATE_CREDENTIALS_FILE", "ROBOTSGATE_AUTH"
	if token, ok := c.given(tokenName); ok {
		if name, global := robots.ProductName(token); global || name != token {
			c.report(tokenName, nil, "%q is not a product token; use the name a robots.txt's User-agent line gives the crawler, e.g. \"GPTBot\" (letters, digits and -_.!)", token)
		}
	}
	if cfg.UsageResponses == proxy.ResponsesWithhold && cfg.Usage == proxy.UsageOff {
		c.report("ROBOTSGATE_USAGE_RESPONSES", nil, "is withhold, but ROBOTSGATE_USAGE is off, so no response would be withheld; set ROBOTSGATE_USAGE to enforce, or unset ROBOTSGATE_USAGE_RESPONSES")
	}
	if cfg.TDMRep && cfg.Usage == proxy.UsageOff {
		c.report("ROBOTSGATE_TDMREP", nil, "is on, but ROBOTSGATE_USAGE is off, so no tdmrep.json would be read; set ROBOTSGATE_USAGE to enforce or audit, or unset ROBOTSGATE_TDMREP")
	}
	if _, ok := c.given("ROBOTSGATE_PURPOSES"); ok && !c.failed("ROBOTSGATE_PURPOSES") && cfg.Token == "" {
		c.report("ROBOTSGATE_PURPOSES", nil, "declares the purposes of the crawler %s names, and it is unset: on a gate several bots share, one list cannot speak for all; set %s, or declare purposes per crawler in ROBOTSGATE_POLICY", tokenName, tokenName)
	}
	file, fileSet := c.given(fileName)
	if fileSet {
		c.checkReadableFile(fileName, file)
	}
	_, authSet := c.given(authName)
	switch {
	case c.failed(authName):
	case !authSet && fileSet:
		cfg.Auth = identity.ModeRequired
		c.derive(authName, fileName)
	case !authSet:
	case cfg.Auth == identity.ModeOff && fileSet:
		c.report(authName, nil, "is off, but %s is set, and would be ignored; use optional or required, or unset %s", fileName, fileName)
	case cfg.Auth != identity.ModeOff && !fileSet:
		c.report(authName, nil, "is %s, but no credentials are set; name an htpasswd file (htpasswd -B) in %s", cfg.Auth, fileName)
	}
}

// checkSigning checks the pinned token's signing keys by reading them, and
// the Signature-Agent and signature lifetime.
func (c *checker) checkSigning(cfg *Config) {
	const keyName, agentName, ttlName = "ROBOTSGATE_SIGNING_KEY", "ROBOTSGATE_SIGNATURE_AGENT", "ROBOTSGATE_SIGNATURE_TTL"
	if agent, ok := c.given(agentName); ok {
		if err := signing.CheckAgent(agent); err != nil {
			c.report(agentName, err, "%v", err)
		}
	}
	if !c.failed(ttlName) && (cfg.SignatureTTL < 10*time.Second || cfg.SignatureTTL > time.Hour) {
		c.report(ttlName, nil, "%s is out of range; use 10s to 1h: long enough for clocks that differ a little, short enough that a signature seen cannot be replayed for long", c.shown(ttlName))
	}
	if _, ok := c.given(keyName); !ok || c.failed(keyName) {
		return
	}
	switch {
	case len(cfg.SigningKey) == 0:
		c.report(keyName, nil, "names no file; name the key files, comma-separated (robotsgate keygen FILE makes one)")
	case cfg.Token == "":
		c.report(keyName, nil, "signs the requests of the crawler ROBOTSGATE_TOKEN names, and it is unset: on a gate several bots share, one key cannot speak for all; set ROBOTSGATE_TOKEN, or give credential users signing_keys in ROBOTSGATE_POLICY")
	case cfg.SignatureAgent == "":
		c.report(keyName, nil, "is set, but ROBOTSGATE_SIGNATURE_AGENT is not: sites need its URL to find the key directory; set it (https://your-crawler.example, say)")
	case !c.failed(agentName):
		if _, err := cfg.SigningIdentity(); err != nil {
			c.report(keyName, err, "%v", err)
		}
	}
}

// checkPace checks the pacing settings and works out
// ROBOTSGATE_CRAWL_DELAY's default.
func (c *checker) checkPace(cfg *Config) {
	const modeName, defaultName, maxName = "ROBOTSGATE_CRAWL_DELAY", "ROBOTSGATE_DEFAULT_CRAWL_DELAY", "ROBOTSGATE_MAX_CRAWL_DELAY"
	const waitName, connsName, idleName = "ROBOTSGATE_MAX_WAIT", "ROBOTSGATE_MAX_CONNS_PER_ORIGIN", "ROBOTSGATE_CLIENT_IDLE_TIMEOUT"
	const schedulesName = "ROBOTSGATE_MAX_SCHEDULES_PER_CLIENT"
	const backoffName, baseName, factorName, minName = "ROBOTSGATE_MAX_BACKOFF", "ROBOTSGATE_BACKOFF_BASE", "ROBOTSGATE_DELAY_FACTOR", "ROBOTSGATE_MIN_DELAY"
	if _, set := c.given(modeName); !set && cfg.Mode == proxy.ModeAudit {
		cfg.CrawlDelay = pace.ModeAudit
		c.derive(modeName, "ROBOTSGATE_MODE")
	}
	if c.positive(maxName, cfg.MaxCrawlDelay) {
		c.atMost(maxName, cfg.MaxCrawlDelay, 24*time.Hour, "24h", "")
	}
	if c.notNegative(defaultName, cfg.DefaultCrawlDelay) && !c.failed(maxName) && cfg.DefaultCrawlDelay > cfg.MaxCrawlDelay {
		c.report(defaultName, nil, "%s is longer than %s (%s); use at most that", c.shown(defaultName), maxName, cfg.MaxCrawlDelay)
	}
	if c.notNegative(backoffName, cfg.MaxBackoff) {
		c.atMost(backoffName, cfg.MaxBackoff, 24*time.Hour, "24h", "RFC 9309 lets a crawler trust a robots.txt a day; no origin's word holds longer")
	}
	if c.positive(baseName, cfg.BackoffBase) && !c.failed(backoffName) && cfg.MaxBackoff > 0 && cfg.BackoffBase > cfg.MaxBackoff {
		c.report(baseName, nil, "%s is longer than %s (%s); use at most that", c.shown(baseName), backoffName, cfg.MaxBackoff)
	}
	if !c.failed(factorName) && !(cfg.DelayFactor >= 0 && cfg.DelayFactor <= 100) { // NaN fails both
		c.report(factorName, nil, "%s is out of range; use a number from 0 (off) to 100, e.g. 2 or 0.5", c.shown(factorName))
	}
	if c.notNegative(minName, cfg.MinDelay) && !c.failed(maxName) && cfg.MinDelay > cfg.MaxCrawlDelay {
		c.report(minName, nil, "%s is longer than %s (%s); use at most that", c.shown(minName), maxName, cfg.MaxCrawlDelay)
	}
	_, waitSet := c.given(waitName)
	if !waitSet && cfg.ClientIdleTimeout > 0 && cfg.MaxWait >= cfg.ClientIdleTimeout {
		// Lowering the idle timeout alone must not make the default wrong.
		cfg.MaxWait = cfg.ClientIdleTimeout / 2
		c.derive(waitName, idleName)
	}
	if c.positive(waitName, cfg.MaxWait) && cfg.ClientIdleTimeout > 0 && cfg.MaxWait >= cfg.ClientIdleTimeout {
		c.report(waitName, nil, "%s is not shorter than %s (%s), which would close a connection while its request waits; use less, or raise that",
			c.shown(waitName), idleName, cfg.ClientIdleTimeout)
	}
	if !c.failed(connsName) && (cfg.MaxConnsPerOrigin < 0 || cfg.MaxConnsPerOrigin > 1_000_000) {
		c.report(connsName, nil, "%s is out of range; use a number of requests from 1 to 1000000, or 0 for no bound", c.shown(connsName))
	}
	if !c.failed(schedulesName) && (cfg.MaxSchedulesPerClient < pace.MinSchedulesPerClient || cfg.MaxSchedulesPerClient > pace.DefaultMaxSchedules) {
		c.report(schedulesName, nil, "%s is out of range; use a number of schedules from %d to %d",
			c.shown(schedulesName), pace.MinSchedulesPerClient, pace.DefaultMaxSchedules)
	}
	if c.failed(modeName) || cfg.CrawlDelay != pace.ModeOff {
		return
	}
	// Settings that off would ignore are mistakes, not preferences.
	if _, set := c.given(defaultName); set && cfg.DefaultCrawlDelay > 0 {
		c.report(defaultName, nil, "is set, but %s=off paces nothing; use enforce, wait or audit, or unset it", modeName)
	}
	if _, set := c.given(connsName); set && cfg.MaxConnsPerOrigin > 0 {
		c.report(connsName, nil, "is set, but %s=off paces nothing; use enforce, wait or audit, or unset it", modeName)
	}
	for _, name := range []string{schedulesName, backoffName, baseName, factorName, minName, "ROBOTSGATE_PACE_BY"} {
		if _, set := c.given(name); set {
			c.report(name, nil, "is set, but %s=off paces nothing; use enforce, wait or audit, or unset it", modeName)
		}
	}
}

func (c *checker) checkListen(addr string) {
	const name = "ROBOTSGATE_LISTEN"
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		reason := err.Error()
		if ae, ok := errors.AsType[*net.AddrError](err); ok {
			reason = ae.Err // the rest repeats the address
		}
		c.report(name, err, `%s is not a host:port address (%s); use e.g. "127.0.0.1:8080" or "[::1]:8080"`, c.shown(name), reason)
		return
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		c.report(name, err, "%s has port %q; use a port number from 0 to 65535", c.shown(name), port)
	}
}

// checkCA checks the CA pair and works out CADir's default.
func (c *checker) checkCA(cfg *Config) {
	const certName, keyName, dirName = "ROBOTSGATE_CA_CERT", "ROBOTSGATE_CA_KEY", "ROBOTSGATE_CA_DIR"
	certPath, certSet := c.given(certName)
	keyPath, keySet := c.given(keyName)
	switch {
	case certSet && !keySet:
		c.report(keyName, nil, "not set, but %s is; set both or neither", certName)
	case keySet && !certSet:
		c.report(certName, nil, "not set, but %s is; set both or neither", keyName)
	}
	if certSet {
		c.checkReadableFile(certName, certPath)
	}
	if keySet {
		c.checkReadableFile(keyName, keyPath)
	}

	if dir, ok := c.given(dirName); ok {
		// A missing directory is fine: robotsgate creates it.
		if fi, err := os.Stat(dir); err == nil && !fi.IsDir() {
			c.report(dirName, nil, "%q is not a directory; use a directory path", dir)
		} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
			c.report(dirName, err, "%q cannot be used: %v", dir, pathErrReason(err))
		}
		return
	}
	// The user's, so unset it is the machine's word even when empty.
	c.origins[c.index[dirName]] = origin{SourceMachine, userConfigDir}
	base, err := os.UserConfigDir()
	if err == nil {
		cfg.CADir = filepath.Join(base, "robotsgate")
		return
	}
	// Without a user config directory the default exists only as an error,
	// and only when robotsgate would need it.
	if c.serving && cfg.MITM && !c.failed("ROBOTSGATE_MITM") && !certSet && !keySet {
		c.report(dirName, err, "not set, and there is no default (%v); set it, or set %s and %s, or turn interception off with ROBOTSGATE_MITM=false",
			err, certName, keyName)
	}
}

// checkReadableFile checks that path names a file this process can open.
func (c *checker) checkReadableFile(name, path string) {
	f, err := os.Open(path)
	if err != nil {
		c.report(name, err, "%q cannot be read: %v", path, pathErrReason(err))
		return
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil {
		c.report(name, err, "%q cannot be read: %v", path, pathErrReason(err))
	} else if fi.IsDir() {
		c.report(name, nil, "%q is a directory; use the path of a PEM file", path)
	}
}

func (c *checker) checkPEMBundle(name, path string) {
	data, err := os.ReadFile(path)
	if err != nil {
		c.report(name, err, "%q cannot be read: %v", path, pathErrReason(err))
		return
	}
	if !x509.NewCertPool().AppendCertsFromPEM(data) {
		c.report(name, nil, `%q holds no PEM certificate; use a file of "-----BEGIN CERTIFICATE-----" blocks`, path)
	}
}

func (c *checker) checkAuditLog(path string) {
	const name = "ROBOTSGATE_AUDIT_LOG"
	if path == "-" {
		return
	}
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		c.report(name, nil, `%q is a directory; use a file path, or "-" for standard output`, path)
		return
	}
	dir := filepath.Dir(path)
	fi, err := os.Stat(dir)
	switch {
	case err != nil:
		c.report(name, err, `%q cannot be used: directory %q: %v; create it, or use "-" for standard output`, path, dir, pathErrReason(err))
	case !fi.IsDir():
		c.report(name, nil, `%q cannot be used: %q is not a directory; use a file path, or "-" for standard output`, path, dir)
	}
}

// pathErrReason drops the path from an *fs.PathError, which the messages
// already quote.
func pathErrReason(err error) error {
	if pe, ok := errors.AsType[*fs.PathError](err); ok {
		return pe.Err
	}
	return err
}

func (c *checker) checkFetch(cfg *Config) {
	const name, connectName = "ROBOTSGATE_FETCH_TIMEOUT", "ROBOTSGATE_FETCH_CONNECT_TIMEOUT"
	if c.positive(name, cfg.FetchTimeout) {
		c.atMost(name, cfg.FetchTimeout, 5*time.Minute, "5m", "")
	}
	timeoutOK := !c.failed(name)
	if _, set := c.given(connectName); !set && timeoutOK && cfg.FetchConnectTimeout > cfg.FetchTimeout {
		cfg.FetchConnectTimeout = cfg.FetchTimeout
		c.derive(connectName, name)
	}
	if c.positive(connectName, cfg.FetchConnectTimeout) && timeoutOK {
		c.atMost(connectName, cfg.FetchConnectTimeout, cfg.FetchTimeout, name+" ("+c.shown(name)+")", "")
	}
	c.checkFetchSlots(cfg)
}

// maxFetches bounds ROBOTSGATE_MAX_FETCHES: each fetch under way may hold
// a connection and a parse buffer of up to ROBOTSGATE_PARSE_LIMIT.
const maxFetches = 65536

// checkFetchSlots checks the fetch slots and their share per client, and
// works out the share's default.
func (c *checker) checkFetchSlots(cfg *Config) {
	const name, perName = "ROBOTSGATE_MAX_FETCHES", "ROBOTSGATE_MAX_FETCHES_PER_CLIENT"
	if !c.failed(name) && (cfg.MaxFetches < 1 || cfg.MaxFetches > maxFetches) {
		c.report(name, nil, "%s is out of range; use a number of fetches from 1 to %d", c.shown(name), maxFetches)
	}
	c.checkShare(name, perName, "fetches", cfg.MaxFetches, &cfg.MaxFetchesPerClient, fetch.DefaultMaxPerClient)
}

// checkShare checks one client's share (per, set by perName) of a bound
// (total, set by name), and works out its default from the bound when
// perName is unset.
func (c *checker) checkShare(name, perName, unit string, total int, per *int, defaultShare func(total int) int) {
	totalOK := !c.failed(name)
	if _, set := c.given(perName); !set && totalOK {
		*per = defaultShare(total)
		c.derive(perName, name)
	}
	switch {
	case c.failed(perName):
	case *per < 1:
		c.report(perName, nil, "%s is out of range; use a number of %s from 1 to %s", c.shown(perName), unit, name)
	case totalOK && *per > total:
		c.report(perName, nil, "%s is above %s (%d); use a number of %s from 1 to %d", c.shown(perName), name, total, unit, total)
	}
}

func (c *checker) checkCacheAges(cfg *Config) {
	const maxName, minName = "ROBOTSGATE_CACHE_MAX_AGE", "ROBOTSGATE_CACHE_MIN_AGE"
	if c.positive(maxName, cfg.CacheMaxAge) {
		c.atMost(maxName, cfg.CacheMaxAge, 24*time.Hour, "24h",
			"RFC 9309 section 2.4 says a cached robots.txt SHOULD NOT be used for more than 24 hours")
	}
	maxOK := !c.failed(maxName)
	if _, set := c.given(minName); !set && maxOK && cfg.CacheMinAge > cfg.CacheMaxAge {
		cfg.CacheMinAge = cfg.CacheMaxAge
		c.derive(minName, maxName)
	}
	if c.notNegative(minName, cfg.CacheMinAge) && maxOK {
		c.atMost(minName, cfg.CacheMinAge, cfg.CacheMaxAge, maxName+" ("+c.shown(maxName)+")", "")
	}
}

// positive reports d unless it is > 0, and says whether it passed. A value
// that failed to parse is not checked again.
func (c *checker) positive(name string, d time.Duration) bool {
	if c.failed(name) {
		return false
	}
	if d <= 0 {
		c.report(name, nil, `%s is not positive; use a duration greater than 0, e.g. "30s"`, c.shown(name))
		return false
	}
	return true
}

// notNegative reports d unless it is ≥ 0, and says whether it passed.
func (c *checker) notNegative(name string, d time.Duration) bool {
	if c.failed(name) {
		return false
	}
	if d < 0 {
		c.report(name, nil, `%s is negative; use 0 or a positive duration, e.g. "10s"`, c.shown(name))
		return false
	}
	return true
}

// atMost reports d if it exceeds limit, described as limitText, giving why
// when there is a reason beyond taste.
func (c *checker) atMost(name string, d, limit time.Duration, limitText, why string) {
	if d <= limit {
		return
	}
	if why != "" {
		why = ": " + why
	}
	c.report(name, nil, "%s is longer than %s%s; use a duration of at most %s", c.shown(name), limitText, why, limitText)
}

func (c *checker) checkUserAgent(ua string) {
	const name = "ROBOTSGATE_FETCH_USER_AGENT"
	for i := range len(ua) {
		if b := ua[i]; b < 0x20 || b > 0x7e {
			c.report(name, nil, "%q has a byte that is not printable ASCII at offset %d; use printable ASCII only (no CR, LF or other control characters)", ua, i)
			return
		}
	}
}

func (c *checker) checkSizes(cfg *Config) {
	const limitName, cacheName = "ROBOTSGATE_PARSE_LIMIT", "ROBOTSGATE_CACHE_MAX_BYTES"
	const minLimit, maxLimit, minCache = 500 * KiB, 64 * MiB, ByteSize(cache.MinMaxBytes)
	if !c.failed(limitName) {
		switch {
		case cfg.ParseLimit < minLimit:
			c.report(limitName, nil, "%s (%s) is below %s: RFC 9309 section 2.5 says the parsing limit MUST be at least 500 KiB; use a size from %s to %s",
				c.shown(limitName), cfg.ParseLimit, minLimit, minLimit, maxLimit)
		case cfg.ParseLimit > maxLimit:
			c.report(limitName, nil, "%s (%s) is above %s; use a size from %s to %s",
				c.shown(limitName), cfg.ParseLimit, maxLimit, minLimit, maxLimit)
		}
	}
	if !c.failed(cacheName) && cfg.CacheMaxBytes < minCache {
		c.report(cacheName, nil, "%s (%s) is below %s; use at least %s", c.shown(cacheName), cfg.CacheMaxBytes, minCache, minCache)
	}
}

func (c *checker) checkClientLimits(cfg *Config) {
	const headerName, urlName, connsName = "ROBOTSGATE_MAX_HEADER_BYTES", "ROBOTSGATE_MAX_URL_BYTES", "ROBOTSGATE_MAX_CONNECTIONS"
	const minHeader, maxHeader, minURL = 4 * KiB, 1 * MiB, 1 * KiB
	if !c.failed(headerName) && (cfg.MaxHeaderBytes < minHeader || cfg.MaxHeaderBytes > maxHeader) {
		c.report(headerName, nil, "%s (%s) is out of range; use a size from %s to %s", c.shown(headerName), cfg.MaxHeaderBytes, minHeader, maxHeader)
	}
	if !c.failed(urlName) {
		switch {
		case cfg.MaxURLBytes < minURL:
			c.report(urlName, nil, "%s (%s) is below %s; use at least %s", c.shown(urlName), cfg.MaxURLBytes, minURL, minURL)
		case !c.failed(headerName) && cfg.MaxURLBytes > cfg.MaxHeaderBytes:
			c.report(urlName, nil, "%s (%s) is above ROBOTSGATE_MAX_HEADER_BYTES (%s), which bounds the request line too; use at most that",
				c.shown(urlName), cfg.MaxURLBytes, cfg.MaxHeaderBytes)
		}
	}
	if !c.failed(connsName) && (cfg.MaxConnections < 1 || cfg.MaxConnections > 1_000_000) {
		c.report(connsName, nil, "%s is out of range; use a number of connections from 1 to 1000000", c.shown(connsName))
	}
	c.checkConnectionShare(cfg)
}

// checkConnectionShare checks one client's share of the client
// connections, and works out its default.
func (c *checker) checkConnectionShare(cfg *Config) {
	const name, perName = "ROBOTSGATE_MAX_CONNECTIONS", "ROBOTSGATE_MAX_CONNECTIONS_PER_CLIENT"
	c.checkShare(name, perName, "connections", cfg.MaxConnections, &cfg.MaxConnectionsPerClient, proxy.DefaultMaxConnectionsPerClient)
}

// checkUnknown reports ROBOTSGATE_* variables that set nothing, which are
// almost always typos that would otherwise fall back to a default silently.
func (c *checker) checkUnknown() {
	known := make([]string, len(c.fields))
	for i, f := range c.fields {
		known[i] = f.Name
	}
	var unknown []string
	for k := range c.environ {
		// Case-insensitive, so robotsgate_listen is caught too.
		if _, ok := c.index[k]; !ok && strings.HasPrefix(strings.ToUpper(k), envPrefix) {
			unknown = append(unknown, k)
		}
	}
	slices.Sort(unknown)
	for _, k := range unknown {
		problem := "unknown variable, not a robotsgate setting"
		if s := suggest(k, known); len(s) > 0 {
			problem = "unknown variable; did you mean " + orList(s) + "?"
			if strings.ToUpper(k) == s[0] {
				problem += " (names are upper-case)"
			}
		}
		c.other = append(c.other, &VariableError{Name: k, Problem: problem})
	}
}

// suggest returns the known names closest to name: those within a small
// edit distance, or failing that the few whose words contain name's words or
// are contained in them (ROBOTSGATE_CACHE_MAX → CACHE_MAX_AGE, CACHE_MAX_BYTES).
func suggest(name string, known []string) []string {
	name = strings.ToUpper(name)
	best, bestDist := []string(nil), -1
	for _, k := range known {
		d := editDistance(name, k)
		if d > max(2, len(strings.TrimPrefix(k, envPrefix))/4) {
			continue
		}
		switch {
		case bestDist < 0 || d < bestDist:
			best, bestDist = []string{k}, d
		case d == bestDist:
			best = append(best, k)
		}
	}
	if len(best) > 0 {
		return best
	}
	words := nameWords(name)
	if len(words) == 0 {
		return nil
	}
	var related []string
	for _, k := range known {
		kw := nameWords(k)
		if subset(words, kw) || subset(kw, words) {
			related = append(related, k)
		}
	}
	if len(related) > 3 { // too vague to help
		return nil
	}
	return related
}

// nameWords splits a variable name after the prefix into its words.
func nameWords(name string) []string {
	return slices.DeleteFunc(strings.Split(strings.TrimPrefix(name, envPrefix), "_"),
		func(w string) bool { return w == "" })
}

func subset(a, b []string) bool {
	for _, w := range a {
		if !slices.Contains(b, w) {
			return false
		}
	}
	return true
}

// editDistance is the Levenshtein distance between two ASCII-ish strings,
// counted in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// orList joins names as "A", "A or B", "A, B or C".
func orList(names []string) string {
	if len(names) == 1 {
		return names[0]
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}
