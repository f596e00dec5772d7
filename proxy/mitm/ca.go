package mitm

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"os"
	"path/filepath"
	"runtime"
	"time"
)

// File names LoadOrCreateCA uses inside its directory.
const (
	CACertFileName = "ca.pem"
	CAKeyFileName  = "ca-key.pem"
)

const (
	caLifetime = 10 * 365 * 24 * time.Hour
	// caCreationWait bounds how long LoadOrCreateCA waits for another process
	// that has written the key but not yet the certificate; that window lasts
	// microseconds, so running out of it means the pair really is incomplete.
	caCreationWait  = time.Second
	caCreationProbe = 10 * time.Millisecond
)

// errLostCreationRace reports that another process published a CA key first.
var errLostCreationRace = errors.New("another process is creating the CA")

// CA is a certificate authority that can sign leaf certificates. It is
// immutable once loaded and safe for concurrent use.
type CA struct {
	cert     *x509.Certificate
	key      crypto.Signer
	certPEM  []byte
	certFile string
	keyFile  string
}

// Certificate returns the CA certificate. Callers must not modify it.
func (ca *CA) Certificate() *x509.Certificate { return ca.cert }

// CertPEM returns the CA certificate as one PEM block, ready to be served to
// users who need to trust it. The slice is a copy.
func (ca *CA) CertPEM() []byte { return append([]byte(nil), ca.certPEM...) }

// CertFile returns the path the certificate was loaded from or written to.
func (ca *CA) CertFile() string { return ca.certFile }

// KeyFile returns the path the private key was loaded from or written to.
func (ca *CA) KeyFile() string { return ca.keyFile }

// LoadCA loads a CA certificate and its private key from PEM files. The
// certificate must be a CA allowed to sign certificates; the key may be RSA
// (PKCS#1 or PKCS#8) or ECDSA (SEC1 or PKCS#8) and must match the
// certificate. Errors name the offending file.
func LoadCA(certFile, keyFile string) (*CA, error) {
	cert, err := readCACert(certFile)
	if err != nil {
		return nil, err
	}
	key, err := readPrivateKey(keyFile)
	if err != nil {
		return nil, err
	}
	pub, ok := key.Public().(interface{ Equal(crypto.PublicKey) bool })
	if !ok || !pub.Equal(cert.PublicKey) {
		return nil, fmt.Errorf("CA key %s does not match the certificate in %s", keyFile, certFile)
	}
	return &CA{
		cert:     cert,
		key:      key,
		certPEM:  pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw}),
		certFile: certFile,
		keyFile:  keyFile,
	}, nil
}

// readCACert reads the first certificate of a PEM file and checks that it
// can act as a CA today.
func readCACert(path string) (*x509.Certificate, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read CA certificate: %w", err)
	}
	var block *pem.Block
	for rest := data; ; {
		block, rest = pem.Decode(rest)
		if block == nil {
			return nil, fmt.Errorf("CA certificate %s: no PEM block of type CERTIFICATE found", path)
		}
		if block.Type == "CERTIFICATE" {
			break
		}
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("CA certificate %s: %w", path, err)
	}
	if !cert.BasicConstraintsValid || !cert.IsCA {
		return nil, fmt.Errorf("CA certificate %s: %q is not a CA certificate (basic constraints lack CA:TRUE), so it cannot sign certificates for intercepted hosts",
			path, cert.Subject.String())
	}
	// An absent key usage extension places no limit (RFC 5280 §4.2.1.3).
	if cert.KeyUsage != 0 && cert.KeyUsage&x509.KeyUsageCertSign == 0 {
		return nil, fmt.Errorf("CA certificate %s: %q may not sign certificates (key usage lacks keyCertSign)",
			path, cert.Subject.String())
	}
	if now := time.Now(); now.After(cert.NotAfter) {
		return nil, fmt.Errorf("CA certificate %s: expired on %s", path, cert.NotAfter.UTC().Format(time.RFC3339))
	}
	return cert, nil
}

// readPrivateKey reads the first private key of a PEM file, skipping blocks
// such as the "EC PARAMETERS" that `openssl ecparam -genkey` writes first.
func readPrivateKey(path string) (crypto.Signer, error) {
	if err := checkKeyPrivate(path); err != nil {
		return nil, err
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read CA key: %w", err)
	}
	var seen []string
	for rest := data; ; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			if len(seen) == 0 {
				return nil, fmt.Errorf("CA key %s: no PEM data found", path)
			}
			return nil, fmt.Errorf("CA key %s: no private key PEM block found (found %q)", path, seen)
		}
		if _, encrypted := block.Headers["Proc-Type"]; encrypted {
			return nil, encryptedKeyError(path)
		}
		var key any
		switch block.Type {
		case "RSA PRIVATE KEY":
			key, err = x509.ParsePKCS1PrivateKey(block.Bytes)
		case "EC PRIVATE KEY":
			key, err = x509.ParseECPrivateKey(block.Bytes)
		case "PRIVATE KEY":
			key, err = x509.ParsePKCS8PrivateKey(block.Bytes)
		case "ENCRYPTED PRIVATE KEY":
			return nil, encryptedKeyError(path)
		default:
			seen = append(seen, block.Type)
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("CA key %s: parse %s block: %w", path, block.Type, err)
		}
		switch k := key.(type) {
		case *rsa.PrivateKey:
			return k, nil
		case *ecdsa.PrivateKey:
			return k, nil
		case ed25519.PrivateKey:
			return nil, fmt.Errorf("CA key %s: Ed25519 keys are not supported (browsers do not accept Ed25519 certificates); use RSA or ECDSA", path)
		default:
			return nil, fmt.Errorf("CA key %s: unsupported key type %T; use RSA or ECDSA", path, key)
		}
	}
}

// ErrKeyExposed is wrapped by the error for a CA key file that others than
// its owner may read.
var ErrKeyExposed = errors.New("CA key readable by group or others")

// checkKeyPrivate refuses a key file that group or others may read: whoever
// reads it can impersonate any site to the crawlers that trust the CA.
func checkKeyPrivate(path string) error {
	if runtime.GOOS == "windows" {
		return nil // modes do not express Windows ACLs
	}
	fi, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("read CA key: %w", err)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return fmt.Errorf("%w: %s has mode %04o; whoever can read it can impersonate any site to clients that trust the CA; fix it with: chmod 600 %s",
			ErrKeyExposed, path, perm, path)
	}
	return nil
}

func encryptedKeyError(path string) error {
	return fmt.Errorf("CA key %s: encrypted keys are not supported; decrypt it first (openssl pkey -in KEY -out PLAIN)", path)
}

// LoadOrCreateCA returns the CA kept in dir as ca.pem and ca-key.pem,
// creating an ECDSA P-256 CA valid for ten years when neither file exists;
// created reports whether it did. When only one of the two files exists it
// fails and leaves the file alone.
func LoadOrCreateCA(dir string) (ca *CA, created bool, err error) {
	if dir == "" {
		return nil, false, errors.New("CA directory is empty")
	}
	certFile := filepath.Join(dir, CACertFileName)
	keyFile := filepath.Join(dir, CAKeyFileName)

	certExists, err := fileExists(certFile)
	if err != nil {
		return nil, false, err
	}
	keyExists, err := fileExists(keyFile)
	if err != nil {
		return nil, false, err
	}
	switch {
	case certExists && keyExists:
		ca, err = LoadCA(certFile, keyFile)
		return ca, false, err
	case certExists:
		return nil, false, fmt.Errorf("CA certificate %s exists but its key %s does not; restore the key, or remove the certificate to create a new CA", certFile, keyFile)
	case keyExists:
		// Creation links the key before the certificate, so another process
		// may be between the two steps.
		ca, err = loadWhenComplete(certFile, keyFile)
		return ca, false, err
	}

	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, false, fmt.Errorf("create CA directory: %w", err)
	}
	ca, err = createCA(certFile, keyFile)
	if errors.Is(err, errLostCreationRace) {
		// Another process won the race; use its CA.
		ca, err = loadWhenComplete(certFile, keyFile)
		return ca, false, err
	}
	if err != nil {
		return nil, false, err
	}
	return ca, true, nil
}

// loadWhenComplete loads the pair once the certificate appears next to the
// key, waiting at most caCreationWait for a concurrent creator.
func loadWhenComplete(certFile, keyFile string) (*CA, error) {
	deadline := time.Now().Add(caCreationWait)
	for {
		exists, err := fileExists(certFile)
		if err != nil {
			return nil, err
		}
		if exists {
			return LoadCA(certFile, keyFile)
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("CA key %s exists but its certificate %s does not; restore the certificate, or remove the key to create a new CA", keyFile, certFile)
		}
		time.Sleep(caCreationProbe)
	}
}

func fileExists(path string) (bool, error) {
	_, err := os.Lstat(path)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	default:
		return false, fmt.Errorf("check %s: %w", path, err)
	}
}

// createCA generates a CA and publishes it as keyFile then certFile. It
// returns errLostCreationRace when the key file appeared meanwhile.
func createCA(certFile, keyFile string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate CA key: %w", err)
	}
	serial, err := randomSerial()
	if err != nil {
		return nil, err
	}
	name := "robotsgate CA"
	if host, err := os.Hostname(); err == nil && host != "" {
		name += " " + host
	}
	now := time.Now()
	template := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: name, Organization: []string{"robotsgate"}},
		NotBefore:             now.Add(-leafClockSkew),
		NotAfter:              now.Add(caLifetime),
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLen:            0,
		MaxPathLenZero:        true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	// With SubjectKeyId unset, CreateCertificate derives it from the public
	// key, as it does for every CA template.
	der, err := x509.CreateCertificate(rand.Reader, template, template, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("create CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parse new CA certificate: %w", err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("encode CA key: %w", err)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})

	// The key goes first: a crash between the two links leaves a key without
	// a certificate, which LoadOrCreateCA reports instead of replacing.
	if err := publishFile(keyFile, keyPEM, 0o600); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return nil, errLostCreationRace
		}
		return nil, err
	}
	if err := publishFile(certFile, certPEM, 0o644); err != nil {
		// Only a foreign file can be in the way here, since racing creators
		// stop at the key; withdraw our key so the user's file is not paired
		// with it.
		if rmErr := os.Remove(keyFile); rmErr != nil {
			err = errors.Join(err, fmt.Errorf("withdraw new CA key: %w", rmErr))
		}
		return nil, err
	}
	syncDir(filepath.Dir(certFile))
	return &CA{cert: cert, key: key, certPEM: certPEM, certFile: certFile, keyFile: keyFile}, nil
}

// publishFile writes data to a synced temporary file next to path and
// hard-links it to path, so path appears whole or not at all, and an existing
// path is never replaced (the error then wraps fs.ErrExist).
func publishFile(path string, data []byte, mode fs.FileMode) (err error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer func() {
		if rmErr := os.Remove(tmp.Name()); rmErr != nil && !errors.Is(rmErr, fs.ErrNotExist) {
			err = errors.Join(err, fmt.Errorf("remove temporary file: %w", rmErr))
		}
	}()
	if err := writeAndSync(tmp, data, mode); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Link(tmp.Name(), path); err != nil {
		return fmt.Errorf("publish %s: %w", path, err)
	}
	return nil
}

func writeAndSync(f *os.File, data []byte, mode fs.FileMode) error {
	// Chmod rather than rely on the umask: the key must be 0600 whatever it is.
	if err := f.Chmod(mode); err != nil {
		f.Close()
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// syncDir makes the new directory entries durable where the platform allows
// it; the files are already synced, so a failure here only risks losing the
// whole new pair in a power cut, which the next start recreates.
func syncDir(dir string) {
	d, err := os.Open(dir)
	if err != nil {
		return
	}
	_ = d.Sync()
	_ = d.Close()
}

// randomSerial returns a random serial number in [1, 2^128).
func randomSerial() (*big.Int, error) {
	limit := new(big.Int).Lsh(big.NewInt(1), 128)
	limit.Sub(limit, big.NewInt(1))
	n, err := rand.Int(rand.Reader, limit)
	if err != nil {
		return nil, fmt.Errorf("generate serial number: %w", err)
	}
	return n.Add(n, big.NewInt(1)), nil
}
