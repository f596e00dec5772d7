package identity

import (
	"crypto/rand"
	"crypto/sha256"
)

// macSize is the size of a remembered credential's key.
const macSize = sha256.Size

// macKey computes HMAC-SHA256 (RFC 2104) under a key drawn at start, so
// that a remembered credential is kept as a keyed hash of the header that
// carried it, never as the password. It is written out, rather than taken
// from crypto/hmac, so that the hash of a header on the hot path costs no
// allocation.
type macKey struct {
	ipad, opad [sha256.BlockSize]byte
}

func newMACKey() macKey {
	var key [sha256.Size]byte
	rand.Read(key[:]) // never fails (crypto/rand)
	return macKeyFrom(key[:])
}

func macKeyFrom(key []byte) macKey {
	var k macKey
	copy(k.ipad[:], key)
	copy(k.opad[:], key)
	for i := range k.ipad {
		k.ipad[i] ^= 0x36
		k.opad[i] ^= 0x5c
	}
	return k
}

// sum is HMAC-SHA256(key, s).
func (k *macKey) sum(s string) [macSize]byte {
	var inner [macSize]byte
	var buf [sha256.BlockSize + 192]byte
	if len(s) <= len(buf)-sha256.BlockSize {
		copy(buf[:], k.ipad[:])
		n := copy(buf[sha256.BlockSize:], s)
		inner = sha256.Sum256(buf[:sha256.BlockSize+n])
	} else {
		h := sha256.New()
		h.Write(k.ipad[:])
		h.Write([]byte(s))
		h.Sum(inner[:0])
	}
	var outer [sha256.BlockSize + macSize]byte
	copy(outer[:], k.opad[:])
	copy(outer[sha256.BlockSize:], inner[:])
	return sha256.Sum256(outer[:])
}
