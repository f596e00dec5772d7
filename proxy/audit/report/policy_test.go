package report

import (
	"bytes"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"

	"robotsgate/proxy/audit"
)

// writeLog writes records as the proxy does, through an audit.Writer:
// the lines a report reads in production.
func writeLog(tb testing.TB, recs ...audit.Record) []byte {
	tb.Helper()
	var buf bytes.Buffer
	w := audit.NewWriter(&buf, nil, audit.Options{})
	for i := range recs {
		if err := w.Write(&recs[i]); err != nil {
			tb.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes()
}

const policyFile = "/etc/robotsgate/policy.yaml"

// The records of each thing the operator's policy does, as the proxy
// logs them.
func policyRefusal(at time.Time, kind, rule string, line int) audit.Record {
	r := refused(at)
	r.Reason, r.Rule, r.RuleLine, r.Group = "policy: "+rule, "", 0, ""
	r.Policy = audit.PolicyFinding{File: policyFile, Line: line, Kind: kind, Rule: rule}
	r.PolicyVersion, r.Purposes = "0123456789ab", []string{"search"}
	if kind == audit.PolicyDestination {
		r.RobotsOutcome, r.RobotsStatus, r.RobotsCache, r.RobotsTxt = "", 0, "", ""
	}
	return r
}

func byException(at time.Time, origin, line int) audit.Record {
	r := allowed(at)
	r.Origin = fmt.Sprintf("https://site%d.example", origin)
	r.URL = r.Origin + "/reports/q3"
	r.Reason = "allow by exception: robots.txt disallow: /reports/ (line 3)"
	r.Policy = audit.PolicyFinding{File: policyFile, Line: line, Kind: audit.PolicyException, Rule: "/reports/", Reason: "written permission, 2026-10-01"}
	r.PolicyVersion = "0123456789ab"
	return r
}

// One record of each kind: where it counts, in the totals, its crawler
// and its origin alike.
func TestPolicyCountsOfOneRecord(t *testing.T) {
	for _, c := range []struct {
		name   string
		record func(at time.Time) audit.Record
		want   Counts // Requests, FirstSeen and LastSeen are filled in
	}{
		{"a rule of the policy refused", func(at time.Time) audit.Record {
			return policyRefusal(at, audit.PolicyRule, "Disallow: /checkout/", 12)
		}, Counts{Refused: 1, RefusedByPolicy: 1, Compliance: rate(0)}},
		{"outside the crawler's sites", func(at time.Time) audit.Record {
			return policyRefusal(at, audit.PolicyDestination, "allow_sites", 7)
		}, Counts{Refused: 1, RefusedByPolicy: 1, Compliance: rate(0)}},
		{"outside the crawler's sites, denied_destination set too", func(at time.Time) audit.Record {
			r := policyRefusal(at, audit.PolicyDestination, "deny_sites", 8)
			r.DeniedDestination = true
			return r
		}, Counts{Refused: 1, RefusedByPolicy: 1, Compliance: rate(0)}},
		{"outside the crawler's sites, audit mode: refused all the same", func(at time.Time) audit.Record {
			r := policyRefusal(at, audit.PolicyDestination, "allow_sites", 7)
			r.Mode = "audit"
			return r
		}, Counts{Refused: 1, RefusedByPolicy: 1, Compliance: rate(0)}},
		{"a rule of the policy, audit mode", func(at time.Time) audit.Record {
			r := policyRefusal(at, audit.PolicyRule, "Disallow: /checkout/", 12)
			r.Mode, r.Forwarded, r.Status, r.Bytes = "audit", true, 200, 9
			return r
		}, Counts{WouldBeRefused: 1, WouldBeRefusedByPolicy: 1, Compliance: rate(0), Bytes: 9}},
		{"robots.txt refused, a policy loaded", func(at time.Time) audit.Record {
			r := refused(at)
			r.PolicyVersion = "0123456789ab"
			return r
		}, Counts{Refused: 1, Compliance: rate(0)}},
		{"an exception allowed", func(at time.Time) audit.Record { return byException(at, 1, 30) },
			Counts{Allowed: 1, AllowedByException: 1, Compliance: rate(1), Bytes: 100}},
		{"the crawler's max_concurrency, 429", func(at time.Time) audit.Record {
			r := allowed(at)
			r.Pace, r.Forwarded, r.Status, r.Bytes = "busy", false, 429, 0
			r.Policy = audit.PolicyFinding{File: policyFile, Line: 9, Kind: audit.PolicyMaxConcurrency, Rule: "max_concurrency: 2"}
			return r
		}, Counts{Allowed: 1, Compliance: rate(1), TooEarly: 1, PacedByPolicy: 1}},
		{"the crawler's min_delay, waited", func(at time.Time) audit.Record {
			r := allowed(at)
			r.Pace, r.WaitedMS = "waited", 1500
			r.Policy = audit.PolicyFinding{File: policyFile, Line: 8, Kind: audit.PolicyMinDelay, Rule: "min_delay: 2s"}
			return r
		}, Counts{Allowed: 1, Compliance: rate(1), Delayed: 1, PacedByPolicy: 1, Bytes: 100}},
		{"the crawler's min_delay, not held", func(at time.Time) audit.Record {
			r := allowed(at)
			r.Policy = audit.PolicyFinding{File: policyFile, Line: 8, Kind: audit.PolicyMinDelay, Rule: "min_delay: 2s"}
			return r
		}, Counts{Allowed: 1, Compliance: rate(1), Bytes: 100}},
		{"an exception's kind on a refusal counts as robots.txt's", func(at time.Time) audit.Record {
			r := refused(at)
			r.Policy = audit.PolicyFinding{File: policyFile, Line: 30, Kind: audit.PolicyException}
			return r
		}, Counts{Refused: 1, Compliance: rate(0)}},
		{"a kind this version does not know", func(at time.Time) audit.Record {
			r := refused(at)
			r.Policy = audit.PolicyFinding{File: policyFile, Line: 30, Kind: "later"}
			return r
		}, Counts{Refused: 1, Compliance: rate(0)}},
	} {
		t.Run(c.name, func(t *testing.T) {
			at := t0.Add(90 * time.Second)
			_, rep := readLogs(t, Options{}, writeLog(t, c.record(at)))
			want := c.want
			want.Requests, want.FirstSeen, want.LastSeen = 1, at, at
			for what, got := range map[string]Counts{"totals": rep.Totals, "crawler": rep.Crawlers[0].Counts, "origin": rep.Origins[0].Counts} {
				if !reflect.DeepEqual(got, want) {
					t.Errorf("%s:\n got %s\nwant %s", what, showCounts(got), showCounts(want))
				}
			}
		})
	}
}

// policyLog is a log with a policy reloaded halfway: refusals of both
// robots.txt and the policy, exceptions used by two crawlers on several
// origins, and records from before any policy was loaded.
func policyLog(t *testing.T) []byte {
	t.Helper()
	var recs []audit.Record
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	early := allowed(at(0)) // no policy loaded yet
	recs = append(recs, early)
	for i := range 3 {
		recs = append(recs, policyRefusal(at(10+i), audit.PolicyRule, "Disallow: /checkout/", 12))
	}
	dest := policyRefusal(at(20), audit.PolicyDestination, "deny_sites: admin.example.com", 7)
	dest.Origin, dest.URL = "https://admin.example.com", "https://admin.example.com/"
	recs = append(recs, dest, refused(at(21)))
	for i := range 4 {
		e := byException(at(30+i), i%2, 30)
		if i == 3 {
			e.Credential, e.Token = "archiver", "ia_archiver"
		}
		recs = append(recs, e)
	}
	other := byException(at(40), 5, 41)
	other.Policy.Rule, other.Policy.Reason = "/press/$", "public anyway"
	recs = append(recs, other)
	// The policy reloaded: another version, the exception of line 30 at
	// line 32 now, its reason changed.
	for i := range 2 {
		e := byException(at(100+i), 0, 32)
		e.PolicyVersion, e.Policy.Reason = "ba9876543210", "renewed, 2026-11-20"
		recs = append(recs, e)
	}
	return writeLog(t, recs...)
}

func TestPolicyReport(t *testing.T) {
	_, rep := readLogs(t, Options{}, policyLog(t))
	c := rep.Totals
	if c.Refused != 5 || c.RefusedByPolicy != 4 || c.Allowed != 8 || c.AllowedByException != 7 || c.Requests != 13 {
		t.Errorf("totals: %s", showCounts(c))
	}
	gpt := rep.Crawlers[0]
	if gpt.Name != "GPTBot" || gpt.Refused != 5 || gpt.RefusedByPolicy != 4 || gpt.AllowedByException != 6 || !slices.Equal(gpt.Purposes, []string{"search"}) {
		t.Errorf("GPTBot: %+v", gpt)
	}

	wantExceptions := []ExceptionUse{
		{File: policyFile, Line: 30, Rule: "/reports/", Reason: "written permission, 2026-10-01", Requests: 4,
			From: t0.Add(30 * time.Second), To: t0.Add(33 * time.Second),
			Origins:  []Seen{{Value: "https://site0.example", Count: 2}, {Value: "https://site1.example", Count: 2}},
			Crawlers: []CrawlerSeen{{Name: "GPTBot", By: "token", Count: 3}, {Name: "archiver", By: "credential", Count: 1}}},
		{File: policyFile, Line: 32, Rule: "/reports/", Reason: "renewed, 2026-11-20", Requests: 2,
			From: t0.Add(100 * time.Second), To: t0.Add(101 * time.Second),
			Origins:  []Seen{{Value: "https://site0.example", Count: 2}},
			Crawlers: []CrawlerSeen{{Name: "GPTBot", By: "token", Count: 2}}},
		{File: policyFile, Line: 41, Rule: "/press/$", Reason: "public anyway", Requests: 1,
			From: t0.Add(40 * time.Second), To: t0.Add(40 * time.Second),
			Origins:  []Seen{{Value: "https://site5.example", Count: 1}},
			Crawlers: []CrawlerSeen{{Name: "GPTBot", By: "token", Count: 1}}},
	}
	if !reflect.DeepEqual(rep.Exceptions, wantExceptions) || rep.ExceptionsOmitted != 0 {
		t.Errorf("exceptions\n got %+v\nwant %+v", rep.Exceptions, wantExceptions)
	}
	wantVersions := []PolicyVersion{
		{Version: "", From: t0, To: t0.Add(21 * time.Second), Requests: 2}, // refused(at(21)) carries none
		{Version: "0123456789ab", From: t0.Add(10 * time.Second), To: t0.Add(40 * time.Second), Requests: 9},
		{Version: "ba9876543210", From: t0.Add(100 * time.Second), To: t0.Add(101 * time.Second), Requests: 2},
	}
	if !reflect.DeepEqual(rep.PolicyVersions, wantVersions) {
		t.Errorf("policy versions\n got %+v\nwant %+v", rep.PolicyVersions, wantVersions)
	}
	// The policy's refusals are top rules of their own, by file and line.
	wantRules := []RuleCount{
		{Origin: "https://example.com", Policy: policyFile, Rule: "Disallow: /checkout/", Line: 12, Refused: 3},
		{Origin: "https://admin.example.com", Policy: policyFile, Rule: "deny_sites: admin.example.com", Line: 7, Refused: 1},
		{Origin: "https://example.com", Group: "*", Rule: "/private/", Line: 4, Refused: 1},
	}
	if !reflect.DeepEqual(rep.TopRules, wantRules) {
		t.Errorf("top rules\n got %+v\nwant %+v", rep.TopRules, wantRules)
	}
}

// A log without a policy lists no version, and its report shows none of
// the policy's columns and tables, as before policies existed.
func TestNoPolicyNoPolicyColumns(t *testing.T) {
	_, rep := readLogs(t, Options{}, writeLog(t, allowed(t0), refused(t0.Add(time.Second))))
	if rep.PolicySeen() || len(rep.PolicyVersions) != 0 || len(rep.Exceptions) != 0 {
		t.Fatalf("policy seen: versions %+v, exceptions %+v", rep.PolicyVersions, rep.Exceptions)
	}
	var out bytes.Buffer
	if err := WriteText(&out, rep); err != nil {
		t.Fatal(err)
	}
	for _, absent := range []string{"Policy:", "BY-POLICY", "EXCEPTIONS USED", "POLICY VERSIONS", "PURPOSES"} {
		if strings.Contains(out.String(), absent) {
			t.Errorf("the text shows %q:\n%s", absent, out.String())
		}
	}
	p := renderPage(t, rep)
	if found := find(p.root, func(n *html.Node) bool { return attr(n, "id") == "policy-section" }); len(found) != 0 {
		t.Error("the page has a policy section")
	}
	if got := len(p.rows(t, "crawlers")[0]); got != 16 {
		t.Errorf("a crawler row has %d cells, want 16", got)
	}
}

func TestPolicyText(t *testing.T) {
	_, rep := readLogs(t, Options{}, policyLog(t))
	var out bytes.Buffer
	if err := WriteText(&out, rep); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	for _, want := range []string{
		`(?m)^Requests:   13: 8 allowed, 5 refused, 0 would be refused`,
		`(?m)^Policy:     4 refused by the operator's policy \(of the refused\), 0 would be \(audit mode\); 7 allowed by an exception robots.txt disallowed; 0 paced`,
		`(?m)^\s+CRAWLER\s+BY\s+REQUESTS\s+ALLOWED\s+REFUSED\s+WOULD-BE\s+BY-POLICY\s+WOULD-BY-POLICY\s+BY-EXCEPTION\s+COMPLIANCE`,
		`(?m)^\s+GPTBot\s+token\s+12\s+7\s+5\s+0\s+4\s+0\s+6\s+58\.3%.* search$`,
		`(?m)^EXCEPTIONS USED`,
		`(?m)^\s+` + regexp.QuoteMeta(policyFile) + `:30\s+/reports/\s+4\s+2026-11-25 10:00:30Z\s+2026-11-25 10:00:33Z\s+GPTBot ×3, archiver \(credential\) ×1\s+https://site0.example ×2, https://site1.example ×2\s+written permission, 2026-10-01$`,
		`(?m)^\s+` + regexp.QuoteMeta(policyFile) + `:41\s+/press/\$\s+1\s+.* public anyway$`,
		`(?m)^POLICY VERSIONS`,
		`(?m)^\s+\(no policy\)\s+2026-11-25 10:00:00Z\s+2026-11-25 10:00:21Z\s+2$`,
		`(?m)^\s+ba9876543210\s+2026-11-25 10:01:40Z\s+2026-11-25 10:01:41Z\s+2$`,
		`(?m)^\s+3\s+https://example.com\s+\(policy\)\s+12 Disallow: /checkout/ \(` + regexp.QuoteMeta(policyFile) + `\)$`,
	} {
		if !regexp.MustCompile(want).MatchString(text) {
			t.Errorf("the text lacks %s:\n%s", want, text)
		}
	}
}

func TestPolicyHTML(t *testing.T) {
	_, rep := readLogs(t, Options{}, policyLog(t))
	p := renderPage(t, rep)
	for id, want := range map[string]string{
		"total-refused-by-policy": "4", "total-would-be-refused-by-policy": "0", "total-allowed-by-exception": "7", "total-paced-by-policy": "0",
	} {
		if got := text(p.byID(t, id)); got != want {
			t.Errorf("#%s = %q, want %q", id, got, want)
		}
	}
	crawlers := p.rows(t, "crawlers")
	// Crawler, requests, allowed, refused, would be, by policy, would be
	// by policy, by exception, ...; purposes last.
	if gpt := crawlers[0]; len(gpt) != 20 || !slices.Equal(gpt[:8], []string{"GPTBot token", "12", "7", "5", "0", "4", "0", "6"}) || gpt[19] != "search" {
		t.Errorf("GPTBot's row: %q", gpt)
	}
	if origin := p.rows(t, "origins")[0]; len(origin) != 22 {
		t.Errorf("an origin row has %d cells, want 22: %q", len(origin), origin)
	}
	exceptions := p.rows(t, "exceptions")
	want := []string{policyFile + ":30", "/reports/", "4", "2026-11-25 10:00:30Z", "2026-11-25 10:00:33Z",
		"GPTBot token ×3, archiver credential ×1", "https://site0.example ×2, https://site1.example ×2", "written permission, 2026-10-01"}
	if len(exceptions) != 3 || !slices.Equal(exceptions[0], want) {
		t.Errorf("exceptions %q\nwant first %q", exceptions, want)
	}
	versions := p.column(t, "policy-versions", 0)
	if !slices.Equal(versions, []string{"(no policy)", "0123456789ab", "ba9876543210"}) {
		t.Errorf("versions %q", versions)
	}
	rules := p.rows(t, "rules")
	if len(rules) < 2 || rules[0][2] != "policy "+policyFile || rules[0][4] != "Disallow: /checkout/" {
		t.Errorf("rules %q", rules)
	}
}

// The exceptions listed are bounded, the rest counted; so are the
// versions.
func TestPolicyListsBounded(t *testing.T) {
	var recs []audit.Record
	for i := range maxExceptions + 5 {
		recs = append(recs, byException(t0.Add(time.Duration(i)*time.Millisecond), 0, i+1))
	}
	for i := range maxPolicyVersions + 3 {
		r := allowed(t0.Add(time.Duration(i) * time.Second))
		r.PolicyVersion = fmt.Sprintf("%012x", i)
		recs = append(recs, r, r)
	}
	_, rep := readLogs(t, Options{}, writeLog(t, recs...))
	if len(rep.Exceptions) != maxExceptions || rep.ExceptionsOmitted != 5 {
		t.Errorf("%d exceptions listed, %d requests omitted; want %d and 5", len(rep.Exceptions), rep.ExceptionsOmitted, maxExceptions)
	}
	// The version of the exceptions' records is the first seen.
	if len(rep.PolicyVersions) != maxPolicyVersions || rep.PolicyVersionsOmitted != 2*4 {
		t.Errorf("%d versions listed, %d records omitted; want %d and 8", len(rep.PolicyVersions), rep.PolicyVersionsOmitted, maxPolicyVersions)
	}
	var out bytes.Buffer
	if err := WriteText(&out, rep); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"5 requests allowed by exceptions past the first 1,000, not listed", "8 records of versions past the first 100"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the text does not say %q", want)
		}
	}
}
