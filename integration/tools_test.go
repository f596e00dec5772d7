package integration

import (
	"testing"

	"robotsgate/cache/fleet/redistest"
)

// tools tallies the tests skipped for want of a program they run (curl,
// wget, redis-server, …), which TestMain reports after the run even
// without -v. .ci/run installs every one.
var tools = redistest.NewTools("robotsgate/integration")

// startRedis is redistest.Start, the test counted in tools when
// redis-server is not installed.
func startRedis(t testing.TB, opts ...redistest.Option) *redistest.Server {
	t.Helper()
	tools.LookRedis(t)
	return redistest.Start(t, opts...)
}
