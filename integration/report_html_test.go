package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"image/png"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// updateScreenshot rewrites the screenshot proxy/cmd/report/README.md shows:
// go test ./integration -run TestReportHTMLInBrowser -update-screenshot
var updateScreenshot = flag.Bool("update-screenshot", false, "rewrite testdata/report-sample.png from this run")

const sampleScreenshot = "testdata/report-sample.png"

// sampleCrawl drives a small crawl through a real proxy: four crawlers
// (one behind a credential whose User-Agent claims Googlebot), three
// origins (one with a Crawl-delay, one whose robots.txt answers 503),
// over a few seconds, and returns the audit log it wrote.
func sampleCrawl(t *testing.T) string {
	t.Helper()
	shop := newOrigin(t, false, map[string]http.HandlerFunc{"/robots.txt": robotsTxt(
		"User-agent: *\nDisallow: /cart/\nDisallow: /account/\n\nUser-agent: GPTBot\nDisallow: /\n")})
	news := newOrigin(t, false, map[string]http.HandlerFunc{"/robots.txt": robotsTxt(
		"User-agent: *\nCrawl-delay: 1\nDisallow: /drafts/\n")})
	flaky := newOrigin(t, false, map[string]http.HandlerFunc{"/robots.txt": statusPage(http.StatusServiceUnavailable)})
	acme := newCredential("acme-crawler", "AcmeBot")
	p := startProxy(t, "ROBOTSGATE_CREDENTIALS_FILE="+credentialsFile(t, acme), "ROBOTSGATE_AUTH=optional")

	anonymous := p.client(t)
	authURL := *p.url
	authURL.User = url.UserPassword(acme.name, acme.password)
	authenticated := newClient(t, &http.Transport{Proxy: http.ProxyURL(&authURL)})
	type visit struct {
		client    *http.Client
		userAgent string
		paths     []string
		site      *origin
	}
	visits := []visit{
		{anonymous, "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)", []string{"/", "/products/1", "/cart/checkout"}, shop},
		{anonymous, "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)", []string{"/", "/world"}, news},
		{anonymous, "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; GPTBot/1.2; +https://openai.com/gptbot)", []string{"/", "/products/2"}, shop},
		{anonymous, "CCBot/2.0 (https://commoncrawl.org/faq/)", []string{"/", "/drafts/next", "/sport"}, news},
		{anonymous, "CCBot/2.0 (https://commoncrawl.org/faq/)", []string{"/"}, flaky},
		{authenticated, "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)", []string{"/account/orders", "/products/3"}, shop},
	}
	const rounds = 4
	for round := range rounds {
		started := time.Now()
		for _, v := range visits {
			for _, path := range v.paths {
				get(t, v.client, v.site.base()+path, v.userAgent)
			}
		}
		if round < rounds-1 {
			// The timeline has one bar a second: each round starts in a
			// second of its own, waiting only for the clock to reach it.
			time.Sleep(time.Until(started.Truncate(time.Second).Add(time.Second)))
		}
	}
	if code := p.stop(); code != 0 {
		t.Fatalf("robotsgate exited %d", code)
	}
	return p.auditLog
}

// browserReport is what the page shows, read in the browser.
type browserReport struct {
	Cards    map[string]string     `json:"cards"`
	Crawlers [][]string            `json:"crawlers"`
	Kinds    []string              `json:"kinds"` // of the crawlers, by their badges
	Origins  [][]string            `json:"origins"`
	Rules    [][]string            `json:"rules"`
	Charts   map[string]chartShape `json:"charts"`
}

type chartShape struct {
	Width, Height float64
	Rects         int
}

// readPage reads the page as shown; a crawler's cell is its name alone,
// its badge read apart.
const readPage = `(() => {
  const rows = id => Array.from(document.querySelectorAll("#" + id + " tbody tr"))
    .map(tr => Array.from(tr.cells).map(td => (td.querySelector(".who") || td).textContent.trim()));
  const cards = {};
  document.querySelectorAll("#summary dd").forEach(dd => { cards[dd.id] = dd.textContent.trim(); });
  const charts = {};
  ["chart-compliance", "chart-rules", "chart-timeline"].forEach(id => {
    const chart = document.getElementById(id);
    if (!chart) return;
    const box = chart.getBoundingClientRect();
    charts[id] = {Width: box.width, Height: box.height, Rects: chart.querySelectorAll("rect").length};
  });
  const kinds = Array.from(document.querySelectorAll("#crawlers tbody .kind")).map(k => k.textContent.trim());
  return {cards, crawlers: rows("crawlers"), kinds, origins: rows("origins"), rules: rows("rules"), charts};
})()`

// TestReportHTMLInBrowser opens the HTML report of a real crawl in
// headless Chromium from disk: it loads without a console error or a
// network request, shows the figures the JSON report has, draws its
// charts at a size, sorts its tables, and reads in dark mode and in print.
func TestReportHTMLInBrowser(t *testing.T) {
	chromium := tools.Look(t, "apt-get install chromium", "chromium", "chromium-browser", "google-chrome")
	auditLog := sampleCrawl(t)
	dir := t.TempDir()
	htmlFile, jsonFile, wideFile := filepath.Join(dir, "report.html"), filepath.Join(dir, "report.json"), filepath.Join(dir, "wide.html")
	for out, log := range map[string]string{htmlFile: auditLog, jsonFile: auditLog, wideFile: wideLog(t, dir)} {
		cmd := command(context.Background(), t, "report", "-o", out, log)
		if output, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("report -o %s: %v\n%s", out, err, output)
		}
	}
	var want struct {
		Totals struct {
			Requests int64 `json:"requests"`
			Allowed  int64 `json:"allowed"`
			Refused  int64 `json:"refused"`
			TooEarly int64 `json:"too_early"`
		} `json:"totals"`
		Crawlers []struct {
			Name     string `json:"name"`
			By       string `json:"by"`
			Requests int64  `json:"requests"`
			Allowed  int64  `json:"allowed"`
			Refused  int64  `json:"refused"`
			TooEarly int64  `json:"too_early"`
			Mismatch int64  `json:"ua_mismatches"`
		} `json:"crawlers"`
		TopRules []struct {
			Rule    string `json:"rule"`
			Refused int64  `json:"refused"`
		} `json:"top_rules"`
	}
	raw, err := os.ReadFile(jsonFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &want); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	alloc, cancelAlloc := chromedp.NewExecAllocator(ctx, append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.WindowSize(1280, 900))...)
	defer cancelAlloc()
	browser, cancelBrowser := chromedp.NewContext(alloc)
	defer cancelBrowser()

	var mu sync.Mutex
	var problems, requests []string
	if err := chromedp.Listen(browser, func(ev any) {
		mu.Lock()
		defer mu.Unlock()
		switch ev := ev.(type) {
		case *runtime.EventConsoleAPICalled:
			var args []string
			for _, a := range ev.Args {
				args = append(args, string(a.Value)+a.Description)
			}
			problems = append(problems, fmt.Sprintf("console.%s: %s", ev.Type, strings.Join(args, " ")))
		case *runtime.EventExceptionThrown:
			problems = append(problems, "exception: "+ev.ExceptionDetails.Text)
		case *cdplog.EventEntryAdded:
			problems = append(problems, fmt.Sprintf("log %s %s: %s %s", ev.Entry.Level, ev.Entry.Source, ev.Entry.Text, ev.Entry.URL))
		case *network.EventRequestWillBeSent:
			requests = append(requests, ev.Request.URL)
		}
	}); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	fileURL := "file://" + htmlFile
	if err := chromedp.Do(browser,
		call(network.Enable, network.EnableParams{}), call(cdplog.Enable, cdp.Empty{}), call(runtime.Enable, cdp.Empty{}),
		chromedp.Navigate(fileURL),
		chromedp.WaitVisible("#crawlers"),
	); err != nil {
		t.Fatalf("load the report in chromium: %v", err)
	}
	shown, err := chromedp.Run(browser, chromedp.Evaluate[browserReport](readPage))
	if err != nil {
		t.Fatalf("read the report in chromium: %v", err)
	}

	t.Run("no console message and no request but the file", func(t *testing.T) {
		mu.Lock()
		defer mu.Unlock()
		if len(problems) > 0 {
			t.Errorf("the page logged:\n%s", strings.Join(problems, "\n"))
		}
		if slices.ContainsFunc(requests, func(u string) bool { return u != fileURL }) || len(requests) == 0 {
			t.Errorf("requests made: %q, want only %s", requests, fileURL)
		}
	})

	t.Run("figures", func(t *testing.T) {
		cards := map[string]int64{
			"total-requests": want.Totals.Requests, "total-allowed": want.Totals.Allowed,
			"total-refused": want.Totals.Refused, "total-too-early": want.Totals.TooEarly,
		}
		for id, n := range cards {
			if got := shown.Cards[id]; got != formatCount(n) {
				t.Errorf("card %s shows %q, want %q", id, got, formatCount(n))
			}
		}
		if want.Totals.Refused == 0 || want.Totals.TooEarly == 0 {
			t.Errorf("the sample crawl should have refusals and 429s: %+v", want.Totals)
		}
		if len(shown.Crawlers) != len(want.Crawlers) {
			t.Fatalf("crawlers table has %d rows, the JSON report %d crawlers", len(shown.Crawlers), len(want.Crawlers))
		}
		for i, c := range want.Crawlers {
			row := shown.Crawlers[i]
			got := []string{row[0], shown.Kinds[i], row[1], row[2], row[3], row[7], row[13]}
			wantRow := []string{c.Name, c.By, formatCount(c.Requests), formatCount(c.Allowed), formatCount(c.Refused), formatCount(c.TooEarly), formatCount(c.Mismatch)}
			if !slices.Equal(got, wantRow) {
				t.Errorf("crawler row %d: name, kind, requests, allowed, refused, 429, mismatches = %q, want %q", i, got, wantRow)
			}
		}
		if len(shown.Rules) != len(want.TopRules) || len(want.TopRules) == 0 {
			t.Fatalf("rules table has %d rows, the JSON report %d rules", len(shown.Rules), len(want.TopRules))
		}
		for i, r := range want.TopRules {
			if got := shown.Rules[i]; got[0] != formatCount(r.Refused) || got[4] != r.Rule {
				t.Errorf("rule row %d = %q, want %d refused by %q", i, got, r.Refused, r.Rule)
			}
		}
	})

	t.Run("charts", func(t *testing.T) {
		for _, id := range []string{"chart-compliance", "chart-timeline", "chart-rules"} {
			c, ok := shown.Charts[id]
			if !ok {
				t.Errorf("no chart #%s", id)
				continue
			}
			if c.Width < 300 || c.Height < 40 || c.Rects == 0 {
				t.Errorf("chart #%s is %.0f×%.0f px with %d bars, want at least 300×40 with bars", id, c.Width, c.Height, c.Rects)
			}
		}
	})

	t.Run("sorting", func(t *testing.T) {
		column := func(table string, n int) []string {
			cells, err := chromedp.Run(browser, chromedp.Evaluate[[]string](fmt.Sprintf(
				`Array.from(document.querySelectorAll("#%s tbody tr")).map(tr => tr.cells[%d].textContent.trim())`, table, n)))
			if err != nil {
				t.Fatal(err)
			}
			return cells
		}
		click := func(table string, n int) {
			if err := chromedp.Do(browser, chromedp.Click(fmt.Sprintf("#%s thead th:nth-child(%d)", table, n+1))); err != nil {
				t.Fatal(err)
			}
		}
		numbers := func(cells []string) []int {
			var out []int
			for _, c := range cells {
				n, err := strconv.Atoi(strings.ReplaceAll(strings.Fields(c)[0], ",", ""))
				if err != nil {
					t.Fatalf("cell %q is not a count", c)
				}
				out = append(out, n)
			}
			return out
		}
		const name, refused = 0, 3
		click("crawlers", refused)
		desc := numbers(column("crawlers", refused))
		if !slices.IsSortedFunc(desc, func(a, b int) int { return b - a }) || desc[0] == desc[len(desc)-1] {
			t.Errorf("after one click on Refused: %v, want descending and not all equal", desc)
		}
		click("crawlers", refused)
		if asc := numbers(column("crawlers", refused)); !slices.IsSorted(asc) {
			t.Errorf("after a second click on Refused: %v, want ascending", asc)
		}
		click("crawlers", name)
		names := column("crawlers", name)
		if !slices.IsSortedFunc(names, func(a, b string) int { return strings.Compare(strings.ToLower(a), strings.ToLower(b)) }) {
			t.Errorf("after a click on Crawler: %q, want alphabetical", names)
		}
	})

	t.Run("fits 1280 px", func(t *testing.T) {
		for _, page := range []string{fileURL, "file://" + wideFile} {
			if err := chromedp.Do(browser, chromedp.EmulateViewport(1280, 900), chromedp.Navigate(page), chromedp.WaitVisible("#crawlers")); err != nil {
				t.Fatal(err)
			}
			fit, err := chromedp.Run(browser, chromedp.Evaluate[pageFit](measureFit))
			if err != nil {
				t.Fatal(err)
			}
			if fit.Viewport != 1280 || fit.Tables < 6 {
				t.Fatalf("%s: a viewport %d px wide with %d tables measured, want 1280 and every table", page, fit.Viewport, fit.Tables)
			}
			if len(fit.Overflows) > 0 {
				t.Errorf("%s at 1280 px: %s", page, strings.Join(fit.Overflows, "; "))
			}
		}
	})

	// The wide page is on screen: its crawlers told apart, its empty
	// token shown, its rules' bars with their origins and whole reasons.
	t.Run("kinds, empty values and whole reasons", func(t *testing.T) {
		seen, err := chromedp.Run(browser, chromedp.Evaluate[wideShown](readWide))
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"acme credential", "acme token", wideToken + " token"} {
			if !slices.Contains(seen.Crawlers, want) {
				t.Errorf("crawlers shown as %q, want one shown as %q", seen.Crawlers, want)
			}
		}
		if !slices.Contains(seen.Crawlers, "(no token) token") || !slices.Contains(seen.Empty, "(no token)") {
			t.Errorf("crawlers %q, empty values shown %q: want the crawler without a token, visibly", seen.Crawlers, seen.Empty)
		}
		for _, want := range []string{wideHost, wideReason} {
			if !slices.ContainsFunc(seen.RuleBars, func(bar string) bool { return strings.Contains(bar, want) }) {
				t.Errorf("no rule bar shows %q whole:\n%s", want, strings.Join(seen.RuleBars, "\n"))
			}
		}
	})

	t.Run("dark mode and print", func(t *testing.T) {
		emulate := func(media, scheme string) chromedp.Action[chromedp.Void] {
			return call(emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
				Media: media, Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: scheme}},
			})
		}
		colors := func(media, scheme string) string {
			if err := chromedp.Do(browser, emulate(media, scheme)); err != nil {
				t.Fatal(err)
			}
			got, err := chromedp.Run(browser, chromedp.Evaluate[string](
				`getComputedStyle(document.body).backgroundColor + " " + getComputedStyle(document.body).color`))
			if err != nil {
				t.Fatal(err)
			}
			return got
		}
		if got := colors("screen", "light"); got != "rgb(255, 255, 255) rgb(27, 31, 36)" {
			t.Errorf("light mode: background and text %q, want dark text on white", got)
		}
		if got := colors("screen", "dark"); got != "rgb(20, 23, 27) rgb(228, 232, 236)" {
			t.Errorf("dark mode: background and text %q, want light text on a dark background", got)
		}
		if got := colors("print", "dark"); got != "rgb(255, 255, 255) rgb(0, 0, 0)" {
			t.Errorf("print (with a dark screen preference): background and text %q, want black on white", got)
		}
		pdf, err := chromedp.Run(browser, chromedp.PrintToPDF())
		if err != nil || !bytes.HasPrefix(pdf, []byte("%PDF")) {
			t.Errorf("printing to PDF: %v (%d bytes)", err, len(pdf))
		}
		if err := chromedp.Do(browser, emulate("screen", "light")); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("screenshot", func(t *testing.T) {
		if err := chromedp.Do(browser, chromedp.Navigate(fileURL), chromedp.WaitVisible("#crawlers")); err != nil {
			t.Fatal(err)
		}
		shot, err := chromedp.Run(browser, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(bytes.NewReader(shot))
		if err != nil {
			t.Fatalf("the screenshot is not a PNG: %v", err)
		}
		if b := img.Bounds(); b.Dx() < 1000 || b.Dy() < 900 {
			t.Errorf("screenshot is %v, want the whole page at 1280 px wide", b)
		}
		if *updateScreenshot {
			if err := os.WriteFile(sampleScreenshot, shot, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// call runs one DevTools command as an action.
func call[P, R any](c cdp.Command[P, R], params P) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := cdp.Call(ctx, t, c, params)
		return err
	})
}

// formatCount writes n as the report does, with thousands separators.
func formatCount(n int64) string {
	s := strconv.FormatInt(n, 10)
	var b strings.Builder
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// pageFit is how a page fits its window: Overflows name what is wider.
type pageFit struct {
	Viewport  int      `json:"viewport"`
	Tables    int      `json:"tables"`
	Overflows []string `json:"overflows"`
}

// measureFit compares the page and each table's scroll box with the
// window. The timeline's table is folded away: it is opened first.
const measureFit = `(() => {
  document.querySelectorAll("details").forEach(d => { d.open = true; });
  const root = document.documentElement, over = [];
  if (root.scrollWidth > root.clientWidth) over.push("the page is " + root.scrollWidth + " px wide in " + root.clientWidth);
  const boxes = document.querySelectorAll(".scroll");
  boxes.forEach(box => {
    if (box.scrollWidth > box.clientWidth) over.push("#" + box.querySelector("table").id + " is " + box.scrollWidth + " px wide in " + box.clientWidth);
  });
  return {viewport: window.innerWidth, tables: boxes.length, overflows: over};
})()`

type wideShown struct {
	Crawlers []string `json:"crawlers"`
	Empty    []string `json:"empty"`
	RuleBars []string `json:"rule_bars"`
}

// readWide reads what a reader sees (innerText: no hidden text, no
// tooltips).
const readWide = `(() => {
  const texts = sel => Array.from(document.querySelectorAll(sel)).map(e => e.innerText.replace(/\s+/g, " ").trim());
  return {crawlers: texts("#crawlers tbody td.name"), empty: texts(".empty"), rule_bars: texts("#chart-rules li")};
})()`

// The wide log's longest values: the longest token the log keeps, a host
// of long labels and a reason of several causes.
var (
	wideToken  = strings.Repeat("VeryLongProductToken-", 7)[:128]
	wideHost   = "https://" + strings.Repeat("a-label-as-long-as-a-busy-site-makes-them.", 4) + "example:8443"
	wideReason = "robots.txt unreachable: " + strings.Repeat("dial tcp 192.0.2.1:443: i/o timeout; ", 6) + "complete disallow"
	// wideHoldError is a connection failure as long as a hold's gets.
	wideHoldError = "dial tcp [2001:db8:85a3:8d3:1319:8a2e:370:7348]:8443: connect: connection refused"
)

// wideLog writes an audit log with what makes a report wide: the longest
// token the audit log keeps, a long host and reason, a
// credential and a token of one name, a client without a token, counts of
// five digits and bytes in PiB.
func wideLog(t *testing.T, dir string) string {
	t.Helper()
	start := time.Date(2026, 11, 25, 0, 0, 0, 0, time.UTC)
	type crawler struct{ token, credential, ua string }
	crawlers := []crawler{
		{"acme", "", "acme/1.0 (+https://acme.example/bot)"},
		{"AcmeBot", "acme", "Mozilla/5.0 (compatible; Googlebot/2.1)"},
		{wideToken, "", wideToken + "/1.0"},
		{"", "", ""},
	}
	origins := []string{wideHost, "https://example.com", "http://127.0.0.1:8080"}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	for i := range 12_000 {
		c := crawlers[i%len(crawlers)]
		origin := origins[i%len(origins)]
		rec := map[string]any{
			"time": start.Add(time.Duration(i) * 7 * time.Second), "client": "10.0.0.1:40000", "method": "GET",
			"url": origin + "/catalogue/" + strings.Repeat("x", 80) + "/" + strconv.Itoa(i%50), "user_agent": c.ua, "token": c.token,
			"origin": origin, "paths_checked": true, "robots_outcome": "ok", "robots_status": 200, "mode": "enforce",
			"verdict": "allow", "reason": "no matching rule", "forwarded": true, "status": 200, "bytes": int64(1) << 40, "duration_ms": 1,
		}
		if c.credential != "" {
			rec["credential"], rec["ua_token"], rec["ua_mismatch"] = c.credential, "Googlebot", true
		}
		switch i % 5 {
		case 1:
			rec["verdict"], rec["reason"], rec["rule"], rec["rule_line"], rec["group"] = "disallow", "disallow: /private/ (line 4)", "/private/", 4, "*"
			rec["forwarded"], rec["status"], rec["bytes"] = false, 403, 0
		case 2:
			if origin == wideHost {
				rec["verdict"], rec["reason"], rec["robots_outcome"], rec["robots_status"] = "disallow", wideReason, "unreachable", 503
				rec["forwarded"], rec["status"], rec["bytes"] = false, 403, 0
			}
		case 3:
			// The origin's hold, in the incidents table: the longest
			// kind a connection failure and a pace group make.
			if origin == wideHost && i%4 != 0 {
				rec["pace"], rec["hold_cause"], rec["hold_error"], rec["pace_group"], rec["backoff_step"] = "backoff", "backoff", wideHoldError, "domain:"+wideHost[8:], 12
				rec["hold_until"], rec["forwarded"], rec["status"], rec["bytes"] = start.Add(time.Duration(i+1)*7*time.Second), false, 429, 0
				rec["hold_origin"] = "https://www." + wideHost[8:]
			}
		}
		if err := enc.Encode(rec); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(dir, "wide.log")
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}
