package integration

import (
	"bufio"
	"bytes"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Issue 12: several robotsgate processes sharing one real redis-server
// behave like one proxy towards an origin: one robots.txt fetch, one
// Crawl-delay schedule; and they outlive Redis.

// startFleet starts n proxies sharing the Redis at redisURL, plus env.
func startFleet(t *testing.T, n int, redisURL string, env ...string) []*proxyProcess {
	t.Helper()
	fleet := make([]*proxyProcess, n)
	for i := range fleet {
		fleet[i] = startProxy(t, append([]string{"ROBOTSGATE_REDIS_URL=" + redisURL}, env...)...)
	}
	return fleet
}

// crawlOver sends each of paths through the proxies in turn (path i
// through proxy i mod n), from workers goroutines, and returns the status
// each got; a request that failed counts as status 0, with its error
// reported.
func crawlOver(t *testing.T, fleet []*proxyProcess, workers int, paths []string, base string) []int {
	t.Helper()
	clients := make([]*http.Client, len(fleet))
	for i, p := range fleet {
		clients[i] = p.client(t)
	}
	statuses := make([]int, len(paths))
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; i < len(paths); i += workers {
				r, err := tryGet(clients[i%len(clients)], base+paths[i], crawlerUA)
				if err != nil {
					t.Errorf("GET %s through proxy %d: %v", paths[i], i%len(clients), err)
					continue
				}
				statuses[i] = r.status
			}
		})
	}
	wg.Wait()
	return statuses
}

func TestFleetFetchesRobotsTxtOnce(t *testing.T) {
	t.Parallel()
	redis := startRedis(t)
	o := newOrigin(t, false, map[string]http.HandlerFunc{
		"/robots.txt": robotsTxt("User-agent: *\nDisallow: /private/\n"),
	})
	fleet := startFleet(t, 2, redis.URL())

	// 200 requests over both proxies at once, both of them cold: the
	// fetch is claimed by one and waited for by the other.
	var paths []string
	for i := range 200 {
		if i%10 == 9 {
			paths = append(paths, fmt.Sprintf("/private/%d", i))
		} else {
			paths = append(paths, fmt.Sprintf("/page/%d", i))
		}
	}
	statuses := crawlOver(t, fleet, 16, paths, o.base())
	for i, status := range statuses {
		want := http.StatusOK
		if strings.HasPrefix(paths[i], "/private/") {
			want = http.StatusForbidden
		}
		if status != want {
			t.Errorf("%s: status %d, want %d", paths[i], status, want)
		}
	}
	if n := o.count("/robots.txt"); n != 1 {
		t.Errorf("the origin served robots.txt %d times to a fleet of two, want once", n)
	}

	// One proxy fetched it (its records say "loaded"), the other took it
	// from Redis ("shared") and never fetched.
	var fetched []int
	for i, p := range fleet {
		p.stop()
		caches := map[string]int{}
		for _, rec := range p.audit() {
			if rec.Origin == o.base() {
				caches[rec.RobotsCache]++
			}
		}
		if caches["loaded"] > 0 {
			fetched = append(fetched, i)
		} else if caches["shared"] == 0 {
			t.Errorf("proxy %d neither fetched robots.txt nor took it from Redis: robots_cache counts %v", i, caches)
		}
	}
	if len(fetched) != 1 {
		t.Errorf("proxies %v fetched robots.txt themselves, want exactly one", fetched)
	}
}

func TestFleetKeepsCrawlDelay(t *testing.T) {
	t.Parallel()
	// Alone, two proxies keep a schedule each and let a crawler through
	// twice as fast as asked: that shows the measurement can fail.
	for _, shared := range []bool{true, false} {
		name := "alone"
		if shared {
			name = "shared"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			o := newOrigin(t, false, map[string]http.HandlerFunc{
				"/robots.txt": robotsTxt("User-agent: *\nCrawl-delay: 1\n"),
			})
			var fleet []*proxyProcess
			if shared {
				fleet = startFleet(t, 2, startRedis(t).URL())
			} else {
				fleet = []*proxyProcess{startProxy(t), startProxy(t)}
			}
			clients := []*http.Client{fleet[0].client(t), fleet[1].client(t)}
			// Warm both caches, so that fetching robots.txt does not
			// stand between the proxies' decisions and the origin.
			for _, c := range clients {
				tryGet(c, o.base()+"/robots.txt", crawlerUA)
			}

			// A crawler alternating between the proxies every 100 ms,
			// well past what Crawl-delay: 1 allows, until four of its
			// requests reached the origin and some were refused: the
			// count, not a time, says when there is enough to judge.
			byStatus := map[int][2]int{}
			var arrivals []time.Time
			deadline := time.Now().Add(30 * time.Second)
			for i := 0; len(arrivals) < 4 || byStatus[http.StatusTooManyRequests] == [2]int{}; i++ {
				if time.Now().After(deadline) {
					t.Fatalf("after 30s, %d requests reached the origin and statuses per proxy are %v; want 4, and some 429s", len(arrivals), byStatus)
				}
				r, err := tryGet(clients[i%2], fmt.Sprintf("%s/p/%d", o.base(), i), crawlerUA)
				if err != nil {
					t.Fatalf("request %d: %v", i, err)
				}
				counts := byStatus[r.status]
				counts[i%2]++
				byStatus[r.status] = counts
				arrivals = arrivals[:0]
				for _, a := range o.arrived() {
					if strings.HasPrefix(a.path, "/p/") {
						arrivals = append(arrivals, a.at)
					}
				}
				time.Sleep(100 * time.Millisecond) // the crawler's pace, not a wait of the test's
			}
			if len(byStatus) != 2 || byStatus[http.StatusOK] == [2]int{} {
				t.Fatalf("statuses per proxy %v, want 200s and 429s only", byStatus)
			}
			shortest := time.Hour
			for i := 1; i < len(arrivals); i++ {
				shortest = min(shortest, arrivals[i].Sub(arrivals[i-1]))
			}
			switch {
			case shared && shortest < time.Second-fleetJitter:
				t.Errorf("two requests reached the origin %v apart through a fleet sharing Redis; Crawl-delay: 1 asks for 1s", shortest.Round(time.Millisecond))
			case !shared && shortest >= time.Second-jitter:
				t.Errorf("two proxies without Redis kept the crawler to Crawl-delay: 1 together (shortest gap %v): the measurement cannot tell a shared schedule", shortest.Round(time.Millisecond))
			}
		})
	}
}

func TestFleetOutlivesRedis(t *testing.T) {
	t.Parallel()
	redis := startRedis(t)
	fleet := startFleet(t, 2, redis.URL())
	origins := make([]*origin, 3)
	for i := range origins {
		origins[i] = newOrigin(t, false, map[string]http.HandlerFunc{
			"/robots.txt": robotsTxt("User-agent: *\nDisallow: /private/\n"),
		})
	}
	pages := func(n int) []string {
		var paths []string
		for i := range n {
			paths = append(paths, fmt.Sprintf("/page/%d", i))
		}
		return paths
	}
	crawl := func(o *origin, n int) {
		t.Helper()
		for i, status := range crawlOver(t, fleet, 4, pages(n), o.base()) {
			if status != http.StatusOK {
				t.Errorf("%s/page/%d: status %d, want 200", o.base(), i, status)
			}
		}
	}
	health := func(p *proxyProcess) string {
		r := get(t, directClient(t), p.url.String()+"/healthz", "test")
		if r.status != http.StatusOK {
			t.Fatalf("/healthz: status %d, want 200 whatever Redis does", r.status)
		}
		return string(r.body)
	}
	waitFor := func(what string, ok func(p *proxyProcess) bool) {
		t.Helper()
		deadline := time.Now().Add(15 * time.Second)
		for _, p := range fleet {
			for !ok(p) {
				if time.Now().After(deadline) {
					t.Fatalf("%s: not after 15s; /healthz says %q\noutput:\n%s", what, health(p), p.output)
				}
				time.Sleep(50 * time.Millisecond)
			}
		}
	}

	crawl(origins[0], 20)
	for i, p := range fleet {
		if h := health(p); !strings.Contains(h, "redis: shared") {
			t.Errorf("proxy %d /healthz = %q, want a line saying Redis is shared", i, h)
		}
		if up := metricValue(t, p, "robotsgate_redis_up"); up != 1 {
			t.Errorf("proxy %d robotsgate_redis_up = %v, want 1", i, up)
		}
	}

	// Redis dies while two crawlers go on, each through its own proxy, to
	// origins that proxy has not seen, paced by Crawl-delay: every request
	// needs Redis, for robots.txt and for its schedule, and every one is
	// still answered, by each proxy alone.
	cold := make([]*origin, 24)
	for i := range cold {
		cold[i] = newOrigin(t, false, map[string]http.HandlerFunc{
			"/robots.txt": robotsTxt("User-agent: *\nCrawl-delay: 1\n"),
		})
	}
	// Redis is stopped once both crawlers are a quarter of the way: by
	// their progress, not a time, so that it dies mid-crawl however fast
	// the machine is.
	var answered sync.WaitGroup
	answered.Add(len(fleet) * len(cold) / 4)
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		answered.Wait()
		redis.Stop()
	}()
	var wg sync.WaitGroup
	for i, p := range fleet {
		client, userAgent := p.client(t), fmt.Sprintf("FleetBot%d/1.0", i) // a schedule each
		wg.Go(func() {
			for j, o := range cold {
				r, err := tryGet(client, o.base()+"/page", userAgent)
				switch {
				case err != nil:
					t.Errorf("proxy %d, %s: %v", i, o.base(), err)
				case r.status != http.StatusOK:
					t.Errorf("proxy %d, %s: status %d, want 200; X-Robotsgate-Decision %q", i, o.base(), r.status, r.header.Get("X-Robotsgate-Decision"))
				}
				if j < len(cold)/4 {
					answered.Done()
				}
			}
		})
	}
	wg.Wait()
	<-stopped
	for i, p := range fleet {
		// Requests met Redis dying (error) or found it gone (skipped),
		// not only the health check.
		if n := redisFallbacks(t, p); n == 0 {
			t.Errorf("proxy %d: no request found Redis failing during the crawl: the kill came too late to test anything", i)
		}
	}
	crawl(origins[1], 40)
	for i, p := range fleet {
		if h := health(p); !strings.Contains(h, "redis: unreachable") {
			t.Errorf("proxy %d /healthz = %q while Redis is down, want a line saying so", i, h)
		}
		if up := metricValue(t, p, "robotsgate_redis_up"); up != 0 {
			t.Errorf("proxy %d robotsgate_redis_up = %v while Redis is down, want 0", i, up)
		}
	}
	if n := origins[1].count("/robots.txt"); n != 2 {
		t.Errorf("with Redis down, origin 2's robots.txt was fetched %d times, want once per proxy (2)", n)
	}

	// Redis returns: both proxies share again by themselves.
	redis.Start()
	waitFor("back to shared mode", func(p *proxyProcess) bool { return strings.Contains(health(p), "redis: shared") })
	crawl(origins[2], 40)
	if n := origins[2].count("/robots.txt"); n != 1 {
		t.Errorf("after Redis returned, origin 3's robots.txt was fetched %d times by the fleet, want once", n)
	}
	if n := origins[0].count("/robots.txt"); n != 1 {
		t.Errorf("origin 1's robots.txt was fetched %d times, want once: the copy each proxy holds outlives Redis", n)
	}
	for i, p := range fleet {
		if up := metricValue(t, p, "robotsgate_redis_up"); up != 1 {
			t.Errorf("proxy %d robotsgate_redis_up = %v after Redis returned, want 1", i, up)
		}
		p.stop()
		// One line per change of state, not one per failed request.
		out := p.output.String()
		if down, back := strings.Count(out, fleetDownMsg), strings.Count(out, fleetBackMsg); down != 1 || back != 1 {
			t.Errorf("proxy %d logged %q %d times and %q %d times, want once each\noutput:\n%s", i, fleetDownMsg, down, fleetBackMsg, back, out)
		}
		for _, rec := range p.audit() {
			if rec.Status >= 500 {
				t.Errorf("proxy %d answered %s with %d: %s", i, rec.URL, rec.Status, rec.Error)
			}
		}
	}
}

// fleetJitter is jitter for a schedule kept in Redis: between the
// script's decision and the origin lie a Redis reply and another process,
// whose delays on a loaded machine differ from one request to the next.
// Two proxies without Redis let requests through about 100 ms apart in
// TestFleetKeepsCrawlDelay, far below what this allows.
const fleetJitter = 100 * time.Millisecond

// The log messages of the fleet's changes of state.
const (
	fleetDownMsg = "redis unreachable"
	fleetBackMsg = "redis reachable again"
)

// redisFallbacks counts p's Redis operations other than its health
// check that failed or were not tried because Redis was down.
func redisFallbacks(t *testing.T, p *proxyProcess) float64 {
	t.Helper()
	r := get(t, directClient(t), p.url.String()+"/metrics", "test")
	var n float64
	for line := range strings.Lines(string(r.body)) {
		name, value, ok := strings.Cut(strings.TrimSpace(line), " ")
		if !ok || !strings.HasPrefix(name, "robotsgate_redis_operations_total{") || strings.Contains(name, `op="ping"`) ||
			!strings.Contains(name, `result="error"`) && !strings.Contains(name, `result="skipped"`) {
			continue
		}
		v, err := strconv.ParseFloat(value, 64)
		if err != nil {
			t.Fatalf("/metrics: %s has the value %q", name, value)
		}
		n += v
	}
	return n
}

// metricValue reads one unlabelled metric from p's /metrics; it fails
// the test when the metric is missing.
func metricValue(t *testing.T, p *proxyProcess, name string) float64 {
	t.Helper()
	r := get(t, directClient(t), p.url.String()+"/metrics", "test")
	sc := bufio.NewScanner(bytes.NewReader(r.body))
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 2 && fields[0] == name {
			v, err := strconv.ParseFloat(fields[1], 64)
			if err != nil {
				t.Fatalf("/metrics: %s has the value %q", name, fields[1])
			}
			return v
		}
	}
	t.Fatalf("/metrics has no %s", name)
	return 0
}
