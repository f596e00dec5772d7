package robots

// Bounds on the memory a parsed file keeps alive, which a cache charges
// (see [Robots.RetainedBytes]) and must make room for: parsed without
// [Parser.KeepIgnored], a file keeps at most MaxRetainedPerByte bytes per
// byte parsed, plus MaxRetainedBase. In the compact form the costliest
// files per byte are lists of distinct user-agent names each heading a
// group of one rule (about 5 bytes per byte of "user-agent:N / allow:/"
// lines: a name, a group and a rule record each), then names alone and
// short rules (2 to 3.6 per byte). The bound leaves room far above them
// for the parser to change; the configuration's warnings are computed
// from it. robots.TestRetainedBound and robots.FuzzRetainedBound check it.
const (
	MaxRetainedPerByte = 8
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
