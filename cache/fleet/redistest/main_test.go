package redistest

import (
	"os"
	"testing"
)

// tools tallies the tests skipped for want of redis-server, reported
// after the run.
var tools = NewTools("robotsgate/cache/fleet/redistest")

func TestMain(m *testing.M) { os.Exit(tools.Run(m)) }
