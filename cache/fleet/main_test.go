package fleet_test

import (
	"os"
	"testing"

	"robotsgate/cache/fleet/redistest"
)

// tools tallies the tests skipped for want of redis-server, reported
// after the run even without -v.
var tools = redistest.NewTools("robotsgate/cache/fleet")

func TestMain(m *testing.M) { os.Exit(tools.Run(m)) }

// startRedis is redistest.Start, the test counted in tools when
// redis-server is not installed.
func startRedis(tb testing.TB, opts ...redistest.Option) *redistest.Server {
	tb.Helper()
	tools.LookRedis(tb)
	return redistest.Start(tb, opts...)
}
