package redistest

import (
	"net"
	"strconv"
	"strings"
	"testing"
)

// TestStartTriesAnotherPort: a port taken between freePort and
// redis-server's bind costs a try, not the test, whether what took it
// answers or not.
func TestStartTriesAnotherPort(t *testing.T) {
	tests := []struct {
		name string
		// take holds a port of 127.0.0.1 until the test ends.
		take func(t *testing.T) int
	}{
		{
			name: "a listener that never answers",
			take: func(t *testing.T) int {
				l, err := net.Listen("tcp", "127.0.0.1:0")
				if err != nil {
					t.Fatalf("listen: %v", err)
				}
				t.Cleanup(func() { l.Close() })
				return l.Addr().(*net.TCPAddr).Port
			},
		},
		{
			name: "another redis-server",
			take: func(t *testing.T) int { return Start(t).port },
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tools.LookRedis(t)
			taken := tt.take(t)
			var tries int
			s := start(t, func(t testing.TB) int {
				tries++
				if tries == 1 {
					return taken
				}
				return freePort(t)
			})
			if tries != 2 || s.port == taken {
				t.Errorf("started on port %d after %d tries; want another than %d, at the second", s.port, tries, taken)
			}
			info, err := s.Raw(0).Info(t.Context(), "server").Result()
			if err != nil {
				t.Fatalf("INFO: %v", err)
			}
			if want := "process_id:" + strconv.Itoa(s.cmd.Process.Pid); !strings.Contains(info, want) {
				t.Errorf("INFO server of %s = %q; want %s, the server started", s.Addr(), info, want)
			}
		})
	}
}
