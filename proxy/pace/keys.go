package pace

import (
	"hash/maphash"
	"strings"
)

// schedule is the name who's schedules go by and its kind: 'c' for a
// credential's name, 't' for a product token, which is compared in lower
// case.
func (who Identity) schedule() (name string, kind byte) {
	if who.Credential != "" {
		return who.Credential, 'c'
	}
	return who.Token, 't'
}

// scheduleKey is the key of who's schedule at origin: the hash of origin,
// a zero byte, the kind and the name, a token in lower case. A key that
// fits on the stack is hashed there in one call, which costs the on-time
// path less than a maphash.Hash; who is a pointer for the same reason.
func (p *Pacer) scheduleKey(origin string, who *Identity) uint64 {
	name, kind := who.schedule()
	var buf [128]byte
	if n := len(origin) + 2 + len(name); n <= len(buf) {
		copy(buf[:], origin)
		buf[len(origin)], buf[len(origin)+1] = 0, kind
		lowered(buf[len(origin)+2:n], name, kind)
		return maphash.Bytes(p.seed, buf[:n])
	}
	var h maphash.Hash
	h.SetSeed(p.seed)
	h.WriteString(origin)
	h.WriteByte(0)
	h.WriteByte(kind)
	for len(name) > 0 {
		n := min(len(name), len(buf))
		lowered(buf[:n], name[:n], kind)
		h.Write(buf[:n])
		name = name[n:]
	}
	return h.Sum64()
}

// lowered copies name into dst, as long, in lower case when it is a
// token (kind 't').
func lowered(dst []byte, name string, kind byte) {
	copy(dst, name)
	if kind != 't' {
		return
	}
	for i, c := range dst {
		if 'A' <= c && c <= 'Z' {
			dst[i] = c + 'a' - 'A'
		}
	}
}

// sharedKey names who's schedule at origin in the Shared schedules:
// origin, a zero byte, the kind and the name, a token in lower case, as
// scheduleKey hashes them but with no seed, so that every process of a
// fleet names it alike. (One writer for both would make scheduleKey's
// hash escape: the local path must not allocate.)
func sharedKey(origin string, who Identity) string {
	name, kind := who.schedule()
	var b strings.Builder
	b.Grow(len(origin) + 2 + len(name))
	b.WriteString(origin)
	b.WriteByte(0)
	b.WriteByte(kind)
	for i := 0; i < len(name); i++ {
		c := name[i]
		if kind == 't' && 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		b.WriteByte(c)
	}
	return b.String()
}
