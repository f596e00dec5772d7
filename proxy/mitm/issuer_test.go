package mitm

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

func TestServerHandshake(t *testing.T) {
	ca, iss := newTestIssuer(t, IssuerOptions{})
	roots := rootsOf(ca)
	tests := []struct {
		name          string
		connectTarget string
		client        *tls.Config
		wantSNI       bool // whether the server sees an SNI name
		wantDNS       string
		wantIP        string
	}{
		{
			name:          "SNI name",
			connectTarget: "example.test:443",
			client:        &tls.Config{RootCAs: roots, ServerName: "example.test"},
			wantSNI:       true,
			wantDNS:       "example.test",
		},
		{
			name:          "SNI in mixed case",
			connectTarget: "www.example.test:443",
			client:        &tls.Config{RootCAs: roots, ServerName: "WWW.Example.TEST"},
			wantSNI:       true,
			wantDNS:       "www.example.test",
		},
		{
			name:          "SNI wins over the CONNECT host",
			connectTarget: "connect.test:443",
			client:        &tls.Config{RootCAs: roots, ServerName: "sni.test"},
			wantSNI:       true,
			wantDNS:       "sni.test",
		},
		{
			// Clients send no SNI for an IP address, and verify the IP SAN.
			name:          "no SNI, IPv4 CONNECT host",
			connectTarget: "192.0.2.7:443",
			client:        &tls.Config{RootCAs: roots, ServerName: "192.0.2.7"},
			wantIP:        "192.0.2.7",
		},
		{
			name:          "no SNI, IPv6 CONNECT host",
			connectTarget: "[2001:db8::7]:8443",
			client:        &tls.Config{RootCAs: roots, ServerName: "2001:db8::7"},
			wantIP:        "2001:db8::7",
		},
		{
			// A client that sends no SNI yet expects a name: the leaf must be
			// for the CONNECT host. crypto/tls only omits SNI when ServerName
			// is empty, which needs InsecureSkipVerify; VerifyConnection then
			// does the full verification against our CA by hand.
			name:          "no SNI, named CONNECT host",
			connectTarget: "connect.test:443",
			client: &tls.Config{
				InsecureSkipVerify: true,
				VerifyConnection: func(cs tls.ConnectionState) error {
					inter := x509.NewCertPool()
					for _, c := range cs.PeerCertificates[1:] {
						inter.AddCert(c)
					}
					_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{
						Roots: roots, Intermediates: inter, DNSName: "connect.test",
						KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
					})
					return err
				},
			},
			wantDNS: "connect.test",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var served atomic.Pointer[tls.Conn]
			srv := startTLSServer(t, func(c net.Conn) (*tls.Conn, error) {
				tlsConn, err := iss.Server(c, tt.connectTarget)
				served.Store(tlsConn)
				return tlsConn, err
			})
			client := tt.client.Clone()
			client.NextProtos = []string{"h2", "http/1.1"}
			state, err := srv.dial(client)
			if err != nil {
				t.Fatalf("handshake: %v", err)
			}
			// dial returns once the server has finished its handshake.
			if got := served.Load().ConnectionState().ServerName; (got != "") != tt.wantSNI {
				t.Errorf("server saw SNI %q, want SNI present = %v", got, tt.wantSNI)
			}
			if !tt.client.InsecureSkipVerify && len(state.VerifiedChains) == 0 {
				t.Error("client verified no chain")
			}
			if state.NegotiatedProtocol != "http/1.1" {
				t.Errorf("ALPN %q, want http/1.1", state.NegotiatedProtocol)
			}
			leaf := state.PeerCertificates[0]
			var wantDNS []string
			if tt.wantDNS != "" {
				wantDNS = []string{tt.wantDNS}
			}
			if !slices.Equal(leaf.DNSNames, wantDNS) {
				t.Errorf("DNS SANs %q, want %q", leaf.DNSNames, wantDNS)
			}
			var gotIPs []string
			for _, ip := range leaf.IPAddresses {
				gotIPs = append(gotIPs, ip.String())
			}
			var wantIPs []string
			if tt.wantIP != "" {
				wantIPs = []string{tt.wantIP}
			}
			if !slices.Equal(gotIPs, wantIPs) {
				t.Errorf("IP SANs %q, want %q", gotIPs, wantIPs)
			}
		})
	}
}

func TestServerRejects(t *testing.T) {
	ca, iss := newTestIssuer(t, IssuerOptions{})
	srv := startTLSServer(t, func(c net.Conn) (*tls.Conn, error) { return iss.Server(c, "example.test:443") })

	t.Run("client trusting another CA", func(t *testing.T) {
		other, _ := newTestIssuer(t, IssuerOptions{})
		_, err := srv.dial(&tls.Config{RootCAs: rootsOf(other), ServerName: "example.test"})
		var unknown x509.UnknownAuthorityError
		if !errors.As(err, &unknown) {
			t.Errorf("err = %v, want x509.UnknownAuthorityError", err)
		}
	})
	t.Run("TLS 1.1 client", func(t *testing.T) {
		_, err := srv.dial(&tls.Config{RootCAs: rootsOf(ca), ServerName: "example.test", MinVersion: tls.VersionTLS10, MaxVersion: tls.VersionTLS11})
		// The server must be the one refusing, with a protocol_version alert.
		if err == nil || !strings.Contains(err.Error(), "remote error: tls: protocol version not supported") {
			t.Errorf("err = %v, want the server's protocol version alert", err)
		}
	})
	t.Run("invalid SNI", func(t *testing.T) {
		before := iss.Stats().LeavesSigned
		_, err := srv.dial(&tls.Config{RootCAs: rootsOf(ca), ServerName: "bad!name.test"})
		// The server must be the one failing, aborting its handshake.
		if err == nil || !strings.Contains(err.Error(), "remote error") {
			t.Errorf("err = %v, want the server to abort the handshake", err)
		}
		if after := iss.Stats().LeavesSigned; after != before {
			t.Errorf("signed %d leaves for an invalid name", after-before)
		}
	})
	t.Run("invalid CONNECT target", func(t *testing.T) {
		for _, target := range []string{"", ":443", "bad host:443", "*.example.test:443"} {
			client, server := net.Pipe()
			if conn, err := iss.Server(server, target); !errors.Is(err, ErrInvalidHost) {
				t.Errorf("Server(conn, %q) = %v, %v; want an error wrapping ErrInvalidHost", target, conn, err)
			}
			client.Close()
			server.Close()
		}
	})
}

func TestServerSettings(t *testing.T) {
	_, iss := newTestIssuer(t, IssuerOptions{})
	cfg := iss.serverConfig
	if cfg.MinVersion != tls.VersionTLS12 {
		t.Errorf("MinVersion %x, want TLS 1.2", cfg.MinVersion)
	}
	if !slices.Equal(cfg.NextProtos, []string{"http/1.1"}) {
		t.Errorf("NextProtos %q, want [http/1.1]", cfg.NextProtos)
	}
	if len(cfg.Certificates) != 0 {
		t.Error("static Certificates set; the leaf must come from GetCertificate")
	}
}

func TestLeafProperties(t *testing.T) {
	ca, iss := newTestIssuer(t, IssuerOptions{})
	before := time.Now()
	cert, err := iss.Leaf("Leaf.Example.TEST.")
	if err != nil {
		t.Fatal(err)
	}
	leaf := parseLeaf(t, cert)
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: rootsOf(ca), DNSName: "leaf.example.test"}); err != nil {
		t.Errorf("leaf does not verify: %v", err)
	}
	if !slices.Equal(leaf.DNSNames, []string{"leaf.example.test"}) || len(leaf.IPAddresses) != 0 {
		t.Errorf("SANs DNS %q IP %v, want only DNS leaf.example.test", leaf.DNSNames, leaf.IPAddresses)
	}
	if leaf.Subject.CommonName != "leaf.example.test" {
		t.Errorf("CN %q", leaf.Subject.CommonName)
	}
	if leaf.IsCA || !leaf.BasicConstraintsValid {
		t.Errorf("basic constraints: valid=%v CA=%v, want a valid non-CA", leaf.BasicConstraintsValid, leaf.IsCA)
	}
	if !slices.Equal(leaf.ExtKeyUsage, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}) {
		t.Errorf("ExtKeyUsage %v, want [ServerAuth]", leaf.ExtKeyUsage)
	}
	if leaf.KeyUsage != x509.KeyUsageDigitalSignature {
		t.Errorf("KeyUsage %v, want DigitalSignature", leaf.KeyUsage)
	}
	pub, ok := leaf.PublicKey.(*ecdsa.PublicKey)
	if !ok || pub.Curve != elliptic.P256() {
		t.Errorf("public key %T, want ECDSA P-256", leaf.PublicKey)
	}
	if priv, ok := cert.PrivateKey.(*ecdsa.PrivateKey); !ok || !priv.PublicKey.Equal(leaf.PublicKey) {
		t.Error("PrivateKey does not match the leaf")
	}
	if leaf.SerialNumber.Sign() <= 0 || leaf.SerialNumber.BitLen() > 128 || leaf.SerialNumber.BitLen() < 64 {
		t.Errorf("serial %x: want a positive random number of up to 128 bits", leaf.SerialNumber)
	}
	if got := before.Sub(leaf.NotBefore); got < 59*time.Minute || got > 61*time.Minute {
		t.Errorf("NotBefore is %v before issuance, want about 1h", got)
	}
	if got := leaf.NotAfter.Sub(before); got < leafLifetime-time.Minute || got > leafLifetime+time.Minute {
		t.Errorf("leaf valid for %v after issuance, want %v", got, leafLifetime)
	}

	ipCert, err := iss.Leaf("::ffff:192.0.2.9")
	if err != nil {
		t.Fatal(err)
	}
	ipLeaf := parseLeaf(t, ipCert)
	if len(ipLeaf.DNSNames) != 0 || len(ipLeaf.IPAddresses) != 1 || !ipLeaf.IPAddresses[0].Equal(net.ParseIP("192.0.2.9")) {
		t.Errorf("SANs DNS %q IP %v, want only IP 192.0.2.9", ipLeaf.DNSNames, ipLeaf.IPAddresses)
	}
}

func TestLeafLongNameHasNoCommonName(t *testing.T) {
	_, iss := newTestIssuer(t, IssuerOptions{})
	host := "a-rather-long-label-for-testing." + "another-rather-long-label-for-testing.example"
	cert, err := iss.Leaf(host)
	if err != nil {
		t.Fatal(err)
	}
	leaf := parseLeaf(t, cert)
	if leaf.Subject.CommonName != "" {
		t.Errorf("CN %q for a %d-byte name; CN is limited to 64", leaf.Subject.CommonName, len(host))
	}
	if !slices.Equal(leaf.DNSNames, []string{host}) {
		t.Errorf("DNS SANs %q", leaf.DNSNames)
	}
}

func TestLeafSharedKeyIsFreshPerIssuer(t *testing.T) {
	ca, first := newTestIssuer(t, IssuerOptions{})
	second, err := NewIssuer(ca, IssuerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	a, err := first.Leaf("a.test")
	if err != nil {
		t.Fatal(err)
	}
	b, err := first.Leaf("b.test")
	if err != nil {
		t.Fatal(err)
	}
	c, err := second.Leaf("a.test")
	if err != nil {
		t.Fatal(err)
	}
	keyA := a.PrivateKey.(*ecdsa.PrivateKey)
	if !keyA.Equal(b.PrivateKey) {
		t.Error("one Issuer used two leaf keys; the design shares one")
	}
	if keyA.Equal(c.PrivateKey) {
		t.Error("two Issuers of one CA produced the same leaf key; keys must be random, not derived")
	}
}

func TestLeafCachePerHost(t *testing.T) {
	_, iss := newTestIssuer(t, IssuerOptions{})
	first, err := iss.Leaf("a.test")
	if err != nil {
		t.Fatal(err)
	}
	for _, same := range []string{"a.test", "A.TEST", "a.test."} {
		again, err := iss.Leaf(same)
		if err != nil {
			t.Fatal(err)
		}
		if again != first {
			t.Errorf("Leaf(%q) returned a new certificate; want the cached one", same)
		}
	}
	other, err := iss.Leaf("b.test")
	if err != nil {
		t.Fatal(err)
	}
	if other == first || parseLeaf(t, other).SerialNumber.Cmp(parseLeaf(t, first).SerialNumber) == 0 {
		t.Error("two hosts share a leaf")
	}
	if got := iss.Stats(); got != (IssuerStats{LeavesSigned: 2, CachedHosts: 2}) {
		t.Errorf("stats %+v, want 2 signed, 2 cached", got)
	}
}

func TestLeafCacheSurvivesHandshakes(t *testing.T) {
	ca, iss := newTestIssuer(t, IssuerOptions{})
	srv := startTLSServer(t, func(c net.Conn) (*tls.Conn, error) { return iss.Server(c, "repeat.test:443") })
	var serials []string
	for range 3 {
		state, err := srv.dial(&tls.Config{RootCAs: rootsOf(ca), ServerName: "repeat.test"})
		if err != nil {
			t.Fatal(err)
		}
		serials = append(serials, state.PeerCertificates[0].SerialNumber.String())
	}
	if serials[0] != serials[1] || serials[1] != serials[2] {
		t.Errorf("three connections to one host got serials %q, want one leaf", serials)
	}
	if got := iss.Stats().LeavesSigned; got != 1 {
		t.Errorf("signed %d leaves for three connections, want 1", got)
	}
}

func TestLeafCacheDisabled(t *testing.T) {
	_, iss := newTestIssuer(t, IssuerOptions{DisableCache: true})
	a, err := iss.Leaf("a.test")
	if err != nil {
		t.Fatal(err)
	}
	b, err := iss.Leaf("a.test")
	if err != nil {
		t.Fatal(err)
	}
	if parseLeaf(t, a).SerialNumber.Cmp(parseLeaf(t, b).SerialNumber) == 0 {
		t.Error("same serial twice with the cache disabled")
	}
	if got := iss.Stats(); got != (IssuerStats{LeavesSigned: 2, CachedHosts: 0}) {
		t.Errorf("stats %+v, want 2 signed, 0 cached", got)
	}
}

func TestLeafCacheEvictsLeastRecentlyUsed(t *testing.T) {
	_, iss := newTestIssuer(t, IssuerOptions{MaxCachedHosts: 2})
	leaf := func(host string) *tls.Certificate {
		t.Helper()
		cert, err := iss.Leaf(host)
		if err != nil {
			t.Fatal(err)
		}
		return cert
	}
	a := leaf("a.test")
	leaf("b.test")
	leaf("a.test") // a is now more recent than b
	leaf("c.test") // evicts b
	if got := iss.Stats(); got != (IssuerStats{LeavesSigned: 3, CachedHosts: 2}) {
		t.Fatalf("stats %+v, want 3 signed, 2 cached", got)
	}
	if leaf("a.test") != a {
		t.Error("a.test was evicted although b.test was used less recently")
	}
	leaf("b.test")
	if got := iss.Stats(); got != (IssuerStats{LeavesSigned: 4, CachedHosts: 2}) {
		t.Errorf("stats %+v after asking for b.test again, want 4 signed (b was evicted), 2 cached", got)
	}
}

func TestLeafConcurrentColdHostSignsOnce(t *testing.T) {
	_, iss := newTestIssuer(t, IssuerOptions{})
	// Each round releases many callers at once on a host nobody has asked
	// for; rounds repeat it so that, on few cores, callers really overlap in
	// some of them.
	const rounds, callers = 32, 16
	for round := range rounds {
		host := fmt.Sprintf("cold%d.test", round)
		certs := make([]*tls.Certificate, callers)
		errs := make([]error, callers)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for c := range callers {
			wg.Go(func() {
				<-start
				certs[c], errs[c] = iss.Leaf(host)
			})
		}
		close(start)
		wg.Wait()
		for c := range callers {
			if errs[c] != nil {
				t.Fatal(errs[c])
			}
			if certs[c] != certs[0] {
				t.Fatalf("%s: caller %d got a different leaf than caller 0", host, c)
			}
		}
		if got := iss.Stats().LeavesSigned; got != uint64(round+1) {
			t.Fatalf("%s: %d leaves signed after %d cold hosts asked for by %d concurrent callers each, want one per host",
				host, got, round+1, callers)
		}
	}
}

func TestLeafRenewal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// The CA is made inside the bubble so its validity follows the
		// bubble's clock.
		_, iss := newTestIssuer(t, IssuerOptions{})
		first, err := iss.Leaf("renew.test")
		if err != nil {
			t.Fatal(err)
		}
		issued := time.Now()
		firstLeaf := parseLeaf(t, first)
		if !firstLeaf.NotAfter.Equal(issued.Add(leafLifetime).Truncate(time.Second)) {
			t.Errorf("NotAfter %v, want %v", firstLeaf.NotAfter, issued.Add(leafLifetime))
		}

		renewAt := leafLifetime * 3 / 4
		time.Sleep(renewAt - time.Second)
		if again, err := iss.Leaf("renew.test"); err != nil || again != first {
			t.Fatalf("leaf replaced %v before renewal time (err %v)", renewAt-time.Second, err)
		}

		time.Sleep(time.Second)
		renewed, err := iss.Leaf("renew.test")
		if err != nil {
			t.Fatal(err)
		}
		if renewed == first {
			t.Fatalf("still the first leaf %v after issuance, with %v of validity left", renewAt, leafLifetime-renewAt)
		}
		renewedLeaf := parseLeaf(t, renewed)
		if !renewedLeaf.NotAfter.After(firstLeaf.NotAfter) {
			t.Errorf("renewed leaf expires %v, not after the first one (%v)", renewedLeaf.NotAfter, firstLeaf.NotAfter)
		}
		if got := iss.Stats(); got != (IssuerStats{LeavesSigned: 2, CachedHosts: 1}) {
			t.Errorf("stats %+v, want 2 signed, 1 cached", got)
		}
	})
}

func TestLeafCappedByCAExpiry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const caLeft = 48 * time.Hour
		certFile, keyFile := testCA{keyForm: ecdsaPKCS8, notAfter: time.Now().Add(caLeft)}.write(t, t.TempDir())
		ca, err := LoadCA(certFile, keyFile)
		if err != nil {
			t.Fatal(err)
		}
		iss, err := NewIssuer(ca, IssuerOptions{})
		if err != nil {
			t.Fatal(err)
		}
		first, err := iss.Leaf("capped.test")
		if err != nil {
			t.Fatal(err)
		}
		if got := parseLeaf(t, first).NotAfter; !got.Equal(ca.Certificate().NotAfter) {
			t.Errorf("leaf NotAfter %v, want the CA's %v", got, ca.Certificate().NotAfter)
		}

		// Renewal is proportional to what is left, so a capped leaf is
		// served for three quarters of its life, not re-signed every time.
		time.Sleep(caLeft*3/4 - time.Minute)
		if again, err := iss.Leaf("capped.test"); err != nil || again != first {
			t.Fatalf("capped leaf replaced early (err %v)", err)
		}
		time.Sleep(2 * time.Minute)
		renewed, err := iss.Leaf("capped.test")
		if err != nil {
			t.Fatal(err)
		}
		if renewed == first {
			t.Error("capped leaf not renewed with a quarter of its validity left")
		}

		time.Sleep(caLeft)
		if _, err := iss.Leaf("capped.test"); err == nil {
			t.Error("signed a leaf with an expired CA")
		}
		if _, err := iss.Leaf("fresh.test"); err == nil {
			t.Error("signed a leaf with an expired CA")
		}
	})
}

func TestNewIssuerRejectsBadOptions(t *testing.T) {
	ca, _ := newTestIssuer(t, IssuerOptions{})
	if _, err := NewIssuer(ca, IssuerOptions{MaxCachedHosts: -1}); err == nil {
		t.Error("accepted MaxCachedHosts -1")
	}
	if _, err := NewIssuer(nil, IssuerOptions{}); err == nil {
		t.Error("accepted a nil CA")
	}
}

func TestServerResumesSessions(t *testing.T) {
	ca, iss := newTestIssuer(t, IssuerOptions{})
	// Each connection names its own CONNECT target, as tunnels do.
	var n atomic.Int32
	srv := startTLSServer(t, func(c net.Conn) (*tls.Conn, error) {
		return iss.Server(c, fmt.Sprintf("tunnel-%d.test:443", n.Add(1)))
	})
	for _, version := range []uint16{tls.VersionTLS12, tls.VersionTLS13} {
		t.Run(tls.VersionName(version), func(t *testing.T) {
			client := &tls.Config{RootCAs: rootsOf(ca), ServerName: "resume.test", MaxVersion: version,
				ClientSessionCache: tls.NewLRUClientSessionCache(4)}
			for i, wantResumed := range []bool{false, true, true} {
				state, err := srv.dial(client)
				if err != nil {
					t.Fatalf("connection %d: %v", i+1, err)
				}
				if state.DidResume != wantResumed {
					t.Errorf("connection %d: resumed %v, want %v", i+1, state.DidResume, wantResumed)
				}
			}
		})
	}
}
