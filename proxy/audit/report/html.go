package report

import (
	"crypto/sha256"
	_ "embed"
	"encoding/base64"
	"fmt"
	"html/template"
	"io"
	"math"
	"strconv"
	"time"
)

// The page is one file that works offline, opened from disk: its style,
// script and charts are inline, and its Content-Security-Policy lets
// nothing else load or run (only this style and this script, by hash),
// so a User-Agent or URL from the log cannot make it fetch or execute
// anything even if escaping were ever missed.
var (
	//go:embed report.html.tmpl
	pageTemplate string
	//go:embed report.css
	pageStyle string
	//go:embed report.js
	pageScript string
)

// WriteHTML writes the report as one self-contained HTML page: sortable
// tables and inline SVG charts, readable in light and dark mode and when
// printed.
func WriteHTML(w io.Writer, rep *Report) error {
	tmpl, err := template.New("report").Funcs(template.FuncMap{
		"time":    formatTime,
		"number":  number,
		"percent": percent,
		"rate":    rateValue,
		"bytes":   bytesWords,
		"approx":  approx,
		// The page shows a crawler's whole name (the log keeps at most
		// 128 bytes of it): it wraps, where a terminal's column is cut.
		"name":   func(name string) string { return clean(name, 512) },
		"dict":   dict,
		"plural": Plural,
	}).Parse(pageTemplate)
	if err != nil {
		return fmt.Errorf("report template: %w", err)
	}
	view := struct {
		*Report
		Style            template.CSS
		Script           template.JS
		Policy           string
		Usage, Purposes  bool
		CrawlerColumns   int
		OriginColumns    int
		Compliance       []barRow
		TimelineChart    chart
		RulesChart       []barRow
		FilterWords      string
		MalformedOmitted int64
		UserAgents       []crawlerValue
		Mismatched       []*Crawler
		Incidents        []originIncident
	}{
		Report:           rep,
		Style:            template.CSS(pageStyle),
		Script:           template.JS(pageScript),
		Policy:           "default-src 'none'; style-src " + sourceHash(pageStyle) + "; script-src " + sourceHash(pageScript),
		Compliance:       complianceChart(rep),
		TimelineChart:    timelineChart(rep),
		RulesChart:       rulesChart(rep),
		FilterWords:      describeFilter(rep.Filter),
		MalformedOmitted: rep.Malformed - int64(len(rep.Problems)),
		Usage:            rep.UsageSeen(),
	}
	// Purposes come from the policy, or ROBOTSGATE_PURPOSES for usage
	// preferences.
	view.Purposes = rep.PolicySeen() || view.Usage
	view.CrawlerColumns, view.OriginColumns = 16, 19
	if rep.PolicySeen() {
		view.CrawlerColumns, view.OriginColumns = view.CrawlerColumns+3, view.OriginColumns+3
	}
	if view.Usage {
		view.CrawlerColumns, view.OriginColumns = view.CrawlerColumns+3, view.OriginColumns+4
	}
	if view.Purposes {
		view.CrawlerColumns++
	}
	for i := range rep.Crawlers {
		c := &rep.Crawlers[i]
		for _, ua := range c.UserAgents {
			view.UserAgents = append(view.UserAgents, crawlerValue{c, ua})
		}
		if c.UAMismatches > 0 {
			view.Mismatched = append(view.Mismatched, c)
		}
	}
	for i := range rep.Origins {
		o := &rep.Origins[i]
		for _, in := range incidentRows(o) {
			row := originIncident{Origin: o.Origin, incidentRow: in}
			switch {
			case in.Hold != nil:
				row.Kind, row.From, row.To, row.Requests = holdKind(in.Hold, 512), in.Hold.From, in.Hold.To, in.Hold.Requests
			case in.Robots != nil:
				row.Kind, row.From, row.To, row.Requests = robotsKind(in.Robots), in.Robots.From, in.Robots.To, in.Robots.Requests
			}
			view.Incidents = append(view.Incidents, row)
		}
	}
	if err := tmpl.Execute(w, view); err != nil {
		return fmt.Errorf("write HTML report: %w", err)
	}
	return nil
}

// crawlerValue is a row of the User-Agents table.
type crawlerValue struct {
	Crawler *Crawler
	Seen
}

// originIncident is a row of the incidents table: an incident, or how
// many earlier ones of a kind were not kept.
type originIncident struct {
	Origin string
	incidentRow
	// What every incident has: what it was, when, how many requests.
	Kind     string
	From, To time.Time
	Requests int64
}

// dict passes several values to a sub-template.
func dict(pairs ...any) (map[string]any, error) {
	if len(pairs)%2 != 0 {
		return nil, fmt.Errorf("dict wants key-value pairs, got %d values", len(pairs))
	}
	m := make(map[string]any, len(pairs)/2)
	for i := 0; i < len(pairs); i += 2 {
		key, ok := pairs[i].(string)
		if !ok {
			return nil, fmt.Errorf("dict key %v is not a string", pairs[i])
		}
		m[key] = pairs[i+1]
	}
	return m, nil
}

func sourceHash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return "'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"
}

// rateValue is a compliance rate as a sortable number; -1 for none.
func rateValue(rate *float64) string {
	if rate == nil {
		return "-1"
	}
	return strconv.FormatFloat(*rate, 'f', 6, 64)
}

// chart is an SVG drawn from the report: sized boxes and labels.
type chart struct {
	Width, Height int
	Rects         []rect
	Labels        []label
	Lines         []line
}

type rect struct {
	X, Y, W, H float64
	Class      string
	Title      string
}

type label struct {
	X, Y   float64
	Text   string
	Anchor string // start, middle or end
	Class  string
}

type line struct{ X1, Y1, X2, Y2 float64 }

const (
	chartWidth   = 760
	chartEntries = 15 // crawlers and rules drawn
)

// barRow is one bar of a bar chart. The charts of crawlers and rules are
// HTML rows, each with its bar in an SVG scaled to the row, so that a
// long name, host or reason wraps in full instead of being cut to fit
// beside an SVG bar.
type barRow struct {
	Crawler *Crawler   // the compliance chart's row
	Rule    *RuleCount // the rules chart's row
	// Parts are the bar's pieces, their X and W in percent of the row.
	Parts []rect
	Value string // right of the bar
	Note  string // instead of a bar
}

// complianceChart draws, per crawler (the busiest), its judged requests
// split into allowed, refused and would-be-refused, as shares of 100%.
func complianceChart(rep *Report) []barRow {
	rows := make([]barRow, 0, min(len(rep.Crawlers), chartEntries))
	for i := range cap(rows) {
		cr := &rep.Crawlers[i]
		row := barRow{Crawler: cr}
		judged := cr.Allowed + cr.Refused + cr.WouldBeRefused
		if judged == 0 {
			row.Note = "no request judged"
			rows = append(rows, row)
			continue
		}
		name := crawlerName(cr) + " (" + cr.By + ")"
		x := 0.0
		for _, part := range []struct {
			n     int64
			class string
			what  string
		}{{cr.Allowed, "allowed", "allowed"}, {cr.Refused, "refused", "refused"}, {cr.WouldBeRefused, "would", "would be refused"}} {
			if part.n == 0 {
				continue
			}
			w := 100 * float64(part.n) / float64(judged)
			row.Parts = append(row.Parts, rect{X: x, W: w, Class: part.class,
				Title: fmt.Sprintf("%s: %s %s of %s judged", name, number(part.n), part.what, number(judged))})
			x += w
		}
		row.Value = percent(cr.Compliance)
		rows = append(rows, row)
	}
	return rows
}

// timelineChart draws each interval's requests as a column: allowed,
// then refused, would-be-refused and too early stacked on it.
func timelineChart(rep *Report) chart {
	const height, top, bottom, left = 220, 12, 36, 56
	c := chart{Width: chartWidth, Height: height}
	buckets := rep.Timeline.Buckets
	var peak int64
	for _, b := range buckets {
		peak = max(peak, b.Requests)
	}
	plotW, plotH := float64(chartWidth-left-8), float64(height-top-bottom)
	base := float64(height - bottom)
	c.Lines = append(c.Lines, line{left, base, float64(chartWidth - 8), base}, line{left, top, left, base})
	c.Labels = append(c.Labels,
		label{X: left - 6, Y: top + 8, Text: number(peak), Anchor: "end", Class: "muted"},
		label{X: left - 6, Y: base, Text: "0", Anchor: "end", Class: "muted"})
	if len(buckets) == 0 || peak == 0 {
		c.Labels = append(c.Labels, label{X: left + plotW/2, Y: top + plotH/2, Text: "no records", Anchor: "middle", Class: "muted"})
		return c
	}
	slot := plotW / float64(len(buckets))
	w := math.Max(slot*0.8, 1)
	for i, b := range buckets {
		x := left + float64(i)*slot + (slot-w)/2
		y := base
		when := formatTime(b.Start)
		for _, part := range []struct {
			n     int64
			class string
			what  string
		}{{b.Allowed - b.TooEarly - b.WouldBeTooEarly, "allowed", "allowed"}, {b.TooEarly + b.WouldBeTooEarly, "early", "too early (429, or would be)"},
			{b.Refused, "refused", "refused"}, {b.WouldBeRefused, "would", "would be refused"},
			{b.DeniedDestination + b.Errors, "error", "denied destination or without a verdict"}} {
			if part.n <= 0 {
				continue
			}
			h := plotH * float64(part.n) / float64(peak)
			y -= h
			c.Rects = append(c.Rects, rect{X: x, Y: y, W: w, H: h, Class: part.class,
				Title: fmt.Sprintf("%s (+%s): %s %s", when, rep.Timeline.Interval, number(part.n), part.what)})
		}
	}
	for _, i := range []int{0, len(buckets) / 2, len(buckets) - 1} {
		anchor := "middle"
		switch i {
		case 0:
			anchor = "start"
		case len(buckets) - 1:
			anchor = "end"
		}
		x := left + float64(i)*slot + slot/2
		if anchor == "start" {
			x = left
		} else if anchor == "end" {
			x = float64(chartWidth - 8)
		}
		c.Labels = append(c.Labels, label{X: x, Y: base + 16, Text: formatTime(buckets[i].Start), Anchor: anchor, Class: "muted"})
	}
	c.Labels = append(c.Labels, label{X: left + plotW/2, Y: base + 32, Text: "per " + rep.Timeline.Interval, Anchor: "middle", Class: "muted"})
	return c
}

// rulesChart draws the most refused rules as bars, the busiest full
// width.
func rulesChart(rep *Report) []barRow {
	rows := make([]barRow, 0, min(len(rep.TopRules), chartEntries))
	for i := range cap(rows) {
		r := &rep.TopRules[i]
		w := math.Max(100*float64(r.Refused)/float64(rep.TopRules[0].Refused), 0.5)
		what := r.Rule
		if r.Line != 0 {
			what += " (line " + strconv.Itoa(r.Line) + ")"
		}
		whose := "group " + r.Group
		if r.Policy != "" {
			whose = "policy " + r.Policy
		}
		rows = append(rows, barRow{Rule: r, Value: number(r.Refused) + approx(r.Overcount), Parts: []rect{{W: w, Class: "refused",
			Title: fmt.Sprintf("%s %s, %s: %s refused", r.Origin, what, whose, Plural(r.Refused, "request", "requests"))}}})
	}
	return rows
}
