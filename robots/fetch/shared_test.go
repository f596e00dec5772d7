package fetch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"robotsgate/robots"
)

// sharedRules asks a pace of two tokens and has a rule that only one
// reading of a tricky path matches.
const sharedRules = "User-agent: *\nDisallow: /private/\nAllow: /private/ok\nDisallow: /a/b\n\n" +
	"User-agent: SlowBot\nCrawl-delay: 7\nDisallow: /slow/\n\n" +
	"User-agent: RateBot\nRequest-rate: 1/5\nDisallow: /\n"

// sharedPaths and sharedTokens are what decoded results are judged on.
var (
	sharedPaths  = []string{"/", "/private/x", "/private/ok", "/a/b", "/a/./b", "/a%2Fb", "/slow/x", "/robots.txt", "/late/x"}
	sharedTokens = []string{"Googlebot", "SlowBot", "slowbot", "RateBot", ""}
)

// TestSharedRoundTrip: every kind of fetch, shared as Load shares it,
// decodes in another instance to a result that judges exactly as the
// original, with the same Timing.
func TestSharedRoundTrip(t *testing.T) {
	const limit = 1024
	overLimit := "User-agent: *\nDisallow: /early/\n" + strings.Repeat("# padding padding padding\n", 60) + "Disallow: /late/\n"
	for _, c := range []struct {
		name    string
		opts    Options
		origin  func(t *testing.T) string
		outcome robots.Outcome
		target  error // an error of this package the result must keep wrapping
	}{
		{"rules", Options{}, func(t *testing.T) string {
			return serve(t, func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Cache-Control", "max-age=600")
				w.Header().Set("Expires", "Thu, 01 Dec 2094 16:00:00 GMT")
				w.Header().Set("Age", "12")
				io.WriteString(w, sharedRules)
			}).URL
		}, robots.OutcomeOK, nil},
		{"404", Options{}, func(t *testing.T) string { return serveBody(t, 404, sharedRules).URL }, robots.OutcomeUnavailable, nil},
		{"401", Options{}, func(t *testing.T) string { return serveBody(t, 401, "").URL }, robots.OutcomeUnavailable, nil},
		{"401 auth-disallow", Options{AuthDisallow: true}, func(t *testing.T) string { return serveBody(t, 401, "").URL }, robots.OutcomeRestricted, nil},
		{"503", Options{}, func(t *testing.T) string { return serveBody(t, 503, sharedRules).URL }, robots.OutcomeUnreachable, nil},
		{"redirect chain", Options{}, func(t *testing.T) string { return redirectChain(t, 3).URL }, robots.OutcomeOK, nil},
		{"too many redirects", Options{}, func(t *testing.T) string { return redirectChain(t, 6).URL }, robots.OutcomeUnavailable, ErrTooManyRedirects},
		{"over the parse limit", Options{MaxBytes: limit}, func(t *testing.T) string { return serveBody(t, 200, overLimit).URL }, robots.OutcomeOK, nil},
		{"at the parse limit", Options{MaxBytes: limit}, func(t *testing.T) string { return serveBody(t, 200, overLimit[:limit]).URL }, robots.OutcomeOK, nil},
		{"unreachable", Options{}, func(t *testing.T) string { return "http://" + freePort(t) }, robots.OutcomeUnreachable, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			opts := c.opts
			opts.Share = true
			origin := c.origin(t)
			f := newTestFetcher(t, opts)
			want, fx := f.fetchAll(t.Context(), origin)
			if want.Outcome != c.outcome {
				t.Fatalf("outcome %v (%v), want %v", want.Outcome, want.Err, c.outcome)
			}
			shared := f.share(t.Context(), origin, want, fx)
			if shared == nil {
				t.Fatal("Share set, but nothing to share")
			}
			t.Logf("shared: %q", shared[:min(len(shared), 400)])
			other := newTestFetcher(t, opts)
			got, cost, err := other.Decode(origin, shared)
			if err != nil {
				t.Fatal(err)
			}
			if cost != got.RetainedBytes() || cost <= 0 {
				t.Errorf("cost %d, want its RetainedBytes %d", cost, got.RetainedBytes())
			}
			_, gotFx, err := other.decodeShared(origin, shared)
			if err != nil {
				t.Fatal(err)
			}
			sameResult(t, want, got)
			sameTiming(t, fx.Timing, gotFx.Timing)
			if c.target != nil && !errors.Is(got.Err, c.target) {
				t.Errorf("decoded err %v does not wrap %v", got.Err, c.target)
			}
		})
	}
}

// sameResult fails t unless got tells all that want tells, and judges
// every path and token alike.
func sameResult(t *testing.T, want, got *Result) {
	t.Helper()
	if got.Outcome != want.Outcome || got.Detail != want.Detail || got.Origin != want.Origin ||
		got.Status != want.Status || got.Redirects != want.Redirects || got.FinalURL != want.FinalURL ||
		got.Bytes != want.Bytes || got.Truncated != want.Truncated {
		t.Errorf("decoded %+v\nwant    %+v", got, want)
	}
	if (got.Err == nil) != (want.Err == nil) || got.Err != nil && got.Err.Error() != want.Err.Error() {
		t.Errorf("err %v, want %v", got.Err, want.Err)
	}
	var gotStatus, wantStatus *StatusError
	if errors.As(got.Err, &gotStatus) != errors.As(want.Err, &wantStatus) || gotStatus != nil && *gotStatus != *wantStatus {
		t.Errorf("status error %#v, want %#v", gotStatus, wantStatus)
	}
	for _, target := range []error{ErrTooManyRedirects, ErrRedirectLoop, ErrBadRedirect} {
		if errors.Is(got.Err, target) != errors.Is(want.Err, target) {
			t.Errorf("errors.Is(%v, %v) differs from the original's", got.Err, target)
		}
	}
	if got.TDMRepDetail != want.TDMRepDetail || (got.TDMRep == nil) != (want.TDMRep == nil) ||
		got.TDMRep.RetainedBytes() != want.TDMRep.RetainedBytes() {
		t.Errorf("tdmrep.json %v (%q), want %v (%q)", got.TDMRep, got.TDMRepDetail, want.TDMRep, want.TDMRepDetail)
	}
	for _, path := range append(sharedPaths, tdmrepPaths...) {
		if g, w := got.TDMRep.Statements(path), want.TDMRep.Statements(path); !reflect.DeepEqual(g, w) {
			t.Errorf("TDMRep.Statements(%q) = %+v, want %+v", path, g, w)
		}
	}
	if (got.Robots == nil) != (want.Robots == nil) {
		t.Fatalf("rules %v, want %v", got.Robots, want.Robots)
	}
	if want.Robots != nil && (got.Robots.Truncated() != want.Robots.Truncated() || got.Robots.ParsedBytes() != want.Robots.ParsedBytes() ||
		got.Robots.IgnoredCount() != want.Robots.IgnoredCount()) {
		t.Errorf("parsed %d bytes, truncated %v, %d ignored; want %d, %v, %d",
			got.Robots.ParsedBytes(), got.Robots.Truncated(), got.Robots.IgnoredCount(),
			want.Robots.ParsedBytes(), want.Robots.Truncated(), want.Robots.IgnoredCount())
	}
	for _, token := range sharedTokens {
		for _, path := range sharedPaths {
			if g, w := got.Check(token, path), want.Check(token, path); !reflect.DeepEqual(g, w) {
				t.Errorf("Check(%q, %q) = %+v, want %+v", token, path, g, w)
			}
			if g, w := got.CheckReadings(token, path), want.CheckReadings(token, path); !reflect.DeepEqual(g, w) {
				t.Errorf("CheckReadings(%q, %q) = %+v, want %+v", token, path, g, w)
			}
		}
		gotPace, gotOK := got.Pace(token)
		wantPace, wantOK := want.Pace(token)
		if gotPace != wantPace || gotOK != wantOK {
			t.Errorf("Pace(%q) = %+v %v, want %+v %v", token, gotPace, gotOK, wantPace, wantOK)
		}
	}
}

// sameTiming fails t unless got is want, as a shared store keeps it.
func sameTiming(t *testing.T, want, got Timing) {
	t.Helper()
	if got.Duration != want.Duration {
		t.Errorf("duration %v, want %v", got.Duration, want.Duration)
	}
	if !got.FetchedAt.Truncate(time.Millisecond).Equal(want.FetchedAt.Truncate(time.Millisecond)) {
		t.Errorf("fetched at %v, want %v", got.FetchedAt, want.FetchedAt)
	}
	gf, wf := got.Freshness, want.Freshness
	if !gf.Date.Equal(wf.Date) || !gf.Expires.Equal(wf.Expires) {
		t.Errorf("freshness dates %v %v, want %v %v", gf.Date, gf.Expires, wf.Date, wf.Expires)
	}
	gf.Date, gf.Expires, wf.Date, wf.Expires = time.Time{}, time.Time{}, time.Time{}, time.Time{}
	if gf != wf {
		t.Errorf("freshness %+v, want %+v", got.Freshness, want.Freshness)
	}
	gotTTL, gotHas := got.Freshness.TTL()
	wantTTL, wantHas := want.Freshness.TTL()
	if gotTTL != wantTTL || gotHas != wantHas {
		t.Errorf("TTL %v %v, want %v %v", gotTTL, gotHas, wantTTL, wantHas)
	}
}

// TestSharedVerdictsAreReal guards the round trip against judging nothing:
// the rules the results are compared on do decide.
func TestSharedVerdictsAreReal(t *testing.T) {
	srv := serveBody(t, http.StatusOK, sharedRules)
	f := newTestFetcher(t, Options{Share: true})
	loaded := f.Load(t.Context(), srv.URL)
	res, _, err := f.Decode(srv.URL, loaded.Shared)
	if err != nil {
		t.Fatal(err)
	}
	if v := res.CheckReadings("Googlebot", "/a/./b"); v.Allowed {
		t.Errorf("/a/./b allowed (%s)", v.Reason())
	}
	if p, ok := res.Pace("slowbot"); !ok || p.Interval != 7*time.Second {
		t.Errorf("Pace(slowbot) = %+v %v, want 7s", p, ok)
	}
	if p, ok := res.Pace("RateBot"); !ok || p.Interval != 5*time.Second || p.Directive != robots.DirectiveRequestRate {
		t.Errorf("Pace(RateBot) = %+v %v, want 5s by Request-rate", p, ok)
	}
}

// TestShareOff: without Share, and for a connection this instance's policy
// refused, nothing is shared.
func TestShareOff(t *testing.T) {
	srv := serveBody(t, http.StatusOK, sharedRules)
	if r := newTestFetcher(t, Options{}).Load(t.Context(), srv.URL); r.Shared != nil {
		t.Errorf("shared without Share: %q", r.Shared)
	}
	refuse := func(context.Context, string, string, syscall.RawConn) error {
		return fmt.Errorf("destination denied: %w", fs.ErrPermission)
	}
	r := newTestFetcher(t, Options{Share: true, DialControl: refuse}).Load(t.Context(), srv.URL)
	if !errors.Is(r.Value.Err, fs.ErrPermission) {
		t.Fatalf("err %v, want a permission error", r.Value.Err)
	}
	if r.Shared != nil {
		t.Errorf("a refusal by this instance's policy is shared: %q", r.Shared)
	}
	// A key that is not the canonical origin would never decode.
	if r := newTestFetcher(t, Options{Share: true}).Load(t.Context(), srv.URL+"/"); r.Shared != nil {
		t.Errorf("shared under a key that is not its origin: %q", r.Shared)
	}
}

// TestShareHoldsBackLocalFailures: a failure whose cause is this instance
// (its upstream proxy down or refusing, no free fetch slot, a cancelled
// fetch) says nothing of the origin and is never shared, or another
// instance would refuse the origin for it; the origin's own failures are
// shared, through the upstream proxy too.
func TestShareHoldsBackLocalFailures(t *testing.T) {
	up := startUpstream(t, "crawler", "pw")
	down := &url.URL{Scheme: "http", Host: freePort(t)}
	unavailable := serveBody(t, http.StatusServiceUnavailable, "")
	cancelled, cancel := context.WithCancel(t.Context())
	cancel()
	for _, c := range []struct {
		name   string
		opts   Options
		ctx    context.Context
		full   bool // every fetch slot taken
		origin string
		shared bool
	}{
		{"upstream proxy down", Options{UpstreamProxy: down}, t.Context(), false, unavailable.URL, false},
		{"upstream proxy refuses", Options{UpstreamProxy: up.proxyURL("wr0ng")}, t.Context(), false, unavailable.URL, false},
		{"no free fetch slot", Options{MaxConcurrent: 1, Timeout: 50 * time.Millisecond}, t.Context(), true, unavailable.URL, false},
		{"cancelled", Options{}, cancelled, false, unavailable.URL, false},
		{"503 from the origin", Options{}, t.Context(), false, unavailable.URL, true},
		{"503 through the upstream proxy", Options{UpstreamProxy: up.proxyURL("pw")}, t.Context(), false, unavailable.URL, true},
		{"connection refused by the origin", Options{}, t.Context(), false, "http://" + freePort(t), true},
	} {
		t.Run(c.name, func(t *testing.T) {
			opts := c.opts
			opts.Share = true
			f := newTestFetcher(t, opts)
			if c.full {
				f.slots.take(t.Context(), "", 0, nil)
			}
			r := f.Load(c.ctx, c.origin)
			if !r.Failed && !r.Discard {
				t.Fatalf("outcome %v, want a failure", r.Value.Outcome)
			}
			if shared := r.Shared != nil; shared != c.shared {
				t.Errorf("%q (%v): shared %v, want %v", r.Value.Detail, r.Value.Err, shared, c.shared)
			}
		})
	}
}

// TestDecodeRefuses: data that no fetch by this Fetcher under this key
// could have produced is an error.
func TestDecodeRefuses(t *testing.T) {
	const origin = "https://example.com"
	f := newTestFetcher(t, Options{MaxBytes: 16})
	good := func(edit func(h *sharedHeader), body string) []byte {
		h := sharedHeader{Version: sharedVersion, Origin: origin, Outcome: "ok", Status: 200, Bytes: len(body),
			Truncated: len(body) > 16, FinalURL: origin + "/robots.txt", FetchedAt: time.Now()}
		edit(&h)
		data, err := h.encode(bodies{robots: []byte(body)})
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	keep := func(*sharedHeader) {}
	if _, _, err := f.Decode(origin, good(keep, "User-agent: *\n")); err != nil {
		t.Fatalf("the well-formed entry: %v", err)
	}
	for _, c := range []struct {
		name string
		data []byte
	}{
		{"empty", nil},
		{"no header line", []byte(`{"v":1}`)},
		{"not JSON", []byte("User-agent: *\nDisallow: /\n")},
		{"another version", good(func(h *sharedHeader) { h.Version = 3 }, "")},
		{"version 2 without tdmrep.json", good(func(h *sharedHeader) { h.Version = sharedVersionTDMRep }, "")},
		{"tdmrep.json in version 1", good(func(h *sharedHeader) { h.TDMRep = &sharedTDMRep{Detail: "tdmrep.json 404"} }, "")},
		{"no version", good(func(h *sharedHeader) { h.Version = 0 }, "")},
		{"another origin", good(func(h *sharedHeader) { h.Origin = "https://example.org" }, "")},
		{"unknown outcome", good(func(h *sharedHeader) { h.Outcome = "maybe" }, "")},
		{"ok with an error", good(func(h *sharedHeader) { h.Err = "boom" }, "")},
		{"unreachable without an error", good(func(h *sharedHeader) { h.Outcome = "unreachable"; h.Bytes = 0 }, "")},
		{"unknown error kind", good(func(h *sharedHeader) { h.Outcome, h.Err, h.ErrKind = "unreachable", "x", "gremlins" }, "")},
		{"a body with a failure", good(func(h *sharedHeader) { h.Outcome, h.Err = "unavailable", "x" }, "User-agent: *\n")},
		{"past the parse limit", good(keep, strings.Repeat("x", 18))},
		{"bytes not the body's", good(func(h *sharedHeader) { h.Bytes = 3 }, "User-agent: *\n")},
		{"truncated at another limit", good(func(h *sharedHeader) { h.Truncated = true }, "User-agent: *\n")},
		{"negative bytes", good(func(h *sharedHeader) { h.Outcome, h.Err, h.Bytes = "unreachable", "x", -1 }, "")},
		{"too many redirects", good(func(h *sharedHeader) { h.Redirects = MaxRedirects + 1 }, "")},
		{"status out of range", good(func(h *sharedHeader) { h.Status = 42 }, "")},
		{"status error without status", good(func(h *sharedHeader) { h.Outcome, h.ErrKind, h.Status = "unavailable", errKindStatus, 0 }, "")},
		{"negative duration", good(func(h *sharedHeader) { h.Duration = -time.Second }, "")},
		// Detail and Err end up in 403 pages and audit records.
		{"a detail too long", good(func(h *sharedHeader) { h.Outcome, h.Err, h.Detail = "unreachable", "x", strings.Repeat("d", 2<<10+1) }, "")},
		{"an error too long", good(func(h *sharedHeader) { h.Outcome, h.Err = "unreachable", strings.Repeat("e", 2<<10+1) }, "")},
		{"a final URL too long", good(func(h *sharedHeader) { h.FinalURL = origin + "/" + strings.Repeat("u", 8<<10) }, "User-agent: *\n")},
	} {
		if res, cost, err := f.Decode(origin, c.data); err == nil {
			t.Errorf("%s: decoded %+v (cost %d)", c.name, res, cost)
		} else {
			t.Logf("%s: %v", c.name, err)
		}
	}
}

// TestSharedLongText: an error message or detail longer than Decode takes
// is shared shortened, at a character's boundary; a final URL longer than
// it takes is not shared at all, as no shortened URL is the one fetched.
func TestSharedLongText(t *testing.T) {
	const origin = "https://example.com"
	f := newTestFetcher(t, Options{})
	long := strings.Repeat("é", 3<<10)
	res := &Result{Answer: robots.Answer{Outcome: robots.OutcomeUnreachable, Detail: "robots.txt unreachable: " + long}, Origin: origin,
		FinalURL: origin + "/robots.txt", Err: errors.New("fetch: " + long)}
	data, err := encodeShared(res, fetched{Timing: Timing{FetchedAt: time.Now()}})
	if err != nil {
		t.Fatal(err)
	}
	got, _, err := f.Decode(origin, data)
	if err != nil {
		t.Fatalf("a shortened entry does not decode: %v", err)
	}
	for _, c := range []struct{ name, got, want string }{{"detail", got.Detail, res.Detail}, {"error", got.Err.Error(), res.Err.Error()}} {
		kept := strings.TrimSuffix(c.got, "…")
		if len(c.got) > 2<<10 || kept == c.got || !strings.HasPrefix(c.want, kept) || !utf8.ValidString(c.got) {
			t.Errorf("%s shared as %d bytes %q; want at most 2 KiB, the start of the original and an ellipsis", c.name, len(c.got), c.got)
		}
	}
	res.FinalURL = origin + "/" + strings.Repeat("u", 8<<10)
	if data, err := encodeShared(res, fetched{Timing: Timing{FetchedAt: time.Now()}}); err == nil {
		t.Errorf("a final URL of %d bytes encoded: %q", len(res.FinalURL), data)
	}
}

// FuzzDecode: no data makes Decode panic, with or without TDMRep, and
// whatever decodes encodes again to data that decodes to the same result.
func FuzzDecode(f *testing.F) {
	const origin = "https://example.com"
	fetchers := []*Fetcher{New(Options{MaxBytes: 64}), New(Options{MaxBytes: 64, TDMRep: true})}
	defer fetchers[0].Close()
	defer fetchers[1].Close()
	now := time.Date(2026, 11, 25, 9, 7, 44, 123456789, time.UTC)
	for _, seed := range []struct {
		res          Result
		timing       Timing
		body, tdmrep string
	}{
		{Result{Answer: robots.Answer{Outcome: robots.OutcomeOK}, Origin: origin, Status: 200, Bytes: 36, FinalURL: origin + "/robots.txt"},
			Timing{FetchedAt: now, Duration: time.Millisecond, Freshness: Freshness{MaxAge: time.Hour, HasMaxAge: true, Date: now}},
			"User-agent: *\nCrawl-delay: 3\nDisallow: /", ""},
		{Result{Answer: robots.Answer{Outcome: robots.OutcomeOK}, Origin: origin, Status: 200, Bytes: 65, Truncated: true, FinalURL: origin + "/robots.txt"},
			Timing{FetchedAt: now}, strings.Repeat("Disallow: /x\n", 5), ""},
		{Result{Answer: robots.Answer{Outcome: robots.OutcomeUnavailable, Detail: "robots.txt 404"}, Origin: origin, Status: 404, FinalURL: origin + "/robots.txt",
			Err: &StatusError{URL: origin + "/robots.txt", Code: 404}}, Timing{FetchedAt: now, Freshness: Freshness{HasExpires: true, Date: now}}, "", ""},
		{Result{Answer: robots.Answer{Outcome: robots.OutcomeUnavailable, Detail: "robots.txt: redirect loop"}, Origin: origin, Status: 302, Redirects: 2,
			Err: fmt.Errorf("x redirects back to y: %w", ErrRedirectLoop)}, Timing{FetchedAt: now}, "", ""},
		{Result{Answer: robots.Answer{Outcome: robots.OutcomeUnreachable, Detail: "robots.txt unreachable: timeout"}, Origin: origin,
			Err: errors.New("fetch: timeout")}, Timing{FetchedAt: now}, "", ""},
		{Result{Answer: robots.Answer{Outcome: robots.OutcomeOK}, Origin: origin, Status: 200, Bytes: 24, FinalURL: origin + "/robots.txt",
			TDMRepDetail: "tdmrep.json: 2 rules"}, Timing{FetchedAt: now},
			"User-agent: *\nAllow: /\n", `[{"location":"/a/","tdm-reservation":0},{"location":"/","tdm-reservation":1}]`},
		{Result{Answer: robots.Answer{Outcome: robots.OutcomeUnavailable, Detail: "robots.txt 404"}, Origin: origin, Status: 404, FinalURL: origin + "/robots.txt",
			Err: &StatusError{URL: origin + "/robots.txt", Code: 404}, TDMRepDetail: "tdmrep.json 404"}, Timing{FetchedAt: now}, "", ""},
	} {
		data, err := encodeShared(&seed.res, fetched{Timing: seed.timing, bodies: bodies{robots: []byte(seed.body), tdmrep: []byte(seed.tdmrep)}})
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, fetcher := range fetchers {
			res, b, err := fetcher.decodeShared(origin, data)
			if err != nil {
				continue
			}
			if (res.TDMRep != nil) != (len(b.tdmrep) > 0) || !fetcher.opts.TDMRep && (res.TDMRep != nil || res.TDMRepDetail != "") {
				t.Fatalf("TDMRep %v (%q) with a body of %d bytes, Options.TDMRep %v", res.TDMRep, res.TDMRepDetail, len(b.tdmrep), fetcher.opts.TDMRep)
			}
			if b.tdmrepLocal != tdmrepOrigin {
				t.Fatalf("decoded with a tdmrep.json locality of %d", b.tdmrepLocal)
			}
			again, err := encodeShared(res, b)
			if err != nil {
				t.Fatalf("decoded %+v, but it does not encode: %v", res, err)
			}
			res2, b2, err := fetcher.decodeShared(origin, again)
			if err != nil {
				t.Fatalf("encoded again as %q, it does not decode: %v", again, err)
			}
			if !bytes.Equal(b.robots, b2.robots) || !bytes.Equal(b.tdmrep, b2.tdmrep) {
				t.Fatalf("bodies %q, then %q", b.bodies, b2.bodies)
			}
			sameResult(t, res, res2)
			sameTiming(t, b.Timing, b2.Timing)
			if !reflect.DeepEqual(res.Robots, res2.Robots) || !reflect.DeepEqual(res.TDMRep, res2.TDMRep) {
				t.Fatalf("rules %+v %+v, then %+v %+v", res.Robots, res.TDMRep, res2.Robots, res2.TDMRep)
			}
		}
	})
}

// BenchmarkDecode is what an instance pays for a robots.txt another
// instance fetched: reading the entry and parsing the body, on real files.
func BenchmarkDecode(b *testing.B) {
	for _, name := range []string{"twitter_2022.texting_robots.txt", "en.wikipedia.org_2024.txt", "quora_2022.texting_robots.txt"} {
		body, err := os.ReadFile(filepath.Join("..", "testdata", "corpus", name))
		if err != nil {
			b.Fatal(err)
		}
		const origin = "https://example.com"
		f := New(Options{})
		res := &Result{Answer: robots.Answer{Outcome: robots.OutcomeOK}, Origin: origin, Status: 200, Bytes: int32(len(body)),
			FinalURL: origin + "/robots.txt"}
		data, err := encodeShared(res, fetched{Timing: Timing{FetchedAt: time.Now(), Freshness: Freshness{Date: time.Now()}}, bodies: bodies{robots: body}})
		if err != nil {
			b.Fatal(err)
		}
		b.Run(strings.TrimSuffix(name, ".txt"), func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := f.Decode(origin, data); err != nil {
					b.Fatal(err)
				}
			}
		})
		f.Close()
	}
}
