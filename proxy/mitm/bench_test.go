package mitm

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"net"
	"testing"
	"time"
)

// BenchmarkHandshake measures new TLS connections per second through
// Issuer.Server, one full handshake over loopback per iteration (client
// and server both in this process, no session resumption), for one host:
//
//   - cachedLeaf: the production setting, one signature for the first
//     connection only;
//   - uncachedLeaf: IssuerOptions.DisableCache, one signature per connection;
//   - freshRSA2048PerConn: what a naive MITM does, generating an RSA-2048 key
//     and signing a leaf per connection. Run it with -benchtime=20x.
func BenchmarkHandshake(b *testing.B) {
	const host = "bench.test"
	b.Run("cachedLeaf", func(b *testing.B) {
		ca, iss := newTestIssuer(b, IssuerOptions{})
		benchmarkHandshakes(b, ca, func(c net.Conn) (*tls.Conn, error) { return iss.Server(c, host+":443") })
	})
	b.Run("uncachedLeaf", func(b *testing.B) {
		ca, iss := newTestIssuer(b, IssuerOptions{DisableCache: true})
		benchmarkHandshakes(b, ca, func(c net.Conn) (*tls.Conn, error) { return iss.Server(c, host+":443") })
	})
	b.Run("freshRSA2048PerConn", func(b *testing.B) {
		ca, _ := newTestIssuer(b, IssuerOptions{})
		naive := &tls.Config{
			MinVersion: tls.VersionTLS12,
			NextProtos: []string{"http/1.1"},
			GetCertificate: func(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
				key, err := rsa.GenerateKey(rand.Reader, 2048)
				if err != nil {
					return nil, err
				}
				return signLeafWithKey(ca, hello.ServerName, key)
			},
		}
		benchmarkHandshakes(b, ca, func(c net.Conn) (*tls.Conn, error) { return tls.Server(c, naive), nil })
	})
}

func benchmarkHandshakes(b *testing.B, ca *CA, server func(net.Conn) (*tls.Conn, error)) {
	srv := startTLSServer(b, server)
	client := &tls.Config{RootCAs: rootsOf(ca), ServerName: "bench.test"}
	// Warm up: the cached variant signs here, outside the timed loop.
	if _, err := srv.dial(client); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := srv.dial(client); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "conns/s")
}

// BenchmarkLeaf measures the cost of a leaf alone, to weigh the shared leaf
// key against a key per host:
//
//   - cacheHit: a host already cached;
//   - signSharedKey: one signature with the Issuer's shared key (cache off);
//   - generateP256KeyAndSign: a new P-256 key per leaf, then the signature.
func BenchmarkLeaf(b *testing.B) {
	b.Run("cacheHit", func(b *testing.B) {
		_, iss := newTestIssuer(b, IssuerOptions{})
		if _, err := iss.Leaf("bench.test"); err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			if _, err := iss.Leaf("bench.test"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("signSharedKey", func(b *testing.B) {
		_, iss := newTestIssuer(b, IssuerOptions{DisableCache: true})
		b.ReportAllocs()
		for b.Loop() {
			if _, err := iss.Leaf("bench.test"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("generateP256KeyAndSign", func(b *testing.B) {
		ca, _ := newTestIssuer(b, IssuerOptions{})
		b.ReportAllocs()
		for b.Loop() {
			key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := signLeafWithKey(ca, "bench.test", key); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// signLeafWithKey is the baseline the benchmarks compare against: a leaf for
// host with its own key, signed by ca.
func signLeafWithKey(ca *CA, host string, key crypto.Signer) (*tls.Certificate, error) {
	serial, err := randomSerial()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	template := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: host},
		DNSNames:              []string{host},
		NotBefore:             now.Add(-leafClockSkew),
		NotAfter:              now.Add(leafLifetime),
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, template, ca.cert, key.Public(), ca.key)
	if err != nil {
		return nil, err
	}
	return &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}

// BenchmarkLeafCache measures the leaf cache alone, full at its default
// size: get of a cached host, and put of a new host, which evicts the least
// recently used one.
func BenchmarkLeafCache(b *testing.B) {
	hosts := make([]string, 2*DefaultMaxCachedHosts)
	for i := range hosts {
		hosts[i] = fmt.Sprintf("host-%06d.example.com", i)
	}
	cert := &tls.Certificate{}
	now := time.Now()
	renewAt := now.Add(time.Hour)
	fill := func(b *testing.B) *leafCache {
		c, err := newLeafCache(DefaultMaxCachedHosts)
		if err != nil {
			b.Fatal(err)
		}
		for _, h := range hosts[:DefaultMaxCachedHosts] {
			c.put(h, cert, renewAt)
		}
		return c
	}
	b.Run("get", func(b *testing.B) {
		c := fill(b)
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			if _, ok := c.get(hosts[i%DefaultMaxCachedHosts], now); !ok {
				b.Fatal("cached host not found")
			}
			i++
		}
	})
	b.Run("put-evict", func(b *testing.B) {
		c := fill(b)
		b.ReportAllocs()
		i := DefaultMaxCachedHosts
		for b.Loop() {
			c.put(hosts[i%len(hosts)], cert, renewAt) // a host evicted DefaultMaxCachedHosts puts ago
			i++
		}
	})
}
