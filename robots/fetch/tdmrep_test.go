package fetch

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"robotsgate/robots"
	"robotsgate/robots/usage"
)

// testTDMRep reserves everything but /open/.
const testTDMRep = `[{"location":"/open/","tdm-reservation":0},{"location":"/","tdm-reservation":1,"tdm-policy":"https://example.com/tdm"}]`

// tdmrepPaths are what decoded results' TDMRep is judged on.
var tdmrepPaths = []string{"/open/x", "/closed", "/open/../closed", "/"}

// requestLog records the requests an origin got.
type requestLog struct {
	mu   sync.Mutex
	reqs []*http.Request
}

func (l *requestLog) add(r *http.Request) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.reqs = append(l.reqs, r.Clone(context.Background()))
}

// to returns the requests for path.
func (l *requestLog) to(path string) []*http.Request {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []*http.Request
	for _, r := range l.reqs {
		if r.URL.Path == path {
			out = append(out, r)
		}
	}
	return out
}

// serveSite is an origin answering robots.txt with robotsStatus and
// testRules, tdmrep.json and every other path with tdmrep.
func serveSite(t *testing.T, robotsStatus int, tdmrep http.HandlerFunc) (*httptest.Server, *requestLog) {
	t.Helper()
	log := &requestLog{}
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
		log.add(r)
		if r.URL.Path == "/robots.txt" {
			w.WriteHeader(robotsStatus)
			io.WriteString(w, testRules)
			return
		}
		tdmrep(w, r)
	})
	return srv, log
}

// serveJSON answers with body.
func serveJSON(body string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, body)
	}
}

// redirectTo answers tdmrep.json with a 302 to location ("{self}" is the
// origin's own URL), and every other path with body.
func redirectTo(location, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != tdmrepPath {
			io.WriteString(w, body)
			return
		}
		if location != "" {
			w.Header().Set("Location", strings.ReplaceAll(location, "{self}", "http://"+r.Host))
		}
		w.WriteHeader(http.StatusFound)
	}
}

// sameRobots fails t unless got and want say the same of robots.txt.
func sameRobots(t *testing.T, got, want *Result) {
	t.Helper()
	if got.Outcome != want.Outcome || got.Detail != want.Detail || got.Status != want.Status || got.Redirects != want.Redirects ||
		got.FinalURL != want.FinalURL || got.Bytes != want.Bytes || (got.Err == nil) != (want.Err == nil) ||
		got.Err != nil && got.Err.Error() != want.Err.Error() {
		t.Errorf("robots.txt: %s %q %d (%v), want %s %q %d (%v)", got.Outcome, got.Detail, got.Status, got.Err, want.Outcome, want.Detail, want.Status, want.Err)
	}
	for _, path := range []string{"/", "/private/x", "/private/ok"} {
		if g, w := got.CheckReadings("bot", path), want.CheckReadings("bot", path); g.Allowed != w.Allowed || g.Reason() != w.Reason() {
			t.Errorf("CheckReadings(%q) = %v %q, want %v %q", path, g.Allowed, g.Reason(), w.Allowed, w.Reason())
		}
	}
}

func TestFetchTDMRep(t *testing.T) {
	other := serve(t, redirectTo("", testTDMRep))
	pad := func(n int) string { return "[" + strings.Repeat(" ", n-len(testTDMRep)) + testTDMRep[1:] }
	for _, c := range []struct {
		name         string
		robotsStatus int
		tdmrep       http.HandlerFunc
		found        bool
		detail       string
	}{
		{"parsed", 200, serveJSON(testTDMRep), true, "tdmrep.json: 2 rules"},
		{"a rule with a problem", 200, serveJSON(`[{"location":"/unset/"},` + testTDMRep[1:]), true,
			"tdmrep.json: 3 rules, 1 problem (rule 1: no tdm-reservation (unset))"},
		{"404", 200, http.NotFound, false, "tdmrep.json 404"},
		{"500", 200, func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(500) }, false, "tdmrep.json 500"},
		{"at the size bound", 200, serveJSON(pad(MaxTDMRepBytes)), true, "tdmrep.json: 2 rules"},
		{"oversized", 200, serveJSON(pad(MaxTDMRepBytes + 1)), false, "tdmrep.json: larger than 64 KiB"},
		{"invalid JSON", 200, serveJSON("<html>Not found</html>"), false,
			"tdmrep.json: invalid JSON at byte 1: invalid character '<' looking for beginning of value"},
		{"not an array", 200, serveJSON(`{"location":"/","tdm-reservation":1}`), false,
			"tdmrep.json: a JSON object, want an array of rules (the brackets are mandatory)"},
		{"redirect followed", 200, redirectTo("/tdm/v2.json", testTDMRep), true, "tdmrep.json: 2 rules"},
		{"redirect to another host", 200, redirectTo(other.URL+"/tdm.json", ""), true, "tdmrep.json: 2 rules"},
		{"redirect to itself", 200, redirectTo("{self}"+tdmrepPath, ""), false, "tdmrep.json: redirect loop"},
		{"redirect without Location", 200, redirectTo("", ""), false, "tdmrep.json 302: unusable redirect: no Location header"},
		{"5 redirects", 200, chainTo(5), true, "tdmrep.json: 2 rules"},
		{"6 redirects", 200, chainTo(6), false, "tdmrep.json: more than 5 redirects"},
		{"robots.txt 404", 404, serveJSON(testTDMRep), true, "tdmrep.json: 2 rules"},
		{"robots.txt 503", 503, serveJSON(testTDMRep), true, "tdmrep.json: 2 rules"},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv, log := serveSite(t, c.robotsStatus, c.tdmrep)
			f := newTestFetcher(t, Options{TDMRep: true})
			res := f.Fetch(t.Context(), srv.URL)
			if (res.TDMRep != nil) != c.found || res.TDMRepDetail != c.detail {
				t.Errorf("TDMRep %v, detail %q; want found %v, %q", res.TDMRep, res.TDMRepDetail, c.found, c.detail)
			}
			if c.found {
				got := res.TDMRep.Statements("/open/x")
				if len(got) != 1 || got[0].Value != "0" {
					t.Errorf("/open/x: %+v, want not reserved", got)
				}
			}
			// Whatever became of tdmrep.json, robots.txt's fetch is the one
			// a Fetcher without TDMRep makes.
			sameRobots(t, res, newTestFetcher(t, Options{}).Fetch(t.Context(), srv.URL))
			reqs := log.to(tdmrepPath)
			if len(reqs) != 1 {
				t.Fatalf("%d requests for %s, want 1", len(reqs), tdmrepPath)
			}
			if ua, accept := reqs[0].Header.Get("User-Agent"), reqs[0].Header.Get("Accept"); ua != f.Options().UserAgent || accept != tdmrepAccept {
				t.Errorf("User-Agent %q, Accept %q", ua, accept)
			}
		})
	}
}

// chainTo redirects tdmrep.json hops times (/hop1, /hop2, ...), then
// serves testTDMRep.
func chainTo(hops int) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		n := 0
		if hop, ok := strings.CutPrefix(r.URL.Path, "/hop"); ok {
			n, _ = strconv.Atoi(hop)
		}
		if n < hops {
			w.Header().Set("Location", "/hop"+strconv.Itoa(n+1))
			w.WriteHeader(http.StatusMovedPermanently)
			return
		}
		io.WriteString(w, testTDMRep)
	}
}

// TestFetchTDMRepOff: without Options.TDMRep tdmrep.json is never asked
// for, and results are shared as before (version 1).
func TestFetchTDMRepOff(t *testing.T) {
	srv, log := serveSite(t, 200, serveJSON(testTDMRep))
	f := newTestFetcher(t, Options{Share: true})
	r := f.Load(t.Context(), srv.URL)
	f.Fetch(t.Context(), srv.URL)
	if n := len(log.to(tdmrepPath)); n != 0 {
		t.Errorf("tdmrep.json requested %d times", n)
	}
	if n := len(log.to("/robots.txt")); n != 2 {
		t.Errorf("robots.txt requested %d times, want 2", n)
	}
	if r.Value.TDMRep != nil || r.Value.TDMRepDetail != "" {
		t.Errorf("TDMRep %v, detail %q", r.Value.TDMRep, r.Value.TDMRepDetail)
	}
	if !bytes.HasPrefix(r.Shared, []byte(`{"v":1,`)) {
		t.Errorf("shared as %q", r.Shared)
	}
}

// TestFetchTDMRepOriginUnreachable: an origin that gave robots.txt no
// answer is not asked for tdmrep.json.
func TestFetchTDMRepOriginUnreachable(t *testing.T) {
	log := &requestLog{}
	hangUp := rawServer(t, func(c net.Conn, req *http.Request) { log.add(req) })
	for _, origin := range []string{hangUp, "http://" + freePort(t)} {
		res := newTestFetcher(t, Options{TDMRep: true}).Fetch(t.Context(), origin)
		if res.Outcome != robots.OutcomeUnreachable || res.TDMRep != nil || res.TDMRepDetail != "tdmrep.json not fetched: robots.txt got no answer" {
			t.Errorf("%s: outcome %s (%v), TDMRep %v, detail %q", origin, res.Outcome, res.Err, res.TDMRep, res.TDMRepDetail)
		}
	}
	if n := len(log.to(tdmrepPath)); n != 0 {
		t.Errorf("tdmrep.json requested %d times", n)
	}
}

// TestFetchTDMRepWithinTimeout: a tdmrep.json that never comes ends with
// the fetch's Timeout, robots.txt's rules kept.
func TestFetchTDMRepWithinTimeout(t *testing.T) {
	srv, _ := serveSite(t, 200, func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	const timeout = 300 * time.Millisecond
	res, timing := newTestFetcher(t, Options{TDMRep: true, Timeout: timeout}).FetchTimed(t.Context(), srv.URL)
	wantOutcome(t, res, robots.OutcomeOK, "")
	if res.TDMRep != nil || !strings.HasPrefix(res.TDMRepDetail, "tdmrep.json unreachable: ") {
		t.Errorf("TDMRep %v, detail %q", res.TDMRep, res.TDMRepDetail)
	}
	if timing.Duration > 2*timeout {
		t.Errorf("took %v, past the Timeout of %v", timing.Duration, timeout)
	}
	t.Logf("%q after %v", res.TDMRepDetail, timing.Duration)
}

// TestSharedTDMRep: a result fetched with TDMRep decodes in another
// instance with the same tdmrep.json; an instance without TDMRep leaves it
// out; an instance with TDMRep refuses a result fetched without it.
func TestSharedTDMRep(t *testing.T) {
	withTDMRep := Options{Share: true, TDMRep: true}
	for _, c := range []struct {
		name   string
		tdmrep http.HandlerFunc
		found  bool
	}{
		{"parsed", serveJSON(testTDMRep), true},
		{"404", http.NotFound, false},
		{"invalid", serveJSON("[1,"), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv, _ := serveSite(t, 200, c.tdmrep)
			loaded := newTestFetcher(t, withTDMRep).Load(t.Context(), srv.URL)
			want := loaded.Value
			if (want.TDMRep != nil) != c.found || !bytes.HasPrefix(loaded.Shared, []byte(`{"v":2,`)) {
				t.Fatalf("TDMRep %v (%q), shared as %.80q", want.TDMRep, want.TDMRepDetail, loaded.Shared)
			}
			got, cost, err := newTestFetcher(t, withTDMRep).Decode(srv.URL, loaded.Shared)
			if err != nil {
				t.Fatal(err)
			}
			if cost != got.RetainedBytes() {
				t.Errorf("cost %d, want %d", cost, got.RetainedBytes())
			}
			sameResult(t, want, got)
			if c.found && got.TDMRep.Statements("/closed")[0].Text != want.TDMRep.Statements("/closed")[0].Text {
				t.Errorf("decoded text %q", got.TDMRep.Statements("/closed")[0].Text)
			}

			without, _, err := newTestFetcher(t, Options{Share: true}).Decode(srv.URL, loaded.Shared)
			if err != nil {
				t.Fatal(err)
			}
			if without.TDMRep != nil || without.TDMRepDetail != "" {
				t.Errorf("without TDMRep, decoded %v (%q)", without.TDMRep, without.TDMRepDetail)
			}
			sameRobots(t, without, want)
		})
	}
	srv, _ := serveSite(t, 200, serveJSON(testTDMRep))
	old := newTestFetcher(t, Options{Share: true}).Load(t.Context(), srv.URL)
	if res, _, err := newTestFetcher(t, withTDMRep).Decode(srv.URL, old.Shared); err == nil || !strings.Contains(err.Error(), "no tdmrep.json") {
		t.Errorf("a result fetched without TDMRep: %v, %v", res, err)
	}
}

// TestDecodeRefusesTDMRep: a tdmrep.json section no fetch could have
// produced is an error.
func TestDecodeRefusesTDMRep(t *testing.T) {
	const origin = "https://example.com"
	f := newTestFetcher(t, Options{TDMRep: true})
	entry := func(section *sharedTDMRep, tdmrep string) []byte {
		h := sharedHeader{Version: sharedVersionTDMRep, Origin: origin, Outcome: "unavailable", Status: 404, ErrKind: errKindStatus,
			FinalURL: origin + "/robots.txt", FetchedAt: time.Now(), TDMRep: section}
		data, err := h.encode(bodies{tdmrep: []byte(tdmrep)})
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	if res, _, err := f.Decode(origin, entry(&sharedTDMRep{Detail: "tdmrep.json: 2 rules", Bytes: len(testTDMRep)}, testTDMRep)); err != nil || res.TDMRep.Len() != 2 {
		t.Fatalf("the well-formed entry: %v", err)
	}
	for _, c := range []struct {
		name string
		data []byte
	}{
		{"no detail", entry(&sharedTDMRep{Bytes: len(testTDMRep)}, testTDMRep)},
		{"a detail too long", entry(&sharedTDMRep{Detail: strings.Repeat("d", maxSharedMessage+1)}, "")},
		{"more bytes than there are", entry(&sharedTDMRep{Detail: "x", Bytes: len(testTDMRep) + 1}, testTDMRep)},
		{"negative bytes", entry(&sharedTDMRep{Detail: "x", Bytes: -1}, "")},
		{"past the size bound", entry(&sharedTDMRep{Detail: "x", Bytes: MaxTDMRepBytes + 1}, strings.Repeat(" ", MaxTDMRepBytes+1))},
		{"a body that does not parse", entry(&sharedTDMRep{Detail: "x", Bytes: 3}, "[1,")},
		{"a tdmrep.json body left for robots.txt", entry(&sharedTDMRep{Detail: "x"}, testTDMRep)},
	} {
		if res, _, err := f.Decode(origin, c.data); err == nil {
			t.Errorf("%s: decoded %+v", c.name, res)
		} else {
			t.Logf("%s: %v", c.name, err)
		}
	}
}

// TestShareHoldsBackLocalTDMRep: a tdmrep.json this instance's policy
// refused to fetch is no answer of the origin's: the result is not shared.
func TestShareHoldsBackLocalTDMRep(t *testing.T) {
	denied := serve(t, redirectTo("", testTDMRep))
	_, deniedPort, _ := net.SplitHostPort(denied.Listener.Addr().String())
	refuse := func(_ context.Context, _, address string, _ syscall.RawConn) error {
		if _, port, _ := net.SplitHostPort(address); port == deniedPort {
			return fmt.Errorf("destination denied: %w", fs.ErrPermission)
		}
		return nil
	}
	srv, _ := serveSite(t, 200, redirectTo(denied.URL+"/tdm.json", ""))
	r := newTestFetcher(t, Options{Share: true, TDMRep: true, DialControl: refuse}).Load(t.Context(), srv.URL)
	if r.Value.Outcome != robots.OutcomeOK || r.Value.TDMRep != nil || !strings.HasPrefix(r.Value.TDMRepDetail, "tdmrep.json unreachable: ") {
		t.Fatalf("outcome %s, TDMRep %v (%q)", r.Value.Outcome, r.Value.TDMRep, r.Value.TDMRepDetail)
	}
	if r.Shared != nil {
		t.Errorf("a tdmrep.json refused by this instance's policy is shared: %.80q", r.Shared)
	}
	t.Log(r.Value.TDMRepDetail)
}

// TestLoadTDMRepNoParseSlot: a tdmrep.json that found no free parse slot
// is this instance's limit, not the origin's answer: Load keeps the result
// a minute at most, however long robots.txt may be kept, and shares none
// of it.
func TestLoadTDMRepNoParseSlot(t *testing.T) {
	f := newTestFetcher(t, Options{Share: true, TDMRep: true, MaxParses: 1, Timeout: 300 * time.Millisecond})
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			w.Header().Set("Cache-Control", "max-age=3600")
			io.WriteString(w, testRules)
			return
		}
		// robots.txt is parsed by now: another client takes the one parse
		// slot until the fetch's Timeout has run out.
		f.parses.take(t.Context(), "other", 0, nil)
		serveJSON(testTDMRep)(w, r)
	})
	r := f.Load(t.Context(), srv.URL)
	if r.Value.Outcome != robots.OutcomeOK || r.Value.TDMRep != nil || r.Value.TDMRepDetail != "tdmrep.json not parsed: no free parse slot" {
		t.Fatalf("outcome %s, TDMRep %v (%q)", r.Value.Outcome, r.Value.TDMRep, r.Value.TDMRepDetail)
	}
	if r.MaxAge != tdmrepRetry || r.NoStore || r.Failed || r.Discard {
		t.Errorf("kept for %v (no-store %v, failed %v, discarded %v), want %v", r.MaxAge, r.NoStore, r.Failed, r.Discard, tdmrepRetry)
	}
	if r.Shared != nil {
		t.Errorf("a tdmrep.json this instance did not parse is shared: %.80q", r.Shared)
	}
}

// TestLoadLogsTDMRep: Load's debug records say how tdmrep.json went.
func TestLoadLogsTDMRep(t *testing.T) {
	srv, _ := serveSite(t, 200, serveJSON(testTDMRep))
	var records bytes.Buffer
	f := newTestFetcher(t, Options{TDMRep: true, Logger: slog.New(slog.NewTextHandler(&records, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	f.Load(t.Context(), srv.URL)
	if !strings.Contains(records.String(), `msg="fetched tdmrep.json"`) || !strings.Contains(records.String(), " rules=2 ") {
		t.Errorf("debug records %q do not tell of tdmrep.json", records.String())
	}
}

// TestTDMRepMaxRetainedBytes: the costliest robots.txt with the costliest
// tdmrep.json stays within MaxRetainedBytes.
func TestTDMRepMaxRetainedBytes(t *testing.T) {
	tdmrep := []byte("[")
	rule := `{"location":"/` + strings.Repeat("\u2028", 20) + `","tdm-reservation":1}`
	for len(tdmrep)+len(rule)+2 <= MaxTDMRepBytes {
		if len(tdmrep) > 1 {
			tdmrep = append(tdmrep, ',')
		}
		tdmrep = append(tdmrep, rule...)
	}
	tdmrep = append(tdmrep, ']')
	robotsBody := costlyBodies()["names-upper"]
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			w.Write(robotsBody)
			return
		}
		w.Write(tdmrep)
	})
	res := newTestFetcher(t, Options{TDMRep: true}).Fetch(t.Context(), srv.URL)
	wantOutcome(t, res, robots.OutcomeOK, "")
	if res.TDMRep == nil {
		t.Fatalf("tdmrep.json of %d bytes: %s", len(tdmrep), res.TDMRepDetail)
	}
	if got, bound := res.TDMRep.RetainedBytes(), usage.MaxTDMRepRetained(MaxTDMRepBytes); got > bound {
		t.Errorf("TDMRep keeps %d, past %d", got, bound)
	}
	if got := res.RetainedBytes(); got > MaxRetainedBytes(0) {
		t.Errorf("RetainedBytes %d, past MaxRetainedBytes %d", got, MaxRetainedBytes(0))
	}
	t.Logf("tdmrep.json of %d bytes keeps %d; the result %d of %d", len(tdmrep), res.TDMRep.RetainedBytes(), res.RetainedBytes(), MaxRetainedBytes(0))
}
