package robots

// Bounds on the memory a parsed file keeps alive, which a cache charges
// (see [Robots.RetainedBytes]) and must make room for: parsed without
// [Parser.KeepIgnored], a file keeps at most MaxRetainedPerByte bytes per
// byte parsed, plus MaxRetainedBase. The costliest files per byte are
// lists of distinct user-agent names (each keeps a rule set of its own:
// up to about 16 bytes per byte of "user-agent:N / allow:/" lines), then
// short rules (about 11 per byte of "Allow: /n/index.htm", which implies a
// second rule); a group is kept once however many names it has, so names
// sharing groups cost no more (about 10 per byte). The bound leaves room
// above them for the parser to change. robots.TestRetainedBound and
// robots.FuzzRetainedBound check it.
const (
	MaxRetainedPerByte = 24
	MaxRetainedBase    = 4 << 10
)

// MaxRetained is the most [Robots.RetainedBytes] of a file parsed with
// the parse limit maxBytes (zero or less: DefaultMaxBytes) and without
// [Parser.KeepIgnored].
func MaxRetained(maxBytes int) int64 {
	if maxBytes <= 0 {
		maxBytes = DefaultMaxBytes
	}
	return MaxRetainedPerByte*int64(maxBytes) + MaxRetainedBase
}
