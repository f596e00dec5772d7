package mitm

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// testKeyForm names a key type and the PEM encoding a test writes it in.
type testKeyForm string

const (
	rsaPKCS1          testKeyForm = "RSA PKCS#1"
	rsaPKCS8          testKeyForm = "RSA PKCS#8"
	ecdsaSEC1         testKeyForm = "ECDSA SEC1"
	ecdsaSEC1Params   testKeyForm = "ECDSA SEC1 after EC PARAMETERS"
	ecdsaPKCS8        testKeyForm = "ECDSA PKCS#8"
	ed25519PKCS8      testKeyForm = "Ed25519 PKCS#8"
	rsaPKCS1Encrypted testKeyForm = "RSA PKCS#1 with Proc-Type header"
)

// testCA describes a certificate authority a test writes to disk with
// crypto/x509, independently of the code under test.
type testCA struct {
	keyForm   testKeyForm
	notCA     bool
	keyUsage  x509.KeyUsage // zero means CertSign|CRLSign
	notBefore time.Time     // zero means an hour ago
	notAfter  time.Time     // zero means a year from now
}

// write generates the CA into dir as ca.pem and ca-key.pem and returns the
// two paths.
func (o testCA) write(tb testing.TB, dir string) (certFile, keyFile string) {
	tb.Helper()
	var key crypto.Signer
	var err error
	switch o.keyForm {
	case rsaPKCS1, rsaPKCS8, rsaPKCS1Encrypted:
		key, err = rsa.GenerateKey(rand.Reader, 2048)
	case ecdsaSEC1, ecdsaSEC1Params, ecdsaPKCS8:
		key, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	case ed25519PKCS8:
		_, key, err = ed25519.GenerateKey(rand.Reader)
	default:
		tb.Fatalf("unknown key form %q", o.keyForm)
	}
	if err != nil {
		tb.Fatal(err)
	}
	now := time.Now()
	template := &x509.Certificate{
		SerialNumber:          big.NewInt(now.UnixNano()),
		Subject:               pkix.Name{CommonName: "test CA " + string(o.keyForm)},
		NotBefore:             o.notBefore,
		NotAfter:              o.notAfter,
		BasicConstraintsValid: true,
		IsCA:                  !o.notCA,
		KeyUsage:              o.keyUsage,
	}
	if template.NotBefore.IsZero() {
		template.NotBefore = now.Add(-time.Hour)
	}
	if template.NotAfter.IsZero() {
		template.NotAfter = now.Add(365 * 24 * time.Hour)
	}
	if template.KeyUsage == 0 {
		template.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageCRLSign
	}
	der, err := x509.CreateCertificate(rand.Reader, template, template, key.Public(), key)
	if err != nil {
		tb.Fatal(err)
	}

	var blocks []*pem.Block
	switch o.keyForm {
	case rsaPKCS1:
		blocks = append(blocks, &pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key.(*rsa.PrivateKey))})
	case rsaPKCS1Encrypted:
		blocks = append(blocks, &pem.Block{Type: "RSA PRIVATE KEY",
			Headers: map[string]string{"Proc-Type": "4,ENCRYPTED", "DEK-Info": "AES-128-CBC,00000000000000000000000000000000"},
			Bytes:   x509.MarshalPKCS1PrivateKey(key.(*rsa.PrivateKey))})
	case ecdsaSEC1, ecdsaSEC1Params:
		sec1, err := x509.MarshalECPrivateKey(key.(*ecdsa.PrivateKey))
		if err != nil {
			tb.Fatal(err)
		}
		if o.keyForm == ecdsaSEC1Params {
			// What `openssl ecparam -name prime256v1 -genkey` writes first:
			// the OID of P-256.
			blocks = append(blocks, &pem.Block{Type: "EC PARAMETERS", Bytes: []byte{0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07}})
		}
		blocks = append(blocks, &pem.Block{Type: "EC PRIVATE KEY", Bytes: sec1})
	default: // the PKCS#8 forms
		pkcs8, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			tb.Fatal(err)
		}
		blocks = append(blocks, &pem.Block{Type: "PRIVATE KEY", Bytes: pkcs8})
	}
	var keyPEM []byte
	for _, b := range blocks {
		keyPEM = append(keyPEM, pem.EncodeToMemory(b)...)
	}
	certFile = filepath.Join(dir, CACertFileName)
	keyFile = filepath.Join(dir, CAKeyFileName)
	writeFile(tb, certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
	writeFile(tb, keyFile, keyPEM)
	return certFile, keyFile
}

func writeFile(tb testing.TB, path string, data []byte) {
	tb.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		tb.Fatal(err)
	}
}

// newTestIssuer creates a CA in a temporary directory and an Issuer for it.
func newTestIssuer(tb testing.TB, opts IssuerOptions) (*CA, *Issuer) {
	tb.Helper()
	ca, _, err := LoadOrCreateCA(tb.TempDir())
	if err != nil {
		tb.Fatal(err)
	}
	iss, err := NewIssuer(ca, opts)
	if err != nil {
		tb.Fatal(err)
	}
	return ca, iss
}

// rootsOf returns a pool trusting only ca.
func rootsOf(ca *CA) *x509.CertPool {
	pool := x509.NewCertPool()
	pool.AddCert(ca.Certificate())
	return pool
}

// parseLeaf parses the leaf of a tls.Certificate.
func parseLeaf(tb testing.TB, cert *tls.Certificate) *x509.Certificate {
	tb.Helper()
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		tb.Fatal(err)
	}
	return leaf
}

// tlsServer is a real TLS server on 127.0.0.1 that has server make the
// server side of each connection, as the proxy has its Issuer per
// CONNECT, completes the handshake, writes one byte and hangs up.
type tlsServer struct {
	ln     net.Listener
	server func(net.Conn) (*tls.Conn, error)
	wg     sync.WaitGroup
}

const ioTimeout = 10 * time.Second

// startTLSServer serves TLS on a loopback port: server makes the server
// side of each connection, which writes one byte after the handshake.
func startTLSServer(tb testing.TB, server func(net.Conn) (*tls.Conn, error)) *tlsServer {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	s := &tlsServer{ln: ln, server: server}
	s.wg.Add(1)
	go s.acceptLoop()
	tb.Cleanup(func() {
		ln.Close()
		s.wg.Wait()
	})
	return s
}

func (s *tlsServer) acceptLoop() {
	defer s.wg.Done()
	for {
		conn, err := s.ln.Accept()
		if err != nil {
			return // listener closed
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer conn.Close()
			if err := conn.SetDeadline(time.Now().Add(ioTimeout)); err != nil {
				return
			}
			tlsConn, err := s.server(conn)
			if err != nil {
				return // the client sees the connection close mid-handshake
			}
			if err := tlsConn.Handshake(); err != nil {
				return
			}
			_, _ = tlsConn.Write([]byte{'k'})
		}()
	}
}

// dial makes one TLS connection to s with cfg, waits for the server's byte
// (so both sides have finished the handshake) and returns the client's view.
func (s *tlsServer) dial(cfg *tls.Config) (tls.ConnectionState, error) {
	ctx, cancel := context.WithTimeout(context.Background(), ioTimeout)
	defer cancel()
	d := tls.Dialer{Config: cfg}
	conn, err := d.DialContext(ctx, "tcp", s.ln.Addr().String())
	if err != nil {
		return tls.ConnectionState{}, err
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(ioTimeout)); err != nil {
		return tls.ConnectionState{}, err
	}
	var b [1]byte
	if _, err := io.ReadFull(conn, b[:]); err != nil {
		return tls.ConnectionState{}, err
	}
	if b[0] != 'k' {
		return tls.ConnectionState{}, errors.New("server sent an unexpected byte")
	}
	return conn.(*tls.Conn).ConnectionState(), nil
}
