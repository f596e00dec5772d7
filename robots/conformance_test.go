package robots

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

type conformanceCase struct {
	ID         string   `json:"id"`
	GoogleOnly bool     `json:"google_only"`
	Robots     *string  `json:"robots"`
	RobotsB64  *string  `json:"robots_b64"`
	UserAgent  *string  `json:"user_agent"`
	UserAgents []string `json:"user_agents"`
	URL        string   `json:"url"`
	Allowed    bool     `json:"allowed"`
	Note       string   `json:"note"`
}

type conformanceHelper struct {
	ID         string          `json:"id"`
	GoogleOnly bool            `json:"google_only"`
	Function   string          `json:"function"`
	Input      json.RawMessage `json:"input"`
	Expected   json.RawMessage `json:"expected"`
	Note       string          `json:"note"`
}

type conformanceSuite struct {
	Cases   []conformanceCase   `json:"cases"`
	Helpers []conformanceHelper `json:"helpers"`
}

// rfcOverrides are the Google cases where RFC 9309 says otherwise; the test
// asserts the RFC's answer for them.
var rfcOverrides = map[string]string{
	"ID_Encoding/3": `§2.2.2: "Octets in the URI and robots.txt paths outside the range of the ASCII coded character set ... MUST be percent-encoded ... prior to comparison." The raw UTF-8 URL /foo/bar/ツ is /foo/bar/%E3%83%84 and matches "Allow: /foo/bar/ツ"; Google does not encode the URL.`,
	"ID_Encoding/5": `§2.2.2: "Octets in the URI ... outside the range of the ASCII coded character set ... MUST be percent-encoded ... prior to comparison." The raw UTF-8 URL /foo/bar/ツ is /foo/bar/%E3%83%84 and matches "Allow: /foo/bar/%E3%83%84"; Google does not encode the URL.`,
	"ID_Encoding/6": `§2.2.2: "If a percent-encoded ASCII octet is encountered in the URI, it MUST be unencoded prior to comparison, unless it is a reserved character"; Figure 4 maps /foo/bar/%62%61%7A to /foo/bar/baz, so "Allow: /foo/bar/%62%61%7A" matches /foo/bar/baz; Google compares the escapes literally.`,
}

// conformanceFile is Google's suite as data, under testdata/; its README,
// NOTICE and LICENSE are beside it.
const conformanceFile = "conformance/google-robotstxt.json"

func loadConformance(t *testing.T) conformanceSuite {
	t.Helper()
	var suite conformanceSuite
	if err := json.Unmarshal(readTestdata(t, conformanceFile), &suite); err != nil {
		t.Fatalf("%s: %v", conformanceFile, err)
	}
	return suite
}

func (c conformanceCase) body(t *testing.T) []byte {
	t.Helper()
	if c.RobotsB64 != nil {
		b, err := base64.StdEncoding.DecodeString(*c.RobotsB64)
		if err != nil {
			t.Fatalf("%s: robots_b64: %v", c.ID, err)
		}
		return b
	}
	if c.Robots == nil {
		t.Fatalf("%s: no robots body", c.ID)
	}
	return []byte(*c.Robots)
}

func TestGoogleConformance(t *testing.T) {
	suite := loadConformance(t)
	var standard, standardPass, googleOnly, googleOnlyPass, rfcCases int
	for _, c := range suite.Cases {
		agents := c.UserAgents
		if c.UserAgent != nil {
			agents = append(agents, *c.UserAgent)
		}
		robots := Parser{}.Parse(c.body(t))
		path := PathAndQuery(c.URL)
		got := false // allowed if any agent is allowed, as upstream's AllowedByRobots
		for _, agent := range agents {
			if robots.Check(agent, path).Allowed {
				got = true
			}
		}
		want := c.Allowed
		rfcReason, overridden := rfcOverrides[c.ID]
		if overridden {
			want = !want
			rfcCases++
		}
		if c.GoogleOnly {
			googleOnly++
			if got == want {
				googleOnlyPass++
				continue
			}
			t.Errorf("%s (google_only): allowed=%v, want %v (%s)", c.ID, got, want, c.Note)
			continue
		}
		standard++
		if got != want {
			t.Errorf("%s: allowed=%v, want %v (%s)", c.ID, got, want, c.Note)
			continue
		}
		standardPass++
		if overridden {
			t.Logf("%s: RFC 9309 answer (allowed=%v) instead of Google's: %s", c.ID, got, rfcReason)
		}
	}
	requireREADME(t,
		"(`robots/testdata/"+conformanceFile+"`)",
		fmt.Sprintf("**%d/%d standard cases pass, %d of them answered as RFC 9309 says rather than as Google does**",
			standardPass, standard, rfcCases),
		fmt.Sprintf("**%d/%d `google_only` cases pass.**", googleOnlyPass, googleOnly))
}

func TestGoogleConformanceHelpers(t *testing.T) {
	suite := loadConformance(t)
	ran := 0
	for _, h := range suite.Helpers {
		if h.Function == "RobotsMatcher::IsValidUserAgentToObey" {
			// Google's check that a caller's token is only letters, '-'
			// and '_'. robotsgate accepts digits and dots in tokens on
			// purpose (MJ12bot, Mail.RU_Bot): see ProductName.
			continue
		}
		t.Run(h.ID, func(t *testing.T) {
			switch h.Function {
			case "GetPathParamsQuery":
				ran++
				var in, want string
				mustUnmarshal(t, h.Input, &in)
				mustUnmarshal(t, h.Expected, &want)
				if got := PathAndQuery(in); got != want {
					t.Errorf("PathAndQuery(%q) = %q, want %q", in, got, want)
				}
			case "MaybeEscapePattern":
				ran++
				var in, want string
				mustUnmarshal(t, h.Input, &in)
				mustUnmarshal(t, h.Expected, &want)
				if got, _ := normalize(in, true); got != want {
					t.Errorf("normalize(%q) = %q, want %q", in, got, want)
				}
			case "ParseRobotsTxt+RobotsStatsReporter":
				ran++
				checkStatsReporter(t, h)
			case "ParseRobotsTxt+RobotsParsingReporter":
				ran++
				checkParsingReporter(t, h)
			default:
				t.Fatalf("unknown helper function %q", h.Function)
			}
		})
	}
	if ran == 0 {
		t.Fatal("no helper case ran")
	}
}

func mustUnmarshal(t *testing.T, data []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("%s: %v", data, err)
	}
}

type reporterInput struct {
	Robots    *string `json:"robots"`
	RobotsB64 *string `json:"robots_b64"`
	LineNum   int     `json:"line_num"`
}

func (in reporterInput) body(t *testing.T) []byte {
	return conformanceCase{ID: "helper", Robots: in.Robots, RobotsB64: in.RobotsB64}.body(t)
}

// checkStatsReporter counts what Google's RobotsStatsReporter counts, as a
// consumer of the line walk (lines).
func checkStatsReporter(t *testing.T, h conformanceHelper) {
	var in reporterInput
	mustUnmarshal(t, h.Input, &in)
	var want map[string]any
	mustUnmarshal(t, h.Expected, &want)
	valid, unknown, last := 0, 0, 0
	var sitemap strings.Builder
	for line := range lines(decodeText(in.body(t))) {
		switch line.Directive {
		case DirectiveNone:
			continue
		case DirectiveUserAgent, DirectiveAllow, DirectiveDisallow, DirectiveSitemap:
			valid++
			if line.Directive == DirectiveSitemap {
				sitemap.WriteString(line.Value)
			}
		default:
			unknown++
		}
		last = line.Number
	}
	got := map[string]any{"valid_directives": float64(valid), "unknown_directives": float64(unknown), "last_line_seen": float64(last), "sitemap": sitemap.String()}
	for key, w := range want {
		if got[key] != w {
			t.Errorf("%s = %v, want %v (%s)", key, got[key], w, h.Note)
		}
	}
}

// checkParsingReporter rebuilds Google's per-line RobotsParsingReporter
// records from the line walk (lines).
func checkParsingReporter(t *testing.T, h conformanceHelper) {
	var in reporterInput
	mustUnmarshal(t, h.Input, &in)
	var want map[string]json.RawMessage
	mustUnmarshal(t, h.Expected, &want)
	type metadata struct {
		IsEmpty          bool `json:"is_empty"`
		HasComment       bool `json:"has_comment"`
		IsComment        bool `json:"is_comment"`
		HasDirective     bool `json:"has_directive"`
		IsAcceptableTypo bool `json:"is_acceptable_typo"`
		IsLineTooLong    bool `json:"is_line_too_long"`
		IsMissingColon   bool `json:"is_missing_colon_separator"`
	}
	type record struct {
		LineNum  int      `json:"line_num"`
		TagName  string   `json:"tag_name"`
		IsTypo   bool     `json:"is_typo"`
		Metadata metadata `json:"metadata"`
	}
	var records []record
	valid, last := 0, 0
	for line := range lines(decodeText(in.body(t))) {
		tag := "Unknown"
		switch line.Directive {
		case DirectiveUserAgent:
			tag = "UserAgent"
		case DirectiveAllow:
			tag = "Allow"
		case DirectiveDisallow:
			tag = "Disallow"
		case DirectiveSitemap:
			tag = "Sitemap"
		case DirectiveCrawlDelay, DirectiveRequestRate, DirectiveUnsupported, DirectiveContentUsage, DirectiveContentSignal:
			tag = "Unused"
		}
		if tag != "Unknown" && tag != "Unused" {
			valid++
		}
		last = line.Number
		records = append(records, record{
			LineNum: line.Number, TagName: tag, IsTypo: line.IsTypo,
			Metadata: metadata{
				IsEmpty: line.IsEmpty, HasComment: line.HasComment, IsComment: line.IsComment,
				HasDirective: line.Directive != DirectiveNone, IsAcceptableTypo: line.IsTypo,
				IsLineTooLong: line.TooLong, IsMissingColon: line.MissingColon,
			},
		})
	}
	if _, perLine := want["line_num"]; perLine {
		var w record
		mustUnmarshal(t, h.Expected, &w)
		if w.LineNum < 1 || w.LineNum > len(records) {
			t.Fatalf("line %d not reported; %d lines", w.LineNum, len(records))
		}
		if got := records[w.LineNum-1]; got != w {
			t.Errorf("line %d: got %+v, want %+v (%s)", w.LineNum, got, w, h.Note)
		}
		return
	}
	got := map[string]int{"valid_directives": valid, "last_line_seen": last, "parse_results_size": len(records)}
	for key, raw := range want {
		var w int
		mustUnmarshal(t, raw, &w)
		if g, ok := got[key]; !ok || g != w {
			t.Errorf("%s = %d, want %d (%s)", key, g, w, h.Note)
		}
	}
}
