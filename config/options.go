package config

import (
	"crypto/x509"
	"fmt"
	"log/slog"
	"os"
	"time"

	"robotsgate/cache"
	"robotsgate/cache/fleet"
	"robotsgate/proxy"
	"robotsgate/proxy/destination"
	"robotsgate/proxy/identity"
	"robotsgate/proxy/mitm"
	"robotsgate/proxy/pace"
	"robotsgate/proxy/policy"
	"robotsgate/proxy/signing"
	"robotsgate/robots/fetch"
)

// The methods below turn the settings into the options of each part that
// uses them, so that what a part receives can be tested from an
// environment, and main only wires.

// UsageOptions says how sites' usage preferences are judged: the
// operator's purposes speak for the pinned token's crawler only.
func (c *Config) UsageOptions() proxy.UsageOptions {
	return proxy.UsageOptions{Mode: c.Usage, Responses: c.UsageResponses, Purposes: c.Purposes, Token: c.Token}
}

// PolicyOptions are what the policy file reads from the settings: the
// default Signature-Agent of its signing_keys.
func (c *Config) PolicyOptions() policy.Options {
	return policy.Options{SignatureAgent: c.SignatureAgent}
}

// SigningIdentity is the signing identity of the crawler Token pins, read
// from SigningKey; nil without keys.
func (c *Config) SigningIdentity() (*signing.Identity, error) {
	if len(c.SigningKey) == 0 {
		return nil, nil
	}
	return signing.LoadIdentity("token "+c.Token, c.SignatureAgent, c.SigningKey)
}

// SigningOptions say how forwarded requests are signed: the pinned
// token's identity read from its key files (the policy's users have their
// own).
func (c *Config) SigningOptions() (proxy.SigningOptions, error) {
	pinned, err := c.SigningIdentity()
	if err != nil {
		return proxy.SigningOptions{}, fmt.Errorf("ROBOTSGATE_SIGNING_KEY: %w", err)
	}
	return proxy.SigningOptions{TTL: c.SignatureTTL, Pinned: pinned, Token: c.Token}, nil
}

// UpstreamRoots returns the certificates origins are verified against:
// the system roots plus ROBOTSGATE_UPSTREAM_CA_FILE. Without system roots
// it is an error unless that file is set, in which case its certificates
// are used alone and warn says so: an empty pool would make every HTTPS
// origin unreachable without a word.
func (c *Config) UpstreamRoots(warn func(msg string, args ...any)) (*x509.CertPool, error) {
	pool, sysErr := x509.SystemCertPool()
	if sysErr != nil {
		if c.UpstreamCAFile == "" {
			return nil, fmt.Errorf("the system's root certificates cannot be loaded (%w); install them (Debian: ca-certificates), or name a PEM bundle in ROBOTSGATE_UPSTREAM_CA_FILE", sysErr)
		}
		warn("the system's root certificates cannot be loaded; origins are verified against ROBOTSGATE_UPSTREAM_CA_FILE alone",
			"err", sysErr, "file", c.UpstreamCAFile)
		pool = x509.NewCertPool()
	}
	if c.UpstreamCAFile != "" {
		pem, err := os.ReadFile(c.UpstreamCAFile)
		if err != nil {
			return nil, fmt.Errorf("ROBOTSGATE_UPSTREAM_CA_FILE: %w", err)
		}
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("ROBOTSGATE_UPSTREAM_CA_FILE: %s holds no PEM certificate", c.UpstreamCAFile)
		}
	}
	return pool, nil
}

// rootsWith returns the system roots plus the PEM bundle in file (named
// by variable in errors); without system roots, the bundle alone.
func rootsWith(variable, file string) (*x509.CertPool, error) {
	pool, err := x509.SystemCertPool()
	if err != nil {
		pool = x509.NewCertPool()
	}
	if file == "" {
		return pool, nil
	}
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", variable, err)
	}
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s: %s holds no PEM certificate", variable, file)
	}
	return pool, nil
}

// Fleet reports whether ROBOTSGATE_REDIS_URL makes this instance one of
// a fleet.
func (c *Config) Fleet() bool { return c.RedisURL != "" }

// FleetOptions are the options of the fleet's Redis client:
// ROBOTSGATE_REDIS_URL, ROBOTSGATE_REDIS_TIMEOUT, ROBOTSGATE_REDIS_PREFIX
// and ROBOTSGATE_REDIS_CA_FILE.
func (c *Config) FleetOptions(log *slog.Logger) (fleet.Options, error) {
	roots, err := rootsWith("ROBOTSGATE_REDIS_CA_FILE", c.RedisCAFile)
	if err != nil {
		return fleet.Options{}, err
	}
	return fleet.Options{URL: c.RedisURL, Timeout: c.RedisTimeout, Prefix: c.RedisPrefix, RootCAs: roots, Logger: log}, nil
}

// ClaimTTL is how long one instance of a fleet may hold the fetch of an
// origin's robots.txt before another takes it over: the whole fetch and
// its wait for a free slot, plus the Redis round trips around them.
func (c *Config) ClaimTTL() time.Duration {
	return 2*c.FetchTimeout + 2*c.RedisTimeout + time.Second
}

// Destinations is the policy of ROBOTSGATE_DENY_DESTINATIONS.
func (c *Config) Destinations() *destination.Policy { return destination.New(c.DenyDestinations) }

// FetchOptions are the robots.txt fetcher's options, its fetch slots
// (ROBOTSGATE_MAX_FETCHES, ROBOTSGATE_MAX_FETCHES_PER_CLIENT) included.
// version completes the default User-Agent.
func (c *Config) FetchOptions(version string, roots *x509.CertPool, destinations *destination.Policy, log *slog.Logger) fetch.Options {
	userAgent := c.FetchUserAgent
	if userAgent == "" {
		userAgent = fetch.DefaultUserAgent(version)
	}
	opts := fetch.Options{
		UserAgent:      userAgent,
		Timeout:        c.FetchTimeout,
		ConnectTimeout: c.FetchConnectTimeout,
		MaxBytes:       int(c.ParseLimit),
		MaxConcurrent:  c.MaxFetches,
		MaxPerClient:   c.MaxFetchesPerClient,
		AuthDisallow:   c.RobotsAuthStatus == RobotsAuthDisallow,
		RootCAs:        roots,
		UpstreamProxy:  c.UpstreamProxy,
		Logger:         log,
		TDMRep:         c.TDMRep,
	}
	if len(destinations.Ranges()) > 0 {
		// Only a policy that denies something: through an upstream proxy
		// the fetcher resolves each origin's name for it to judge.
		opts.DialControl = destinations.Control
	}
	return opts
}

// UpstreamOptions bound the proxy's connections to origins and say
// whether they go through an upstream proxy.
func (c *Config) UpstreamOptions(roots *x509.CertPool) proxy.UpstreamOptions {
	return proxy.UpstreamOptions{
		DialTimeout:           c.UpstreamDialTimeout,
		TLSHandshakeTimeout:   c.UpstreamTLSTimeout,
		ResponseHeaderTimeout: c.UpstreamResponseHeaderTimeout,
		IdleConnTimeout:       c.UpstreamIdleTimeout,
		MaxIdleConns:          c.UpstreamIdleConns,
		// No more idle than may be in flight to one origin at once.
		MaxIdleConnsPerOrigin: c.MaxConnsPerOrigin,
		RootCAs:               roots,
		Proxy:                 c.UpstreamProxy,
	}
}

// ClientLimits bound what one client can make the proxy hold.
func (c *Config) ClientLimits() proxy.ClientLimits {
	return proxy.ClientLimits{
		IdleTimeout:             c.ClientIdleTimeout,
		HeaderTimeout:           c.ClientHeaderTimeout,
		TLSTimeout:              c.ClientTLSTimeout,
		MaxHeaderBytes:          int(c.MaxHeaderBytes),
		MaxURLBytes:             int(c.MaxURLBytes),
		MaxConnections:          c.MaxConnections,
		MaxConnectionsPerClient: c.MaxConnectionsPerClient,
	}
}

// CacheOptions are the robots.txt cache's options: its defaults, changed
// where a variable says so. Every value passes as it is: a zero
// ROBOTSGATE_MAX_STALE serves no stale copy, a zero
// ROBOTSGATE_CACHE_MIN_AGE sets no floor. Its LargestCost is the most a
// robots.txt of ROBOTSGATE_PARSE_LIMIT may keep once parsed, so that the
// cache has room for any file; when ROBOTSGATE_CACHE_MAX_BYTES is too
// small to keep that much for one origin, log (unless nil) warns: such a
// file is then fetched for every request to its origin.
func (c *Config) CacheOptions(log *slog.Logger) cache.Options {
	o := cache.DefaultOptions()
	o.MaxBytes = int64(c.CacheMaxBytes)
	o.LargestCost = fetch.MaxRetainedBytes(int(c.ParseLimit))
	o.MaxAge = c.CacheMaxAge
	o.MinAge = c.CacheMinAge
	o.RetryAfter = c.UnreachableRetry
	o.MaxStale = c.MaxStale
	o.MetricsPrefix = proxy.RulesMetricsPrefix
	o.Logger = log
	if kept := o.LargestKept(); kept < o.LargestCost && log != nil {
		// Twice the cost is enough: the window may take half the budget,
		// and 64 KiB covers its per-entry overhead.
		const mib = int64(MiB)
		enough := (2*o.LargestCost + 64<<10 + mib - 1) / mib * mib
		log.Warn(fmt.Sprintf("ROBOTSGATE_CACHE_MAX_BYTES (%s) is too small for ROBOTSGATE_PARSE_LIMIT (%s): a robots.txt of the parse limit may keep up to %.1f MiB once parsed, but the cache keeps at most %.1f MiB for one origin; such a file may be fetched and parsed again for every request to its origin. Set ROBOTSGATE_CACHE_MAX_BYTES to at least %s, or lower ROBOTSGATE_PARSE_LIMIT",
			c.CacheMaxBytes, c.ParseLimit, float64(o.LargestCost)/float64(mib), float64(kept)/float64(mib), ByteSize(enough)),
			"cache_max_bytes", int64(c.CacheMaxBytes), "parse_limit", int64(c.ParseLimit),
			"largest_cost", o.LargestCost, "largest_kept", kept, "enough", enough)
	}
	return o
}

// IdentityOptions say whose rules apply to a request: ROBOTSGATE_AUTH,
// ROBOTSGATE_CREDENTIALS_FILE and ROBOTSGATE_TOKEN.
func (c *Config) IdentityOptions(log *slog.Logger) identity.Options {
	return identity.Options{Mode: c.Auth, CredentialsFile: c.CredentialsFile, Token: c.Token, Logger: log}
}

// PaceOptions say how requests are paced: ROBOTSGATE_CRAWL_DELAY,
// ROBOTSGATE_MAX_WAIT, ROBOTSGATE_MAX_CONNS_PER_ORIGIN,
// ROBOTSGATE_MAX_SCHEDULES_PER_CLIENT, the origins' holds
// (ROBOTSGATE_MAX_BACKOFF, ROBOTSGATE_BACKOFF_BASE) and
// ROBOTSGATE_DELAY_FACTOR within ROBOTSGATE_MIN_DELAY and
// ROBOTSGATE_MAX_CRAWL_DELAY.
func (c *Config) PaceOptions() pace.Options {
	return pace.Options{Mode: c.CrawlDelay, MaxWait: c.MaxWait, MaxConnsPerOrigin: c.MaxConnsPerOrigin,
		MaxSchedulesPerClient: c.MaxSchedulesPerClient, MaxBackoff: c.MaxBackoff, BackoffBase: c.BackoffBase,
		DelayFactor: c.DelayFactor, MinDelay: c.MinDelay, MaxDelay: c.MaxCrawlDelay}
}

// PacePolicy turns what robots.txt asks into the delay in force:
// ROBOTSGATE_DEFAULT_CRAWL_DELAY, ROBOTSGATE_MAX_CRAWL_DELAY and
// ROBOTSGATE_MIN_DELAY.
func (c *Config) PacePolicy() pace.Policy {
	return pace.Policy{Default: c.DefaultCrawlDelay, Max: c.MaxCrawlDelay, Min: c.MinDelay}
}

// PaceGroups says which hosts share a pace (ROBOTSGATE_PACE_BY).
func (c *Config) PaceGroups() *pace.Grouper {
	return pace.NewGrouper(pace.GrouperOptions{By: c.PaceBy})
}

// CA is the CA that intercepts HTTPS: the pair in ROBOTSGATE_CA_CERT and
// ROBOTSGATE_CA_KEY, or the one in ROBOTSGATE_CA_DIR, created there on
// first use (created says so). Errors name the variables.
func (c *Config) CA() (ca *mitm.CA, created bool, err error) {
	if c.CACertFile != "" {
		ca, err := mitm.LoadCA(c.CACertFile, c.CAKeyFile)
		if err != nil {
			return nil, false, fmt.Errorf("ROBOTSGATE_CA_CERT/ROBOTSGATE_CA_KEY: %w", err)
		}
		return ca, false, nil
	}
	ca, created, err = mitm.LoadOrCreateCA(c.CADir)
	if err != nil {
		return nil, false, fmt.Errorf("ROBOTSGATE_CA_DIR: %w", err)
	}
	return ca, created, nil
}
