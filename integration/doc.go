// Package integration holds robotsgate's black-box tests: they build the
// real binary once, start it as a subprocess with its own environment, CA
// directory and audit log, and drive it with real clients (Go's net/http,
// raw CONNECT tunnels, curl) against real origins on 127.0.0.1. They use no
// package of the module: only the binary, its environment variables, its
// logs and its audit log, as an operator would.
package integration
