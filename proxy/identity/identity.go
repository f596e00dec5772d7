// Package identity decides whose robots.txt rules apply to a request: a
// credential the operator issued (an htpasswd file of bcrypt hashes,
// presented in Proxy-Authorization: Basic), else a product token the
// operator pinned, else the token of the client's own User-Agent.
//
// bcrypt is slow on purpose, so a credential is verified once and then
// remembered, by a keyed hash of the header that carried it, for a bounded
// time and count: a keep-alive crawler pays nothing per request. Failed
// attempts are counted, logged and, when they repeat from one address,
// slowed down; verifications running at once are bounded, so no client can
// make the proxy spend its CPU on bcrypt.
package identity

import (
	"context"
	"encoding/base64"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/golang-lru/v2/simplelru"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/crypto/bcrypt"

	"robotsgate/proxy/live"
)

// Mode says whether clients must present a credential.
type Mode string

const (
	// ModeOff ignores Proxy-Authorization: every client is anonymous.
	ModeOff Mode = "off"
	// ModeOptional verifies a credential when one is presented and lets
	// clients without one through as anonymous.
	ModeOptional Mode = "optional"
	// ModeRequired answers 407 to every client without a valid credential.
	ModeRequired Mode = "required"
)

// UnmarshalText accepts "off", "optional" or "required" in any case.
func (m *Mode) UnmarshalText(text []byte) error {
	switch v := Mode(strings.ToLower(string(text))); v {
	case ModeOff, ModeOptional, ModeRequired:
		*m = v
		return nil
	}
	return fmt.Errorf("%q is not valid; use %q, %q or %q", text, ModeOff, ModeOptional, ModeRequired)
}

// Defaults of [Options].
const (
	DefaultRemember    = 15 * time.Minute
	DefaultRememberMax = 10_000
	// forgetFailureAfter is how long a failed credential is remembered as
	// failed: long enough that a client repeating it costs no bcrypt, short
	// enough that a fixed typo is not held against it.
	forgetFailureAfter = time.Minute
	// rememberFailedMax bounds the failed credentials remembered, apart
	// from the good ones, so that a flood of wrong ones evicts none of them.
	rememberFailedMax = 1024
)

// Options configure a Gate.
type Options struct {
	// Mode: "" means ModeRequired when CredentialsFile is set, ModeOff
	// otherwise.
	Mode Mode
	// CredentialsFile is the htpasswd file (see ParseCredentials); needed
	// unless Mode is off, re-read by Reload and, when it changes, by Watch.
	CredentialsFile string
	// Token, when set, is the product token of every request that presents
	// no credential, whatever its User-Agent.
	Token string
	// Remember is how long a verified credential is trusted without bcrypt
	// (DefaultRemember); RememberMax bounds how many are (DefaultRememberMax).
	Remember    time.Duration
	RememberMax int
	Logger      *slog.Logger
}

// Gate authenticates clients. It is safe for concurrent use; a nil *Gate
// lets everyone through anonymously, judged by their User-Agent.
type Gate struct {
	opts Options
	log  *slog.Logger
	key  macKey
	// file keeps the credentials file in force, nil when Mode is off.
	file     *live.File[*state]
	failures *failureTracker
	// verifying bounds the bcrypt comparisons running at once.
	verifying chan struct{}
	metrics   gateMetrics
}

// state is one credentials file and what was verified against it: a
// reload that changed the file replaces both, so a removed credential
// stops working at once.
type state struct {
	creds  *Credentials
	mu     sync.RWMutex
	known  *simplelru.LRU[[macSize]byte, verdict] // verified
	failed *simplelru.LRU[[macSize]byte, verdict] // refused
}

// verdict is a remembered verification: cred nil means it failed.
type verdict struct {
	cred   *Credential
	reason Reason
	until  time.Time
}

// New builds a Gate and reads its credentials file.
func New(opts Options) (*Gate, error) {
	switch opts.Mode {
	case "":
		opts.Mode = ModeOff
		if opts.CredentialsFile != "" {
			opts.Mode = ModeRequired
		}
	case ModeOff, ModeOptional, ModeRequired:
	default:
		return nil, fmt.Errorf("identity: unknown mode %q", opts.Mode)
	}
	if opts.Mode != ModeOff && opts.CredentialsFile == "" {
		return nil, fmt.Errorf("identity: mode %q needs a credentials file", opts.Mode)
	}
	if opts.Remember <= 0 {
		opts.Remember = DefaultRemember
	}
	if opts.RememberMax <= 0 {
		opts.RememberMax = DefaultRememberMax
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	g := &Gate{
		opts:     opts,
		log:      opts.Logger,
		key:      newMACKey(),
		failures: newFailureTracker(),
		// Half the CPUs at most: a flood of wrong passwords leaves the
		// other half to the requests already verified.
		verifying: make(chan struct{}, max(1, runtime.GOMAXPROCS(0)/2)),
		metrics:   newGateMetrics(),
	}
	if opts.Mode != ModeOff {
		file, err := live.New(live.Options[*state]{
			Name: "credentials",
			Path: opts.CredentialsFile,
			Load: func(path string, data []byte) (*state, error) {
				creds, err := ParseCredentials(data)
				if err != nil {
					return nil, fmt.Errorf("%s: %w", path, err)
				}
				return g.newState(creds), nil
			},
			Attrs:         func(st *state) []any { return []any{"credentials", st.creds.Len()} },
			MaxBytes:      maxFileBytes,
			MetricsPrefix: "robotsgate_auth",
			Logger:        opts.Logger,
		})
		if err != nil {
			return nil, err
		}
		g.file = file
	}
	return g, nil
}

// current is the credentials in force, nil when Mode is off.
func (g *Gate) current() *state {
	if g == nil || g.file == nil {
		return nil
	}
	return g.file.Current()
}

func (g *Gate) newState(creds *Credentials) *state {
	known, _ := simplelru.NewLRU[[macSize]byte, verdict](g.opts.RememberMax, nil) // sizes are positive
	failed, _ := simplelru.NewLRU[[macSize]byte, verdict](rememberFailedMax, nil)
	return &state{creds: creds, known: known, failed: failed}
}

// Mode is the mode in force; a nil Gate's is ModeOff.
func (g *Gate) Mode() Mode {
	if g == nil {
		return ModeOff
	}
	return g.opts.Mode
}

// Reload reads the credentials file again and puts it in force. A file
// that does not load leaves the previous one in force; the error says why.
// A changed file forgets the verifications remembered; the same bytes
// keep them. Connections are not touched: a tunnel asks Current for its
// credential on each request.
func (g *Gate) Reload() error {
	if g == nil || g.file == nil {
		return nil
	}
	return g.file.Reload()
}

// Watch, until ctx ends, checks the credentials file every interval and
// reloads it when it changed, as Reload does. Without a credentials file
// it returns at once.
func (g *Gate) Watch(ctx context.Context, every time.Duration) {
	if g == nil || g.file == nil {
		return
	}
	g.file.Watch(ctx, every)
}

// FileState says which version of the credentials file is in force and
// since when; its String is "credentials: none" without one.
func (g *Gate) FileState() live.State {
	if g == nil || g.file == nil {
		return live.State{Name: "credentials"}
	}
	return g.file.State()
}

// Token is the product token a request is judged as: its credential's,
// else the pinned one, else uaToken, the token of its User-Agent. fromUA
// says the last.
func (g *Gate) Token(cred *Credential, uaToken string) (token string, fromUA bool) {
	switch {
	case cred != nil:
		return cred.Token, false
	case g != nil && g.opts.Token != "":
		return g.opts.Token, false
	}
	return uaToken, true
}

// Reason says why a client did not authenticate; the values label
// robotsgate_auth_failures_total.
type Reason string

const (
	ReasonMissing       Reason = "missing"        // no Proxy-Authorization where one is required
	ReasonMalformed     Reason = "malformed"      // not one Basic credential
	ReasonUnknownName   Reason = "unknown_name"   // no such name in the file
	ReasonWrongPassword Reason = "wrong_password" // the name is known, the password wrong
	ReasonGone          Reason = "client_gone"    // the client left while it was being slowed down
)

// Failure is a client that did not authenticate: answer 407.
type Failure struct{ Reason Reason }

// Error says what the client did wrong, in words for the client: a wrong
// name and a wrong password read the same.
func (f *Failure) Error() string {
	switch f.Reason {
	case ReasonMissing:
		return "no credentials were sent (Proxy-Authorization: Basic)"
	case ReasonMalformed:
		return "Proxy-Authorization is not one set of Basic credentials"
	case ReasonGone:
		return "the client went away"
	}
	return "the credentials were not accepted"
}

// Authenticate checks the Proxy-Authorization values a client sent from
// address client (host:port). It returns the credential, nil for an
// anonymous client the mode lets through, or the failure to answer 407.
func (g *Gate) Authenticate(ctx context.Context, header []string, client string) (*Credential, *Failure) {
	if g == nil || g.opts.Mode == ModeOff {
		return nil, nil
	}
	if len(header) == 0 {
		if g.opts.Mode == ModeOptional {
			return nil, nil
		}
		g.metrics.failures.WithLabelValues(string(ReasonMissing)).Inc()
		return nil, &Failure{Reason: ReasonMissing}
	}
	st := g.current()
	key := g.key.sum(header[0])
	if len(header) == 1 {
		if v, ok := st.recall(key, time.Now()); ok && v.cred != nil {
			g.metrics.remembered.Inc()
			return v.cred, nil
		}
	}
	// From here on the attempt may fail and costs bcrypt: an address that
	// keeps failing waits first.
	addr := addressOf(client)
	if err := g.failures.wait(ctx, addr, time.Now()); err != nil {
		return nil, g.gone()
	}
	if len(header) > 1 {
		return nil, g.fail(addr, "", ReasonMalformed)
	}
	if v, ok := st.recall(key, time.Now()); ok && v.cred == nil {
		name, _, _ := parseBasic(header[0])
		return nil, g.fail(addr, name, v.reason)
	}
	name, password, ok := parseBasic(header[0])
	if !ok {
		return nil, g.fail(addr, "", ReasonMalformed)
	}
	cred := st.creds.Lookup(name)
	hash := st.creds.decoy
	if cred != nil {
		hash = cred.hash
	}
	match, err := g.compare(ctx, hash, password)
	if err != nil {
		return nil, g.gone()
	}
	now := time.Now()
	if cred != nil && match {
		st.remember(key, verdict{cred: cred, until: now.Add(g.opts.Remember)})
		g.failures.forgive(addr)
		g.metrics.verified.Inc()
		return cred, nil
	}
	reason := ReasonWrongPassword
	if cred == nil {
		reason = ReasonUnknownName
	}
	st.remember(key, verdict{reason: reason, until: now.Add(min(g.opts.Remember, forgetFailureAfter))})
	return nil, g.fail(addr, name, reason)
}

// gone counts a client that left before it could be checked.
func (g *Gate) gone() *Failure {
	g.metrics.failures.WithLabelValues(string(ReasonGone)).Inc()
	return &Failure{Reason: ReasonGone}
}

// Current returns the credential of cred's name in the file in force,
// with its token as the file now says, or nil once its line is gone. A
// tunnel opened with cred asks this of each request, so that a reload
// reaches it. The password is not checked again (it is not kept): a
// changed password applies to new tunnels, a removed line to open ones.
func (g *Gate) Current(cred *Credential) *Credential {
	st := g.current()
	if st == nil {
		return nil
	}
	return st.creds.Lookup(cred.Name)
}

// compare runs bcrypt, on half the CPUs at most.
func (g *Gate) compare(ctx context.Context, hash []byte, password string) (bool, error) {
	select {
	case g.verifying <- struct{}{}:
	case <-ctx.Done():
		return false, ctx.Err()
	}
	defer func() { <-g.verifying }()
	return bcrypt.CompareHashAndPassword(hash, []byte(password)) == nil, nil
}

// fail counts a failed attempt from addr and logs it: the first from an
// address and then at each doubling, so a flood of failures cannot flood
// the log. name is the name tried, when it is known.
func (g *Gate) fail(addr, name string, reason Reason) *Failure {
	g.metrics.failures.WithLabelValues(string(reason)).Inc()
	n := g.failures.add(addr, time.Now())
	if n&(n-1) == 0 {
		g.log.Warn("proxy authentication failed", "client", addr, "name", printable(name), "reason", string(reason),
			"failures", n, "slowed_down", g.failures.delay(n).String())
	}
	return &Failure{Reason: reason}
}

func (st *state) recall(key [macSize]byte, now time.Time) (verdict, bool) {
	st.mu.RLock()
	v, ok := st.known.Peek(key)
	if !ok {
		v, ok = st.failed.Peek(key)
	}
	st.mu.RUnlock()
	if !ok || now.After(v.until) {
		return verdict{}, false
	}
	return v, true
}

func (st *state) remember(key [macSize]byte, v verdict) {
	st.mu.Lock()
	if v.cred != nil {
		st.failed.Remove(key)
		st.known.Add(key, v)
	} else {
		st.failed.Add(key, v)
	}
	st.mu.Unlock()
}

// printable is a name a client sent, fit for a log line: at most 64
// bytes, printable ASCII, anything else as "?".
func printable(name string) string {
	b := []byte(name[:min(len(name), 64)])
	for i, c := range b {
		if c < 0x20 || c > 0x7E {
			b[i] = '?'
		}
	}
	return string(b)
}

// parseBasic reads "Basic base64(name:password)" (RFC 7617).
func parseBasic(value string) (name, password string, ok bool) {
	scheme, encoded, found := strings.Cut(strings.TrimSpace(value), " ")
	if !found || !strings.EqualFold(scheme, "Basic") {
		return "", "", false
	}
	decoded, err := base64.StdEncoding.DecodeString(strings.TrimSpace(encoded))
	if err != nil {
		return "", "", false
	}
	name, password, found = strings.Cut(string(decoded), ":")
	if !found || name == "" {
		return "", "", false
	}
	return name, password, true
}

// addressOf is whom failures are counted against: the client's IP
// address, or its /64 for IPv6, which one subscriber usually holds whole.
func addressOf(hostport string) string {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		host = hostport
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return host
	}
	ip = ip.Unmap()
	if ip.Is6() {
		prefix, _ := ip.WithZone("").Prefix(64)
		return prefix.String()
	}
	return ip.String()
}

// gateMetrics are the Gate's Prometheus metrics.
type gateMetrics struct {
	failures   *prometheus.CounterVec
	verified   prometheus.Counter
	remembered prometheus.Counter
	all        []prometheus.Collector
}

func newGateMetrics() gateMetrics {
	failures := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "robotsgate_auth_failures_total",
		Help: "Proxy authentications that failed, by reason (missing, malformed, unknown_name, wrong_password, client_gone).",
	}, []string{"reason"})
	successes := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "robotsgate_auth_successes_total",
		Help: "Proxy authentications that succeeded, by how: bcrypt (verified now) or remembered (verified before).",
	}, []string{"how"})
	return gateMetrics{
		failures:   failures,
		verified:   successes.WithLabelValues("bcrypt"),
		remembered: successes.WithLabelValues("remembered"),
		all:        []prometheus.Collector{failures, successes},
	}
}

// Describe and Collect make a Gate a prometheus.Collector: its counters,
// the credentials in force, the file's reloads and version
// (robotsgate_auth_reloads_total, robotsgate_auth_info,
// robotsgate_auth_loaded_timestamp_seconds) and the addresses being
// slowed down.
func (g *Gate) Describe(ch chan<- *prometheus.Desc) { prometheus.DescribeByCollect(g, ch) }

func (g *Gate) Collect(ch chan<- prometheus.Metric) {
	for _, c := range g.metrics.all {
		c.Collect(ch)
	}
	credentials := 0
	if g.file != nil {
		g.file.Collect(ch)
		credentials = g.file.Current().creds.Len()
	}
	ch <- prometheus.MustNewConstMetric(credentialsDesc, prometheus.GaugeValue, float64(credentials))
	ch <- prometheus.MustNewConstMetric(slowedDesc, prometheus.GaugeValue, float64(g.failures.slowed(time.Now())))
}

var (
	credentialsDesc = prometheus.NewDesc("robotsgate_auth_credentials", "Credentials in force, from ROBOTSGATE_CREDENTIALS_FILE.", nil, nil)
	slowedDesc      = prometheus.NewDesc("robotsgate_auth_slowed_addresses", "Client addresses whose authentication attempts are being slowed down after repeated failures.", nil, nil)
)
