package mitm

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

func TestLoadOrCreateCACreatesCA(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state", "ca")
	before := time.Now()
	ca, created, err := LoadOrCreateCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !created {
		t.Error("created = false for an empty directory")
	}

	wantCert, wantKey := filepath.Join(dir, "ca.pem"), filepath.Join(dir, "ca-key.pem")
	if ca.CertFile() != wantCert || ca.KeyFile() != wantKey {
		t.Errorf("paths = %q, %q; want %q, %q", ca.CertFile(), ca.KeyFile(), wantCert, wantKey)
	}
	for path, want := range map[string]fs.FileMode{dir: 0o700 | fs.ModeDir, wantCert: 0o644, wantKey: 0o600} {
		info, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if info.Mode() != want {
			t.Errorf("%s: mode %v, want %v", path, info.Mode(), want)
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 2 {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("directory holds %q, want only the two PEM files (no temporary files left)", names)
	}

	onDisk, err := os.ReadFile(wantCert)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(onDisk, ca.CertPEM()) {
		t.Error("CertPEM differs from ca.pem")
	}
	block, _ := pem.Decode(ca.CertPEM())
	if block == nil || block.Type != "CERTIFICATE" {
		t.Fatalf("CertPEM is not a CERTIFICATE PEM block: %q", ca.CertPEM())
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if !cert.Equal(ca.Certificate()) {
		t.Error("Certificate() differs from CertPEM()")
	}

	if !cert.BasicConstraintsValid || !cert.IsCA || cert.MaxPathLen != 0 || !cert.MaxPathLenZero {
		t.Errorf("basic constraints: valid=%v CA=%v maxPathLen=%d zero=%v", cert.BasicConstraintsValid, cert.IsCA, cert.MaxPathLen, cert.MaxPathLenZero)
	}
	if want := x509.KeyUsageCertSign | x509.KeyUsageCRLSign; cert.KeyUsage != want {
		t.Errorf("key usage %v, want %v", cert.KeyUsage, want)
	}
	if pub, ok := cert.PublicKey.(*ecdsa.PublicKey); !ok || pub.Curve != elliptic.P256() {
		t.Errorf("public key %T, want ECDSA P-256", cert.PublicKey)
	}
	if !strings.HasPrefix(cert.Subject.CommonName, "robotsgate CA") {
		t.Errorf("CN %q, want it to start with \"robotsgate CA\"", cert.Subject.CommonName)
	}
	if len(cert.Subject.Organization) != 1 || cert.Subject.Organization[0] != "robotsgate" {
		t.Errorf("O = %q, want [robotsgate]", cert.Subject.Organization)
	}
	if len(cert.SubjectKeyId) == 0 {
		t.Error("no SubjectKeyId")
	}
	if cert.SerialNumber.Sign() <= 0 || cert.SerialNumber.BitLen() > 128 || cert.SerialNumber.BitLen() < 64 {
		t.Errorf("serial %x: want a positive random number of up to 128 bits", cert.SerialNumber)
	}
	if years := cert.NotAfter.Sub(before).Hours() / 24 / 365; years < 9.9 || years > 10.1 {
		t.Errorf("valid for %.2f years, want about 10", years)
	}
	if !cert.NotBefore.Before(before) {
		t.Errorf("NotBefore %v is not before creation time %v", cert.NotBefore, before)
	}
	if err := cert.CheckSignatureFrom(cert); err != nil {
		t.Errorf("not self-signed: %v", err)
	}
}

func TestLoadOrCreateCALoadsExisting(t *testing.T) {
	dir := t.TempDir()
	first, created, err := LoadOrCreateCA(dir)
	if err != nil || !created {
		t.Fatalf("first call: created=%v err=%v", created, err)
	}
	second, created, err := LoadOrCreateCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	if created {
		t.Error("second call created a new CA")
	}
	if !bytes.Equal(first.CertPEM(), second.CertPEM()) {
		t.Error("second call returned a different certificate")
	}
	// The loaded key must be the created one: a leaf signed with the reloaded
	// CA verifies against the first certificate.
	iss, err := NewIssuer(second, IssuerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := iss.Leaf("reload.test")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := parseLeaf(t, leaf).Verify(x509.VerifyOptions{Roots: rootsOf(first), DNSName: "reload.test"}); err != nil {
		t.Errorf("leaf from reloaded CA does not verify against the created one: %v", err)
	}
}

func TestLoadOrCreateCAConcurrentCreators(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ca")
	const creators = 8
	type result struct {
		ca      *CA
		created bool
		err     error
	}
	results := make([]result, creators)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range creators {
		wg.Go(func() {
			<-start
			ca, created, err := LoadOrCreateCA(dir)
			results[i] = result{ca, created, err}
		})
	}
	close(start)
	wg.Wait()

	createdCount := 0
	for i, r := range results {
		if r.err != nil {
			t.Fatalf("creator %d: %v", i, r.err)
		}
		if r.created {
			createdCount++
		}
		if !bytes.Equal(r.ca.CertPEM(), results[0].ca.CertPEM()) {
			t.Errorf("creator %d got a different CA than creator 0", i)
		}
	}
	if createdCount != 1 {
		t.Errorf("%d callers report creating the CA, want exactly 1", createdCount)
	}
	onDisk, err := LoadCA(filepath.Join(dir, CACertFileName), filepath.Join(dir, CAKeyFileName))
	if err != nil {
		t.Fatalf("files left on disk do not form a CA: %v", err)
	}
	if !bytes.Equal(onDisk.CertPEM(), results[0].ca.CertPEM()) {
		t.Error("the CA on disk is not the one the callers got")
	}
}

func TestLoadOrCreateCARefusesHalfPresentPair(t *testing.T) {
	for _, present := range []string{CACertFileName, CAKeyFileName} {
		t.Run("only "+present, func(t *testing.T) {
			// synctest: with only the key present, LoadOrCreateCA waits for a
			// concurrent creator before giving up; the bubble's clock makes
			// that wait instant.
			synctest.Test(t, func(t *testing.T) {
				dir := t.TempDir()
				full := t.TempDir()
				if _, _, err := LoadOrCreateCA(full); err != nil {
					t.Fatal(err)
				}
				content, err := os.ReadFile(filepath.Join(full, present))
				if err != nil {
					t.Fatal(err)
				}
				writeFile(t, filepath.Join(dir, present), content)

				_, _, err = LoadOrCreateCA(dir)
				if err == nil {
					t.Fatal("no error with half a CA pair")
				}
				for _, name := range []string{CACertFileName, CAKeyFileName} {
					if !strings.Contains(err.Error(), filepath.Join(dir, name)) {
						t.Errorf("error %q does not name %s", err, name)
					}
				}
				after, err := os.ReadFile(filepath.Join(dir, present))
				if err != nil || !bytes.Equal(after, content) {
					t.Errorf("existing %s was changed (err %v)", present, err)
				}
				entries, err := os.ReadDir(dir)
				if err != nil {
					t.Fatal(err)
				}
				if len(entries) != 1 {
					t.Errorf("directory holds %d entries, want only the user's file", len(entries))
				}
			})
		})
	}
}

func TestLoadOrCreateCACorruptFiles(t *testing.T) {
	for _, corrupt := range []string{CACertFileName, CAKeyFileName} {
		t.Run(corrupt, func(t *testing.T) {
			dir := t.TempDir()
			if _, _, err := LoadOrCreateCA(dir); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, corrupt)
			writeFile(t, path, []byte("-----BEGIN GARBAGE-----\nnot base64 !!\n"))
			_, _, err := LoadOrCreateCA(dir)
			if err == nil {
				t.Fatal("no error for a corrupt file")
			}
			if !strings.Contains(err.Error(), path) {
				t.Errorf("error %q does not name %s", err, path)
			}
		})
	}
}

func TestLoadOrCreateCAEmptyDir(t *testing.T) {
	if _, _, err := LoadOrCreateCA(""); err == nil {
		t.Error("no error for an empty directory name")
	}
}

func TestLoadCAKeyForms(t *testing.T) {
	for _, form := range []testKeyForm{rsaPKCS1, rsaPKCS8, ecdsaSEC1, ecdsaSEC1Params, ecdsaPKCS8} {
		t.Run(string(form), func(t *testing.T) {
			certFile, keyFile := testCA{keyForm: form}.write(t, t.TempDir())
			ca, err := LoadCA(certFile, keyFile)
			if err != nil {
				t.Fatal(err)
			}
			if ca.CertFile() != certFile || ca.KeyFile() != keyFile {
				t.Errorf("paths = %q, %q", ca.CertFile(), ca.KeyFile())
			}

			// The loaded CA must sign leaves a client accepts over real TLS.
			iss, err := NewIssuer(ca, IssuerOptions{})
			if err != nil {
				t.Fatal(err)
			}
			srv := startTLSServer(t, func(c net.Conn) (*tls.Conn, error) { return iss.Server(c, "loaded.test:443") })
			state, err := srv.dial(&tls.Config{RootCAs: rootsOf(ca), ServerName: "loaded.test"})
			if err != nil {
				t.Fatalf("handshake: %v", err)
			}
			if got := state.PeerCertificates[0].DNSNames; len(got) != 1 || got[0] != "loaded.test" {
				t.Errorf("leaf DNS names %q", got)
			}
		})
	}
}

func TestLoadCARejects(t *testing.T) {
	mismatched := func(t *testing.T) (string, string) {
		certFile, _ := testCA{keyForm: ecdsaPKCS8}.write(t, t.TempDir())
		_, keyFile := testCA{keyForm: ecdsaPKCS8}.write(t, t.TempDir())
		return certFile, keyFile
	}
	tests := []struct {
		name     string
		files    func(t *testing.T) (certFile, keyFile string)
		wantIn   string // which file the error must name: "cert" or "key"
		wantText string
	}{
		{
			name: "leaf certificate",
			files: func(t *testing.T) (string, string) {
				return testCA{keyForm: ecdsaSEC1, notCA: true}.write(t, t.TempDir())
			},
			wantIn:   "cert",
			wantText: "is not a CA certificate",
		},
		{
			name: "CA without keyCertSign",
			files: func(t *testing.T) (string, string) {
				return testCA{keyForm: ecdsaSEC1, keyUsage: x509.KeyUsageDigitalSignature}.write(t, t.TempDir())
			},
			wantIn:   "cert",
			wantText: "keyCertSign",
		},
		{
			name: "expired CA",
			files: func(t *testing.T) (string, string) {
				past := time.Now().Add(-48 * time.Hour)
				return testCA{keyForm: ecdsaSEC1, notBefore: past.Add(-time.Hour), notAfter: past}.write(t, t.TempDir())
			},
			wantIn:   "cert",
			wantText: "expired",
		},
		{
			name:     "key of another CA",
			files:    mismatched,
			wantIn:   "key",
			wantText: "does not match",
		},
		{
			name:     "Ed25519 key",
			files:    func(t *testing.T) (string, string) { return testCA{keyForm: ed25519PKCS8}.write(t, t.TempDir()) },
			wantIn:   "key",
			wantText: "Ed25519",
		},
		{
			name:     "encrypted key",
			files:    func(t *testing.T) (string, string) { return testCA{keyForm: rsaPKCS1Encrypted}.write(t, t.TempDir()) },
			wantIn:   "key",
			wantText: "encrypted",
		},
		{
			name: "certificate where the key should be",
			files: func(t *testing.T) (string, string) {
				certFile, _ := testCA{keyForm: ecdsaSEC1}.write(t, t.TempDir())
				return certFile, certFile
			},
			wantIn:   "key",
			wantText: "no private key PEM block",
		},
		{
			name: "key where the certificate should be",
			files: func(t *testing.T) (string, string) {
				_, keyFile := testCA{keyForm: ecdsaSEC1}.write(t, t.TempDir())
				return keyFile, keyFile
			},
			wantIn:   "cert",
			wantText: "no PEM block of type CERTIFICATE",
		},
		{
			name: "missing key file",
			files: func(t *testing.T) (string, string) {
				certFile, _ := testCA{keyForm: ecdsaSEC1}.write(t, t.TempDir())
				return certFile, filepath.Join(t.TempDir(), "absent.pem")
			},
			wantIn:   "key",
			wantText: "no such file",
		},
		{
			name: "empty certificate file",
			files: func(t *testing.T) (string, string) {
				certFile, keyFile := testCA{keyForm: ecdsaSEC1}.write(t, t.TempDir())
				writeFile(t, certFile, nil)
				return certFile, keyFile
			},
			wantIn:   "cert",
			wantText: "no PEM block",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			certFile, keyFile := tt.files(t)
			ca, err := LoadCA(certFile, keyFile)
			if err == nil {
				t.Fatalf("LoadCA accepted it: %v", ca.Certificate().Subject)
			}
			named := certFile
			if tt.wantIn == "key" {
				named = keyFile
			}
			if !strings.Contains(err.Error(), named) {
				t.Errorf("error %q does not name %s", err, named)
			}
			if !strings.Contains(err.Error(), tt.wantText) {
				t.Errorf("error %q does not say %q", err, tt.wantText)
			}
		})
	}
}

func TestCertPEMReturnsCopy(t *testing.T) {
	ca, _, err := LoadOrCreateCA(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	b := ca.CertPEM()
	b[0] = 'X'
	if ca.CertPEM()[0] == 'X' {
		t.Error("modifying CertPEM's result changed the CA")
	}
}

// TestExposedKeyRefused checks that a CA key group or others may read is
// refused, given directly or found in the CA directory, with the chmod
// that fixes it; 0600 and 0400 are fine.
func TestExposedKeyRefused(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := testCA{keyForm: ecdsaPKCS8}.write(t, dir)
	for _, mode := range []os.FileMode{0o640, 0o604, 0o644, 0o660} {
		if err := os.Chmod(keyFile, mode); err != nil {
			t.Fatal(err)
		}
		_, err := LoadCA(certFile, keyFile)
		if !errors.Is(err, ErrKeyExposed) || !strings.Contains(err.Error(), "chmod 600 "+keyFile) {
			t.Errorf("LoadCA with key mode %04o = %v, want ErrKeyExposed and the chmod", mode, err)
		}
		if _, _, err := LoadOrCreateCA(dir); !errors.Is(err, ErrKeyExposed) {
			t.Errorf("LoadOrCreateCA with key mode %04o = %v, want ErrKeyExposed", mode, err)
		}
	}
	for _, mode := range []os.FileMode{0o600, 0o400} {
		if err := os.Chmod(keyFile, mode); err != nil {
			t.Fatal(err)
		}
		if _, err := LoadCA(certFile, keyFile); err != nil {
			t.Errorf("LoadCA with key mode %04o: %v", mode, err)
		}
	}
}
