package usage

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// specExample is the report's second example of a tdmrep.json.
const specExample = `[
  {"location": "/directory-a/", "tdm-reservation": 1},
  {"location": "/directory-b/html/", "tdm-reservation": 1, "tdm-policy":"https://provider.com/policies/policy.json"},
  {"location": "/directory-b/images/*.jpg", "tdm-reservation": 0}
]`

func reserved(text string) Statement {
	return Statement{Form: FormTDMRep, Text: text, Label: "tdm-reservation", Value: "1"}
}

func notReserved(text string) Statement {
	return Statement{Form: FormTDMRep, Text: text, Label: "tdm-reservation", Value: "0", Allows: true}
}

func TestTDMRepStatements(t *testing.T) {
	rule := func(location string, value int) string {
		return `tdmrep.json: {"location":` + strconv.Quote(location) + `,"tdm-reservation":` + strconv.Itoa(value) + `}`
	}
	for _, c := range []struct {
		name, body, path string
		want             []Statement
	}{
		{"site-wide", `[{"location": "/", "tdm-reservation": 1}]`, "/any/thing?x=1",
			[]Statement{reserved(rule("/", 1))}},
		{"spec example: directory-a", specExample, "/directory-a/paper.pdf",
			[]Statement{reserved(rule("/directory-a/", 1))}},
		{"spec example: the policy is shown", specExample, "/directory-b/html/page.html",
			[]Statement{reserved(`tdmrep.json: {"location":"/directory-b/html/","tdm-reservation":1,"tdm-policy":"https://provider.com/policies/policy.json"}`)}},
		{"spec example: not reserved", specExample, "/directory-b/images/cat.jpg",
			[]Statement{notReserved(rule("/directory-b/images/*.jpg", 0))}},
		{"spec example: no rule matches", specExample, "/directory-b/images/cat.png", nil},
		{"spec example: elsewhere", specExample, "/", nil},
		{"the first match wins, not the longest", `[{"location":"/","tdm-reservation":1},{"location":"/open/","tdm-reservation":0}]`,
			"/open/x", []Statement{reserved(rule("/", 1))}},
		{"a specific rule listed first wins", `[{"location":"/open/","tdm-reservation":0},{"location":"/","tdm-reservation":1}]`,
			"/open/x", []Statement{notReserved(rule("/open/", 0))}},
		{"and the general one elsewhere", `[{"location":"/open/","tdm-reservation":0},{"location":"/","tdm-reservation":1}]`,
			"/closed/x", []Statement{reserved(rule("/", 1))}},
		{"prefix match", `[{"location":"/fish","tdm-reservation":1}]`, "/fish.html", []Statement{reserved(rule("/fish", 1))}},
		{"case-sensitive", `[{"location":"/Images/","tdm-reservation":1}]`, "/images/a.jpg", nil},
		{"$ anchors", `[{"location":"/doc.pdf$","tdm-reservation":1}]`, "/doc.pdf.html", nil},
		{"$ matches the end", `[{"location":"/doc.pdf$","tdm-reservation":1}]`, "/doc.pdf", []Statement{reserved(rule("/doc.pdf$", 1))}},
		{"$ and a query: the query-less reading matches", `[{"location":"/*.pdf$","tdm-reservation":1}]`, "/a/doc.pdf?x=1",
			[]Statement{reserved(rule("/*.pdf$", 1))}},
		{"* in the middle", `[{"location":"/a/*/b","tdm-reservation":1}]`, "/a/x/y/b/c", []Statement{reserved(rule("/a/*/b", 1))}},
		{"* needs its segments", `[{"location":"/a/*/b","tdm-reservation":1}]`, "/a/x/c", nil},
		{"leading *", `[{"location":"*.jpg","tdm-reservation":1}]`, "/img/cat.jpg", []Statement{reserved(rule("*.jpg", 1))}},
		{"percent-encoded unreserved characters decoded", `[{"location":"/%7Euser/","tdm-reservation":1}]`, "/~user/x",
			[]Statement{reserved(rule("/%7Euser/", 1))}},
		{"and in the path", `[{"location":"/~user/","tdm-reservation":1}]`, "/%7euser/x", []Statement{reserved(rule("/~user/", 1))}},
		{"a literal $ is %24 in a location", `[{"location":"/path/foo-%24","tdm-reservation":1}]`, "/path/foo-$",
			[]Statement{reserved(rule("/path/foo-%24", 1))}},
		{"a literal * is %2A in a location", `[{"location":"/a-%2A","tdm-reservation":1}]`, "/a-*", []Statement{reserved(rule("/a-%2A", 1))}},
		{"a * in a path is no wildcard", `[{"location":"/a-%2A","tdm-reservation":1}]`, "/a-b", nil},
		{"non-ASCII location", `[{"location":"/café/","tdm-reservation":1}]`, "/caf%C3%A9/menu", []Statement{reserved(rule("/café/", 1))}},
		{"dot segments cannot escape", `[{"location":"/private/","tdm-reservation":1}]`, "/public/../private/a",
			[]Statement{reserved(rule("/private/", 1))}},
		{"nor an encoded slash", `[{"location":"/a/b","tdm-reservation":1}]`, "/a%2Fb", []Statement{reserved(rule("/a/b", 1))}},
		{"nor merged slashes", `[{"location":"/a/b","tdm-reservation":1}]`, "//a//b", []Statement{reserved(rule("/a/b", 1))}},
		{"every reading's first match, in file order", `[{"location":"/a/","tdm-reservation":0},{"location":"/b/","tdm-reservation":1}]`,
			"/a/../b/x", []Statement{notReserved(rule("/a/", 0)), reserved(rule("/b/", 1))}},
		{"unset shadows later rules", `[{"location":"/a/","tdm-reservation":2},{"location":"/","tdm-reservation":1}]`, "/a/x", nil},
		{"and applies to its paths only", `[{"location":"/a/","tdm-reservation":2},{"location":"/","tdm-reservation":1}]`, "/b",
			[]Statement{reserved(rule("/", 1))}},
		{"a missing reservation is unset", `[{"location":"/a/"},{"location":"/","tdm-reservation":1}]`, "/a/x", nil},
		{"the string \"1\" counts", `[{"location":"/","tdm-reservation":"1"}]`, "/x", []Statement{reserved(rule("/", 1))}},
		{"1.0 is 1", `[{"location":"/","tdm-reservation":1.0}]`, "/x", []Statement{reserved(rule("/", 1))}},
		{"true is no reservation", `[{"location":"/","tdm-reservation":true}]`, "/x", nil},
		{"a rule without a location matches nothing", `[{"tdm-reservation":0},{"location":"/","tdm-reservation":1}]`, "/x",
			[]Statement{reserved(rule("/", 1))}},
		{"nor one whose location is no path", `[{"location":"images/","tdm-reservation":0},{"location":"/","tdm-reservation":1}]`, "/images/x",
			[]Statement{reserved(rule("/", 1))}},
		{"keys are case-sensitive", `[{"Location":"/","tdm-reservation":1}]`, "/x", nil},
		{"unknown keys are ignored", `[{"location":"/","tdm-reservation":1,"tdm-licence":"x"}]`, "/x", []Statement{reserved(rule("/", 1))}},
		{"a policy that is no string is not shown", `[{"location":"/","tdm-reservation":1,"tdm-policy":7}]`, "/x", []Statement{reserved(rule("/", 1))}},
		{"empty path is /", `[{"location":"/$","tdm-reservation":1}]`, "", []Statement{reserved(rule("/$", 1))}},
		{"BOM", "\xEF\xBB\xBF" + `[{"location":"/","tdm-reservation":1}]`, "/", []Statement{reserved(rule("/", 1))}},
		{"empty array", `[]`, "/", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			tdm, err := ParseTDMRep([]byte(c.body))
			if err != nil {
				t.Fatal(err)
			}
			if got := tdm.Statements(c.path); !reflect.DeepEqual(got, c.want) {
				t.Errorf("Statements(%q)\n got %+v\nwant %+v", c.path, got, c.want)
			}
		})
	}
}

func TestTDMRepProblems(t *testing.T) {
	for _, c := range []struct {
		body  string
		rules int
		count int
		first string
	}{
		{specExample, 3, 0, ""},
		{`[{"tdm-reservation":1},{"location":"/"}]`, 1, 2, "rule 1: no location"},
		{`[{"location":"/","tdm-reservation":2}]`, 1, 1, `rule 1: tdm-reservation "2" is neither 0 nor 1 (unset)`},
		{`[{"location":"/","tdm-reservation":null}]`, 1, 1, "rule 1: tdm-reservation is JSON null, not 0 or 1 (unset)"},
		{`[{"location":7,"tdm-reservation":1}]`, 0, 1, "rule 1: location is a JSON number, not a string"},
		{`[{"location":"","tdm-reservation":1}]`, 0, 1, `rule 1: location "" does not start with / or *`},
		{`[{"location":"/","tdm-reservation":1}, "x", null, [1]]`, 1, 3, "rule 2: a JSON string, not an object"},
	} {
		tdm, err := ParseTDMRep([]byte(c.body))
		if err != nil {
			t.Fatalf("%s: %v", c.body, err)
		}
		count, first := tdm.Problems()
		if tdm.Len() != c.rules || count != c.count || first != c.first {
			t.Errorf("%s: %d rules, problems %d %q; want %d, %d %q", c.body, tdm.Len(), count, first, c.rules, c.count, c.first)
		}
	}
}

func TestParseTDMRepRefuses(t *testing.T) {
	many := "[" + strings.Repeat(`{"location":"/","tdm-reservation":1},`, MaxTDMRepRules) + `{"location":"/","tdm-reservation":1}]`
	for _, c := range []struct{ body, want string }{
		{"", "tdmrep.json: empty"},
		{"  \n", "tdmrep.json: empty"},
		{`{"location":"/","tdm-reservation":1}`, "tdmrep.json: a JSON object, want an array of rules (the brackets are mandatory)"},
		{`"x"`, "tdmrep.json: a JSON string, want an array of rules (the brackets are mandatory)"},
		{`1`, "tdmrep.json: a JSON number, want an array of rules (the brackets are mandatory)"},
		{`<html>Not found</html>`, "tdmrep.json: invalid JSON at byte 1: invalid character '<' looking for beginning of value"},
		{`[{"location":"/","tdm-reservation":1},]`, "tdmrep.json: invalid JSON at byte 39: invalid character ']' looking for beginning of value"},
		{`[{"location":"/"`, "tdmrep.json: invalid JSON at byte 16: unexpected end of JSON input"},
		{`[`, "tdmrep.json: invalid JSON at byte 1: unexpected end of JSON input"},
		{`[] []`, "tdmrep.json: invalid JSON at byte 4: invalid character '[' after top-level value"},
		{`[] x`, "tdmrep.json: invalid JSON at byte 4: invalid character 'x' after top-level value"},
		{"[\"\xff\"]", "tdmrep.json: not UTF-8 (at byte 2)"},
		{many, "tdmrep.json: more than 1024 rules"},
		{strings.Repeat("[", 20000), "tdmrep.json: invalid JSON"},
	} {
		tdm, err := ParseTDMRep([]byte(c.body))
		if err == nil || tdm != nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("ParseTDMRep(%.40q) = %v, %v; want the error %q", c.body, tdm, err, c.want)
		}
	}
	at := "[" + strings.Repeat(`{"location":"/","tdm-reservation":1},`, MaxTDMRepRules-1) + `{"location":"/","tdm-reservation":1}]`
	if tdm, err := ParseTDMRep([]byte(at)); err != nil || tdm.Len() != MaxTDMRepRules {
		t.Errorf("%d rules: %v, %d kept", MaxTDMRepRules, err, tdm.Len())
	}
}

// TestTDMRepNil: a nil TDMRep states nothing and keeps nothing.
func TestTDMRepNil(t *testing.T) {
	var tdm *TDMRep
	if tdm.Statements("/") != nil || tdm.RetainedBytes() != 0 || tdm.Len() != 0 {
		t.Error("a nil TDMRep says something")
	}
	if n, first := tdm.Problems(); n != 0 || first != "" {
		t.Error("a nil TDMRep has problems")
	}
}

func TestTDMRepTextBounded(t *testing.T) {
	long := "/" + strings.Repeat("é", 2000)
	tdm, err := ParseTDMRep([]byte(`[{"location":"` + long + `","tdm-reservation":1,"tdm-policy":"https://x/` + strings.Repeat("p", 3000) + `"}]`))
	if err != nil {
		t.Fatal(err)
	}
	got := tdm.Statements(long + "/x")
	if len(got) != 1 || len(got[0].Text) > tdmTextBytes || !utf8.ValidString(got[0].Text) || !strings.HasPrefix(got[0].Text, `tdmrep.json: {"location":"/éé`) {
		t.Fatalf("got %d statements, %+v", len(got), got)
	}
}

// TestTDMRepCostlyPath: a path whose readings cost more than the bound to
// match is taken to be covered by the first reservation, and says so; a
// file without one states nothing of it.
func TestTDMRepCostlyPath(t *testing.T) {
	var rules []string
	for i := range MaxTDMRepRules - 1 {
		rules = append(rules, fmt.Sprintf(`{"location":"/*z%dq*y","tdm-reservation":0}`, i))
	}
	costly := "/" + strings.Repeat("z1", 4<<10)
	for _, c := range []struct {
		name, last string
		want       []Statement
	}{
		{"reserving", `{"location":"/never/","tdm-reservation":1}`,
			[]Statement{reserved(`tdmrep.json, assumed for a path too costly to match: {"location":"/never/","tdm-reservation":1}`)}},
		{"no reservation", `{"location":"/never/","tdm-reservation":0}`, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			tdm, err := ParseTDMRep([]byte("[" + strings.Join(append(rules, c.last), ",") + "]"))
			if err != nil {
				t.Fatal(err)
			}
			if got := tdm.Statements(costly); !reflect.DeepEqual(got, c.want) {
				t.Errorf("got %+v, want %+v", got, c.want)
			}
			if got := tdm.Statements("/short"); got != nil {
				t.Errorf("a short path: %+v, want none", got)
			}
		})
	}
	// Past robots.MaxReadings readings, likewise.
	tdm, err := ParseTDMRep([]byte(`[{"location":"/never/","tdm-reservation":1}]`))
	if err != nil {
		t.Fatal(err)
	}
	ambiguous := strings.Repeat("/a/./b//c;p=1/%2F/\\/..", 8)
	if got := tdm.Statements(ambiguous); len(got) != 1 || !strings.HasPrefix(got[0].Text, tdmAssumedPrefix) {
		t.Errorf("a path of many readings: %+v", got)
	}
}

// tdmWorstBodies are bodies of about n bytes built to keep the most
// memory per byte once parsed.
func tdmWorstBodies(n int) map[string][]byte {
	fill := func(rule func(i int) string) []byte {
		b := []byte("[")
		for i := 0; i < MaxTDMRepRules; i++ {
			r := rule(i)
			if len(b)+len(r)+2 > n {
				break
			}
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, r...)
		}
		return append(b, ']')
	}
	long := func(unit string) func(int) string {
		per := max((n-16)/MaxTDMRepRules, 40)
		return func(i int) string {
			loc := "/" + strings.Repeat(unit, max(per-40, len(unit))/len(unit))
			return `{"location":"` + loc + `","tdm-reservation":1}`
		}
	}
	return map[string][]byte{
		"shortest rules": fill(func(int) string { return `{"location":"/","tdm-reservation":1}` }),
		"unset rules":    fill(func(int) string { return `{"location":"/"}` }),
		"policies":       fill(func(int) string { return `{"location":"/","tdm-reservation":1,"tdm-policy":"h"}` }),
		"spaces":         fill(long(" ")),
		"non-ASCII":      fill(long("é")),
		"U+2028":         fill(long("\u2028")),
		"escaped":        fill(long(`\u00e9`)),
		"one long rule":  []byte(`[{"location":"/` + strings.Repeat("\u2028", (n-40)/3) + `","tdm-reservation":1}]`),
	}
}

func TestTDMRepRetainedBound(t *testing.T) {
	for _, n := range []int{64, 1 << 10, 64 << 10, 256 << 10} {
		for name, body := range tdmWorstBodies(n) {
			tdm, err := ParseTDMRep(body)
			if err != nil {
				t.Fatalf("%s/%d: %v", name, n, err)
			}
			got, bound := tdm.RetainedBytes(), MaxTDMRepRetained(len(body))
			if got > bound {
				t.Errorf("%s, %d bytes: RetainedBytes %d > %d", name, len(body), got, bound)
			}
			t.Logf("%s, %d bytes, %d rules: %d retained (%.1f per byte)", name, len(body), tdm.Len(), got, float64(got)/float64(len(body)))
		}
	}
}

func TestTDMRepStatementsAllocations(t *testing.T) {
	tdm, err := ParseTDMRep([]byte(specExample))
	if err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(100, func() { tdm.Statements("/elsewhere/page.html") }); n > 1 {
		t.Errorf("a path no rule matches: %.0f allocations", n)
	}
}

func FuzzTDMRep(f *testing.F) {
	f.Add([]byte(specExample), "/directory-b/images/a.jpg")
	f.Add([]byte(`[{"location":"/*.pdf$","tdm-reservation":"1"},{"location":"/a/","tdm-reservation":2}]`), "/a/../x.pdf?y")
	f.Add([]byte(`[{"location":"/%7E%2f*$","tdm-reservation":0,"tdm-policy":"x"}]`), "/~%2F//;x")
	f.Add([]byte(`{"location":"/"}`), "/")
	f.Add([]byte("[\"\\u2028\", null, {}]"), "")
	f.Fuzz(func(t *testing.T, body []byte, path string) {
		tdm, err := ParseTDMRep(body)
		if err != nil {
			if tdm != nil || !strings.HasPrefix(err.Error(), "tdmrep.json") {
				t.Fatalf("%v with %v", err, tdm)
			}
			return
		}
		if got, bound := tdm.RetainedBytes(), MaxTDMRepRetained(len(body)); got > bound {
			t.Fatalf("RetainedBytes %d > %d for %d bytes", got, bound, len(body))
		}
		if n, first := tdm.Problems(); (n == 0) != (first == "") || len(first) > tdmProblemBytes {
			t.Fatalf("problems %d %q", n, first)
		}
		for _, p := range []string{path, "/" + path, "/"} {
			for _, s := range tdm.Statements(p) {
				if s.Form != FormTDMRep || s.Label != "tdm-reservation" || s.Line != 0 || s.Header != "" ||
					(s.Value != "0" && s.Value != "1") || s.Allows != (s.Value == "0") ||
					len(s.Text) > tdmTextBytes || !strings.HasPrefix(s.Text, "tdmrep.json") {
					t.Fatalf("Statements(%q): %+v", p, s)
				}
			}
		}
	})
}

func TestTDMRepEverywhere(t *testing.T) {
	for _, tt := range []struct {
		name, body string
		want       string // the statement's value, "" for none
	}{
		{"the first rule covers every path", `[{"location":"/","tdm-reservation":1},{"location":"/open/","tdm-reservation":0}]`, "1"},
		{"a star covers every path", `[{"location":"*","tdm-reservation":0}]`, "0"},
		{"a narrower first rule decides some paths", `[{"location":"/open/","tdm-reservation":0},{"location":"/","tdm-reservation":1}]`, ""},
		{"an unset reservation states nothing", `[{"location":"/","tdm-reservation":7}]`, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tdm, err := ParseTDMRep([]byte(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			got := tdm.Everywhere()
			if tt.want == "" && got != nil || tt.want != "" && (len(got) != 1 || got[0].Value != tt.want) {
				t.Errorf("Everywhere() = %+v, want value %q", got, tt.want)
			}
		})
	}
}
