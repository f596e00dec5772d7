//go:build !linux

package integration

import "os/exec"

// dieWithTest has no portable equivalent outside Linux; t.Cleanup stops
// the proxy there.
func dieWithTest(*exec.Cmd) {}
