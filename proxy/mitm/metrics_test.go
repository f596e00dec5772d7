package mitm

import (
	"fmt"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestIssuerCollect scrapes issuers, with the cache on and off, through a
// pedantic registry after leaves were signed and served from the cache.
func TestIssuerCollect(t *testing.T) {
	tests := []struct {
		name           string
		opts           IssuerOptions
		signed, cached int
	}{
		{"cache on", IssuerOptions{MaxCachedHosts: 2}, 4, 2}, // a, b, c (evicts a), a again
		{"cache off", IssuerOptions{DisableCache: true}, 5, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, iss := newTestIssuer(t, tt.opts)
			for _, host := range []string{"a.test", "b.test", "c.test", "c.test", "a.test"} {
				if _, err := iss.Leaf(host); err != nil {
					t.Fatal(err)
				}
			}
			want := fmt.Sprintf(`
# HELP robotsgate_mitm_cached_hosts Hosts whose leaf certificate is cached.
# TYPE robotsgate_mitm_cached_hosts gauge
robotsgate_mitm_cached_hosts %d
# HELP robotsgate_mitm_leaves_signed_total Leaf certificates signed for intercepted hosts.
# TYPE robotsgate_mitm_leaves_signed_total counter
robotsgate_mitm_leaves_signed_total %d
`, tt.cached, tt.signed)
			if err := testutil.CollectAndCompare(iss, strings.NewReader(want)); err != nil {
				t.Error(err)
			}
		})
	}
}
