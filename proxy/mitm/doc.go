// Package mitm holds the certificate authority robotsgate uses to intercept
// HTTPS: loading or creating the CA, and issuing a leaf certificate for every
// host a client opens a TLS tunnel to, so the proxy can read the requests
// inside and check them against robots.txt.
//
// It knows nothing about goproxy: [Issuer.Server] turns a hijacked CONNECT
// connection into the server side of TLS. goproxy's own CA and signer are
// never used: the built-in CA's private key ships with the library, and its
// signer derives leaf keys from a predictable seed.
//
// # CA
//
// [LoadCA] loads an operator's CA from PEM files (RSA or ECDSA keys in PKCS#1,
// PKCS#8 or SEC1 form). [LoadOrCreateCA] keeps a CA in a directory, creating
// an ECDSA P-256 CA the first time. Creation never overwrites a file: the key
// and the certificate are written to temporary files, synced, and hard-linked
// into place, which fails rather than replaces when the name exists. Two
// processes racing to create the CA therefore agree on one pair, and a crash
// leaves either nothing, a whole key without its certificate (reported
// clearly on the next start), or a whole pair; never half a file (at worst a
// stray temporary file beside them).
//
// # Leaves
//
// An [Issuer] makes one ECDSA P-256 key pair, from crypto/rand, when it is
// created, and every leaf it signs carries that same public key, as
// google/martian and mitmproxy do. A new host then costs one signature and
// no key generation, and the cache holds certificates only. With P-256 the
// saving is modest (a key is about 12µs against about 120µs for signing a
// leaf, which includes crypto/x509 checking its own signature); it is the
// RSA-2048 keys of naive interceptors that cost 60-80ms each. The choice
// rests as much on simplicity and on losing nothing: per-host keys would buy
// no isolation, because whoever can read this process's memory already holds
// the CA key, which can mint a certificate for any host. The leaf key lives
// only in memory and is replaced whenever the process restarts.
//
// A leaf is valid from one hour in the past (clients with a slow clock) until
// seven days ahead, never beyond the CA's own expiry. Seven days keeps a leaked
// leaf short-lived and stays far below the 398-day cap some clients enforce,
// while renewal stays rare: a cached leaf is re-signed once a quarter of its
// validity remains (about 42 hours), one signature per host per five days.
//
// Leaves are cached per host in a least-recently-used list of
// [DefaultMaxCachedHosts] entries (about 850 bytes each, 3.4 MB in all); a
// crawler that touches more hosts re-signs the coldest ones, about 120µs
// each. Concurrent handshakes for a host that is not cached wait for one
// signature.
//
// All intercepted connections share one TLS configuration, so the session
// tickets crypto/tls issues (with keys it makes and rotates itself) work
// across connections: a crawler that keeps a session cache resumes its
// session on every later tunnel, skipping the signature and the
// certificate. A client may resume, in a tunnel to one host, a session it
// began with another: the server name of a resumed connection proves
// nothing, and nothing may rely on it.
//
// Host names come from clients (the TLS SNI field, or the CONNECT target when
// a client sends no SNI), so they are normalised and checked before anything
// is signed; see [ErrInvalidHost].
package mitm
