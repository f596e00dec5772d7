package robots

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// usageCase asks Usage of a file for a token and a path; want is the
// line numbers returned, in order (nil: none).
type usageCase struct {
	name, body, token, path string
	want                    []int
}

func runUsageCases(t *testing.T, cases []usageCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := Parser{}.Parse([]byte(c.body))
			got := r.Usage(c.token, c.path)
			if nums := lineNumbers(got); !slices.Equal(nums, c.want) {
				t.Fatalf("Usage(%q, %q) = lines %v %+v, want %v", c.token, c.path, nums, got, c.want)
			}
			if (got == nil) != (len(c.want) == 0) {
				t.Fatalf("Usage = %#v: nil wanted exactly when no line applies", got)
			}
		})
	}
}

func lineNumbers(ls []UsageLine) []int {
	var out []int
	for _, l := range ls {
		out = append(out, l.Line)
	}
	return out
}

// draftExample is draft-ietf-aipref-attach-05's example file (§3.4),
// with its path-less line.
const draftExample = `User-Agent: *
Allow: /
Disallow: /never/
Content-Usage: train-ai=n
Content-Usage: /ai-ok/ train-ai=y

User-Agent: ExampleBot
Allow: /
Content-Usage: / train-ai=y
`

func TestUsageGroups(t *testing.T) {
	runUsageCases(t, []usageCase{
		{"star group", draftExample, "OtherBot", "/test", []int{4}},
		{"named group", draftExample, "ExampleBot", "/ai-ok/test", []int{9}},
		{"named group, any case", draftExample, "examplebot", "/test", []int{9}},
		{"no token: star group", draftExample, "", "/test", []int{4}},
		{"own group without lines does not inherit star's",
			"User-agent: *\nContent-Signal: ai-train=no\nContent-Usage: train-ai=n\n\nUser-agent: GPTBot\nDisallow: /private/\n",
			"GPTBot", "/x", nil},
		{"no group for the token and no star group",
			"User-agent: GPTBot\nContent-Usage: train-ai=n\n", "CCBot", "/x", nil},
		{"groups naming the token merge",
			"User-agent: GPTBot\nContent-Usage: train-ai=n\n\nUser-agent: *\nContent-Usage: train-ai=y\n\nUser-agent: gptbot\nContent-Signal: ai-train=no\n",
			"GPTBot", "/x", []int{2, 8}},
		{"star groups merge",
			"User-agent: *\nContent-Signal: search=yes\nDisallow: /p\n\nUser-agent: a\nContent-Usage: train-ai=y\n\nUser-agent: *\nContent-Signal: ai-train=no\n",
			"b", "/x", []int{2, 9}},
		{"a signal does not end the user-agent lines",
			"User-agent: *\nContent-Signal: search=yes\n\nUser-agent: a\nContent-Usage: train-ai=y\n", "a", "/x", []int{2, 5}},
		{"a line in a group of several names speaks for each",
			"User-agent: a\nUser-agent: b\nContent-Signal: ai-train=no\nDisallow: /x\n", "b", "/", []int{3}},
		{"Content-Signal speaks for the group as written, user-agent lines after it too",
			"User-agent: a\nContent-Signal: ai-train=no\nUser-agent: b\nAllow: /\n", "b", "/", []int{2}},
		{"Content-Usage ends the user-agent lines: the next one starts a group",
			"User-agent: a\nContent-Usage: train-ai=n\nUser-agent: b\nAllow: /\n", "b", "/", nil},
		{"Content-Usage ends the user-agent lines, its own group keeps it",
			"User-agent: a\nContent-Usage: train-ai=n\nUser-agent: b\nAllow: /\n", "a", "/", []int{2}},
		{"lines after the rules belong to the group",
			"User-agent: a\nDisallow: /x\nContent-Signal: ai-train=no\nUser-agent: b\nContent-Signal: search=yes\n", "a", "/", []int{3}},
		{"lines before any user-agent line belong to no group",
			"Content-Usage: train-ai=n\nContent-Signal: ai-train=no\nUser-agent: *\nAllow: /\n", "a", "/", nil},
		{"a sitemap does not end the group",
			"User-agent: *\nSitemap: https://e.com/s.xml\nContent-Signal: ai-train=no\n", "a", "/", []int{3}},
		{"no usage lines", "User-agent: *\nDisallow: /x\n", "a", "/", nil},
	})
}

func TestUsagePathScope(t *testing.T) {
	runUsageCases(t, []usageCase{
		// The draft's table (§3.4): /never/test is disallowed, and has no
		// preference there; Usage answers for the paths anyway, Check
		// decides whether they are fetched.
		{"draft: no path applies where no longer one matches", draftExample, "OtherBot", "/test", []int{4}},
		{"draft: longest path wins", draftExample, "OtherBot", "/ai-ok/test", []int{5}},
		{"a path-less line is shorter than /",
			"User-agent: *\nContent-Usage: train-ai=n\nContent-Usage: / train-ai=y\n", "a", "/x", []int{3}},
		{"identical paths: both apply",
			"User-agent: *\nContent-Usage: /a/ train-ai=n\nContent-Usage: /a/ train-ai=y\nContent-Usage: / search=y\n", "a", "/a/b", []int{2, 3}},
		{"patterns of equal length: both apply",
			"User-agent: *\nContent-Usage: /a/b train-ai=n\nContent-Usage: /*/b train-ai=y\n", "a", "/a/b", []int{2, 3}},
		{"path-less lines tie",
			"User-agent: *\nContent-Usage: train-ai=n\nContent-Usage: search=y\n", "a", "/x", []int{2, 3}},
		{"no line matches", "User-agent: *\nContent-Usage: /a/ train-ai=n\n", "a", "/b", nil},
		{"wildcard", "User-agent: *\nContent-Usage: / train-ai=y\nContent-Usage: /*.pdf train-ai=n\n", "a", "/docs/x.pdf", []int{3}},
		{"wildcard counts its star", "User-agent: *\nContent-Usage: /a*c train-ai=n\nContent-Usage: /abc train-ai=y\n", "a", "/abcd", []int{2, 3}},
		{"anchored: matches the end", "User-agent: *\nContent-Usage: /x$ train-ai=n\n", "a", "/x", []int{2}},
		{"anchored: not past the end", "User-agent: *\nContent-Usage: /x$ train-ai=n\n", "a", "/xy", nil},
		{"anchored: the query-less form counts", "User-agent: *\nContent-Usage: / train-ai=y\nContent-Usage: /*.pdf$ train-ai=n\n", "a", "/doc.pdf?x=1", []int{3}},
		{"the query counts", "User-agent: *\nContent-Usage: /search?q= train-ai=n\n", "a", "/search?q=x", []int{2}},
		{"a star path", "User-agent: *\nContent-Usage: * train-ai=n\nContent-Usage: /a train-ai=y\n", "a", "/b", []int{2}},
		{"percent-encoded pattern, plain path", "User-agent: *\nContent-Usage: /%7Efoo/ train-ai=n\n", "a", "/~foo/x", []int{2}},
		{"plain pattern, encoded path", "User-agent: *\nContent-Usage: /~foo/ train-ai=n\n", "a", "/%7efoo/x", []int{2}},
		{"UTF-8 pattern, encoded path", "User-agent: *\nContent-Usage: /ツ/ train-ai=n\n", "a", "/%E3%83%84/x", []int{2}},
		{"%2F is not /", "User-agent: *\nContent-Usage: /a/b train-ai=n\n", "a", "/a%2Fb", []int{2}}, // read as /a/b: see TestUsageReadings
		{"a tab separates the path", "User-agent: *\nContent-Usage: /a/\ttrain-ai=n\n", "a", "/a/x", []int{2}},
		{"/robots.txt is a path like any other", "User-agent: *\nContent-Usage: /robots.txt train-ai=n\n", "a", "/robots.txt", []int{2}},
		{"signals: every path-less one, not ranked",
			"User-agent: *\nContent-Signal: ai-train=no\nContent-Signal: search=yes\nContent-Usage: train-ai=y\n", "a", "/x", []int{2, 3, 4}},
		{"signals with a path: where it matches",
			"User-agent: *\nContent-Signal: ai-train=yes\nContent-Signal: /private/ ai-train=no\n", "a", "/private/x", []int{2, 3}},
		{"signals with a path: not elsewhere",
			"User-agent: *\nContent-Signal: ai-train=yes\nContent-Signal: /private/ ai-train=no\n", "a", "/public/x", []int{2}},
		{"a signal does not outrank a Content-Usage line",
			"User-agent: *\nContent-Signal: /a/b/c/ ai-train=no\nContent-Usage: /a/ train-ai=y\n", "a", "/a/b/c/d", []int{2, 3}},
	})
}

func TestUsageReadings(t *testing.T) {
	const articles = "User-agent: *\nContent-Usage: / train-ai=y\nContent-Usage: /articles/ train-ai=n\n"
	runUsageCases(t, []usageCase{
		{"as sent", articles, "a", "/articles/x", []int{3}},
		{"dot segments", articles, "a", "/x/../articles/", []int{2, 3}},
		{"escaped dot segments", articles, "a", "/x/%2e%2E/articles/", []int{2, 3}},
		{"merged slashes", articles, "a", "//articles/x", []int{2, 3}},
		{"decoded slash", articles, "a", "/articles%2Fx", []int{2, 3}},
		{"backslash", articles, "a", `/articles\x`, []int{2, 3}},
		{"params dropped", articles, "a", "/articles;v=1/x", []int{2, 3}},
		{"two steps", articles, "a", "/x/..//articles/", []int{2, 3}},
		{"no reading reaches it", articles, "a", "/other/x", []int{2}},
		{"the query-less form of a reading",
			"User-agent: *\nContent-Usage: /*.pdf$ train-ai=n\n", "a", "/x/../doc.pdf?x=1", []int{2}},
		{"a reading's lines are deduplicated",
			"User-agent: *\nContent-Usage: /a train-ai=n\n", "a", "/x/../a/./b", []int{2}},
		{"signals with a path see readings too",
			"User-agent: *\nContent-Signal: /private/ ai-train=no\n", "a", "/x/../private/", []int{2}},
	})

	// More readings than MaxReadings: every line of the groups, since
	// some reading may be any of them.
	body := articles + "Content-Usage: /unrelated/ search=n\n"
	path := `/%2F%2e%5C/./..;\.a/%2F%2e%5C/./..;\.a` // see TestReadingsAreBounded
	if j := (Parser{}).Parse([]byte("User-agent: *\nDisallow: /zz\n")).Prepare("a", path); j.stop != stopMaxReadings {
		t.Fatalf("the path must have more than MaxReadings readings (stop %d)", j.stop)
	}
	if got := lineNumbers((Parser{}).Parse([]byte(body)).Usage("a", path)); !slices.Equal(got, []int{2, 3, 4}) {
		t.Errorf("ambiguous path: lines %v, want every line", got)
	}
}

// TestUsageCostBound: matching every line of a file against every reading
// of a long path would cost more than MaxDecisionCost; Usage returns every
// line instead, without matching.
func TestUsageCostBound(t *testing.T) {
	var b strings.Builder
	b.WriteString("User-agent: *\n")
	for i := range MaxUsageLines {
		b.WriteString("Content-Usage: /*a*b*c*" + base36(i) + " train-ai=n\n")
	}
	r := Parser{}.Parse([]byte(b.String()))
	path := "/" + strings.Repeat("ab//", 4096)
	load := product{r, &r.sets[r.global]}.usageLoad()
	if plan := planReadings(load, path); plan.cost <= MaxDecisionCost {
		t.Fatalf("the test path must cost more than the bound: %d", plan.cost)
	}
	if got := r.Usage("a", path); len(got) != MaxUsageLines {
		t.Fatalf("too costly: %d lines, want every one, %d", len(got), MaxUsageLines)
	}
	// A short path costs little and is matched.
	if got := r.Usage("a", "/abc"); got != nil {
		t.Fatalf("/abc: %v, want no line", lineNumbers(got))
	}
	if got := lineNumbers(r.Usage("a", "/abcz")); !slices.Equal(got, []int{2 + 35}) {
		t.Fatalf("/abcz: %v, want line %d", got, 2+35)
	}
}

func TestUsageParse(t *testing.T) {
	for _, c := range []struct {
		name, body string
		want       []UsageLine
		ignored    []IgnoredLine
	}{
		{"path and value", "User-agent: *\nContent-Usage: /a/  train-ai=n, search=y \n",
			[]UsageLine{{DirectiveContentUsage, 2, "/a/", "train-ai=n, search=y"}}, nil},
		{"value alone", "User-agent: *\ncontent-USAGE :train-ai=n\n",
			[]UsageLine{{DirectiveContentUsage, 2, "", "train-ai=n"}}, nil},
		{"signal", "User-agent: *\nContent-signal: search=yes, ai-train=no # managed\n",
			[]UsageLine{{DirectiveContentSignal, 2, "", "search=yes, ai-train=no"}}, nil},
		{"signal with a path", "User-agent: *\nContent-Signal: /a/ ai-train=no\n",
			[]UsageLine{{DirectiveContentSignal, 2, "/a/", "ai-train=no"}}, nil},
		{"missing colon, two words", "User-agent: *\nContent-Usage train-ai=n\n",
			[]UsageLine{{DirectiveContentUsage, 2, "", "train-ai=n"}}, nil},
		{"empty", "User-agent: *\nContent-Usage:\nContent-Signal: \n", nil,
			[]IgnoredLine{{Line: 2, Reason: IgnoredEmptyUsage}, {Line: 3, Reason: IgnoredEmptyUsage}}},
		{"a path alone", "User-agent: *\nContent-Usage: /a/\nContent-Usage: /a/ # x\n", nil,
			[]IgnoredLine{{Line: 2, Reason: IgnoredEmptyUsage}, {Line: 3, Reason: IgnoredEmptyUsage}}},
		{"outside a group", "Content-Usage: train-ai=n\nContent-Signal: ai-train=no\n", nil,
			[]IgnoredLine{{Line: 1, Reason: IgnoredOutsideGroup}, {Line: 2, Reason: IgnoredOutsideGroup}}},
		{"a misspelt key is unknown", "User-agent: *\nContent_Usage: train-ai=n\n", nil,
			[]IgnoredLine{{Line: 2, Reason: IgnoredUnknownKey, Key: "Content_Usage"}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := Parser{KeepIgnored: true}.Parse([]byte(c.body))
			if got := r.Usage("a", "/a/"); !slices.Equal(got, c.want) {
				t.Errorf("Usage = %+v, want %+v", got, c.want)
			}
			if got := r.Ignored(); !slices.Equal(got, c.ignored) {
				t.Errorf("Ignored = %v, want %v", got, c.ignored)
			}
			if r.HasUsage() != (len(c.want) > 0) {
				t.Errorf("HasUsage = %v", r.HasUsage())
			}
		})
	}

	// Line reports what the parser read.
	want := []Directive{DirectiveUserAgent, DirectiveContentUsage, DirectiveContentSignal, DirectiveUnknown}
	var got []Directive
	for l := range lines("User-agent: *\nCONTENT-USAGE: train-ai=n\ncontent-signal: ai-train=no\ncontent-usages: x\n") {
		got = append(got, l.Directive)
	}
	if !slices.Equal(got[:len(want)], want) {
		t.Errorf("directives %v, want %v", got, want)
	}
}

func TestUsageTooMany(t *testing.T) {
	var b strings.Builder
	b.WriteString("User-agent: *\n")
	for i := range MaxUsageLines + 2 {
		b.WriteString("Content-Signal: s" + strconv.Itoa(i) + "=no\n")
	}
	r := Parser{KeepIgnored: true}.Parse([]byte(b.String()))
	if got := r.Usage("a", "/"); len(got) != MaxUsageLines || got[len(got)-1].Line != MaxUsageLines+1 {
		t.Fatalf("%d lines kept, the last %d; want %d, the last line %d", len(got), got[len(got)-1].Line, MaxUsageLines, MaxUsageLines+1)
	}
	want := []IgnoredLine{{Line: MaxUsageLines + 2, Reason: IgnoredTooManyUsage}, {Line: MaxUsageLines + 3, Reason: IgnoredTooManyUsage}}
	if got := r.Ignored(); !slices.Equal(got, want) {
		t.Fatalf("Ignored = %v, want %v", got, want)
	}
}

func TestAnswerUsage(t *testing.T) {
	r := Parser{}.Parse([]byte("User-agent: *\nContent-Usage: train-ai=n\n"))
	for _, c := range []struct {
		answer *Answer
		want   int
	}{
		{&Answer{Outcome: OutcomeOK, Robots: r}, 1},
		{&Answer{Outcome: OutcomeUnavailable, Detail: "robots.txt 404"}, 0},
		{&Answer{Outcome: OutcomeUnreachable, Detail: "robots.txt 503"}, 0},
		{nil, 0},
	} {
		if got := c.answer.Usage("a", "/"); len(got) != c.want {
			t.Errorf("%+v: %d lines, want %d", c.answer, len(got), c.want)
		}
	}
	var none *Robots
	if none.HasUsage() || none.Usage("a", "/") != nil {
		t.Error("a nil Robots has no usage lines")
	}
}

// withUsageLines adds usage lines to body where they change no group: a
// Content-Signal line after every user-agent line (it ends nothing) and a
// Content-Usage line after every allow or disallow line (the user-agent
// lines have ended there already).
func withUsageLines(body string) string {
	var b strings.Builder
	for l := range lines(body) {
		if l.Number > 1 {
			b.WriteByte('\n')
		}
		b.WriteString(lineText(body, l.Number))
		switch l.Directive {
		case DirectiveUserAgent:
			b.WriteString("\nContent-Signal: ai-train=no")
		case DirectiveAllow, DirectiveDisallow:
			b.WriteString("\nContent-Usage: /x train-ai=n, search=y")
		}
	}
	return b.String()
}

// lineText is the text of line number n of body, line breaks of every
// kind counted as lines does.
func lineText(body string, n int) string {
	for i := 1; ; i++ {
		end := strings.IndexAny(body, "\r\n")
		if end < 0 {
			return body
		}
		if i == n {
			return body[:end]
		}
		if body[end] == '\r' && end+1 < len(body) && body[end+1] == '\n' {
			end++
		}
		body = body[end+1:]
	}
}

// TestUsageKeepsVerdicts: usage lines placed where they change no group
// change no verdict, on Google's suite and on the corpus.
func TestUsageKeepsVerdicts(t *testing.T) {
	type check struct{ body, token, path string }
	var checks []check
	suite := loadConformance(t)
	for _, c := range suite.Cases {
		body := string(c.body(t))
		if strings.HasPrefix(body, "\xFF\xFE") || strings.HasPrefix(body, "\xFE\xFF") {
			continue // UTF-16: lines are not bytes
		}
		agents := c.UserAgents
		if c.UserAgent != nil {
			agents = append(agents, *c.UserAgent)
		}
		for _, a := range agents {
			checks = append(checks, check{body, a, PathAndQuery(c.URL)})
		}
	}
	for _, body := range corpusFiles(t) {
		if len(body) > DefaultMaxBytes/2 {
			continue // the added lines would push rules past the limit
		}
		for _, token := range []string{"Googlebot", "GPTBot", "bingbot", "CCBot"} {
			for _, p := range append(checkPaths, "/", "/private/../x", "/wp-admin/") {
				checks = append(checks, check{string(body), token, p})
			}
		}
	}
	changed, withLines := 0, 0
	parsed := map[string][2]*Robots{}
	for _, c := range checks {
		pair, ok := parsed[c.body]
		if !ok {
			pair = [2]*Robots{Parser{}.Parse([]byte(c.body)), Parser{}.Parse([]byte(withUsageLines(c.body)))}
			parsed[c.body] = pair
		}
		plain, extended := pair[0], pair[1]
		if extended.HasUsage() {
			withLines++
		}
		for _, check := range []func(r *Robots) Verdict{
			func(r *Robots) Verdict { return r.Check(c.token, c.path) },
			func(r *Robots) Verdict { return r.CheckReadings(c.token, c.path) },
		} {
			v, w := check(plain), check(extended)
			if v.Allowed != w.Allowed || v.Cause != w.Cause || v.Rule.IsZero() != w.Rule.IsZero() ||
				v.Rule.Pattern != w.Rule.Pattern || v.Rule.Allow != w.Rule.Allow {
				changed++
				t.Errorf("%q for %s: %s without usage lines, %s with", c.path, c.token, v.Reason(), w.Reason())
			}
		}
		if changed > 10 {
			t.Fatal("too many")
		}
	}
	if withLines < len(checks)/2 {
		t.Fatalf("only %d of %d checks had usage lines", withLines, len(checks))
	}
	t.Logf("%d checks, %d files", len(checks), len(parsed))
}

// TestUsageBeforeHeadEnds: a Content-Usage line is a rule (the draft's
// grammar): between two user-agent lines it splits the group, as a
// Disallow line would. A Content-Signal line does not.
func TestUsageBeforeHeadEnds(t *testing.T) {
	for _, c := range []struct {
		line    string
		allowed bool
	}{
		{"Content-Usage: train-ai=n", true},
		{"Disallow: /y", true},
		{"Content-Signal: ai-train=no", false},
		{"Crawl-delay: 1", false},
	} {
		r := Parser{}.Parse([]byte("User-agent: a\n" + c.line + "\nUser-agent: b\nDisallow: /x\n"))
		if v := r.Check("a", "/x"); v.Allowed != c.allowed {
			t.Errorf("%s between the user-agent lines: /x for a: %s, want allowed %v", c.line, v.Reason(), c.allowed)
		}
	}
}

// TestUsageRetained: usage lines are copied out of the body and counted.
func TestUsageRetained(t *testing.T) {
	plain := Parser{}.Parse([]byte("User-agent: *\nDisallow: /x\n"))
	body := []byte("User-agent: *\nDisallow: /x\nContent-Usage: /%7ea/ train-ai=n\nContent-Signal: ai-train=no\n")
	r := Parser{}.Parse(body)
	if r.RetainedBytes() <= plain.RetainedBytes() {
		t.Errorf("RetainedBytes %d with usage lines, %d without", r.RetainedBytes(), plain.RetainedBytes())
	}
	before, _ := json.Marshal(r.Usage("a", "/~a/"))
	for i := range body {
		body[i] = 'x'
	}
	if after, _ := json.Marshal(r.Usage("a", "/~a/")); string(after) != string(before) {
		t.Errorf("usage changed after the body was overwritten: %s -> %s", before, after)
	}
	checkRetainedBound(t, r)
}

// readmeExample is the example of robots/README.md, whose answers the
// README gives.
const readmeExample = `User-Agent: *
Allow: /
Disallow: /never/
Content-Signal: search=yes, ai-train=no
Content-Usage: train-ai=n
Content-Usage: /ai-ok/ train-ai=y

User-Agent: ExampleBot
Allow: /
Content-Usage: / train-ai=y
`

func TestUsageReadmeExample(t *testing.T) {
	requireREADME(t, strings.Join(strings.Fields(readmeExample), " "),
		"`/test` above gets lines 4 and 5 and `/ai-ok/test` lines 4 and 6",
		"`/x/../ai-ok/test` gets lines 4, 5 and 6", "`ExampleBot` above gets only line 10",
		"keeps at most `robots.MaxUsageLines` ("+strconv.Itoa(MaxUsageLines)+")")
	runUsageCases(t, []usageCase{
		{"named group", readmeExample, "ExampleBot", "/test", []int{10}},
		{"no path", readmeExample, "OtherBot", "/test", []int{4, 5}},
		{"longest", readmeExample, "OtherBot", "/ai-ok/test", []int{4, 6}},
		{"readings", readmeExample, "OtherBot", "/x/../ai-ok/test", []int{4, 5, 6}},
	})
}

func TestUsageEverywhere(t *testing.T) {
	for _, tt := range []struct {
		name, robots, token string
		want                []int // lines
	}{
		{"signals and path-less usage apply everywhere", "User-agent: *\nContent-Signal: ai-train=no\nContent-Usage: train-ai=n\n", "bot", []int{2, 3}},
		{"a scoped Content-Usage line may outrank the path-less one", "User-agent: *\nContent-Signal: ai-train=no\nContent-Usage: train-ai=n\nContent-Usage: /open/ train-ai=y\n", "bot", []int{2}},
		{"a scoped signal speaks for its paths only", "User-agent: *\nContent-Signal: /blog/ ai-train=no\n", "bot", nil},
		{"a signal scoped to every path", "User-agent: *\nContent-Signal: / ai-train=no\nContent-Signal: /* search=no\n", "bot", []int{2, 3}},
		{"the longest of lines each naming every path", "User-agent: *\nContent-Usage: train-ai=n\nContent-Usage: / train-ai=y\nContent-Usage: /* search=n\n", "bot", []int{4}},
		{"a path-less line and a / line: the / line", "User-agent: *\nContent-Usage: train-ai=y\nContent-Usage: / train-ai=n\n", "bot", []int{3}},
		{"the crawler's own group, not *", "User-agent: *\nContent-Usage: train-ai=n\n\nUser-agent: bot\nContent-Signal: ai-train=no\n", "Bot", []int{5}},
		{"no usage lines", "User-agent: *\nDisallow: /x\n", "bot", nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var got []int
			for _, l := range (Parser{}).Parse([]byte(tt.robots)).UsageEverywhere(tt.token) {
				got = append(got, l.Line)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("lines %v, want %v", got, tt.want)
			}
		})
	}
}
