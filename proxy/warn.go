package proxy

import (
	"sync"
	"time"

	"robotsgate/proxy/netcause"
)

// warnEvery is how often one kind of warning may be logged; the ones held
// back in between are counted in the next.
const warnEvery = time.Minute

// warnLimiter lets a kind of warning through at most once per interval and
// counts those it holds back, so that a client failing in a loop cannot
// flood the log. Kinds are constants of the code, never what a client
// sends, so the map stays small.
type warnLimiter struct {
	every time.Duration
	mu    sync.Mutex
	kinds map[string]*warnKind
}

type warnKind struct {
	last time.Time
	held int
}

func newWarnLimiter(every time.Duration) *warnLimiter {
	return &warnLimiter{every: every, kinds: make(map[string]*warnKind)}
}

// allow reports whether a warning of kind may be logged now and, if so,
// how many of its kind were held back since the last one logged.
func (l *warnLimiter) allow(kind string) (ok bool, held int) {
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	k := l.kinds[kind]
	if k == nil {
		k = &warnKind{}
		l.kinds[kind] = k
	} else if now.Sub(k.last) < l.every {
		k.held++
		return false, 0
	}
	k.last, held, k.held = now, k.held, 0
	return true, held
}

// upstreamCAHint tells how to make robotsgate trust an origin whose
// certificate no trusted CA signed.
const upstreamCAHint = "if this origin is meant to be reached (a private CA, a self-signed certificate), " +
	"add its CA certificate to the PEM bundle in ROBOTSGATE_UPSTREAM_CA_FILE and restart robotsgate"

// originNotTrusted warns, once a minute at most, that an origin's
// certificate was signed by no CA robotsgate trusts, and how to fix it;
// during says what failed: the robots.txt fetch or forwarding.
func (s *Server) originNotTrusted(origin, during string) {
	ok, held := s.warnings.allow("origin " + netcause.CertificateNotTrusted)
	if !ok {
		return
	}
	attrs := []any{"origin", origin, "during", during}
	if held > 0 {
		attrs = append(attrs, "suppressed", held)
	}
	s.log.Warn("robotsgate does not trust an origin's TLS certificate: "+upstreamCAHint, attrs...)
}
