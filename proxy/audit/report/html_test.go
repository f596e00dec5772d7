package report

import (
	"bytes"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"
)

// page is a rendered report, parsed as a browser would.
type page struct{ root *html.Node }

func renderPage(t *testing.T, rep *Report) page {
	t.Helper()
	var out bytes.Buffer
	if err := WriteHTML(&out, rep); err != nil {
		t.Fatal(err)
	}
	root, err := html.Parse(&out)
	if err != nil {
		t.Fatal(err)
	}
	return page{root}
}

// find returns the elements under n that match, in document order.
func find(n *html.Node, match func(*html.Node) bool) []*html.Node {
	var out []*html.Node
	for d := range n.Descendants() {
		if d.Type == html.ElementNode && match(d) {
			out = append(out, d)
		}
	}
	return out
}

func attr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}

func hasClass(n *html.Node, class string) bool {
	return slices.Contains(strings.Fields(attr(n, "class")), class)
}

// text is what a reader sees of n: its text, spaces collapsed, a line
// break as a space.
func text(n *html.Node) string {
	var b strings.Builder
	for d := range n.Descendants() {
		switch {
		case d.Type == html.TextNode && d.Parent.Data != "title":
			b.WriteString(d.Data)
		case d.Type == html.ElementNode && d.Data == "br":
			b.WriteString(" ")
		}
	}
	return strings.Join(strings.Fields(b.String()), " ")
}

func (p page) byID(t *testing.T, id string) *html.Node {
	t.Helper()
	found := find(p.root, func(n *html.Node) bool { return attr(n, "id") == id })
	if len(found) != 1 {
		t.Fatalf("%d elements #%s", len(found), id)
	}
	return found[0]
}

// rows are the texts of the cells of a table's body.
func (p page) rows(t *testing.T, table string) [][]string {
	t.Helper()
	var out [][]string
	for _, tr := range find(p.byID(t, table), func(n *html.Node) bool { return n.Data == "tr" && n.Parent.Data == "tbody" }) {
		var cells []string
		for _, td := range find(tr, func(n *html.Node) bool { return n.Data == "td" }) {
			cells = append(cells, text(td))
		}
		out = append(out, cells)
	}
	return out
}

// column is the text of cell i of each row of a table's body.
func (p page) column(t *testing.T, table string, i int) []string {
	t.Helper()
	var out []string
	for _, row := range p.rows(t, table) {
		out = append(out, row[i])
	}
	return out
}

// bars is the text of each bar of a bar chart.
func (p page) bars(t *testing.T, id string) []string {
	t.Helper()
	var out []string
	for _, li := range find(p.byID(t, id), func(n *html.Node) bool { return n.Data == "li" }) {
		out = append(out, text(li))
	}
	return out
}

// A credential and a product token may share a name; they are two
// crawlers, and every place that names one says which kind it is.
func TestWriteHTMLTellsCredentialFromToken(t *testing.T) {
	byToken := allowed(t0)
	byToken.Token, byToken.UserAgent = "acme", "acme/1.0"
	byCredential := refused(t0.Add(time.Second))
	byCredential.Credential, byCredential.Token, byCredential.UserAgent = "acme", "AcmeBot", "acme/1.0"
	claimed := "acme"
	byCredential.UAToken, byCredential.UAMismatch = &claimed, true
	_, rep := readLogs(t, Options{}, encode(t, byToken, byCredential))
	p := renderPage(t, rep)

	want := []string{"acme credential", "acme token"}
	for _, got := range [][]string{p.column(t, "crawlers", 0), p.column(t, "user-agents", 0)} {
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("crawlers shown as %q, want %q", got, want)
		}
	}
	if got := p.bars(t, "chart-compliance"); len(got) != 2 || !strings.HasPrefix(got[0], "acme ") || got[0][:16] == got[1][:16] {
		t.Errorf("compliance bars %q, want the two crawlers told apart", got)
	}
	if got := p.column(t, "mismatches", 0); !slices.Equal(got, []string{"acme credential"}) {
		t.Errorf("mismatches by %q, want the credential", got)
	}
	// The text report says it in a BY column.
	var out bytes.Buffer
	if err := WriteText(&out, rep); err != nil {
		t.Fatal(err)
	}
	for _, row := range []string{`acme\s+credential\s+1\s+"acme/1.0"`, `acme\s+token\s+1\s+"acme/1.0"`, `acme\s+credential\s+1\s+"acme" ×1`} {
		if !regexp.MustCompile(`(?m)^\s+` + row + `$`).MatchString(out.String()) {
			t.Errorf("the text has no row %s:\n%s", row, out.String())
		}
	}
	for _, badge := range find(p.byID(t, "crawlers"), func(n *html.Node) bool { return hasClass(n, "kind") }) {
		if len(attr(badge, "title")) < 10 {
			t.Errorf("badge %q titled %q, want what it means", text(badge), attr(badge, "title"))
		}
	}
}

// An empty value from the log (a token the User-Agent did not give, an
// empty User-Agent, no group) is shown, in words that say what it means.
func TestWriteHTMLShowsEmptyValues(t *testing.T) {
	noToken := refused(t0)
	noToken.Token, noToken.UserAgent, noToken.Group, noToken.Rule, noToken.RuleLine = "", "", "", "", 0
	noToken.Reason, noToken.RobotsOutcome, noToken.RobotsStatus = "robots.txt 503: complete disallow", "unreachable", 503
	lying := allowed(t0.Add(time.Second))
	none := ""
	lying.Credential, lying.Token, lying.UserAgent, lying.UAToken, lying.UAMismatch = "acme", "AcmeBot", "curl/8.0", &none, true
	_, rep := readLogs(t, Options{}, encode(t, noToken, lying))
	p := renderPage(t, rep)

	for _, c := range []struct {
		table string
		row   []string // its first cells
	}{
		{"crawlers", []string{"(no token) token"}},
		{"user-agents", []string{"(no token) token", "1", "(empty)"}},
		{"mismatches", []string{"acme credential", "1", "(no token) ×1"}},
		{"rules", []string{"1", noToken.Origin, "(none)", "-", "robots.txt 503: complete disallow"}},
	} {
		rows := p.rows(t, c.table)
		if !slices.ContainsFunc(rows, func(r []string) bool { return slices.Equal(r[:min(len(r), len(c.row))], c.row) }) {
			t.Errorf("#%s rows %q, want one starting %q", c.table, rows, c.row)
		}
	}
	empties := find(p.root, func(n *html.Node) bool { return hasClass(n, "empty") })
	if len(empties) < 5 {
		t.Errorf("%d values shown as empty, want at least 5", len(empties))
	}
	for _, e := range empties {
		if !regexp.MustCompile(`^\(.+\)$`).MatchString(text(e)) || len(attr(e, "title")) < 10 {
			t.Errorf("an empty value shown as %q, titled %q: want words in brackets, and their meaning", text(e), attr(e, "title"))
		}
	}
}

// Each bar of the rules chart names its origin, group and line, and the
// whole rule or reason, however long.
func TestWriteHTMLRuleBars(t *testing.T) {
	const host = "https://a-rather-long-host-name-for-a-shop.subsidiary.example-holding.example:8443"
	reason := "robots.txt unreachable (" + strings.Repeat("dial tcp 192.0.2.1:443: i/o timeout; ", 8) + "): complete disallow"
	byRule := refused(t0)
	byReason := refused(t0.Add(time.Second))
	byReason.Origin, byReason.Rule, byReason.RuleLine, byReason.Group, byReason.Reason = host, "", 0, "", reason
	other := byReason
	other.Time = t0.Add(2 * time.Second)
	_, rep := readLogs(t, Options{}, encode(t, byRule, byReason, other))
	got := renderPage(t, rep).bars(t, "chart-rules")
	want := []string{
		host + " group (none) " + reason + " 2",
		"https://example.com group *, line 4 /private/ 1",
	}
	if !slices.Equal(got, want) {
		t.Errorf("rule bars:\n%q\nwant\n%q", got, want)
	}
}

func TestPlural(t *testing.T) {
	for _, c := range []struct {
		n    int64
		want string
	}{{0, "0 lines"}, {1, "1 line"}, {2, "2 lines"}, {1000, "1,000 lines"}, {-1, "-1 lines"}} {
		if got := Plural(c.n, "line", "lines"); got != c.want {
			t.Errorf("Plural(%d) = %q, want %q", c.n, got, c.want)
		}
	}
}

// Counts of one agree with their nouns, in text and in HTML.
func TestOneIsSingular(t *testing.T) {
	r := refused(t0)
	r.RobotsOutcome, r.RobotsStatus = "unreachable", 503
	log := append(encode(t, r), "junk\n"...)
	_, rep := readLogs(t, Options{}, log, encode(t, allowed(t0.Add(time.Second))))
	// One incident kept and one omitted, as after many.
	rep.Origins[0].IncidentsOmitted, rep.Origins[0].HoldIncidentsOmitted = 1, 1
	var textOut, htmlOut bytes.Buffer
	if err := WriteText(&textOut, rep); err != nil {
		t.Fatal(err)
	}
	if err := WriteHTML(&htmlOut, rep); err != nil {
		t.Fatal(err)
	}
	plural := regexp.MustCompile(`(^|[^\d,.])1 (\w+ )?(lines|crawlers|origins|incidents|requests|records)\b`)
	for name, out := range map[string]string{"text": textOut.String(), "HTML": text(renderPage(t, rep).root)} {
		if m := plural.FindString(out); m != "" {
			t.Errorf("the %s says %q", name, m)
		}
	}
	for _, want := range []string{"log1 (2 lines)", "log2 (1 line)", "Seen:       1 crawler, 1 origin"} {
		if !strings.Contains(textOut.String(), want) {
			t.Errorf("the text lacks %q", want)
		}
	}
	for _, want := range []string{"</code>: 2 lines", "</code>: 1 line<", "and 1 earlier robots.txt incident<", "and 1 earlier hold incident<"} {
		if !strings.Contains(htmlOut.String(), want) {
			t.Errorf("the HTML lacks %q", want)
		}
	}
}
