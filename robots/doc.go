// Package robots is robotsgate's Robots Exclusion Protocol engine (RFC 9309).
//
// It parses a robots.txt body once into rules ([Parser.Parse]), answers "may this
// product token fetch this path, and why?" ([Robots.Check]) and, for a
// proxy, the same for every reading an origin may make of the path, within
// a bounded cost ([Robots.CheckReadings], [Robots.Prepare]), derives the
// product token from a User-Agent header ([ProductToken]), says what the
// outcome of getting robots.txt means ([OutcomeOfStatus], [Answer]) and
// names a verdict in the words robotsgate reports it with ([Decision]).
//
// The parser walks a file once and reports every physical line ([Line]); the
// rule builder is one consumer of that walk, the record of ignored lines
// ([Robots.Ignored]) another.
//
// The package does no I/O (package fetch gets robots.txt from origins),
// knows nothing of caching, proxying or logging setup, and imports only
// the standard library.
package robots
