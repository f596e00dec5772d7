// Package fleet keeps the state a fleet of robotsgate instances shares in
// Redis: robots.txt entries (a cache.Store), crawl schedules (a
// pace.SharedSchedules) and the holds of origins that asked to be left
// alone (a pace.SharedHolds). When Redis fails, it says so at once and the
// callers work alone: every operation after a failure is refused without
// touching the network until a background PING finds Redis again, but for
// the release of a claim, which is always tried. Redis refusing the ACL
// user an operation fails that operation alone.
//
// Any Redis from 5.0 on will do, or a server that speaks its protocol and
// Lua scripts.
package fleet

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// Defaults for the zero values of Options.
const (
	DefaultTimeout    = 200 * time.Millisecond
	DefaultRetryEvery = time.Second
	DefaultPrefix     = "robotsgate:"
)

// ErrUnavailable is wrapped by the error of every operation refused because
// Redis is down: the caller works alone, without having waited.
var ErrUnavailable = errors.New("redis is unavailable")

// ErrCredentialsRefused is wrapped by the error of New when Redis refuses
// the URL's user and password (WRONGPASS, NOAUTH, NOPERM): unlike a Redis
// that cannot be reached, that does not mend by itself.
var ErrCredentialsRefused = errors.New("redis refuses the user and password of the URL")

// Options configure a Client.
type Options struct {
	// URL is redis://[user:password@]host[:port][/db], or rediss:// for
	// TLS (see CheckURL).
	URL string
	// Timeout bounds each operation, dial, write and read together; 0
	// means DefaultTimeout. A fleet falls back to working alone rather
	// than wait on Redis, so it is short.
	Timeout time.Duration
	// RetryEvery is how often a PING looks for Redis while it is down; 0
	// means DefaultRetryEvery.
	RetryEvery time.Duration
	// Prefix starts every key; "" means DefaultPrefix.
	Prefix string
	// RootCAs verify a rediss:// server; nil means the system's roots.
	RootCAs *x509.CertPool
	// Logger receives one line each time Redis goes down or comes back,
	// and once each way Redis refuses the ACL user an operation.
	Logger *slog.Logger
}

// Client is a connection to the fleet's Redis that knows whether Redis is
// up. It is safe for concurrent use, and a prometheus.Collector.
type Client struct {
	rdb     *redis.Client
	timeout time.Duration
	every   time.Duration
	prefix  string
	addr    string
	tls     bool
	log     *slog.Logger
	scripts scripts

	// up is read by every operation; mu orders the changes, so that each
	// is logged once.
	up      atomic.Bool
	mu      sync.Mutex
	everUp  bool // Redis has answered since New: it can come back
	since   time.Time
	lastErr string
	refused bool // while down: the latest failure was Redis refusing the credentials
	changes atomic.Uint64
	ops     [opCount][resultCount]atomic.Uint64
	// holdMessages counts what Watch did with each message it received.
	holdMessages [holdMessageCount]atomic.Uint64
	descs        descs

	// refusals are the permission refusals logged already, by Redis's
	// message, so that each is logged once.
	refusalsMu sync.Mutex
	refusals   map[string]bool

	// stop ends the prober and any PING in flight.
	stopCtx context.Context
	stop    context.CancelFunc
	probed  chan struct{}
}

// Status is what a Client knows of Redis.
type Status struct {
	// Up: operations go to Redis; down, they are refused at once.
	Up bool
	// Since is when Redis last went up or down (or New, without change).
	Since time.Time
	// Addr is "host:port db N": never the password.
	Addr string
	// TLS: the connection is rediss://.
	TLS bool
	// LastError is the latest failure while down.
	LastError string
	// Refused: while down, the latest failure was Redis refusing the
	// credentials (see ErrCredentialsRefused), as when its password was
	// changed and this instance still has the old one.
	Refused bool
}

// New connects to Redis as opts say. It fails for bad options, and when
// Redis refuses the URL's credentials (ErrCredentialsRefused): it PINGs
// Redis once, within Timeout, and for any other answer returns a Client
// that is up or down accordingly and logs which. Close releases it.
func New(ctx context.Context, opts Options) (*Client, error) {
	ro, err := parseURL(opts.URL)
	if err != nil {
		return nil, err
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.RetryEvery <= 0 {
		opts.RetryEvery = DefaultRetryEvery
	}
	if opts.Prefix == "" {
		opts.Prefix = DefaultPrefix
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if ro.TLSConfig != nil {
		ro.TLSConfig.RootCAs = opts.RootCAs
	}
	ro.DialTimeout, ro.ReadTimeout, ro.WriteTimeout = opts.Timeout, opts.Timeout, opts.Timeout
	ro.ContextTimeoutEnabled = true
	// A burst of requests (a crawler starting on many origins at once)
	// may want more connections at a time than go-redis's default pool of
	// 10 per CPU. One that waits for a connection gives up at half the
	// Timeout, before the operation's own deadline, so that its error is
	// the pool's: that fails the one operation, which the caller then does
	// alone, but says nothing about Redis (see redisFailed).
	ro.PoolSize = max(64, 10*runtime.GOMAXPROCS(0))
	ro.PoolTimeout = opts.Timeout / 2
	// A fast failure matters more than a retry: the caller has a way to
	// work alone, and a script or claim run twice is not the same as once.
	ro.MaxRetries = -1
	ro.DialerRetries = 1
	// RESP2 is all these commands need, and what every Redis-compatible
	// server speaks; RESP3 would bring push messages and maintenance
	// notices (one more command per connection) this Client has no use for.
	ro.Protocol = 2
	ro.MaintNotificationsConfig = &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
	// go-redis prints some failures itself, a failed dial for one, to
	// stderr, where they would break the lines of a JSON log. Its logger is
	// one for the whole process, and robotsgate runs one Client: its
	// Logger gets them, at Debug, as the Client reports Redis's state
	// itself, once per change.
	redis.SetLogger(goRedisLog{opts.Logger})

	stopCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	c := &Client{
		rdb:      redis.NewClient(ro),
		timeout:  opts.Timeout,
		every:    opts.RetryEvery,
		prefix:   opts.Prefix,
		addr:     ro.Addr + " db " + strconv.Itoa(ro.DB),
		tls:      ro.TLSConfig != nil,
		log:      opts.Logger,
		scripts:  newScripts(),
		descs:    newDescs(),
		refusals: map[string]bool{},
		stopCtx:  stopCtx,
		stop:     stop,
		probed:   make(chan struct{}),
	}
	c.since = time.Now()
	if err := c.ping(ctx); err != nil {
		// A user not even allowed to ping is refused as surely.
		if credentialsRefused(err) || redis.IsPermissionError(err) {
			c.stop()
			c.rdb.Close()
			return nil, fmt.Errorf("%w: redis at %s answered %q; give the user and password it expects, redis://user:password@host:port/db",
				ErrCredentialsRefused, c.addr, redisMessage(err))
		}
		c.lastErr = err.Error()
		c.log.Warn(msgDown, "addr", c.addr, "err", err)
	} else {
		c.up.Store(true)
		c.everUp = true
		c.log.Info(msgUp, "addr", c.addr)
	}
	go c.probe()
	return c, nil
}

// goRedisLog passes what go-redis prints to a slog.Logger, at Debug.
type goRedisLog struct{ log *slog.Logger }

func (l goRedisLog) Printf(ctx context.Context, format string, args ...any) {
	if ctx == nil {
		ctx = context.Background()
	}
	if l.log.Enabled(ctx, slog.LevelDebug) {
		l.log.DebugContext(ctx, "go-redis: "+strings.TrimPrefix(fmt.Sprintf(format, args...), "redis: "))
	}
}

// The log lines of a change of state: msgUp the first time Redis answers,
// msgDown each time it fails, msgBack each time it answers again, and
// msgRefused each time it starts refusing the credentials.
const (
	msgUp      = "redis reachable: robots.txt and crawl schedules are shared with the fleet"
	msgDown    = "redis unreachable: this instance keeps robots.txt and crawl schedules to itself until it returns"
	msgBack    = "redis reachable again: robots.txt and crawl schedules are shared with the fleet once more"
	msgRefused = "redis refuses robotsgate's credentials: this instance keeps robots.txt and crawl schedules to itself until Redis accepts the user and password in ROBOTSGATE_REDIS_URL"
)

// credentialsRefused reports whether err is Redis refusing the user and
// password. A NOPERM on one command is not: the password is right, the
// user's ACL lacks that command, and Redis answers the next ping.
func credentialsRefused(err error) bool {
	return redis.IsAuthError(err)
}

// redisMessage is what Redis answered in err, without what this package
// added around it.
func redisMessage(err error) string {
	if rerr, ok := errors.AsType[redis.Error](err); ok {
		return rerr.Error()
	}
	return err.Error()
}

// HealthDetail is the state of Redis as one line for /healthz. It leaves
// out the address and the error, which /healthz would tell anyone who can
// reach the proxy; the log has them.
func (c *Client) HealthDetail() string {
	s := c.Status()
	since := s.Since.UTC().Format(time.RFC3339)
	if s.Up {
		return "redis: shared with the fleet since " + since
	}
	why := ""
	if s.Refused {
		why = ": it refuses robotsgate's credentials (the user and password in ROBOTSGATE_REDIS_URL)"
	}
	return "redis: unreachable since " + since + why + "; this instance works alone and tries Redis again every " + c.every.String()
}

// Close stops looking for Redis and closes the connections.
func (c *Client) Close() error {
	c.stop()
	<-c.probed
	if err := c.rdb.Close(); err != nil {
		return fmt.Errorf("closing redis client: %w", err)
	}
	return nil
}

// Status reports whether Redis is up, since when, and where it is.
func (c *Client) Status() Status {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := Status{Up: c.up.Load(), Since: c.since, Addr: c.addr, TLS: c.tls}
	if !s.Up {
		s.LastError, s.Refused = c.lastErr, c.refused
	}
	return s
}

// do runs f against Redis for op within Timeout, unless Redis is down: then
// it refuses at once, so that the caller works alone without waiting. A
// failure of Redis marks it down (see redisFailed); Redis refusing the
// user this operation does not (see permissionRefused).
func (c *Client) do(ctx context.Context, op op, f func(ctx context.Context) error) error {
	if !c.up.Load() {
		c.count(op, resultSkipped)
		return fmt.Errorf("%s: %w", op, ErrUnavailable)
	}
	opCtx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	err := f(opCtx)
	if err == nil {
		c.count(op, resultOK)
		return nil
	}
	c.count(op, resultError)
	switch {
	case permissionRefused(err):
		c.noteRefused(op, err)
	case redisFailed(ctx, err):
		c.markDown(err)
	}
	return fmt.Errorf("%s on redis: %w", op, err)
}

// permissionRefused reports whether err is Redis refusing the user an
// operation: its ACL lacks a command, a key or a channel. Redis answered,
// and answers what the ACL allows: marking it down would take robots.txt
// and schedules from the fleet for a refusal of holds alone.
func permissionRefused(err error) bool {
	rerr, ok := errors.AsType[redis.Error](err)
	if !ok {
		return false
	}
	// A command of a script refused is an ERR: Redis 7.0 says so in the
	// first words, 7.2 on in the second.
	msg := rerr.Error()
	return strings.HasPrefix(msg, "NOPERM ") ||
		strings.HasPrefix(msg, "ERR The user executing the script can't ") ||
		strings.HasPrefix(msg, "ERR ACL failure in script: ")
}

// maxRefusals bounds the messages noteRefused remembers: past it, it
// forgets them all and logs each again once.
const maxRefusals = 32

// noteRefused logs a permission refusal the first time Redis answers it:
// the ACL does not mend by itself, and every operation of that kind meets
// it again.
func (c *Client) noteRefused(op op, err error) {
	msg := redisMessage(err)
	c.refusalsMu.Lock()
	defer c.refusalsMu.Unlock()
	if c.refusals[msg] {
		return
	}
	if len(c.refusals) >= maxRefusals {
		clear(c.refusals)
	}
	c.refusals[msg] = true
	c.log.Warn(msgOpRefused, "addr", c.addr, "op", op.String(), "err", err)
}

// msgOpRefused is logged once per message Redis refuses an operation with.
const msgOpRefused = "redis refuses robotsgate's user an operation: this instance does each such operation alone, the rest stays shared with the fleet; give the user what the fleet manual lists"

// redisFailed reports whether err, the error of an operation on the
// caller's ctx, says that Redis failed, rather than the caller or this
// process: the caller's own cancellation or deadline says nothing about
// Redis, nor does a wait for a free connection of the pool that timed out,
// which a burst of this instance's requests causes while Redis answers
// every other instance.
func redisFailed(ctx context.Context, err error) bool {
	return ctx.Err() == nil && !errors.Is(err, redis.ErrPoolTimeout)
}

// bestEffort runs f against Redis for op within Timeout, on the Client's
// own context, whether Redis is marked down or not, and leaves that mark
// as it is. It is for what spares the other instances a wait, as ending a
// claim does: this instance may have found Redis down alone (a timeout on
// a busy machine), and a bestEffort that fails costs no more than not
// trying.
func (c *Client) bestEffort(op op, f func(ctx context.Context) error) {
	ctx, cancel := context.WithTimeout(c.stopCtx, c.timeout)
	defer cancel()
	if err := f(ctx); err != nil {
		c.count(op, resultError)
		return
	}
	c.count(op, resultOK)
}

// ping asks Redis whether it answers, within Timeout.
func (c *Client) ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	if err := c.rdb.Ping(ctx).Err(); err != nil {
		c.count(opPing, resultError)
		return fmt.Errorf("ping: %w", err)
	}
	c.count(opPing, resultOK)
	return nil
}

// markDown records that Redis failed with err, and wakes the prober, unless
// Redis is down already or the Client is closing.
func (c *Client) markDown(err error) {
	if c.stopCtx.Err() != nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.up.Load() {
		return
	}
	c.up.Store(false)
	c.since, c.lastErr = time.Now(), err.Error()
	c.changes.Add(1)
	c.log.Warn(msgDown, "addr", c.addr, "err", err)
	c.noteRefusal(err)
}

// noteRefusal records whether err, the latest failure while down, is Redis
// refusing the credentials, and says so when it starts. c.mu is held.
func (c *Client) noteRefusal(err error) {
	refused := credentialsRefused(err)
	if refused && !c.refused {
		c.log.Warn(msgRefused, "addr", c.addr, "err", err)
	}
	c.refused = refused
}

// probe PINGs Redis every RetryEvery: while it is up, so that an
// instance with nothing to ask Redis still notices it leave; while it is
// down, to mark it up at the first answer.
func (c *Client) probe() {
	defer close(c.probed)
	tick := time.NewTicker(c.every)
	defer tick.Stop()
	for {
		select {
		case <-c.stopCtx.Done():
			return
		case <-tick.C:
		}
		if !c.up.Load() {
			c.tryUp()
			continue
		}
		if err := c.ping(c.stopCtx); err != nil && c.stopCtx.Err() == nil {
			c.markDown(err)
		}
	}
}

// tryUp PINGs Redis and, when it answers, marks it up. Redis that answers
// for the first time, having been down since New, did not come back: that
// is logged as msgUp, without a down_for. It is a change of state all the
// same, counted as such, as robotsgate_redis_up goes from 0 to 1.
func (c *Client) tryUp() {
	err := c.ping(c.stopCtx)
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		if c.stopCtx.Err() == nil {
			c.lastErr = err.Error()
			c.noteRefusal(err)
		}
		return
	}
	downFor := time.Since(c.since)
	c.up.Store(true)
	c.since, c.lastErr, c.refused = time.Now(), "", false
	c.changes.Add(1)
	if !c.everUp {
		c.everUp = true
		c.log.Info(msgUp, "addr", c.addr)
		return
	}
	// A string: slog's JSON handler writes a time.Duration in nanoseconds.
	c.log.Info(msgBack, "addr", c.addr, "down_for", downFor.Round(time.Millisecond).String())
}
