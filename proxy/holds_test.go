package proxy

import (
	"net/http"
	"testing"
	"time"
)

func TestRetryAfterOf(t *testing.T) {
	now := time.Date(2026, 11, 26, 11, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		value string
		want  time.Duration
		ok    bool
	}{
		{"", 0, false},
		{"3", 3 * time.Second, true},
		{" 120 ", 2 * time.Minute, true},
		{"0", 0, true},
		{"99999999999999999999999", maxRetryAfterSeconds * time.Second, true},
		{"Thu, 26 Nov 2026 11:00:05 GMT", 5 * time.Second, true}, // IMF-fixdate
		{"Thursday, 26-Nov-26 11:01:00 GMT", time.Minute, true},  // RFC 850
		{"Thu Nov 26 11:00:30 2026", 30 * time.Second, true},     // asctime
		{"Thu, 26 Nov 2026 10:00:00 GMT", 0, true},               // past
		{"-5", 0, false},
		{"1.5", 0, false},
		{"3s", 0, false},
		{"tomorrow", 0, false},
		{"Thu, 26 Nov 2026 11:00:05 CET", 0, false},
	} {
		got, ok := retryAfterOf(http.Header{"Retry-After": {c.value}}, now)
		if got != c.want || ok != c.ok {
			t.Errorf("Retry-After %q: %v, %v; want %v, %v", c.value, got, ok, c.want, c.ok)
		}
	}
}
