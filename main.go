// Command robotsgate is a forward proxy that makes crawlers obey
// robots.txt. See README.md.
//
//	robotsgate [serve]   run the proxy (configured by ROBOTSGATE_* variables)
//	robotsgate check ... judge URLs against a robots.txt (see "robotsgate check -h")
//	robotsgate version   print the version
package main

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/lmittmann/tint"

	"robotsgate/cache"
	"robotsgate/config"
	"robotsgate/proxy"
	"robotsgate/proxy/audit"
	checkcmd "robotsgate/proxy/cmd/check"
	"robotsgate/proxy/destination"
	"robotsgate/proxy/mitm"
	"robotsgate/robots"
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
		return serve()
	case "check":
		return check(args)
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
  robotsgate check ...  judge URLs against robots.txt; "robotsgate check -h" for details
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

// loadConfig reads the ROBOTSGATE_* settings. check never intercepts
// HTTPS, so for it interception is off and no CA directory is needed (it
// works without a $HOME).
func loadConfig(forCheck bool) (*config.Config, bool) {
	environ := make(map[string]string)
	for _, kv := range os.Environ() {
		if k, v, ok := strings.Cut(kv, "="); ok {
			environ[k] = v
		}
	}
	if forCheck {
		environ["ROBOTSGATE_MITM"] = "false"
	}
	cfg, err := config.LoadFrom(environ)
	if err != nil {
		fmt.Fprintf(os.Stderr, "robotsgate: invalid configuration:\n%v\n", err)
		return nil, false
	}
	if cfg.FetchUserAgent == "" {
		cfg.FetchUserAgent = fetch.DefaultUserAgent(buildVersion())
	}
	return cfg, true
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

// upstreamRoots are the system roots plus ROBOTSGATE_UPSTREAM_CA_FILE.
func upstreamRoots(cfg *config.Config) (*x509.CertPool, error) {
	pool, err := x509.SystemCertPool()
	if err != nil {
		pool = x509.NewCertPool()
	}
	if cfg.UpstreamCAFile != "" {
		pem, err := os.ReadFile(cfg.UpstreamCAFile)
		if err != nil {
			return nil, fmt.Errorf("ROBOTSGATE_UPSTREAM_CA_FILE: %w", err)
		}
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("ROBOTSGATE_UPSTREAM_CA_FILE: %s holds no PEM certificate", cfg.UpstreamCAFile)
		}
	}
	return pool, nil
}

func newFetcher(cfg *config.Config, roots *x509.CertPool, destinations *destination.Policy) *fetch.Fetcher {
	return fetch.New(fetch.Options{
		UserAgent:      cfg.FetchUserAgent,
		Timeout:        cfg.FetchTimeout,
		ConnectTimeout: cfg.FetchConnectTimeout,
		MaxBytes:       int(cfg.ParseLimit),
		AuthDisallow:   cfg.RobotsAuthStatus == config.RobotsAuthDisallow,
		RootCAs:        roots,
		DialControl:    destinations.Control,
	})
}

func check(args []string) int {
	cfg, ok := loadConfig(true)
	if !ok {
		return exitConfig
	}
	roots, err := upstreamRoots(cfg)
	if err != nil {
		fmt.Fprintf(os.Stderr, "robotsgate check: %v\n", err)
		return exitConfig
	}
	fetcher := newFetcher(cfg, roots, destination.New(cfg.DenyDestinations))
	defer fetcher.Close()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return checkcmd.Run(ctx, args, checkcmd.Env{
		Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr,
		Fetcher: fetcher, Parser: robots.Parser{MaxBytes: int(cfg.ParseLimit)},
	})
}

func serve() int {
	cfg, ok := loadConfig(false)
	if !ok {
		return exitConfig
	}
	log := newLogger(cfg)
	if err := serveWith(cfg, log); err != nil {
		log.Error("robotsgate stopped", "err", err)
		var cfgErr configError
		if errors.As(err, &cfgErr) {
			return exitConfig
		}
		return 1
	}
	return 0
}

// configError marks start-up failures caused by the operator's settings.
type configError struct{ error }

func (e configError) Unwrap() error { return e.error }

func serveWith(cfg *config.Config, log *slog.Logger) error {
	roots, err := upstreamRoots(cfg)
	if err != nil {
		return configError{err}
	}
	var ca *mitm.CA
	var issuer *mitm.Issuer
	if cfg.MITM {
		if ca, err = loadCA(cfg, log); err != nil {
			return configError{err}
		}
		if issuer, err = mitm.NewIssuer(ca, mitm.IssuerOptions{}); err != nil {
			return fmt.Errorf("leaf certificate issuer: %w", err)
		}
	}

	destinations := destination.New(cfg.DenyDestinations)
	fetcher := newFetcher(cfg, roots, destinations)
	defer fetcher.Close()
	rules, err := cache.New(cache.Options{
		MaxBytes:   int64(cfg.CacheMaxBytes),
		MaxAge:     cfg.CacheMaxAge,
		MinAge:     cfg.CacheMinAge,
		RetryAfter: cfg.UnreachableRetry,
		MaxStale:   cfg.MaxStale,
		Logger:     log.With("component", "robots-cache"),
	}, fetcher.Load)
	if err != nil {
		return configError{fmt.Errorf("robots.txt cache: %w", err)}
	}
	defer rules.Close()

	auditLog, err := audit.Open(cfg.AuditLog, audit.Options{
		OnFailure: func(err error) {
			if cfg.AuditOnError == proxy.AuditRefuse {
				log.Error("the audit log cannot be written; refusing every request with 503 until it can (ROBOTSGATE_AUDIT_ON_ERROR=refuse)", "err", err)
				return
			}
			log.Error("the audit log cannot be written; SERVING ON WITHOUT A WORKING AUDIT LOG (ROBOTSGATE_AUDIT_ON_ERROR=continue): records are kept in memory, within a bound, until it can", "err", err)
		},
		OnRecovery: func() { log.Info("the audit log can be written again") },
	})
	if err != nil {
		return configError{fmt.Errorf("ROBOTSGATE_AUDIT_LOG: %w", err)}
	}
	sources := proxy.MetricSources{Cache: rules.Stats}
	if issuer != nil {
		sources.Issuer = issuer.Stats
	}
	server, err := proxy.New(proxy.Options{
		Mode:         cfg.Mode,
		Rules:        rules,
		Audit:        auditLog,
		AuditOnError: cfg.AuditOnError,
		Issuer:       issuer,
		CA:           ca,
		Destinations: destinations,
		Upstream: proxy.UpstreamOptions{
			DialTimeout:           cfg.UpstreamDialTimeout,
			TLSHandshakeTimeout:   cfg.UpstreamTLSTimeout,
			ResponseHeaderTimeout: cfg.UpstreamResponseHeaderTimeout,
			IdleConnTimeout:       cfg.UpstreamIdleTimeout,
			RootCAs:               roots,
		},
		Client: proxy.ClientLimits{
			IdleTimeout:    cfg.ClientIdleTimeout,
			HeaderTimeout:  cfg.ClientHeaderTimeout,
			TLSTimeout:     cfg.ClientTLSTimeout,
			MaxHeaderBytes: int(cfg.MaxHeaderBytes),
			MaxURLBytes:    int(cfg.MaxURLBytes),
			MaxConnections: cfg.MaxConnections,
		},
		Logger:  log,
		Metrics: proxy.NewMetrics(buildVersion(), sources),
		Version: buildVersion(),
	})
	if err != nil {
		auditLog.Close()
		return err
	}

	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		auditLog.Close()
		return configError{fmt.Errorf("ROBOTSGATE_LISTEN: %w", err)}
	}
	log.Info("robotsgate listening", "version", buildVersion(), "addr", ln.Addr().String(), "mode", cfg.Mode,
		"mitm", cfg.MITM, "audit_log", cfg.AuditLog, "deny_destinations", cfg.DenyDestinations.String())
	if proxy.ListensBeyondLoopback(ln.Addr()) {
		log.Warn("robotsgate listens beyond loopback: anyone who can reach this address can use it as a proxy; publish it on 127.0.0.1 or keep the network closed",
			"addr", ln.Addr().String())
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	served := make(chan error, 1)
	go func() { served <- server.Serve(ln) }()

	var serveErr error
	select {
	case serveErr = <-served:
	case <-ctx.Done():
		log.Info("shutting down", "grace", cfg.ShutdownGrace.String())
		graceCtx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownGrace)
		if err := server.Shutdown(graceCtx); err != nil {
			log.Warn("shutdown was not clean", "err", err)
		}
		cancel()
		serveErr = <-served
	}
	if err := auditLog.Close(); err != nil {
		serveErr = errors.Join(serveErr, err)
	}
	if serveErr == nil {
		log.Info("stopped")
	}
	return serveErr
}

func loadCA(cfg *config.Config, log *slog.Logger) (*mitm.CA, error) {
	if cfg.CACertFile != "" {
		ca, err := mitm.LoadCA(cfg.CACertFile, cfg.CAKeyFile)
		if err != nil {
			return nil, fmt.Errorf("ROBOTSGATE_CA_CERT/ROBOTSGATE_CA_KEY: %w", err)
		}
		log.Info("using the CA from ROBOTSGATE_CA_CERT", "cert", ca.CertFile())
		return ca, nil
	}
	ca, created, err := mitm.LoadOrCreateCA(cfg.CADir)
	if err != nil {
		return nil, fmt.Errorf("ROBOTSGATE_CA_DIR: %w", err)
	}
	verb := "using the CA"
	if created {
		verb = "created a CA"
	}
	log.Info(verb+"; crawlers must trust it to be intercepted: download it from http://<proxy>/ca.pem or use the file",
		"cert", ca.CertFile(), "key", ca.KeyFile(),
		"curl", "curl -x http://<proxy> --cacert "+ca.CertFile()+" https://example.com/")
	return ca, nil
}
