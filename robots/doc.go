// Package robots is robotsgate's Robots Exclusion Protocol engine (RFC 9309).
//
// It parses a robots.txt body once into rules ([Parse]), answers "may this
// product token fetch this path, and why?" ([Robots.Check]), derives the
// product token from a User-Agent header ([ProductToken]) and fetches an
// origin's robots.txt with RFC 9309's access rules.
//
// The parser walks a file once and reports every physical line ([Lines]); the
// rule builder behind [Parse] is one consumer of that walk, the record of
// ignored lines another, so a linter can reuse the same walk.
//
// The package knows nothing of caching, proxying or logging setup, and
// imports only the standard library.
package robots
