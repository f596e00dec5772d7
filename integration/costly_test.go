package integration

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
)

// costlyRobots has a thousand wildcard rules: judging a long path against
// them takes milliseconds, judging an 8 KiB one with readings would take
// far longer.
func costlyRobots() string {
	var b strings.Builder
	b.WriteString("User-agent: *\nDisallow: /private/\n")
	for i := range 1000 {
		fmt.Fprintf(&b, "Disallow: /*zq%d\n", i)
	}
	return b.String()
}

// TestCostlyPaths: a decision whose work would pass the bound is refused
// without being worked out, and a client sending paths that are dear (but
// not too dear) to judge, many at once, changes nothing of another
// client's answers.
func TestCostlyPaths(t *testing.T) {
	t.Parallel()
	o := newOrigin(t, false, map[string]http.HandlerFunc{"/robots.txt": robotsTxt(costlyRobots())})
	p := startProxy(t)
	hostile, other := p.clientFrom(t, "127.0.0.2"), p.clientFrom(t, "127.0.0.3")

	tooCostly := "/" + strings.Repeat("zq/./", 7<<10/5)
	r := get(t, hostile, o.base()+tooCostly, crawlerUA)
	if r.status != http.StatusForbidden || !strings.Contains(string(r.body), "too costly to judge") {
		t.Fatalf("an 8 KiB path with readings under 1,000 wildcard rules: status %d, body %q; want 403, too costly", r.status, clip(string(r.body)))
	}

	costly := "/" + strings.Repeat("zq", 1<<10)
	var wg sync.WaitGroup
	hostileStatus := make(chan int, 16*8)
	for range 16 {
		wg.Go(func() {
			for range 8 {
				r, err := tryGet(hostile, o.base()+costly, crawlerUA)
				if err != nil {
					t.Error(err)
					return
				}
				hostileStatus <- r.status
			}
		})
	}
	for i := range 40 {
		path, want := fmt.Sprintf("/page/%d", i), http.StatusOK
		if i%4 == 0 {
			path, want = fmt.Sprintf("/private/%d", i), http.StatusForbidden
		}
		if r := get(t, other, o.base()+path, crawlerUA); r.status != want {
			t.Errorf("the other client's %s beside the costly paths: status %d, want %d; body %q", path, r.status, want, clip(string(r.body)))
		}
	}
	wg.Wait()
	close(hostileStatus)
	for status := range hostileStatus {
		if status != http.StatusOK {
			t.Errorf("a costly path within the bound: status %d, want 200 (judged, in turn)", status)
		}
	}
	if n := o.count(tooCostly); n != 0 {
		t.Errorf("the origin received the path too costly to judge %d times", n)
	}

	p.stop()
	// The record's url is cut (it is over 2 KiB): the refusal is the one 403.
	var refusals []auditRecord
	for _, rec := range p.audit() {
		if rec.Status == http.StatusForbidden && !strings.Contains(rec.URL, "/private/") {
			refusals = append(refusals, rec)
		}
	}
	if len(refusals) != 1 {
		t.Fatalf("%d records of refused costly paths, want 1", len(refusals))
	}
	if rec := refusals[0]; rec.Verdict != "disallow" || !strings.Contains(rec.Reason, "decision cost estimated at") || rec.Forwarded {
		t.Errorf("the too costly request's record: verdict %q, reason %q, forwarded %v", rec.Verdict, rec.Reason, rec.Forwarded)
	}
}
