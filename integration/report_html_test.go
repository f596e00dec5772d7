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
	"os/exec"
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
		for _, v := range visits {
			for _, path := range v.paths {
				get(t, v.client, v.site.base()+path, v.userAgent)
			}
		}
		if round < rounds-1 {
			time.Sleep(time.Second) // the timeline gets one bar per second
		}
	}
	if code := p.stop(); code != 0 {
		t.Fatalf("robotsgate exited %d", code)
	}
	return p.auditLog
}

// browserReport is what the page shows, read in the browser.
type browserReport struct {
	Cards    map[string]string   `json:"cards"`
	Crawlers [][]string          `json:"crawlers"`
	Origins  [][]string          `json:"origins"`
	Rules    [][]string          `json:"rules"`
	Charts   map[string]svgShape `json:"charts"`
}

type svgShape struct {
	Width, Height float64
	Rects         int
}

const readPage = `(() => {
  const rows = id => Array.from(document.querySelectorAll("#" + id + " tbody tr"))
    .map(tr => Array.from(tr.cells).map(td => td.textContent.trim()));
  const cards = {};
  document.querySelectorAll("#summary dd").forEach(dd => { cards[dd.id] = dd.textContent.trim(); });
  const charts = {};
  document.querySelectorAll("svg").forEach(svg => {
    const box = svg.getBoundingClientRect();
    charts[svg.id] = {Width: box.width, Height: box.height, Rects: svg.querySelectorAll("rect").length};
  });
  return {cards, crawlers: rows("crawlers"), origins: rows("origins"), rules: rows("rules"), charts};
})()`

// TestReportHTMLInBrowser opens the HTML report of a real crawl in
// headless Chromium from disk: it loads without a console error or a
// network request, shows the figures the JSON report has, draws its
// charts at a size, sorts its tables, and reads in dark mode and in print.
func TestReportHTMLInBrowser(t *testing.T) {
	chromium, err := lookChromium()
	if err != nil {
		t.Skip("chromium is not installed (.ci/run installs it)")
	}
	auditLog := sampleCrawl(t)
	dir := t.TempDir()
	htmlFile, jsonFile := filepath.Join(dir, "report.html"), filepath.Join(dir, "report.json")
	for _, out := range []string{htmlFile, jsonFile} {
		cmd := command(context.Background(), t, "report", "-o", out, auditLog)
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
			got := []string{row[0], row[2], row[3], row[4], row[8], row[14]}
			wantRow := []string{c.Name, formatCount(c.Requests), formatCount(c.Allowed), formatCount(c.Refused), formatCount(c.TooEarly), formatCount(c.Mismatch)}
			if !slices.Equal(got, wantRow) {
				t.Errorf("crawler row %d: name, requests, allowed, refused, 429, mismatches = %q, want %q", i, got, wantRow)
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
				t.Errorf("no SVG #%s", id)
				continue
			}
			if c.Width < 300 || c.Height < 40 || c.Rects == 0 {
				t.Errorf("SVG #%s is %.0f×%.0f px with %d bars, want at least 300×40 with bars", id, c.Width, c.Height, c.Rects)
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
		const name, refused = 0, 4
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

// lookChromium finds Debian's chromium (or another name it goes by).
func lookChromium() (string, error) {
	var err error
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		var path string
		if path, err = exec.LookPath(name); err == nil {
			return path, nil
		}
	}
	return "", err
}
