package fetch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"robotsgate/cache"
	"robotsgate/robots"
)

// costlyBodies are robots.txt files of the default parse limit that keep
// the most memory per byte once parsed (see robots.MaxRetainedPerByte).
func costlyBodies() map[string][]byte {
	fill := func(head string, line func(i int) string) []byte {
		b := []byte(head)
		for i := 0; ; i++ {
			l := line(i)
			if len(b)+len(l) > robots.DefaultMaxBytes {
				return b
			}
			b = append(b, l...)
		}
	}
	n36 := func(i int) string { return strconv.FormatInt(int64(i), 36) }
	return map[string][]byte{
		"names":       fill("", func(i int) string { return "User-agent: a" + n36(i) + "\n" }),
		"names-upper": fill("", func(i int) string { return "useragent " + string(rune('A'+i%26)) + n36(i/26) + "\n" }),
		"index-pages": fill("User-agent: *\n", func(i int) string { return "Allow: /" + n36(i) + "/index.htm\n" }),
		"stars":       fill("User-agent: *\n", func(i int) string { return "Disallow:/*" + n36(i) + "\n" }),
	}
}

// countingOrigin serves body as /robots.txt and counts the requests.
func countingOrigin(t *testing.T, body []byte) (url string, fetches *atomic.Int64) {
	fetches = new(atomic.Int64)
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
		fetches.Add(1)
		w.Header().Set("Content-Type", "text/plain")
		w.Write(body)
	})
	return srv.URL, fetches
}

// TestCostlyRobotsTxtIsFetchedOnce: a robots.txt built to keep as much
// memory as a file of the parse limit can, served to many requests, is
// fetched once, through a cache with the default budget whose admission
// window is sized by MaxRetainedBytes: whether the cache is empty, or full
// of entries in frequent use that ristretto's admission policy prefers to
// it.
func TestCostlyRobotsTxtIsFetchedOnce(t *testing.T) {
	const residentCost = 16 << 10
	for name, body := range costlyBodies() {
		for _, full := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/full=%v", name, full), func(t *testing.T) {
				origin, fetches := countingOrigin(t, body)
				f := newTestFetcher(t, Options{})
				opts := cache.DefaultOptions()
				opts.LargestCost = MaxRetainedBytes(f.Options().MaxBytes)
				var costs sync.Map // origin → RetainedBytes of each fetch
				c, err := cache.New(opts, func(ctx context.Context, key string) cache.Result[*Result] {
					if strings.HasPrefix(key, "resident-") {
						return cache.Result[*Result]{Value: &Result{}, Cost: residentCost}
					}
					r := f.Load(ctx, key)
					costs.Store(key, r.Cost)
					return r
				})
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				ctx := t.Context()
				if full {
					residents := int(opts.MaxBytes / residentCost)
					for range 20 {
						for i := range residents {
							if _, _, err := c.Get(ctx, "resident-"+strconv.Itoa(i)); err != nil {
								t.Fatal(err)
							}
						}
					}
					if s := c.Stats(); s.Evictions == 0 || s.CostBytes < opts.MaxBytes*3/4 {
						t.Fatalf("the residents did not fill the cache: %+v", s)
					}
				}
				for i := range 20 {
					res, _, err := c.Get(ctx, origin)
					if err != nil {
						t.Fatal(err)
					}
					if res.Outcome != robots.OutcomeOK {
						t.Fatalf("Get %d: outcome %s (%v)", i, res.Outcome, res.Err)
					}
				}
				cost, _ := costs.Load(origin)
				s := c.Stats()
				if n := fetches.Load(); n != 1 || s.Uncacheable != 0 {
					t.Errorf("robots.txt fetched %d times, %d uncacheable; want once. Its cost %v, cache %+v", n, s.Uncacheable, cost, s)
				}
				if s.CostBytes > opts.MaxBytes {
					t.Errorf("CostBytes %d > MaxBytes %d", s.CostBytes, opts.MaxBytes)
				}
				if cost.(int64) > opts.LargestCost {
					t.Errorf("a result costs %d, past MaxRetainedBytes %d", cost, opts.LargestCost)
				}
				t.Logf("%d bytes cost %v (%.1f per byte); %d rejections", len(body), cost, float64(cost.(int64))/float64(len(body)), s.Rejections)
			})
		}
	}
}

// TestMaxRetainedBytes: the results that keep the most beside their rules
// (long final URLs, errors quoting long Locations) stay within
// maxResultBytes, and a costly file fetched through such a redirect within
// MaxRetainedBytes.
func TestMaxRetainedBytes(t *testing.T) {
	// Each byte of the Location is escaped as "%80" in the URL, and as
	// "\x80" where an error quotes it.
	long := "/" + strings.Repeat("\x80", 60<<10)
	redirect := func(location string) func(c net.Conn, req *http.Request) {
		return func(c net.Conn, req *http.Request) {
			fmt.Fprintf(c, "HTTP/1.1 302 Found\r\nLocation: %s\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", location)
		}
	}
	f := newTestFetcher(t, Options{Timeout: 5 * time.Second})
	for _, c := range []struct {
		name     string
		handle   func(c net.Conn, req *http.Request)
		wantErr  error
		outcome  robots.Outcome
		wantSize int // the least FinalURL expected
	}{
		{"bad Location", redirect(long + "%zz"), ErrBadRedirect, robots.OutcomeUnreachable, 0},
		{"too many redirects", func(c net.Conn, req *http.Request) {
			hop, _ := strconv.Atoi(req.URL.RawQuery)
			redirect(long+"?"+strconv.Itoa(hop+1))(c, req)
		}, ErrTooManyRedirects, robots.OutcomeUnavailable, 3 * 60 << 10},
		{"loop", redirect(long), ErrRedirectLoop, robots.OutcomeUnavailable, 3 * 60 << 10},
	} {
		t.Run(c.name, func(t *testing.T) {
			res := f.Fetch(t.Context(), rawServer(t, c.handle))
			if res.Outcome != c.outcome || !errors.Is(res.Err, c.wantErr) || len(res.FinalURL) < c.wantSize {
				t.Fatalf("outcome %s, err %v, final URL of %d bytes; want %s, %v, at least %d", res.Outcome, res.Err, len(res.FinalURL), c.outcome, c.wantErr, c.wantSize)
			}
			if got := res.RetainedBytes(); got > maxResultBytes {
				t.Errorf("RetainedBytes %d > maxResultBytes %d", got, maxResultBytes)
			} else {
				t.Logf("RetainedBytes %d of %d", got, maxResultBytes)
			}
		})
	}

	body := costlyBodies()["names-upper"]
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			w.Header().Set("Location", long)
			w.WriteHeader(http.StatusFound)
			return
		}
		w.Write(body)
	})
	res := f.Fetch(t.Context(), srv.URL)
	wantOutcome(t, res, robots.OutcomeOK, "")
	if got := res.RetainedBytes(); len(res.FinalURL) < 3*60<<10 || got > MaxRetainedBytes(0) {
		t.Errorf("final URL of %d bytes; RetainedBytes %d, past MaxRetainedBytes %d", len(res.FinalURL), got, MaxRetainedBytes(0))
	}
}

// TestStalledBodyCostsWhatArrived: an origin that announces a body of the
// parse limit, sends 1 KiB and stalls until the fetch times out costs
// about what it sent, not what it announced.
func TestStalledBodyCostsWhatArrived(t *testing.T) {
	const fetches, sent = 8, 1 << 10
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(robots.DefaultMaxBytes))
		w.Write(bytes.Repeat([]byte("Disallow: /\n"), sent/12))
		http.NewResponseController(w).Flush()
		<-r.Context().Done()
	})
	f := newTestFetcher(t, Options{Timeout: 300 * time.Millisecond})
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	var wg sync.WaitGroup
	for range fetches {
		wg.Go(func() {
			if res := f.Fetch(t.Context(), srv.URL); res.Outcome != robots.OutcomeUnreachable {
				t.Errorf("outcome %s, want unreachable (%v)", res.Outcome, res.Err)
			}
		})
	}
	wg.Wait()
	runtime.ReadMemStats(&after)
	// Everything the test process allocated meanwhile, origin included:
	// the body's first buffer, connections, requests and answers.
	perFetch := (after.TotalAlloc - before.TotalAlloc) / fetches
	if perFetch > firstReadBytes+96<<10 {
		t.Errorf("%d KiB allocated per stalled fetch that sent %d bytes of %d announced", perFetch>>10, sent, robots.DefaultMaxBytes)
	}
	t.Logf("%d KiB allocated per stalled fetch", perFetch>>10)
}

// TestParseSlots: a body that finds no free parse slot within its fetch's
// Timeout is not parsed and says nothing of the origin: its result is
// discarded, never cached, and the next Get fetches again; a request
// cancelled while it waits is "cancelled"; a body from a shared store
// that finds none does not decode.
func TestParseSlots(t *testing.T) {
	if got := New(Options{}).Options().MaxParses; got != runtime.GOMAXPROCS(0) {
		t.Errorf("default MaxParses %d, want GOMAXPROCS %d", got, runtime.GOMAXPROCS(0))
	}
	srv := serveBody(t, http.StatusOK, "User-agent: *\nDisallow: /private/\n")
	f := newTestFetcher(t, Options{MaxParses: 1, Timeout: 300 * time.Millisecond, Share: true})
	shared := f.Load(t.Context(), srv.URL).Shared
	if shared == nil {
		t.Fatal("nothing to share")
	}
	c, err := cache.New(cache.DefaultOptions(), f.Load)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := &ClientContext{Context: t.Context(), Client: "client"}

	// Another client's parse holds the only slot.
	if _, ok := f.parses.take(t.Context(), "other", time.Second, nil); !ok {
		t.Fatal("no parse slot")
	}
	res, info, err := c.Get(ctx, srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	slotErr, ok := errors.AsType[*ParseSlotError](res.Err)
	if !ok || res.Outcome != robots.OutcomeUnreachable || res.Bytes == 0 || res.Robots != nil || info.Outcome != "no_parse_slot" {
		t.Fatalf("outcome %s (%v), %d bytes, rules %v, load %q; want unreachable, *ParseSlotError, the body read, no rules, no_parse_slot",
			res.Outcome, res.Err, res.Bytes, res.Robots != nil, info.Outcome)
	}
	if slotErr.MaxParses != 1 || slotErr.Origin != res.Origin || slotErr.Waited <= 0 ||
		!strings.Contains(slotErr.Error(), "no free parse slot") {
		t.Errorf("error %+v: %v", slotErr, slotErr)
	}

	if _, _, err := f.Decode(res.Origin, shared); !errors.As(err, new(*ParseSlotError)) {
		t.Errorf("Decode without a parse slot: %v, want a *ParseSlotError", err)
	}

	// Cancelled while waiting for the slot.
	cancelCtx, cancel := context.WithCancel(t.Context())
	done := make(chan cache.Result[*Result])
	go func() { done <- f.Load(&ClientContext{Context: cancelCtx, Client: "client"}, srv.URL) }()
	waitFor(t, func() bool {
		f.parses.mu.Lock()
		defer f.parses.mu.Unlock()
		return len(f.parses.waiting) == 1
	})
	cancel()
	if r := <-done; !r.Discard || r.Outcome != "cancelled" {
		t.Errorf("cancelled while waiting: discard %v, outcome %q", r.Discard, r.Outcome)
	}

	f.parses.put("other")
	res, info, err = c.Get(ctx, srv.URL)
	if err != nil || res.Outcome != robots.OutcomeOK || info.Source != cache.SourceLoaded {
		t.Fatalf("with the slot free: outcome %s (%v), source %s, %v", res.Outcome, res.Err, info.Source, err)
	}
	if _, _, err := f.Decode(res.Origin, shared); err != nil {
		t.Errorf("Decode with the slot free: %v", err)
	}
	if s := c.Stats(); s.Loads["no_parse_slot"] != 1 || s.Loads["ok"] != 1 || s.FailedLoads != 0 {
		t.Errorf("loads %v, %d failed; want one no_parse_slot, one ok, none failed", s.Loads, s.FailedLoads)
	}
}

// waitFor polls cond until it holds, for at most a few seconds.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 5s")
		}
		time.Sleep(time.Millisecond)
	}
}
