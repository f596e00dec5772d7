package proxy

import (
	"crypto/tls"
	"net"
	"net/http"
	"time"

	"github.com/elazarl/goproxy"

	"robotsgate/cache"
	"robotsgate/proxy/audit"
	"robotsgate/robots"
)

// tunnel marks the requests read from inside an intercepted CONNECT;
// goproxy copies the CONNECT's UserData to each of them.
type tunnel struct{ target string }

// decision is one request on its way through the proxy: the verdict and
// the audit record that will describe it.
type decision struct {
	s       *Server
	rec     audit.Record
	start   time.Time
	verdict robots.Verdict
	done    bool
}

// handleRequest judges a plain or intercepted request and either lets
// goproxy forward it, through forwardRoundTrip, or answers it.
func (s *Server) handleRequest(req *http.Request, pctx *goproxy.ProxyCtx) (*http.Request, *http.Response) {
	s.inflight.add()
	d := &decision{s: s, start: time.Now()}
	d.rec = audit.Record{
		Time: d.start, Client: req.RemoteAddr, Method: req.Method, URL: req.URL.String(),
		UserAgent: req.UserAgent(), Mode: string(s.opts.Mode), PathsChecked: true,
	}
	if t, ok := pctx.UserData.(*tunnel); ok {
		d.rec.Tunnel = t.target
	}
	if s.stopping.Load() {
		return req, d.fail(req, http.StatusServiceUnavailable, "robotsgate is shutting down", nil)
	}
	d.rec.Token = robots.ProductToken(d.rec.UserAgent)

	// goproxy has made req.URL absolute from the request's own Host, so an
	// intercepted request is judged on the origin it really goes to.
	origin, err := robots.OriginFromURL(req.URL)
	if err != nil {
		return req, d.fail(req, http.StatusBadRequest, "the request names no http or https origin", err)
	}
	d.rec.Origin = origin
	path := requestPath(req)

	if robots.IsRobotsTxt(path) {
		d.verdict = robots.Verdict{Allowed: true, Cause: robots.CauseRobotsTxt}
	} else {
		result, info, err := s.opts.Rules.Get(req.Context(), origin)
		if err != nil {
			return req, d.fail(req, http.StatusGatewayTimeout, "the client went away before robots.txt was fetched", err)
		}
		d.noteRobots(result, info)
		d.verdict = result.Check(d.rec.Token, path)
	}
	d.noteVerdict()

	if !d.verdict.Allowed && s.opts.Mode == ModeEnforce {
		d.rec.Status = http.StatusForbidden
		d.finish()
		return req, forbidden(req, d)
	}
	d.rec.Forwarded = true
	pctx.RoundTripper = goproxy.RoundTripperFunc(d.forwardRoundTrip)
	return req, nil
}

// requestPath is the path and query as the client sent them, not as Go
// re-encodes them: rules are matched against what the origin would see.
func requestPath(req *http.Request) string {
	if req.RequestURI != "" && req.RequestURI != "*" {
		return robots.PathAndQuery(req.RequestURI)
	}
	return req.URL.RequestURI()
}

func (d *decision) noteRobots(result *robots.FetchResult, info cache.Info) {
	d.rec.Robots = result.Outcome.String()
	d.rec.RobotsStatus = result.Status
	d.rec.RobotsCache = info.Source.String()
}

func (d *decision) noteVerdict() {
	v := d.verdict
	d.rec.Verdict = "allow"
	if !v.Allowed {
		d.rec.Verdict = "disallow"
	}
	d.rec.Reason = v.Reason()
	d.rec.Group = v.Group
	if v.Rule != nil {
		d.rec.Rule = v.Rule.Pattern
		d.rec.RuleLine = v.Rule.Line
	}
}

// robotsURL is the robots.txt that decided; built only when a response
// or header names it, not on every request.
func (d *decision) robotsURL() string { return d.rec.Origin + "/robots.txt" }

// fail answers a request the proxy could not judge or forward.
func (d *decision) fail(req *http.Request, status int, why string, err error) *http.Response {
	d.rec.Verdict = "error"
	d.rec.Reason = why
	d.rec.Status = status
	if err != nil {
		d.rec.Error = err.Error()
	}
	d.finish()
	return plainResponse(req, status, why+"\n")
}

// finish writes the audit record once the request is over.
func (d *decision) finish() {
	if d.done {
		return
	}
	d.done = true
	d.rec.Duration = float64(time.Since(d.start).Microseconds()) / 1000
	if err := d.s.opts.Audit.Write(&d.rec); err != nil && d.s.auditErrs.CompareAndSwap(false, true) {
		d.s.log.Error("audit log write failed; records are being lost", "err", err)
	}
	d.s.opts.Metrics.observe(&d.rec)
	d.s.inflight.done()
}

// handleConnect intercepts a tunnel, or, with interception off, judges
// its host as a whole.
func (s *Server) handleConnect(host string, pctx *goproxy.ProxyCtx) (*goproxy.ConnectAction, string) {
	if s.opts.Issuer != nil {
		pctx.UserData = &tunnel{target: host}
		return &goproxy.ConnectAction{
			Action: goproxy.ConnectMitm,
			TLSConfig: func(host string, _ *goproxy.ProxyCtx) (*tls.Config, error) {
				return s.opts.Issuer.TLSConfig(host)
			},
		}, host
	}
	return s.judgeTunnel(host, pctx), host
}

// judgeTunnel decides a tunnel the proxy cannot look into: refused when
// the crawler may fetch nothing on the origin, let through otherwise.
func (s *Server) judgeTunnel(host string, pctx *goproxy.ProxyCtx) *goproxy.ConnectAction {
	req := pctx.Req
	s.inflight.add()
	d := &decision{s: s, start: time.Now()}
	d.rec = audit.Record{
		Time: d.start, Client: req.RemoteAddr, Method: http.MethodConnect, URL: host,
		UserAgent: req.UserAgent(), Mode: string(s.opts.Mode),
	}
	d.rec.Token = robots.ProductToken(d.rec.UserAgent)
	origin, err := robots.OriginOf(tunnelScheme(host) + "://" + host)
	if err != nil {
		pctx.Resp = d.fail(req, http.StatusBadRequest, "the CONNECT target is not a host:port", err)
		return &goproxy.ConnectAction{Action: goproxy.ConnectReject}
	}
	d.rec.Origin = origin
	result, info, err := s.opts.Rules.Get(req.Context(), origin)
	if err != nil {
		pctx.Resp = d.fail(req, http.StatusGatewayTimeout, "the client went away before robots.txt was fetched", err)
		return &goproxy.ConnectAction{Action: goproxy.ConnectReject}
	}
	d.noteRobots(result, info)
	if v, all := disallowsAll(result, d.rec.Token); all {
		d.verdict = v
	} else {
		d.verdict = robots.Verdict{Allowed: true, Cause: robots.CauseNoMatchingRule, Detail: "tunnel not intercepted: only the host was judged"}
	}
	d.noteVerdict()
	if !d.verdict.Allowed && s.opts.Mode == ModeEnforce {
		d.rec.Status = http.StatusForbidden
		d.finish()
		pctx.Resp = forbidden(req, d)
		return &goproxy.ConnectAction{Action: goproxy.ConnectReject}
	}
	d.rec.Forwarded = true
	d.rec.Status = http.StatusOK
	d.finish()
	return &goproxy.ConnectAction{Action: goproxy.ConnectAccept}
}

// disallowsAll reports whether token may fetch nothing on the origin.
func disallowsAll(result *robots.FetchResult, token string) (robots.Verdict, bool) {
	if v := result.Check(token, "/"); v.Cause == robots.CauseUnreachable {
		return v, true
	}
	if result.Robots == nil {
		return robots.Verdict{}, false
	}
	return result.Robots.DisallowsAll(token)
}

// tunnelScheme guesses what a blind tunnel carries from its port.
func tunnelScheme(hostport string) string {
	if _, port, err := net.SplitHostPort(hostport); err == nil && port == "80" {
		return "http"
	}
	return "https"
}
