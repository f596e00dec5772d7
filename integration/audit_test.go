package integration

import (
	"bytes"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestAuditLogByMode sends an allowed and a disallowed request to an HTTP
// and an HTTPS origin, in audit mode and in enforce mode, and reads the
// audit log: one JSON line per request, with the verdict, the rule and its
// line, and what happened to the request.
func TestAuditLogByMode(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		mode          string
		privateStatus int
		forwarded     bool
	}{
		{"audit", http.StatusOK, true},
		{"enforce", http.StatusForbidden, false},
	} {
		t.Run(c.mode, func(t *testing.T) {
			t.Parallel()
			plain := newOrigin(t, false, map[string]http.HandlerFunc{"/robots.txt": robotsTxt(privateRobots)})
			secure := newOrigin(t, true, map[string]http.HandlerFunc{"/robots.txt": robotsTxt(privateRobots)})
			p := startProxy(t, "ROBOTSGATE_MODE="+c.mode, upstreamCA(t, secure))
			client := p.client(t)

			type sent struct {
				base, path string // base is the origin, scheme://host:port
				tunnel     string
				o          *origin
				reply      reply
			}
			var requests []sent
			for _, o := range []*origin{plain, secure} {
				tunnel := "" // plain HTTP is not tunnelled
				if o.TLS != nil {
					tunnel = o.addr
				}
				for _, path := range []string{"/public", "/private/x"} {
					requests = append(requests, sent{base: o.base(), path: path, tunnel: tunnel, o: o,
						reply: get(t, client, o.base()+path, crawlerUA)})
				}
			}
			for _, r := range requests {
				private := strings.HasPrefix(r.path, "/private/")
				want, wantHits := http.StatusOK, 1
				if private {
					want = c.privateStatus
					if !c.forwarded {
						wantHits = 0
					}
				}
				if r.reply.status != want {
					t.Errorf("%s%s: status %d, want %d", r.base, r.path, r.reply.status, want)
				}
				if n := r.o.count(r.path); n != wantHits {
					t.Errorf("%s%s: the origin received it %d times, want %d", r.base, r.path, n, wantHits)
				}
				if private && c.mode == "audit" {
					if h := r.reply.header.Get("X-Robotsgate-Decision"); !strings.Contains(h, "disallow") || !strings.Contains(h, "mode=audit") {
						t.Errorf("%s%s: X-Robotsgate-Decision %q, want the disallow enforcement would have applied, in audit mode", r.base, r.path, h)
					}
				}
			}

			if code := p.stop(); code != 0 {
				t.Fatalf("exit %d after SIGTERM, want 0", code)
			}
			recs := p.audit()
			if len(recs) != len(requests) {
				t.Fatalf("%d audit records, want %d, one per request: %+v", len(recs), len(requests), recs)
			}
			for _, r := range requests {
				url := r.base + r.path
				rec := auditFor(t, recs, url)
				if rec.Mode != c.mode || rec.Method != http.MethodGet || rec.Origin != r.base || rec.Tunnel != r.tunnel ||
					rec.Token != "ExampleBot" || rec.UserAgent != crawlerUA || !rec.PathsChecked {
					t.Errorf("%s: audit record %+v does not describe the request", url, rec)
				}
				if !strings.HasPrefix(r.path, "/private/") {
					if rec.Verdict != "allow" || !rec.Forwarded || rec.Status != http.StatusOK || rec.Bytes != int64(len(r.reply.body)) || rec.Reason != "no matching rule" {
						t.Errorf("%s: audit record %+v, want allow, forwarded, status 200, %d bytes, no matching rule", url, rec, len(r.reply.body))
					}
					continue
				}
				if rec.Verdict != "disallow" || rec.Reason != "disallow: /private/ (line 2)" || rec.Rule != "/private/" || rec.RuleLine != 2 {
					t.Errorf("%s: audit record %+v, want verdict disallow by /private/ on line 2", url, rec)
				}
				for _, field := range []string{"rule", "rule_line"} {
					if _, ok := rec.raw[field]; !ok {
						t.Errorf("%s: audit record has no %q field", url, field)
					}
				}
				wantBytes := int64(0)
				if c.forwarded {
					wantBytes = int64(len(r.reply.body))
				}
				if rec.Forwarded != c.forwarded || rec.Status != c.privateStatus || rec.Bytes != wantBytes {
					t.Errorf("%s: audit record forwarded=%v status=%d bytes=%d, want %v, %d, %d",
						url, rec.Forwarded, rec.Status, rec.Bytes, c.forwarded, c.privateStatus, wantBytes)
				}
			}
		})
	}
}

// TestSIGTERMFinishesInFlightRequests fires allowed and denied requests
// to an HTTP and an HTTPS origin, leaves one slow streamed response in
// flight, and sends SIGTERM: the response completes, robotsgate exits 0,
// and the audit log holds exactly one valid line per request, the
// in-flight one with its full byte count. The in-flight request is plain
// HTTP in one case and inside an intercepted tunnel in the other, which
// net/http no longer tracks once the proxy has hijacked it.
func TestSIGTERMFinishesInFlightRequests(t *testing.T) {
	t.Parallel()
	for _, inFlight := range []string{"http", "https"} {
		t.Run(inFlight, func(t *testing.T) {
			t.Parallel()
			testSIGTERM(t, inFlight)
		})
	}
}

func testSIGTERM(t *testing.T, inFlightScheme string) {
	const half = 64 << 10
	release := make(chan struct{})
	started := make(chan struct{}, 1)
	slow := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Write(bytes.Repeat([]byte("a"), half))
		w.(http.Flusher).Flush()
		started <- struct{}{}
		select {
		case <-release:
		case <-r.Context().Done():
			return
		case <-time.After(requestTimeout):
			return
		}
		w.Write(bytes.Repeat([]byte("b"), half))
	}
	pages := map[string]http.HandlerFunc{"/robots.txt": robotsTxt(privateRobots), "/slow": slow}
	plain := newOrigin(t, false, pages)
	secure := newOrigin(t, true, pages)
	p := startProxy(t, upstreamCA(t, secure))
	client := p.client(t)

	var urls []string
	for _, base := range []string{plain.base(), secure.base()} {
		for path, want := range map[string]int{"/a": 200, "/b": 200, "/c": 200, "/private/1": 403, "/private/2": 403} {
			u := base + path
			urls = append(urls, u)
			if r := get(t, client, u, crawlerUA); r.status != want {
				t.Fatalf("%s: status %d, want %d", u, r.status, want)
			}
		}
	}

	slowURL := plain.base() + "/slow"
	if inFlightScheme == "https" {
		slowURL = secure.base() + "/slow"
	}
	urls = append(urls, slowURL)
	type result struct {
		r   reply
		err error
	}
	done := make(chan result, 1)
	go func() {
		r, err := tryGet(client, slowURL, crawlerUA)
		done <- result{r, err}
	}()
	select {
	case <-started:
	case <-time.After(requestTimeout):
		t.Fatal("the slow response did not start")
	}

	p.terminate()
	if _, err := p.output.waitForJSON(stopTimeout, p.exited, func(rec map[string]any) bool {
		return rec["msg"] == "shutting down"
	}); err != nil {
		t.Fatalf("robotsgate did not start shutting down after SIGTERM: %v", err)
	}
	close(release)
	res := <-done
	want := append(bytes.Repeat([]byte("a"), half), bytes.Repeat([]byte("b"), half)...)
	if res.err != nil {
		t.Errorf("in-flight %s: %v", slowURL, res.err)
	} else if res.r.status != http.StatusOK || !bytes.Equal(res.r.body, want) {
		t.Errorf("in-flight %s: status %d and %d bytes, want 200 and %d bytes", slowURL, res.r.status, len(res.r.body), len(want))
	}
	if code := p.wait(); code != 0 {
		t.Fatalf("exit %d after SIGTERM, want 0", code)
	}

	recs := p.audit()
	if len(recs) != len(urls) {
		t.Errorf("%d audit records, want %d, one per request: %+v", len(recs), len(urls), recs)
	}
	for _, u := range urls {
		auditFor(t, recs, u)
	}
	if rec := auditFor(t, recs, slowURL); rec.Status != http.StatusOK || rec.Bytes != 2*half || rec.Error != "" {
		t.Errorf("in-flight %s: audit record status %d, %d bytes, error %q; want 200, %d bytes, no error",
			slowURL, rec.Status, rec.Bytes, rec.Error, 2*half)
	}
}
