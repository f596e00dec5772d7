package mitm

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/singleflight"
)

// DefaultMaxCachedHosts is the leaf cache bound used when
// IssuerOptions.MaxCachedHosts is zero.
const DefaultMaxCachedHosts = 4096

const (
	// leafClockSkew backdates leaves for clients whose clock runs behind.
	leafClockSkew = time.Hour
	// leafLifetime bounds how long a leaf is valid; see the package doc.
	leafLifetime = 7 * 24 * time.Hour
	// maxCommonNameLen is ub-common-name (RFC 5280 Appendix A); longer names
	// go in the SAN only, which is what clients check anyway.
	maxCommonNameLen = 64
)

// IssuerOptions tunes an Issuer. The zero value is the production setting.
type IssuerOptions struct {
	// MaxCachedHosts bounds how many hosts' leaves are kept; zero means
	// DefaultMaxCachedHosts.
	MaxCachedHosts int
	// DisableCache signs a new leaf for every handshake. It exists to measure
	// what the cache saves and to debug certificate problems.
	DisableCache bool
}

// IssuerStats is a snapshot of an Issuer's work, for metrics.
type IssuerStats struct {
	// LeavesSigned counts certificates signed since the Issuer was created.
	LeavesSigned uint64
	// CachedHosts is how many hosts have a leaf in the cache now.
	CachedHosts int
}

// Issuer signs leaf certificates with a CA for intercepted TLS connections,
// all sharing one key pair, and caches them per host. It is safe for
// concurrent use. It is a prometheus.Collector of its Stats (see Collect).
type Issuer struct {
	ca      *CA
	leafKey *ecdsa.PrivateKey
	// serverConfig serves every intercepted connection (see Server).
	serverConfig *tls.Config
	cache        *leafCache // nil when caching is disabled
	signing      singleflight.Group
	signed       atomic.Uint64

	signedDesc, cachedDesc *prometheus.Desc
}

// NewIssuer returns an Issuer signing with ca. It generates the key pair all
// its leaves share.
func NewIssuer(ca *CA, opts IssuerOptions) (*Issuer, error) {
	if ca == nil {
		return nil, errors.New("new issuer: no CA")
	}
	if opts.MaxCachedHosts < 0 {
		return nil, fmt.Errorf("new issuer: MaxCachedHosts is %d, want 0 (default) or more", opts.MaxCachedHosts)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("new issuer: generate leaf key: %w", err)
	}
	iss := &Issuer{
		ca:      ca,
		leafKey: key,
		signedDesc: prometheus.NewDesc("robotsgate_mitm_leaves_signed_total",
			"Leaf certificates signed for intercepted hosts.", nil, nil),
		cachedDesc: prometheus.NewDesc("robotsgate_mitm_cached_hosts",
			"Hosts whose leaf certificate is cached.", nil, nil),
	}
	iss.serverConfig = &tls.Config{
		MinVersion:     tls.VersionTLS12,
		NextProtos:     []string{"http/1.1"},
		GetCertificate: iss.getCertificate,
	}
	if !opts.DisableCache {
		maxHosts := opts.MaxCachedHosts
		if maxHosts == 0 {
			maxHosts = DefaultMaxCachedHosts
		}
		if iss.cache, err = newLeafCache(maxHosts); err != nil {
			return nil, fmt.Errorf("new issuer: %w", err)
		}
	}
	return iss, nil
}

// CA returns the CA that signs the Issuer's leaves, the one clients must
// trust.
func (iss *Issuer) CA() *CA { return iss.ca }

// Server returns the server side of TLS over conn, a connection a client
// opened with CONNECT connectTarget ("host:port", or a bare host); the
// caller runs the handshake. The leaf is chosen during the handshake for
// the client's SNI name, or for the CONNECT host when the client sends
// none (as when it connects to an IP address). Only HTTP/1.1 is offered
// through ALPN, the protocol the proxy speaks inside the tunnel.
//
// Every connection shares one configuration, and with it the session
// ticket keys (made and rotated by crypto/tls): a client that comes back
// resumes its session, with no signature and no certificate sent. A
// resumed session skips GetCertificate, and crypto/tls does not compare
// its server name with the one the session began with: the connection's
// ServerName is the client's word and must never be trusted (the proxy
// judges by the CONNECT target and each request's Host).
func (iss *Issuer) Server(conn net.Conn, connectTarget string) (*tls.Conn, error) {
	fallback, err := hostFromConnect(connectTarget)
	if err != nil {
		return nil, fmt.Errorf("CONNECT target %q: %w", clip(connectTarget), err)
	}
	return tls.Server(&connectConn{Conn: conn, fallback: fallback}, iss.serverConfig), nil
}

// connectConn is an intercepted connection with the host its CONNECT
// named, for a ClientHello without SNI.
type connectConn struct {
	net.Conn
	fallback leafHost
}

// getCertificate gives the leaf for a ClientHello's SNI name, or for the
// CONNECT host of a connection from Server.
func (iss *Issuer) getCertificate(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
	if hello.ServerName != "" {
		return iss.Leaf(hello.ServerName)
	}
	if c, ok := hello.Conn.(*connectConn); ok {
		return iss.leafFor(c.fallback)
	}
	return nil, fmt.Errorf("%w: the client sent no server name and the connection did not come from Issuer.Server", ErrInvalidHost)
}

// Leaf returns a certificate for host (a DNS name or an IP address, without
// port), from the cache when it holds a leaf not yet due for renewal. Errors
// about the name wrap ErrInvalidHost.
func (iss *Issuer) Leaf(host string) (*tls.Certificate, error) {
	h, err := parseLeafHost(host)
	if err != nil {
		return nil, err
	}
	return iss.leafFor(h)
}

// Stats reports what the Issuer has done so far.
func (iss *Issuer) Stats() IssuerStats {
	stats := IssuerStats{LeavesSigned: iss.signed.Load()}
	if iss.cache != nil {
		stats.CachedHosts = iss.cache.len()
	}
	return stats
}

// Describe implements prometheus.Collector.
func (iss *Issuer) Describe(ch chan<- *prometheus.Desc) {
	ch <- iss.signedDesc
	ch <- iss.cachedDesc
}

// Collect implements prometheus.Collector, reading Stats at scrape time.
func (iss *Issuer) Collect(ch chan<- prometheus.Metric) {
	s := iss.Stats()
	ch <- prometheus.MustNewConstMetric(iss.signedDesc, prometheus.CounterValue, float64(s.LeavesSigned))
	ch <- prometheus.MustNewConstMetric(iss.cachedDesc, prometheus.GaugeValue, float64(s.CachedHosts))
}

func (iss *Issuer) leafFor(h leafHost) (*tls.Certificate, error) {
	if iss.cache == nil {
		cert, _, err := iss.sign(h, time.Now())
		return cert, err
	}
	if cert, ok := iss.cache.get(h.name, time.Now()); ok {
		return cert, nil
	}
	v, err, _ := iss.signing.Do(h.name, func() (any, error) {
		now := time.Now()
		// A flight for this host may have ended between our miss and Do.
		if cert, ok := iss.cache.get(h.name, now); ok {
			return cert, nil
		}
		cert, renewAt, err := iss.sign(h, now)
		if err != nil {
			return nil, err
		}
		iss.cache.put(h.name, cert, renewAt)
		return cert, nil
	})
	if err != nil {
		return nil, err
	}
	return v.(*tls.Certificate), nil
}

// sign issues a leaf for h valid at now, and says when to stop serving it.
func (iss *Issuer) sign(h leafHost, now time.Time) (cert *tls.Certificate, renewAt time.Time, err error) {
	ca := iss.ca.cert
	if now.Before(ca.NotBefore) {
		return nil, time.Time{}, fmt.Errorf("sign leaf for %s: CA certificate not valid before %s", h.name, ca.NotBefore.UTC().Format(time.RFC3339))
	}
	if !now.Before(ca.NotAfter) {
		return nil, time.Time{}, fmt.Errorf("sign leaf for %s: CA certificate expired on %s", h.name, ca.NotAfter.UTC().Format(time.RFC3339))
	}
	notBefore := now.Add(-leafClockSkew)
	if notBefore.Before(ca.NotBefore) {
		notBefore = ca.NotBefore
	}
	notAfter := now.Add(leafLifetime)
	if notAfter.After(ca.NotAfter) {
		notAfter = ca.NotAfter
	}
	serial, err := randomSerial()
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("sign leaf for %s: %w", h.name, err)
	}
	template := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{Organization: []string{"robotsgate"}},
		NotBefore:             notBefore,
		NotAfter:              notAfter,
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
	}
	if len(h.name) <= maxCommonNameLen {
		template.Subject.CommonName = h.name
	}
	if h.addr.IsValid() {
		template.IPAddresses = []net.IP{h.addr.AsSlice()}
	} else {
		template.DNSNames = []string{h.name}
	}
	der, err := x509.CreateCertificate(rand.Reader, template, ca, &iss.leafKey.PublicKey, iss.ca.key)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("sign leaf for %s: %w", h.name, err)
	}
	iss.signed.Add(1)
	// Stop serving a leaf once a quarter of its validity is left: early
	// enough for clients with a fast clock, and proportional, so a leaf cut
	// short by the CA's expiry is not re-signed on every handshake.
	renewAt = notAfter.Add(-notAfter.Sub(now) / 4)
	return &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: iss.leafKey}, renewAt, nil
}
