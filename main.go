// Command robotsgate is a forward proxy that makes crawlers obey
// robots.txt. See README.md.
//
//	robotsgate [serve]   run the proxy (configured by ROBOTSGATE_* variables)
//	robotsgate config    print every setting, its value and where it came from
//	robotsgate check ... judge URLs against a robots.txt (see "robotsgate check -h")
//	robotsgate report ... sum up audit logs (see "robotsgate report -h")
//	robotsgate keygen FILE write a new request-signing key (see "robotsgate keygen -h")
//	robotsgate version   print the version
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"runtime/debug"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/lmittmann/tint"

	"robotsgate/cache"
	"robotsgate/cache/fleet"
	"robotsgate/cache/headroom"
	"robotsgate/config"
	"robotsgate/config/cmd/settings"
	"robotsgate/proxy"
	"robotsgate/proxy/audit"
	"robotsgate/proxy/cmd/keygen"
	"robotsgate/proxy/cmd/report"
	"robotsgate/proxy/identity"
	"robotsgate/proxy/live"
	"robotsgate/proxy/mitm"
	"robotsgate/proxy/pace"
	"robotsgate/proxy/pidfile"
	"robotsgate/proxy/policy"
	"robotsgate/proxy/signing"
	"robotsgate/robots"
	"robotsgate/robots/cmd/check"
	"robotsgate/robots/fetch"
)

// version is set at link time (-ldflags "-X main.version=v1.2.3"); without
// it the module version from the build info is used.
var version string

const exitConfig = 2 // a configuration or usage error

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	command := "serve"
	if len(args) > 0 {
		command, args = args[0], args[1:]
	}
	switch command {
	case "serve":
		if len(args) > 0 {
			fmt.Fprintf(os.Stderr, "robotsgate serve takes no arguments (got %q); it is configured by ROBOTSGATE_* variables, see README.md\n", args)
			return exitConfig
		}
		return serveCommand()
	case "config":
		return settings.Run(args, settings.Env{Stdout: os.Stdout, Stderr: os.Stderr, Environ: os.Environ(), Version: buildVersion()})
	case "check":
		return checkCommand(args)
	case "report":
		return reportCommand(args)
	case "keygen":
		return keygen.Run(args, keygen.Env{Stdout: os.Stdout, Stderr: os.Stderr})
	case "version", "-version", "--version":
		fmt.Println("robotsgate", buildVersion())
		return 0
	case "help", "-h", "-help", "--help":
		fmt.Print(helpText)
		return 0
	}
	fmt.Fprintf(os.Stderr, "robotsgate: unknown command %q\n\n%s", command, helpText)
	return exitConfig
}

const helpText = `usage:
  robotsgate [serve]    run the proxy; settings come from ROBOTSGATE_* variables (README.md)
  robotsgate config     print every setting's value in force and where it came from; "robotsgate config -h"
  robotsgate check ...  judge URLs against robots.txt; "robotsgate check -h" for details
  robotsgate report ... sum up audit logs: crawlers, refusals, robots.txt and hold incidents; "robotsgate report -h"
  robotsgate keygen FILE write a new Ed25519 key for signing requests (Web Bot Auth); "robotsgate keygen -h"
  robotsgate version    print the version
`

func buildVersion() string {
	if version != "" {
		return version
	}
	if info, ok := debug.ReadBuildInfo(); ok && info.Main.Version != "" && info.Main.Version != "(devel)" {
		return info.Main.Version
	}
	return "dev"
}

func newLogger(cfg *config.Config) *slog.Logger {
	format := cfg.LogFormat
	if format == config.LogFormatAuto {
		format = config.LogFormatJSON
		if fi, err := os.Stderr.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			format = config.LogFormatText
		}
	}
	if format == config.LogFormatText {
		return slog.New(tint.NewHandler(os.Stderr, &tint.Options{Level: cfg.LogLevel, TimeFormat: time.TimeOnly}))
	}
	return slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: cfg.LogLevel}))
}

func checkCommand(args []string) int {
	cfg, err := config.LoadForCommand()
	if err != nil {
		fmt.Fprintf(os.Stderr, "robotsgate: invalid configuration:\n%v\n", err)
		return exitConfig
	}
	env := check.Env{
		Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr,
		Parser: robots.Parser{MaxBytes: int(cfg.ParseLimit), KeepIgnored: true}, // check lists them
		Pace:   cfg.PacePolicy(), PolicyFile: cfg.PolicyFile,
		Purposes: cfg.Purposes, Token: cfg.Token, SignatureAgent: cfg.SignatureAgent,
	}
	// Roots are needed only to fetch: judging against a file works without.
	warn := func(msg string, args ...any) { fmt.Fprintf(os.Stderr, "robotsgate check: warning: %s %v\n", msg, args) }
	if roots, err := cfg.UpstreamRoots(warn); err != nil {
		env.NoFetcher = err
	} else {
		fetchOpts := cfg.FetchOptions(buildVersion(), roots, cfg.Destinations(), nil)
		fetchOpts.KeepIgnored = true
		fetcher := fetch.New(fetchOpts)
		defer fetcher.Close()
		env.Fetcher = fetcher
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return check.Run(ctx, args, env)
}

// reportCommand needs no configuration: it reads audit logs only.
func reportCommand(args []string) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return report.Run(ctx, args, report.Env{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr})
}

func serveCommand() int {
	cfg, err := config.Load()
	if err != nil {
		fmt.Fprintf(os.Stderr, "robotsgate: invalid configuration:\n%v\n", err)
		return exitConfig
	}
	log := newLogger(cfg)
	// The policy is checked with the other settings, before anything is
	// created: a broken file stops the start as a bad variable does.
	policyFile, err := loadPolicy(cfg, log.With("component", "policy"))
	if err != nil {
		fmt.Fprintf(os.Stderr, "robotsgate: invalid configuration:\nROBOTSGATE_POLICY: %v\n", err)
		return exitConfig
	}
	if err := serveWith(cfg, log, policyFile); err != nil {
		log.Error("robotsgate stopped", "err", err)
		if errors.As(err, new(configError)) {
			return exitConfig
		}
		return 1
	}
	log.Info("stopped")
	return 0
}

// configError marks start-up failures caused by the operator's settings.
type configError struct{ error }

func (e configError) Unwrap() error { return e.error }

// serveWith builds each part from the settings and the policy file (nil
// for none), hands them to the proxy and serves until SIGTERM or SIGINT.
func serveWith(cfg *config.Config, log *slog.Logger, policyFile *live.File[*policy.Policy]) error {
	roots, err := cfg.UpstreamRoots(log.Warn)
	if err != nil {
		return configError{err}
	}
	var issuer *mitm.Issuer
	var ca *mitm.CA // said once listening, with the address to download it from
	var caCreated bool
	if cfg.MITM {
		if ca, caCreated, err = cfg.CA(); err != nil {
			return configError{err}
		}
		if issuer, err = mitm.NewIssuer(ca, mitm.IssuerOptions{}); err != nil {
			return fmt.Errorf("leaf certificate issuer: %w", err)
		}
	}
	shared, err := joinFleet(cfg, log)
	if err != nil {
		return err
	}
	if shared != nil {
		defer shared.Close()
	}
	destinations := cfg.Destinations()
	fetchOpts := cfg.FetchOptions(buildVersion(), roots, destinations, log.With("component", "robots-fetch"))
	fetchOpts.Share = shared != nil
	fetcher := fetch.New(fetchOpts)
	defer fetcher.Close()
	paceOpts := cfg.PaceOptions()
	cacheOpts := cfg.CacheOptions(log.With("component", "robots-cache"))
	var rules *cache.Cache[*fetch.Result]
	var fleetState proxy.FleetState
	if shared != nil {
		fleetState = shared
		paceOpts.Shared = shared.Schedules()
		paceOpts.SharedHolds = shared.Holds()
		rules, err = cache.NewShared(cacheOpts, fetcher.Load, cache.SecondLevel[*fetch.Result]{
			Store: shared.Robots(), Decode: fetcher.Decode, ClaimTTL: cfg.ClaimTTL(),
		})
	} else {
		rules, err = cache.New(cacheOpts, fetcher.Load)
	}
	if err != nil {
		return configError{fmt.Errorf("robots.txt cache: %w", err)}
	}
	defer rules.Close()
	pacer := pace.New(paceOpts)
	if shared != nil {
		watchCtx, stopWatching := context.WithCancel(context.Background())
		defer stopWatching()
		go shared.Holds().Watch(watchCtx, pacer.ApplySharedHold)
	}
	gate, err := identity.New(cfg.IdentityOptions(log.With("component", "identity")))
	if err != nil {
		return configError{fmt.Errorf("ROBOTSGATE_CREDENTIALS_FILE: %w", err)}
	}
	signingOpts, err := cfg.SigningOptions()
	if err != nil {
		return configError{err}
	}
	auditLog, err := audit.Open(cfg.AuditLog, audit.Options{})
	if err != nil {
		return configError{fmt.Errorf("ROBOTSGATE_AUDIT_LOG: %w", err)}
	}
	var policySource proxy.PolicySource
	files := []func() live.State{gate.FileState}
	if policyFile != nil {
		policySource = policyFile
		files = append(files, policyFile.State)
	}
	server, err := proxy.New(proxy.Options{
		Mode: cfg.Mode, Rules: rules, Audit: auditLog, AuditOnError: cfg.AuditOnError, Issuer: issuer,
		Identity: gate, Pacer: pacer, PacePolicy: cfg.PacePolicy(), PaceGroups: cfg.PaceGroups(), Destinations: destinations, Upstream: cfg.UpstreamOptions(roots), Client: cfg.ClientLimits(),
		Policy: policySource, Usage: cfg.UsageOptions(), Signing: signingOpts, Files: files, Fleet: fleetState, Logger: log, Version: buildVersion(),
	})
	if err != nil {
		return errors.Join(err, auditLog.Close())
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return errors.Join(configError{fmt.Errorf("ROBOTSGATE_LISTEN: %w", err)}, auditLog.Close())
	}
	// Taken before "listening" is said: an unhandled SIGHUP would stop the
	// process.
	hangups := make(chan os.Signal, 1)
	signal.Notify(hangups, syscall.SIGHUP)
	defer signal.Stop(hangups)
	if cfg.PIDFile != "" {
		removePID, err := pidfile.Write(cfg.PIDFile)
		if err != nil {
			return errors.Join(configError{fmt.Errorf("ROBOTSGATE_PID_FILE: %w", err)}, ln.Close(), auditLog.Close())
		}
		defer removePID(log)
	}
	if ca != nil {
		logCA(log, ca, caCreated, ln.Addr())
	}
	upstreamProxy := "none" // its password is never logged
	if cfg.UpstreamProxy != nil {
		upstreamProxy = cfg.UpstreamProxy.Redacted()
	}
	policyInForce := "none" // the version, for a fleet's instances to compare
	if policyFile != nil {
		st := policyFile.State()
		policyInForce = st.Path + " version " + st.Version
	}
	// The collector's room for garbage follows the heap outside the
	// robots.txt cache (cache/headroom), unless the operator chose it.
	gcHeadroom := "adaptive"
	if gogc, limit := os.Getenv("GOGC"), os.Getenv("GOMEMLIMIT"); gogc != "" || limit != "" {
		gcHeadroom = "GOGC=" + gogc + " GOMEMLIMIT=" + limit
	}
	log.Info("robotsgate listening", "version", buildVersion(), "addr", ln.Addr().String(), "mode", cfg.Mode,
		"mitm", cfg.MITM, "auth", cfg.Auth, "token", cfg.Token, "crawl_delay", cfg.CrawlDelay, "audit_log", cfg.AuditLog, "deny_destinations", cfg.DenyDestinations.String(),
		"upstream_proxy", upstreamProxy, "fleet", cfg.Fleet(), "policy", policyInForce, "gc_headroom", gcHeadroom)
	var signers []*signing.Identity // each said once, so the log tells what is signed
	if policyFile != nil {
		signers = policyFile.Current().Identities()
	}
	if id := signingOpts.Pinned; id != nil {
		warnSigning(cfg, []*signing.Identity{id}, log)
		if _, err := id.Current(time.Now()); err != nil {
			log.Warn(err.Error() + "; its requests are refused (503), never sent unsigned, until a key is valid")
		}
		signers = append([]*signing.Identity{id}, signers...)
	}
	for _, id := range signers {
		log.Info("signing the requests of "+id.Name+" (Web Bot Auth); sites find its keys at "+id.Agent+signing.DirectoryPath,
			"keys", keyIDs(id))
	}
	if proxy.ListensBeyondLoopback(ln.Addr()) {
		switch cfg.Auth {
		case identity.ModeOff:
			log.Warn("robotsgate listens beyond loopback with ROBOTSGATE_AUTH=off: anyone who can reach this address can use it as a proxy; publish it on 127.0.0.1, keep the network closed or require credentials (ROBOTSGATE_CREDENTIALS_FILE)",
				"addr", ln.Addr().String())
		case identity.ModeOptional:
			log.Warn("robotsgate listens beyond loopback with ROBOTSGATE_AUTH=optional: anyone who can reach this address can use it as a proxy without credentials; use ROBOTSGATE_AUTH=required to refuse them",
				"addr", ln.Addr().String())
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go reloadOnHangup(ctx, hangups, reloads{gate: gate, policy: policyFile, audit: auditLog}, log)
	if gcHeadroom == "adaptive" {
		go headroom.Run(ctx, headroom.Options{Static: rules.CostBytes, Logger: log.With("component", "gc")})
	}
	go gate.Watch(ctx, cfg.WatchInterval)
	if policyFile != nil {
		go policyFile.Watch(ctx, cfg.WatchInterval)
	}
	return errors.Join(server.Run(ctx, ln, cfg.ShutdownGrace), auditLog.Close())
}

// logCA says which CA intercepted clients must trust, and where they
// download it: at addr, the listener's address (see proxy.ClientURLs).
func logCA(log *slog.Logger, ca *mitm.CA, created bool, addr net.Addr) {
	verb := "using the CA"
	if created {
		verb = "created a CA"
	}
	here, elsewhere := proxy.ClientURLs(addr, net.InterfaceAddrs)
	msg := verb + "; crawlers must trust it to be intercepted: download it from " + here + "/ca.pem or use the file"
	attrs := []any{"ca_url", here + "/ca.pem", "cert", ca.CertFile(), "key", ca.KeyFile(),
		"curl", "curl -x " + here + " --cacert " + ca.CertFile() + " https://example.com/"}
	if elsewhere != "" {
		msg += "; robotsgate listens on every address of this machine: a client elsewhere uses an address it reaches this machine by, such as " + elsewhere + "/ca.pem"
		attrs = append(attrs, "ca_url_elsewhere", elsewhere+"/ca.pem")
	}
	log.Info(msg, attrs...)
}

// joinFleet connects to the fleet's Redis when ROBOTSGATE_REDIS_URL is
// set (nil otherwise). Redis being down is no error: the client works
// alone until it answers, and says so.
func joinFleet(cfg *config.Config, log *slog.Logger) (*fleet.Client, error) {
	if !cfg.Fleet() {
		return nil, nil
	}
	opts, err := cfg.FleetOptions(log.With("component", "redis"))
	if err != nil {
		return nil, configError{err}
	}
	client, err := fleet.New(context.Background(), opts)
	if err != nil {
		return nil, configError{fmt.Errorf("ROBOTSGATE_REDIS_URL: %w", err)}
	}
	return client, nil
}

// loadPolicy reads ROBOTSGATE_POLICY, if set (nil otherwise), and logs
// each note on what it grants, at start and at each reload.
func loadPolicy(cfg *config.Config, log *slog.Logger) (*live.File[*policy.Policy], error) {
	if cfg.PolicyFile == "" {
		return nil, nil
	}
	return live.New(live.Options[*policy.Policy]{
		Name: "policy", Path: cfg.PolicyFile, Logger: log,
		Load: func(path string, data []byte) (*policy.Policy, error) {
			p, err := policy.ParseOptions(path, data, cfg.PolicyOptions())
			if err != nil {
				return nil, err
			}
			for _, note := range p.Notes() {
				log.Warn("policy: "+note, "file", path)
			}
			warnPolicySettings(cfg, p, log)
			return p, nil
		},
		Replaces: (*policy.Policy).Replaces,
		Attrs:    func(p *policy.Policy) []any { return []any{"entries", p.Summary()} },
	})
}

// warnPolicySettings says which of p's entries the settings keep from
// applying: pace bounds when nothing is paced, user entries when a bot may
// leave its credential out.
func warnPolicySettings(cfg *config.Config, p *policy.Policy, log *slog.Logger) {
	warnSigning(cfg, p.Identities(), log.With("file", p.File()))
	if f := p.PaceBound(); f != nil && cfg.CrawlDelay == pace.ModeOff {
		log.Warn("policy: ROBOTSGATE_CRAWL_DELAY=off paces nothing: the policy's min_delay and max_concurrency are not kept; set it to enforce, wait or audit",
			"file", p.File(), "line", f.Line)
	}
	if !p.NamesUsers() {
		return
	}
	switch cfg.Auth {
	case identity.ModeOff:
		log.Warn("policy: ROBOTSGATE_AUTH=off: no client authenticates, so the policy's user entries apply to none; set ROBOTSGATE_CREDENTIALS_FILE",
			"file", p.File())
	case identity.ModeOptional:
		log.Warn("policy: ROBOTSGATE_AUTH=optional: a bot may leave its credential out and be judged as anonymous, by its token, outside its user entries; set ROBOTSGATE_AUTH=required to hold every bot to its own",
			"file", p.File())
	}
}

// warnSigning says what keeps signed identities from being verified or
// signed everywhere: a plain-http Signature-Agent, which the profile does
// not allow, and blind tunnels, whose requests cannot be signed.
func warnSigning(cfg *config.Config, ids []*signing.Identity, log *slog.Logger) {
	if len(ids) == 0 {
		return
	}
	if cfg.Auth == identity.ModeOptional && cfg.Token != "" && slices.ContainsFunc(ids, func(id *signing.Identity) bool { return id.Name == "token "+cfg.Token }) {
		log.Warn("ROBOTSGATE_AUTH=optional with ROBOTSGATE_SIGNING_KEY: a client that leaves its credential out is judged as "+cfg.Token+" and its requests are signed with that key; set ROBOTSGATE_AUTH=required to sign only what authenticated clients send",
			"token", cfg.Token)
	}
	if !cfg.MITM {
		log.Warn("ROBOTSGATE_MITM=false: requests inside HTTPS tunnels cannot be signed (robotsgate does not see them); only plain HTTP requests of the signing identities are signed",
			"identities", len(ids))
	}
	for _, id := range ids {
		if strings.HasPrefix(id.Agent, "http:") {
			log.Warn("the Signature-Agent of "+id.Name+" is plain http: sites that follow Web Bot Auth fetch key directories over https only", "signature_agent", id.Agent)
		}
	}
}

// keyIDs lists an identity's key ids, with their validity when bounded.
func keyIDs(id *signing.Identity) []string {
	ids := make([]string, 0, len(id.Keys))
	for _, k := range id.Keys {
		s := k.ID()
		if !k.NotBefore.IsZero() {
			s += " from " + k.NotBefore.UTC().Format(time.RFC3339)
		}
		if !k.NotAfter.IsZero() {
			s += " until " + k.NotAfter.UTC().Format(time.RFC3339)
		}
		ids = append(ids, s)
	}
	return ids
}

// reloads are what a SIGHUP reloads: the credentials file, the policy file
// (nil for none) and the audit log.
type reloads struct {
	gate   *identity.Gate
	policy *live.File[*policy.Policy]
	audit  *audit.Writer
}

// reloadOnHangup, on each SIGHUP until ctx ends, re-reads the credentials
// and policy files and reopens the audit log file (logrotate's create
// mode), each whatever became of the others. A file that does not load
// leaves the previous one in force (live logs either outcome); an audit
// log that cannot be reopened is written on where it was. SIGHUP never
// stops the proxy.
func reloadOnHangup(ctx context.Context, hangups <-chan os.Signal, r reloads, log *slog.Logger) {
	gate, auditLog := r.gate, r.audit
	for {
		select {
		case <-ctx.Done():
			return
		case <-hangups:
		}
		if ctx.Err() != nil {
			return // stopping: the audit log is about to be closed
		}
		credentials, auditFile := gate.Mode() != identity.ModeOff, auditLog.Path()
		if !credentials && r.policy == nil && auditFile == "" {
			log.Info("SIGHUP: no credentials or policy file to reload, and the audit log is standard output: nothing to do")
			continue
		}
		if credentials {
			gate.Reload()
		}
		if r.policy != nil {
			r.policy.Reload()
		}
		if auditFile != "" {
			if err := auditLog.Reopen(); err != nil {
				log.Error("audit log not reopened", "path", auditFile, "err", err)
			} else {
				log.Info("reopened the audit log", "path", auditFile)
			}
		}
	}
}
