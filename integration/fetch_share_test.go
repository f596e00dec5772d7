package integration

import (
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// shareRobots is the robots.txt every origin of TestFetchShare serves,
// once it serves it at all.
const shareRobots = "User-agent: *\nDisallow: /private/\n"

// TestFetchShare: clients that make robotsgate fetch robots.txt files that
// trickle hold at most their share of the fetch slots, a slot that frees
// goes to the waiting client that holds the fewest, and waiting for a slot
// is never the origin's failure.
//
// Four hostile clients (told apart by source address) each take their
// share, two of the eight slots, with origins whose robots.txt trickles,
// and line up more such requests. A healthy client's origin, whose
// robots.txt takes 1.5s, is asked for after them: when three of the
// hostile clients' fetches end, it gets the first slot, ahead of their
// requests lined up before it, and is judged by its file. The fourth
// hostile client lined up more requests than its share can serve before
// they give up: they are answered 503 with Retry-After, recorded as
// errors, and nothing of them is kept: such an origin, asked again once
// slots are free, is judged by its real robots.txt.
func TestFetchShare(t *testing.T) {
	t.Parallel()
	const (
		fetchTimeout = 3 * time.Second
		slowRobots   = 1500 * time.Millisecond
		share        = 2
	)
	hostiles := []string{"127.0.0.2", "127.0.0.3", "127.0.0.4"}
	const greedy, healthyAddr = "127.0.0.5", "127.0.0.6"
	lining := map[string]int{"127.0.0.2": 2, "127.0.0.3": 2, "127.0.0.4": 2, greedy: 4}

	// Origins whose robots.txt trickles, a newline at a time, until their
	// group is released: then the rules come at once.
	early, late := make(chan struct{}), make(chan struct{})
	var releaseEarly, releaseLate sync.Once
	arrived := make(chan string, 64)
	trickle := func(addr *string, release <-chan struct{}) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			arrived <- *addr
			w.Header().Set("Content-Type", "text/plain")
			rc := http.NewResponseController(w)
			tick := time.NewTicker(100 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-release:
					io.WriteString(w, shareRobots)
					return
				case <-r.Context().Done():
					return
				case <-tick.C:
					io.WriteString(w, "\n")
					rc.Flush()
				}
			}
		}
	}
	owner := map[string]string{} // trickling origin's address → hostile client
	newTrickling := func(client string, release <-chan struct{}) *origin {
		var addr string
		o := newOrigin(t, false, map[string]http.HandlerFunc{"/robots.txt": trickle(&addr, release)})
		addr = o.addr
		owner[o.addr] = client
		return o
	}
	// The holders of the first three hostile clients are released early;
	// the greedy client's trickle until their fetches time out.
	var holders, liners []*origin
	for _, client := range append(hostiles, greedy) {
		release := early
		if client == greedy {
			release = late
		}
		for range share {
			holders = append(holders, newTrickling(client, release))
		}
		for range lining[client] {
			liners = append(liners, newTrickling(client, late))
		}
	}
	// Registered after the origins: runs before they close, which waits
	// for their handlers.
	t.Cleanup(func() {
		releaseEarly.Do(func() { close(early) })
		releaseLate.Do(func() { close(late) })
	})

	healthyOrigin := newOrigin(t, false, map[string]http.HandlerFunc{
		"/robots.txt": func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-time.After(slowRobots): // a slow origin, as is its right
			case <-r.Context().Done():
				return
			}
			robotsTxt(shareRobots)(w, r)
		},
	})

	p := startProxy(t, "ROBOTSGATE_MAX_FETCHES=8", "ROBOTSGATE_MAX_FETCHES_PER_CLIENT=2",
		"ROBOTSGATE_FETCH_TIMEOUT="+fetchTimeout.String(), "ROBOTSGATE_MITM=false", "ROBOTSGATE_LOG_LEVEL=debug")
	// waitInLine waits until n robots.txt fetches of client's have lined up
	// for a slot, as robotsgate's debug log says.
	waitInLine := func(client string, n int) {
		t.Helper()
		seen := 0
		_, err := p.output.waitForJSON(requestTimeout, p.exited, func(rec map[string]any) bool {
			if rec["msg"] == "robots.txt fetch waits for a slot" && rec["client"] == client+":" {
				seen++
			}
			return seen == n
		})
		if err != nil {
			t.Fatalf("%d robots.txt fetches of %s lined up for a slot, want %d: %v", seen, client, n, err)
		}
	}

	type answer struct {
		url string
		reply
		err error
	}
	answers := make(chan answer, len(holders)+len(liners))
	var hostileWG sync.WaitGroup
	ask := func(origins []*origin) {
		for _, o := range origins {
			c := p.clientFrom(t, owner[o.addr])
			hostileWG.Go(func() {
				u := o.base() + "/page"
				r, err := tryGet(c, u, crawlerUA)
				answers <- answer{u, r, err}
			})
		}
	}

	// Every slot taken, two by each hostile client: its share.
	ask(holders)
	held := map[string]int{}
	deadline := time.After(requestTimeout)
	for range holders {
		select {
		case addr := <-arrived:
			held[owner[addr]]++
		case <-deadline:
			t.Fatalf("robotsgate started %v robots.txt fetches of the hostile clients' origins, want 8", held)
		}
	}
	for _, client := range append(hostiles, greedy) {
		if held[client] != share {
			t.Errorf("hostile client %s has %d robots.txt fetches under way, want its share, %d; all: %v", client, held[client], share, held)
		}
	}
	// The hostile clients line up more, then the healthy client comes.
	ask(liners)
	for client, n := range lining {
		waitInLine(client, n)
	}
	healthy := p.clientFrom(t, healthyAddr)
	public := healthyOrigin.base() + "/public"
	healthyAnswer := make(chan answer, 1)
	go func() {
		r, err := tryGet(healthy, public, crawlerUA)
		healthyAnswer <- answer{public, r, err}
	}()
	waitInLine(healthyAddr, 1)

	// Three hostile clients' first fetches end: the first slot that frees
	// goes to the healthy client, which holds none, whose robots.txt is
	// then fetched in its own time and judged by.
	releaseEarly.Do(func() { close(early) })
	if a := <-healthyAnswer; a.err != nil || a.status != http.StatusOK || string(a.body) != healthyOrigin.page("/public") {
		t.Errorf("healthy client, %s: status %d, body %q, err %v; want the origin's page", public, a.status, a.body, a.err)
	}
	if r := get(t, healthy, healthyOrigin.base()+"/private/x", crawlerUA); r.status != http.StatusForbidden ||
		!strings.Contains(r.header.Get("X-Robotsgate-Decision"), `rule="/private/"`) {
		t.Errorf("healthy client, /private/x: status %d, decision %q; want 403 by Disallow: /private/",
			r.status, r.header.Get("X-Robotsgate-Decision"))
	}

	// The greedy client's share frees only when its first two fetches time
	// out, for two of the four it lined up: the other two give up before
	// those end. No other client's request waits in vain.
	var noSlot []answer
	collect := func(a answer) {
		switch {
		case a.err != nil:
			t.Errorf("hostile request %s: %v", a.url, a.err)
		case a.status == http.StatusServiceUnavailable:
			noSlot = append(noSlot, a)
		case a.status != http.StatusOK && !strings.Contains(string(a.body), "robots.txt unreachable: timeout"):
			// 200 once its origin was released, or 403 when its
			// robots.txt trickled past the time limit first.
			t.Errorf("hostile request %s: status %d, body %q; want 200, 403 for a robots.txt past the time limit, or 503", a.url, a.status, a.body)
		}
	}
	deadline = time.After(requestTimeout)
	for got := 0; len(noSlot) < lining[greedy]-share; got++ {
		select {
		case a := <-answers:
			collect(a)
		case <-deadline:
			t.Fatalf("%d hostile requests answered, %d of them for want of a slot; want %d of those", got, len(noSlot), lining[greedy]-share)
		}
	}
	releaseLate.Do(func() { close(late) })
	hostileWG.Wait()
	close(answers)
	for a := range answers {
		collect(a)
	}
	for _, a := range noSlot {
		// The greedy client held its share as its requests waited.
		if client := owner[strings.TrimSuffix(strings.TrimPrefix(a.url, "http://"), "/page")]; client != greedy {
			t.Errorf("no slot for %s, a request of %s; only %s's may wait in vain", a.url, client, greedy)
		}
		if a.header.Get("Retry-After") != "3" || !strings.HasPrefix(string(a.body), "robotsgate has no free robots.txt fetch slot for this client") ||
			!strings.Contains(string(a.body), "(ROBOTSGATE_MAX_FETCHES_PER_CLIENT)") {
			t.Errorf("no slot for %s: Retry-After %q, body %q; want 3 and the reason, its share", a.url, a.header.Get("Retry-After"), a.body)
		}
	}

	// Nothing of a request that got no slot was kept: its origin, never
	// asked for robots.txt, is judged by its real file now that slots are
	// free, for any client.
	retried := noSlot[0].url
	o := trickledOrigin(t, liners, retried)
	if n := o.count("/robots.txt"); n != 0 {
		t.Fatalf("%s: robots.txt requested %d times by a request that got no slot", o.addr, n)
	}
	if r := get(t, healthy, retried, crawlerUA); r.status != http.StatusOK || string(r.body) != o.page("/page") {
		t.Errorf("%s after the slots freed: status %d, body %q; want the page, as its robots.txt allows", retried, r.status, r.body)
	}
	if r := get(t, p.clientFrom(t, greedy), o.base()+"/private/y", crawlerUA); r.status != http.StatusForbidden ||
		!strings.Contains(r.header.Get("X-Robotsgate-Decision"), `rule="/private/"`) {
		t.Errorf("%s/private/y: status %d, decision %q; want 403 by Disallow: /private/", o.base(), r.status, r.header.Get("X-Robotsgate-Decision"))
	}
	if n := o.count("/robots.txt"); n != 1 {
		t.Errorf("%s: robots.txt requested %d times, want once", o.addr, n)
	}

	if code := p.stop(); code != 0 {
		t.Fatalf("robotsgate exited with %d", code)
	}
	recs := p.audit()
	if rec := auditFor(t, recs, public); rec.Verdict != "allow" || rec.RobotsCache != "loaded" || rec.Status != http.StatusOK {
		t.Errorf("healthy request's record: verdict %q, robots_cache %q, status %d; want allow, loaded, 200", rec.Verdict, rec.RobotsCache, rec.Status)
	}
	var refused []auditRecord
	for _, rec := range recs {
		if rec.URL == retried {
			refused = append(refused, rec)
		}
	}
	if len(refused) != 2 || refused[0].Verdict != "error" || refused[0].Status != http.StatusServiceUnavailable ||
		!strings.Contains(refused[0].Reason, "ROBOTSGATE_MAX_FETCHES_PER_CLIENT") || !strings.Contains(refused[0].Error, "no free fetch slot") ||
		refused[1].Verdict != "allow" || refused[1].RobotsCache != "loaded" {
		t.Errorf("records of %s: %+v; want an error for want of a slot, then allow from a fetch", retried, refused)
	}
}

// trickledOrigin returns the origin among origins that rawURL is on.
func trickledOrigin(t *testing.T, origins []*origin, rawURL string) *origin {
	t.Helper()
	for _, o := range origins {
		if strings.HasPrefix(rawURL, o.base()+"/") {
			return o
		}
	}
	t.Fatalf("%s is on none of the origins", rawURL)
	return nil
}
