package integration

import (
	"errors"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// ephemeralLow is the lowest port the kernel hands out to listeners on
// port 0 and to outgoing connections: Linux says it; 10000 is below the
// other systems' defaults (FreeBSD 10000, macOS and Windows 49152).
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 10000
	}
	if f := strings.Fields(string(b)); len(f) == 2 {
		if n, err := strconv.Atoi(f[0]); err == nil {
			return n
		}
	}
	return 10000
}

// listenReusable listens on a port of 127.0.0.1 that can be closed and
// listened on again without another test taking it in between: one below
// the ephemeral range, which no listener on port 0 and no outgoing
// connection is given, so only an explicit listen on that very port could.
// Where the ephemeral range leaves no room below it, the port is the
// kernel's choice and the race remains.
func listenReusable(t *testing.T) net.Listener {
	t.Helper()
	low := ephemeralLow()
	if from := max(1024, low-10000); low-from >= 1000 {
		for range 50 {
			ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(from+rand.IntN(low-from))))
			if err == nil {
				return ln
			}
			if !errors.Is(err, syscall.EADDRINUSE) {
				t.Fatalf("origin listener: %v", err)
			}
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("origin listener: %v", err)
	}
	return ln
}
