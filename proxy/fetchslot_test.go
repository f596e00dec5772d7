package proxy

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"robotsgate/proxy/audit"
	"robotsgate/proxy/identity"
	"robotsgate/robots"
	"robotsgate/robots/fetch"
)

// TestFetchClient: a request's robots.txt fetch is charged to its
// credential when it has one, else to its address (an IPv6 one by its
// /64); no credential name can pass for an address, as names hold no ':'.
func TestFetchClient(t *testing.T) {
	p := newTestServer(t, proxyConfig{})
	for _, c := range []struct {
		remote string
		cred   *identity.Credential
		want   string
	}{
		{"127.0.0.2:40000", nil, "127.0.0.2:"},
		{"127.0.0.2:40001", nil, "127.0.0.2:"},
		{"[2001:db8::1]:443", nil, "2001:db8::/64:"},
		{"[2001:db8::ffff:1]:443", nil, "2001:db8::/64:"},
		{"[2001:db8:0:1::1]:443", nil, "2001:db8:0:1::/64:"},
		{"[::ffff:127.0.0.2]:443", nil, "127.0.0.2:"},
		{"127.0.0.2:40000", &identity.Credential{Name: "crawler-a"}, "crawler-a"},
		{"127.0.0.3:40000", &identity.Credential{Name: "crawler-a"}, "crawler-a"},
		{"127.0.0.2", &identity.Credential{Name: "127.0.0.2"}, "127.0.0.2"},
	} {
		r := httptest.NewRequest("GET", "http://example.com/", nil)
		r.RemoteAddr = c.remote
		d := p.srv.newDecision(r, nil)
		d.identify(c.cred)
		ctx := d.fetchContext(r)
		if ctx.Client != c.want || ctx.Context != r.Context() {
			t.Errorf("%s with %v: fetches as %q, want %q", c.remote, c.cred, ctx.Client, c.want)
		}
	}
}

// TestNoFetchSlot: a robots.txt not fetched for want of a slot is answered
// 503 with Retry-After and recorded as an error naming the setting to
// raise; any other result is left to the verdict.
func TestNoFetchSlot(t *testing.T) {
	p := newTestServer(t, proxyConfig{})
	r := httptest.NewRequest("GET", "http://example.com/page", nil)
	for _, c := range []struct {
		name       string
		err        error
		wantReason string
		retryAfter string
	}{
		{"share", &fetch.SlotError{Held: 2, PerClient: 2, MaxConcurrent: 8, Waited: 5 * time.Second, Timeout: 5 * time.Second},
			"robotsgate has no free robots.txt fetch slot for this client: its robots.txt fetches under way fill its share (ROBOTSGATE_MAX_FETCHES_PER_CLIENT)", "5"},
		{"all", &fetch.SlotError{Held: 1, PerClient: 2, MaxConcurrent: 8, Waited: 5 * time.Second, Timeout: 5 * time.Second},
			"robotsgate has no free robots.txt fetch slot for this client: all of them are in use (ROBOTSGATE_MAX_FETCHES)", "5"},
		{"parse", &fetch.ParseSlotError{Origin: "http://example.com", MaxParses: 2, Waited: 4 * time.Second},
			"robotsgate has no free robots.txt parse slot: all of them are in use (one per CPU)", "1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := p.srv.newDecision(r, nil)
			page := d.noFetchSlot(&fetch.Result{Answer: robots.Answer{Outcome: robots.OutcomeUnreachable}, Err: c.err})
			if page == nil {
				t.Fatal("no answer")
			}
			if page.status != http.StatusServiceUnavailable || page.header.Get("Retry-After") != c.retryAfter {
				t.Errorf("answer %d, Retry-After %q; want 503, %s", page.status, page.header.Get("Retry-After"), c.retryAfter)
			}
			var rec audit.Record
			d.record(&rec)
			if rec.Verdict != robots.VerdictError || rec.Reason != c.wantReason || rec.Status != http.StatusServiceUnavailable || rec.Error != c.err.Error() || rec.Forwarded {
				t.Errorf("record: verdict %q, reason %q, status %d, error %q, forwarded %v", rec.Verdict, rec.Reason, rec.Status, rec.Error, rec.Forwarded)
			}
		})
	}
	for _, err := range []error{nil, errors.New("connection refused"), &fetch.StatusError{Code: 503}} {
		d := p.srv.newDecision(r, nil)
		if page := d.noFetchSlot(&fetch.Result{Err: err}); page != nil || d.done {
			t.Errorf("a fetch that ended in %v was answered (%v), its record written (%v)", err, page != nil, d.done)
		}
	}
}
