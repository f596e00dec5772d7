// Package config holds every robotsgate setting.
//
// Each setting is an environment variable named ROBOTSGATE_*, read once at
// start-up into one [Config] by [Load] (or [LoadFrom], for tests and for a
// caller that already has the environment as a map). The struct's tags are
// the single source of truth: `env` names the variable, `envDefault` gives its
// default (`defaultDoc` describes it where it is computed: "derived: …"
// where other settings change it), `desc` its one-line description, which
// [Variables] exposes so the README's table can be checked against the
// code, and `secret` marks a value [Effective] masks.
//
// Loading validates everything and reports every problem at once, each naming
// the variable, the bad value and what is accepted. Unknown ROBOTSGATE_*
// variables are errors too, with a suggestion when one is close, because a
// misspelt setting otherwise falls back to its default without a word.
package config

import (
	"log/slog"
	"net/url"
	"os"
	"robotsgate/proxy"
	"robotsgate/proxy/identity"
	"robotsgate/proxy/pace"
	"time"

	"github.com/caarlos0/env/v11"
)

// envPrefix starts the name of every robotsgate variable.
const envPrefix = "ROBOTSGATE_"

// Config is robotsgate's complete configuration. Durations and sizes carry
// their unit in the type; the zero Config is not valid, use [Load].
type Config struct {
	// Listen is the proxy's listening address, host:port. The default is
	// loopback so robotsgate is never an open proxy by accident.
	Listen string `env:"LISTEN" envDefault:"127.0.0.1:8080" desc:"Address the proxy listens on, host:port; the loopback default keeps it from being an open proxy"`

	// Mode says whether denied requests are refused or only logged.
	Mode proxy.Mode `env:"MODE" envDefault:"enforce" desc:"enforce answers 403 to requests robots.txt disallows; audit logs the verdict and forwards anyway"`

	// CrawlDelay says what happens to a request before its Crawl-delay
	// (or Request-rate) has passed. Unset, it is audit when Mode is audit.
	CrawlDelay pace.Mode `env:"CRAWL_DELAY" envDefault:"enforce" defaultDoc:"derived: audit when ROBOTSGATE_MODE=audit, else enforce" desc:"A request before its Crawl-delay or Request-rate has passed: enforce answers 429 with Retry-After, wait holds it until its slot, audit forwards it and records it, off paces nothing"`

	// DefaultCrawlDelay applies where robots.txt asks no pace of a token.
	DefaultCrawlDelay time.Duration `env:"DEFAULT_CRAWL_DELAY" envDefault:"0s" desc:"Crawl delay for origins whose robots.txt asks none of the crawler; 0 for none"`

	// MaxCrawlDelay caps what robots.txt asks.
	MaxCrawlDelay time.Duration `env:"MAX_CRAWL_DELAY" envDefault:"60s" desc:"Cap on the delay robots.txt asks (Crawl-delay: 86400 is paced at this), at most 24h"`

	// MaxWait bounds how long ROBOTSGATE_CRAWL_DELAY=wait holds a
	// request. When the variable is unset and ClientIdleTimeout is not
	// longer than the default, it is half ClientIdleTimeout.
	MaxWait time.Duration `env:"MAX_WAIT" envDefault:"60s" defaultDoc:"derived: 60s, or half ROBOTSGATE_CLIENT_IDLE_TIMEOUT when that is 60s or less" desc:"Longest ROBOTSGATE_CRAWL_DELAY=wait holds a request for its slot or a connection (429 beyond); shorter than ROBOTSGATE_CLIENT_IDLE_TIMEOUT"`

	// MaxConnsPerOrigin bounds the requests in flight to one origin.
	MaxConnsPerOrigin int `env:"MAX_CONNS_PER_ORIGIN" envDefault:"0" desc:"Most requests in flight to one origin, all crawlers together; past it as ROBOTSGATE_CRAWL_DELAY says (429, wait, recorded); 0 for no bound"`

	// MaxSchedulesPerClient bounds the Crawl-delay schedules charged to
	// one client, so that a client naming itself anew on every request
	// cannot fill the table for the others.
	MaxSchedulesPerClient int `env:"MAX_SCHEDULES_PER_CLIENT" envDefault:"65536" desc:"Most Crawl-delay schedules one client (its credential, else its IP address) holds at once, from 64 to 1048576 (the whole table, for a proxy that serves one bot); past it that client's new crawler names get 429 full, other clients' do not"`

	// MaxBackoff caps how long an origin's Retry-After, or a backoff
	// pause after a run of its failures, holds every crawler's requests.
	MaxBackoff time.Duration `env:"MAX_BACKOFF" envDefault:"1h" desc:"Cap on how long an origin's 429 or 503 with Retry-After, or a run of its failures (429, 5xx but 501, no answer), holds every crawler's requests to it, at most 24h; 0 leaves origins' answers unheeded"`

	// BackoffBase is the first pause of a run of an origin's failures.
	BackoffBase time.Duration `env:"BACKOFF_BASE" envDefault:"1s" desc:"First pause after an origin's failure without Retry-After, doubled by each further failure in a row up to ROBOTSGATE_MAX_BACKOFF"`

	// DelayFactor paces each crawler by the origin's last response time.
	DelayFactor float64 `env:"DELAY_FACTOR" envDefault:"0" desc:"When above 0, a crawler's next request to an origin starts at least this many times its last response time after its last one (Heritrix's delayFactor), from ROBOTSGATE_MIN_DELAY to ROBOTSGATE_MAX_CRAWL_DELAY; 0 for off, at most 100"`

	// MinDelay is a floor under every delay between a crawler's requests
	// to an origin.
	MinDelay time.Duration `env:"MIN_DELAY" envDefault:"0s" desc:"Floor under every delay between the starts of a crawler's requests to an origin, whatever robots.txt asks (a shorter Crawl-delay, none at all) and under ROBOTSGATE_DELAY_FACTOR's; 0 for none"`

	// PaceBy says which hosts share one pace.
	PaceBy pace.By `env:"PACE_BY" envDefault:"host" desc:"Which hosts share a pace, a connection bound and a hold: host (each origin), domain (a registrable domain, by the public suffix list) or address (the address a host resolves to: virtual hosts on one server share it)"`

	// Token pins the product token every request is judged as, unless it
	// authenticates with a credential that names its own.
	Token string `env:"TOKEN" desc:"Product token every request is judged as, whatever its User-Agent (a request with a credential: the credential's); empty means the User-Agent's"`

	// CredentialsFile is an htpasswd file of bcrypt hashes, name:hash or
	// name:hash:token; re-read on SIGHUP.
	CredentialsFile string `env:"CREDENTIALS_FILE" desc:"htpasswd file of proxy credentials, bcrypt only (htpasswd -B), lines name:hash or name:hash:token; re-read on SIGHUP"`

	// PolicyFile is the operator's policy: per crawler scope, purposes,
	// rules and pace bounds, per site rules and exceptions; reloaded on
	// SIGHUP and when it changes.
	PolicyFile string `env:"POLICY" desc:"YAML file of the operator's policy: per crawler the sites it may visit, its purposes, extra rules, min_delay and max_concurrency, and per credential user its signing_keys; per site extra rules and exceptions with a reason (proxy/policy/README.md); re-read on SIGHUP and when it changes; unset, robots.txt alone decides"`

	// Usage says what sites' AI usage preferences (Content-Usage,
	// Content-Signal, TDMRep, X-Robots-Tag: noai) do to a crawler whose
	// declared purpose they refuse.
	Usage proxy.UsageMode `env:"USAGE" envDefault:"enforce" desc:"What a site's AI usage preferences (robots.txt Content-Usage and Content-Signal lines, tdmrep.json, and the response headers ROBOTSGATE_USAGE_RESPONSES speaks of) do to a crawler whose declared purpose they refuse: enforce (403 before the fetch, or the body withheld, while ROBOTSGATE_MODE is enforce), audit (forwarded, delivered and recorded) or off (none read); crawlers without purposes are only recorded (robots/usage/README.md)"`

	// UsageResponses says what becomes of a response whose headers refuse
	// the crawler's purpose.
	UsageResponses proxy.UsageResponses `env:"USAGE_RESPONSES" envDefault:"record" desc:"A response whose Content-Usage, tdm-reservation or X-Robots-Tag: noai header refuses the crawler's purpose: record (delivered and recorded) or withhold (403 instead: its body never reaches the crawler; while ROBOTSGATE_USAGE and ROBOTSGATE_MODE are enforce, and refused at start with ROBOTSGATE_USAGE=off)"`

	// Purposes are the pinned token's purposes, for crawlers the policy
	// declares none for.
	Purposes PurposeList `env:"PURPOSES" desc:"Comma-separated purposes of the crawler ROBOTSGATE_TOKEN names (search, ai-train, ai-input, or words of your own), judged against sites' usage preferences; needs ROBOTSGATE_TOKEN (refused at start without it); per crawler, declare them in ROBOTSGATE_POLICY instead"`

	// TDMRep fetches each origin's /.well-known/tdmrep.json beside its
	// robots.txt.
	TDMRep bool `env:"TDMREP" envDefault:"false" desc:"Also fetch each origin's /.well-known/tdmrep.json (W3C TDMRep) with its robots.txt, in the same fetch slot and within the same bounds, and judge purposes by it before the fetch; needs ROBOTSGATE_USAGE enforce or audit"`

	// SigningKey are the key files the crawler Token pins signs its
	// requests with (Web Bot Auth).
	SigningKey FileList `env:"SIGNING_KEY" desc:"Comma-separated Ed25519 key files (PEM or JWK, mode 0600; robotsgate keygen FILE makes one) that sign every request of the crawler ROBOTSGATE_TOKEN names (Web Bot Auth), the newest valid key signing; needs ROBOTSGATE_TOKEN and ROBOTSGATE_SIGNATURE_AGENT; per credential user, give signing_keys in ROBOTSGATE_POLICY (proxy/signing/README.md)"`

	// SignatureAgent is where sites fetch the signers' key directory.
	SignatureAgent string `env:"SIGNATURE_AGENT" desc:"URL of the key directory signed requests name in Signature-Agent (https://your-crawler.example, served by robotsgate at /.well-known/http-message-signatures-directory for that host); the default for the policy's signing_keys too"`

	// SignatureTTL is how long a request's signature stays valid.
	SignatureTTL time.Duration `env:"SIGNATURE_TTL" envDefault:"1m" desc:"How long a request's signature is valid (its expires minus its created, which is backdated 2s for clocks a little behind), from 10s to 1h: short, so that a signature seen cannot be replayed for long"`

	// WatchInterval is how often the policy and credentials files are
	// looked at (one stat each) for a change to reload; 0 reloads them on
	// SIGHUP only.
	WatchInterval time.Duration `env:"WATCH_INTERVAL" envDefault:"5s" desc:"How often the policy and credentials files are checked for a change (one stat each) and reloaded; 0 reloads them on SIGHUP only"`

	// Auth says whether clients must authenticate. Unset, it is required
	// when CredentialsFile is set and off otherwise.
	Auth identity.Mode `env:"AUTH" envDefault:"off" defaultDoc:"derived: required when ROBOTSGATE_CREDENTIALS_FILE is set, else off" desc:"off, optional (clients without credentials are judged by their User-Agent) or required (407 without a valid credential)"`

	// MITM turns on interception of CONNECT tunnels with robotsgate's CA.
	MITM bool `env:"MITM" envDefault:"true" desc:"Intercept HTTPS (CONNECT) with robotsgate's CA so every request's path is checked"`

	// CACertFile is a PEM CA certificate to sign intercepted connections
	// with; set together with CAKeyFile, or neither.
	CACertFile string `env:"CA_CERT" desc:"PEM CA certificate that signs intercepted connections; set together with ROBOTSGATE_CA_KEY"`

	// CAKeyFile is the PEM private key of CACertFile.
	CAKeyFile string `env:"CA_KEY" desc:"PEM private key of ROBOTSGATE_CA_CERT (RSA or ECDSA; PKCS#1, PKCS#8 or SEC1)"`

	// CADir is where robotsgate creates ca.pem and ca-key.pem on first use
	// and reuses them afterwards. Its default, os.UserConfigDir()/robotsgate,
	// depends on the process's user; when that cannot be worked out (no
	// $HOME), CADir is left empty, which is an error only if the directory
	// is needed: MITM on and no CACertFile/CAKeyFile.
	CADir string `env:"CA_DIR" defaultDoc:"<user config dir>/robotsgate" desc:"Directory where robotsgate creates and reuses ca.pem and ca-key.pem when no CA is given"`

	// UpstreamCAFile is a PEM bundle added to the system roots to verify
	// origins; Load checks it holds at least one certificate.
	UpstreamCAFile string `env:"UPSTREAM_CA_FILE" desc:"PEM bundle of extra CA certificates, added to the system roots, for verifying origins"`

	// LogFormat chooses the operational log's encoding.
	LogFormat LogFormat `env:"LOG_FORMAT" envDefault:"auto" desc:"auto (coloured text on a terminal, JSON otherwise), text or json; logs go to standard error"`

	// LogLevel is the least severe operational log record written.
	LogLevel slog.Level `env:"LOG_LEVEL" envDefault:"info" desc:"Least severe log record written: debug, info, warn or error"`

	// AuditLog is "-" for standard output or a file path, appended to.
	AuditLog string `env:"AUDIT_LOG" envDefault:"-" desc:"Where the audit record of every decision goes: - for standard output, or a file path appended to, reopened on SIGHUP"`

	// FetchTimeout bounds one robots.txt fetch from start to end.
	FetchTimeout time.Duration `env:"FETCH_TIMEOUT" envDefault:"5s" desc:"Overall time limit of one robots.txt fetch, at most 5m; a fetch may first wait as long for a free slot (ROBOTSGATE_MAX_FETCHES)"`

	// FetchConnectTimeout bounds connecting to an origin for a robots.txt
	// fetch. When the variable is unset and FetchTimeout is shorter than the
	// default, it is FetchTimeout, so lowering one setting never forces
	// setting another.
	FetchConnectTimeout time.Duration `env:"FETCH_CONNECT_TIMEOUT" envDefault:"3s" defaultDoc:"derived: 3s, or ROBOTSGATE_FETCH_TIMEOUT when that is shorter" desc:"Time limit for connecting when fetching a robots.txt; at most ROBOTSGATE_FETCH_TIMEOUT"`

	// MaxFetches bounds the robots.txt fetches under way at once.
	MaxFetches int `env:"MAX_FETCHES" envDefault:"256" desc:"Most robots.txt fetches under way at once, all clients together, from 1 to 65536; a fetch waits for a free slot at most ROBOTSGATE_FETCH_TIMEOUT, then its request gets 503 unless a good copy is cached"`

	// MaxFetchesPerClient bounds the robots.txt fetches one client (its
	// credential, else its IP address) has under way at once. When the
	// variable is unset it is a quarter of MaxFetches (at least 1).
	MaxFetchesPerClient int `env:"MAX_FETCHES_PER_CLIENT" envDefault:"64" defaultDoc:"derived: a quarter of ROBOTSGATE_MAX_FETCHES (64)" desc:"Most robots.txt fetches under way at once for one client (its credential, else its IP address), from 1 to ROBOTSGATE_MAX_FETCHES. A slot that frees goes to the waiting client that holds the fewest"`

	// FetchUserAgent is the User-Agent of robots.txt fetches. Empty means
	// the built-in robotsgate/<version> (+URL), which FetchOptions fills in
	// with the version it is given.
	FetchUserAgent string `env:"FETCH_USER_AGENT" desc:"User-Agent sent when fetching robots.txt; empty means robotsgate/<version> (+project URL)"`

	// RobotsAuthStatus is what a 401 or 403 answer to a robots.txt fetch means.
	RobotsAuthStatus RobotsAuthStatus `env:"ROBOTS_401_403" envDefault:"allow" desc:"Meaning of a 401/403 robots.txt: allow (RFC 9309, no restrictions) or disallow (1996 draft, complete disallow)"`

	// ParseLimit is how much of a robots.txt is parsed; RFC 9309 §2.5 sets
	// a floor of 500 KiB.
	ParseLimit ByteSize `env:"PARSE_LIMIT" envDefault:"500KiB" desc:"How much of a robots.txt is parsed, from 500KiB (RFC 9309 minimum) to 64MiB; a file parsed keeps at most 8 times this in memory, plus 1.3MiB"`

	// CacheMaxBytes bounds the memory of the robots.txt cache.
	CacheMaxBytes ByteSize `env:"CACHE_MAX_BYTES" envDefault:"64MiB" desc:"Memory bound of the robots.txt cache, each parsed file charged the memory it keeps, at least 1MiB; below twice what a file of ROBOTSGATE_PARSE_LIMIT may keep (12MiB for 500KiB) robotsgate warns at start, as the costliest files may then be fetched for every request"`

	// CacheMaxAge is the longest a fetched robots.txt is used before it is
	// fetched again; RFC 9309 §2.4 caps it at 24 h.
	CacheMaxAge time.Duration `env:"CACHE_MAX_AGE" envDefault:"24h" desc:"Longest a fetched robots.txt is used before it is fetched again, at most 24h (RFC 9309 §2.4)"`

	// CacheMinAge is the shortest a fetched robots.txt is cached, whatever
	// its Cache-Control says. When the variable is unset and CacheMaxAge is
	// shorter than the default, it is CacheMaxAge.
	CacheMinAge time.Duration `env:"CACHE_MIN_AGE" envDefault:"1m" defaultDoc:"derived: 1m, or ROBOTSGATE_CACHE_MAX_AGE when that is shorter" desc:"Shortest a fetched robots.txt is cached whatever Cache-Control says; at most ROBOTSGATE_CACHE_MAX_AGE"`

	// UnreachableRetry is the wait before the first retry of an unreachable
	// robots.txt; later retries back off from it.
	UnreachableRetry time.Duration `env:"UNREACHABLE_RETRY" envDefault:"1m" desc:"Wait before the first retry of an unreachable robots.txt, at most 15m; later retries double it, up to 15m"`

	// MaxStale is how long a good copy is still obeyed while its origin's
	// robots.txt is unreachable.
	MaxStale time.Duration `env:"MAX_STALE" envDefault:"720h" desc:"How long a good robots.txt copy is still obeyed while the origin is unreachable"`

	// UpstreamDialTimeout bounds connecting to an origin.
	UpstreamDialTimeout time.Duration `env:"UPSTREAM_DIAL_TIMEOUT" envDefault:"10s" desc:"Time limit for connecting to an origin"`

	// UpstreamTLSTimeout bounds the TLS handshake with an origin.
	UpstreamTLSTimeout time.Duration `env:"UPSTREAM_TLS_TIMEOUT" envDefault:"10s" desc:"Time limit for the TLS handshake with an origin"`

	// UpstreamResponseHeaderTimeout bounds the wait for an origin's response
	// headers once the request is sent.
	UpstreamResponseHeaderTimeout time.Duration `env:"UPSTREAM_HEADER_TIMEOUT" envDefault:"30s" desc:"Time limit for an origin's response headers once the request is sent"`

	// UpstreamIdleTimeout is how long an idle origin connection is kept.
	UpstreamIdleTimeout time.Duration `env:"UPSTREAM_IDLE_TIMEOUT" envDefault:"90s" desc:"How long an idle connection to an origin is kept for reuse"`

	// UpstreamIdleConns bounds the idle origin connections kept for reuse,
	// all origins together; one origin may hold them all.
	UpstreamIdleConns int `env:"UPSTREAM_IDLE_CONNS" envDefault:"1024" desc:"Most idle connections to origins kept for reuse, all origins together; one origin may use them all (at most ROBOTSGATE_MAX_CONNS_PER_ORIGIN when that is set), so that as many requests to it at once find a connection open"`

	// UpstreamProxy is the HTTP proxy every connection to an origin goes
	// through, robots.txt fetches included; nil connects directly. Its
	// user information, percent-decoded, is sent as Basic credentials.
	// Print it with Redacted: it may hold a password.
	UpstreamProxy *url.URL `env:"UPSTREAM_PROXY" secret:"true" desc:"HTTP proxy that forwarded requests, CONNECT tunnels and robots.txt fetches go through, http://host:port or http://user:password@host:port (percent-encoded); unset connects to origins directly"`

	// ClientIdleTimeout is how long an idle keep-alive client connection is
	// kept, also inside intercepted tunnels.
	ClientIdleTimeout time.Duration `env:"CLIENT_IDLE_TIMEOUT" envDefault:"2m" desc:"How long a client connection may stay silent, keep-alive and tunnels included, before it is closed"`

	// ClientHeaderTimeout bounds reading a request's headers, inside
	// tunnels too, and the wait for the first byte through a new tunnel.
	ClientHeaderTimeout time.Duration `env:"CLIENT_HEADER_TIMEOUT" envDefault:"10s" desc:"Time limit for a client to send a request's headers, inside tunnels too, and the first byte through a new tunnel"`

	// ClientTLSTimeout bounds the TLS handshake of an intercepted tunnel.
	ClientTLSTimeout time.Duration `env:"CLIENT_TLS_TIMEOUT" envDefault:"10s" desc:"Time limit for the TLS handshake with a client whose tunnel is intercepted"`

	// MaxHeaderBytes bounds a request's header section, request line
	// included, plainly and inside tunnels.
	MaxHeaderBytes ByteSize `env:"MAX_HEADER_BYTES" envDefault:"64KiB" desc:"Largest request header section accepted, request line included, inside tunnels too (431 beyond), from 4KiB to 1MiB"`

	// MaxURLBytes bounds the request target.
	MaxURLBytes ByteSize `env:"MAX_URL_BYTES" envDefault:"8KiB" desc:"Longest request target accepted (414 beyond), from 1KiB to ROBOTSGATE_MAX_HEADER_BYTES"`

	// MaxConnections bounds the client connections open at once.
	MaxConnections int `env:"MAX_CONNECTIONS" envDefault:"4096" desc:"Most client connections open at once, tunnels included; beyond it new clients get 503 at once and open ones are unharmed"`

	// MaxConnectionsPerClient bounds the client connections one client
	// (its IP address, an IPv6 one by its /64) has open at once. When the
	// variable is unset it is a quarter of MaxConnections (at least 1).
	MaxConnectionsPerClient int `env:"MAX_CONNECTIONS_PER_CLIENT" envDefault:"1024" defaultDoc:"derived: a quarter of ROBOTSGATE_MAX_CONNECTIONS (1024)" desc:"Most client connections open at once from one client (its IP address, an IPv6 one by its /64), tunnels included, from 1 to ROBOTSGATE_MAX_CONNECTIONS. Beyond it the client's new connections get 503 at once and its open ones are unharmed"`

	// DenyDestinations are address ranges the proxy never connects to.
	DenyDestinations DestinationList `env:"DENY_DESTINATIONS" envDefault:"169.254.0.0/16,fe80::/10,0.0.0.0/8,::/128" desc:"Comma-separated CIDRs or addresses robotsgate never connects to, checked on the resolved address of every connection; none to deny nothing"`

	// AuditOnError says what happens while the audit log cannot be written.
	AuditOnError proxy.AuditOnError `env:"AUDIT_ON_ERROR" envDefault:"refuse" desc:"While the audit log cannot be written: refuse answers 503 to every request until it can; continue serves on and logs loudly"`

	// ShutdownGrace is how long in-flight requests may run on after SIGTERM.
	ShutdownGrace time.Duration `env:"SHUTDOWN_GRACE" envDefault:"10s" desc:"How long in-flight requests may finish after SIGTERM"`

	// PIDFile receives the process ID once the proxy listens, so that a
	// script signals this process and no other; removed at a clean stop.
	PIDFile string `env:"PID_FILE" desc:"File robotsgate writes its process ID to once it listens, and removes at a clean stop, for the kill -HUP of a logrotate script; unset writes none"`

	// RedisURL names the Redis a fleet of instances shares robots.txt and
	// crawl schedules through; empty, each instance works alone.
	RedisURL string `env:"REDIS_URL" secret:"true" desc:"redis:// or rediss:// URL, password and database included, of the Redis a fleet of robotsgate instances shares robots.txt and crawl schedules through; unset, each instance works alone"`

	// RedisTimeout bounds each Redis operation: a slow Redis costs a
	// request at most this before the instance works alone.
	RedisTimeout time.Duration `env:"REDIS_TIMEOUT" envDefault:"200ms" desc:"Time limit of each Redis operation, at most 5s; past it, or on any Redis error, the instance works alone and tries Redis again every second"`

	// RedisPrefix starts every key robotsgate writes in Redis.
	RedisPrefix string `env:"REDIS_PREFIX" envDefault:"robotsgate:" desc:"Prefix of every Redis key robotsgate writes, so that several fleets can share one Redis"`

	// RedisCAFile is a PEM bundle added to the system roots to verify a
	// rediss:// server.
	RedisCAFile string `env:"REDIS_CA_FILE" desc:"PEM bundle of extra CA certificates, added to the system roots, for verifying a rediss:// server"`
}

// Load reads the configuration of the proxy from the process environment.
func Load() (*Config, error) {
	return LoadFrom(env.ToMap(os.Environ()))
}

// LoadForCommand reads the configuration for a command that does not
// serve, such as check: what only serving needs (a CA directory for
// interception) is not required of it.
func LoadForCommand() (*Config, error) {
	return load(env.ToMap(os.Environ()), false)
}

// LoadFrom reads the configuration from environ, a map of variable names to
// values, and validates it. Variables set to the empty string count as
// unset. The one value not taken from environ is the default of
// ROBOTSGATE_CA_DIR, which comes from os.UserConfigDir.
//
// The error, if any, joins one error per problem (see [VariableError]).
func LoadFrom(environ map[string]string) (*Config, error) {
	return load(environ, true)
}

func load(environ map[string]string, serving bool) (*Config, error) {
	cfg, _, err := loadChecked(environ, serving)
	return cfg, err
}

// loadChecked is load that also returns its checker, which knows where
// each value came from.
func loadChecked(environ map[string]string, serving bool) (*Config, *checker, error) {
	if environ == nil {
		// env.Options treats a nil Environment as "use os.Environ()".
		environ = map[string]string{}
	}
	var cfg Config
	c := newChecker(environ, serving)
	parseErr := env.ParseWithOptions(&cfg, env.Options{Prefix: envPrefix, Environment: environ})
	c.addParseErrors(parseErr)
	c.validate(&cfg)
	c.checkUnknown()
	if err := c.err(); err != nil {
		return nil, nil, err
	}
	return &cfg, c, nil
}
