package usage

import (
	"net/http"
	"reflect"
	"strings"
	"testing"

	"robotsgate/robots"
)

// cu and cs build the usage lines package robots hands over.
func cu(line int, path, value string) robots.UsageLine {
	return robots.UsageLine{Directive: robots.DirectiveContentUsage, Line: line, Path: path, Value: value}
}

func cs(line int, value string) robots.UsageLine {
	return robots.UsageLine{Directive: robots.DirectiveContentSignal, Line: line, Value: value}
}

// brief is a statement reduced to what the tables compare.
type brief struct {
	Label, Value string
	Allows       bool
}

func briefs(st []Statement) []brief {
	var out []brief
	for _, s := range st {
		out = append(out, brief{s.Label, s.Value, s.Allows})
	}
	return out
}

func TestFromRobotsContentUsage(t *testing.T) {
	n := func(l string) brief { return brief{l, "n", false} }
	y := func(l string) brief { return brief{l, "y", true} }
	tests := []struct {
		name, value string
		want        []brief
	}{
		{"one label", "train-ai=n", []brief{n("train-ai")}},
		{"two labels in order", "train-ai=n, search=y", []brief{n("train-ai"), y("search")}},
		{"no spaces", "train-ai=n,search=y", []brief{n("train-ai"), y("search")}},
		{"every -08 label", "search=y, train-ai=n, ai-use=n", []brief{y("search"), n("train-ai"), n("ai-use")}},
		{"older labels", "bots=n, train-genai=y, ai-output=n, all=n, tdm=y, ai=n, genai=n, inference=y",
			[]brief{n("bots"), y("train-genai"), n("ai-output"), n("all"), y("tdm"), n("ai"), n("genai"), y("inference")}},
		{"unknown labels ignored", "foo=n, train-ai=y, infer-user=n", []brief{y("train-ai")}},
		{"parameters ignored", "train-ai=n;why=\"no\";x=1, search=y;q", []brief{n("train-ai"), y("search")}},
		{"empty", "", nil},
		// Values other than the Tokens y and n state nothing for the label.
		{"string", `train-ai="n", search=y`, []brief{y("search")}},
		{"yes/no tokens", "train-ai=no, search=yes", nil},
		{"integer", "train-ai=0", nil},
		{"bare key is a Boolean", "train-ai, search=y", []brief{y("search")}},
		{"inner list", "train-ai=(n y), search=y", []brief{y("search")}},
		{"upper-case token", "train-ai=N", nil},
		// RFC 9651 §4.2.2: a duplicated key keeps its last value, in the
		// place of its first.
		{"duplicate last wins", "train-ai=n, search=y, train-ai=y", []brief{y("train-ai"), y("search")}},
		{"duplicate last is not a token", "train-ai=n, train-ai", nil},
		// A value that fails to parse states nothing at all.
		{"upper-case key", "Train-AI=n, search=y", nil},
		{"space around =", "train-ai = n", nil},
		{"trailing comma", "train-ai=n,", nil},
		{"non-ASCII", "train-ai=n, séarch=y", nil},
		{"semicolon separator", "train-ai=n; search=y x", nil},
		{"path left in value", "/articles/ train-ai=n", nil},
		{"robots.txt whitespace around", "\ttrain-ai=n ", []brief{n("train-ai")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := FromRobots([]robots.UsageLine{cu(7, "", tt.value)})
			if !reflect.DeepEqual(briefs(got), tt.want) {
				t.Fatalf("FromRobots(%q) = %+v, want %+v", tt.value, briefs(got), tt.want)
			}
			for _, s := range got {
				if s.Form != FormContentUsage || s.Line != 7 || s.Header != "" || s.Text != "Content-Usage: "+strings.Trim(tt.value, " \t") {
					t.Errorf("statement %+v: want form content-usage, line 7, text of the line", s)
				}
			}
		})
	}
}

func TestFromRobotsTextAndLines(t *testing.T) {
	got := FromRobots([]robots.UsageLine{
		cu(3, "/articles/", "train-ai=n"),
		cs(9, "search=yes,ai-train=no"),
		{Directive: robots.DirectiveAllow, Line: 10, Value: "train-ai=n"}, // not a usage line
		{Directive: robots.DirectiveContentSignal, Line: 11, Path: "/shop/", Value: "ai-train=no"},
	})
	want := []Statement{
		{Form: FormContentUsage, Line: 3, Text: "Content-Usage: /articles/ train-ai=n", Label: "train-ai", Value: "n"},
		{Form: FormContentSignal, Line: 9, Text: "Content-Signal: search=yes,ai-train=no", Label: "search", Value: "yes", Allows: true},
		{Form: FormContentSignal, Line: 9, Text: "Content-Signal: search=yes,ai-train=no", Label: "ai-train", Value: "no"},
		{Form: FormContentSignal, Line: 11, Text: "Content-Signal: /shop/ ai-train=no", Label: "ai-train", Value: "no"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
	if FromRobots(nil) != nil {
		t.Error("FromRobots(nil) != nil")
	}
}

func TestFromRobotsContentSignal(t *testing.T) {
	tests := []struct {
		name, value string
		want        []brief
	}{
		{"cloudflare default", "search=yes,ai-train=no", []brief{{"search", "yes", true}, {"ai-train", "no", false}}},
		{"spaces", " search = yes ,  ai-train=no , ai-input=no ",
			[]brief{{"search", "yes", true}, {"ai-train", "no", false}, {"ai-input", "no", false}}},
		{"case", "Search=Yes, AI-Train=NO", []brief{{"Search", "Yes", true}, {"AI-Train", "NO", false}}},
		{"blank signal", "search=yes, ai-input=, ai-train=no", []brief{{"search", "yes", true}, {"ai-train", "no", false}}},
		{"use= is no purpose", "search=yes,ai-train=no,use=reference", []brief{{"search", "yes", true}, {"ai-train", "no", false}}},
		{"malformed entry leaves the rest", "search, ai-train=no, =yes, ai-input=maybe", []brief{{"ai-train", "no", false}}},
		{"y/n are not its values", "ai-train=n, search=y", nil},
		{"aipref labels are not its labels", "train-ai=no", nil},
		{"duplicates both count", "ai-train=no, ai-train=yes", []brief{{"ai-train", "no", false}, {"ai-train", "yes", true}}},
		{"quoted", `ai-train="no"`, nil},
		{"empty", "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := FromRobots([]robots.UsageLine{cs(2, tt.value)})
			if !reflect.DeepEqual(briefs(got), tt.want) {
				t.Fatalf("FromRobots(Content-Signal: %q) = %+v, want %+v", tt.value, briefs(got), tt.want)
			}
		})
	}
}

func TestFromResponse(t *testing.T) {
	tests := []struct {
		name  string
		h     http.Header
		token string
		want  []Statement
	}{
		{"content-usage", http.Header{"Content-Usage": {"train-ai=n, search=y"}}, "GPTBot", []Statement{
			{Form: FormContentUsage, Header: "Content-Usage", Text: "Content-Usage: train-ai=n, search=y", Label: "train-ai", Value: "n"},
			{Form: FormContentUsage, Header: "Content-Usage", Text: "Content-Usage: train-ai=n, search=y", Label: "search", Value: "y", Allows: true},
		}},
		// Field lines combine into one Dictionary: the last value wins.
		{"content-usage lines combine", http.Header{"Content-Usage": {"train-ai=y", "train-ai=n"}}, "", []Statement{
			{Form: FormContentUsage, Header: "Content-Usage", Text: "Content-Usage: train-ai=y, train-ai=n", Label: "train-ai", Value: "n"},
		}},
		{"content-usage empty line skipped", http.Header{"Content-Usage": {"train-ai=n", " "}}, "", []Statement{
			{Form: FormContentUsage, Header: "Content-Usage", Text: "Content-Usage: train-ai=n", Label: "train-ai", Value: "n"},
		}},
		{"content-usage one bad line spoils the field", http.Header{"Content-Usage": {"train-ai=n", "Search=y"}}, "", nil},
		{"tdm-reservation 1", http.Header{"Tdm-Reservation": {"1"}}, "", []Statement{
			{Form: FormTDMRep, Header: "Tdm-Reservation", Text: "tdm-reservation: 1", Label: "tdm-reservation", Value: "1"},
		}},
		{"tdm-reservation 0 with spaces", http.Header{"Tdm-Reservation": {" 0 "}}, "", []Statement{
			{Form: FormTDMRep, Header: "Tdm-Reservation", Text: "tdm-reservation: 0", Label: "tdm-reservation", Value: "0", Allows: true},
		}},
		{"tdm-reservation other values", http.Header{"Tdm-Reservation": {"2", "yes", "", "1 1"}}, "", nil},
		{"tdm-reservation repeated counts once", http.Header{"Tdm-Reservation": {"1", "1"}}, "", []Statement{
			{Form: FormTDMRep, Header: "Tdm-Reservation", Text: "tdm-reservation: 1", Label: "tdm-reservation", Value: "1"},
		}},
		{"noai", http.Header{"X-Robots-Tag": {"noai"}}, "GPTBot", []Statement{
			{Form: FormNoAI, Header: "X-Robots-Tag", Text: "X-Robots-Tag: noai", Label: "noai"},
		}},
		{"noai among rules, any case", http.Header{"X-Robots-Tag": {"noindex, NoAI"}}, "", []Statement{
			{Form: FormNoAI, Header: "X-Robots-Tag", Text: "X-Robots-Tag: noindex, NoAI", Label: "NoAI"},
		}},
		{"noai for our token", http.Header{"X-Robots-Tag": {"gptbot: noai"}}, "GPTBot", []Statement{
			{Form: FormNoAI, Header: "X-Robots-Tag", Text: "X-Robots-Tag: gptbot: noai", Label: "noai"},
		}},
		{"noai for another bot", http.Header{"X-Robots-Tag": {"otherbot: noai"}}, "GPTBot", nil},
		{"noai for a bot, without token", http.Header{"X-Robots-Tag": {"gptbot: noai"}}, "", nil},
		{"scope runs to the end of the line", http.Header{"X-Robots-Tag": {"otherbot: noindex, noai"}}, "GPTBot", nil},
		{"scope ends with the line", http.Header{"X-Robots-Tag": {"otherbot: noindex", "noai"}}, "GPTBot", []Statement{
			{Form: FormNoAI, Header: "X-Robots-Tag", Text: "X-Robots-Tag: noai", Label: "noai"},
		}},
		{"second scope on the line", http.Header{"X-Robots-Tag": {"googlebot: noindex, GPTBot: noai"}}, "gptbot", []Statement{
			{Form: FormNoAI, Header: "X-Robots-Tag", Text: "X-Robots-Tag: googlebot: noindex, GPTBot: noai", Label: "noai"},
		}},
		{"rules with a colon are no scope", http.Header{"X-Robots-Tag": {"max-snippet: 0, unavailable_after: Wednesday, 15-Nov-2026 15:00:00 GMT, noai"}}, "GPTBot", []Statement{
			{Form: FormNoAI, Header: "X-Robots-Tag", Text: "X-Robots-Tag: max-snippet: 0, unavailable_after: Wednesday, 15-Nov-2026 15:00:00 GMT, noai", Label: "noai"},
		}},
		{"noai twice counts once", http.Header{"X-Robots-Tag": {"noai", "noai"}}, "", []Statement{
			{Form: FormNoAI, Header: "X-Robots-Tag", Text: "X-Robots-Tag: noai", Label: "noai"},
		}},
		{"noimageai on a page", http.Header{"X-Robots-Tag": {"noimageai"}, "Content-Type": {"text/html"}}, "", nil},
		{"noimageai on an image", http.Header{"X-Robots-Tag": {"noimageai"}, "Content-Type": {"IMAGE/png"}}, "", []Statement{
			{Form: FormNoAI, Header: "X-Robots-Tag", Text: "X-Robots-Tag: noimageai", Label: "noimageai"},
		}},
		{"noindex alone", http.Header{"X-Robots-Tag": {"noindex, nofollow"}}, "", nil},
		{"nothing", http.Header{"Content-Type": {"text/html"}}, "GPTBot", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := FromResponse(tt.h, tt.token)
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("FromResponse(%v, %q) =\n%+v\nwant\n%+v", tt.h, tt.token, got, tt.want)
			}
		})
	}
}

func TestJudge(t *testing.T) {
	line := func(n int, v string) robots.UsageLine { return cu(n, "", v) }
	tests := []struct {
		name     string
		lines    []robots.UsageLine
		h        http.Header
		purposes []string
		refused  string // the purpose refused, "" for none
		byText   string // By.Text
		byLabel  string
	}{
		{"train-ai=n refuses training", []robots.UsageLine{line(1, "train-ai=n")}, nil, []string{"ai-train"}, "ai-train", "Content-Usage: train-ai=n", "train-ai"},
		{"train-ai=n leaves search", []robots.UsageLine{line(1, "train-ai=n")}, nil, []string{"search", "ai-input"}, "", "", ""},
		{"train-ai=y allows", []robots.UsageLine{line(1, "train-ai=y")}, nil, []string{"ai-train"}, "", "", ""},
		{"search=n refuses search", []robots.UsageLine{line(1, "search=n, train-ai=y")}, nil, []string{"ai-train", "search"}, "search", "Content-Usage: search=n, train-ai=y", "search"},
		{"ai-use=n refuses ai-input", []robots.UsageLine{line(1, "ai-use=n")}, nil, []string{"ai-input"}, "ai-input", "Content-Usage: ai-use=n", "ai-use"},
		// The hierarchy of -01..-04: a parent fills what no narrower label states.
		{"bots=n refuses search", []robots.UsageLine{line(1, "bots=n")}, nil, []string{"search"}, "search", "Content-Usage: bots=n", "bots"},
		{"bots=n refuses training", []robots.UsageLine{line(1, "bots=n")}, nil, []string{"ai-train"}, "ai-train", "Content-Usage: bots=n", "bots"},
		{"bots=n, search=y allows search", []robots.UsageLine{line(1, "bots=n, search=y")}, nil, []string{"search"}, "", "", ""},
		{"bots=n, search=y refuses training", []robots.UsageLine{line(1, "bots=n, search=y")}, nil, []string{"search", "ai-train"}, "ai-train", "Content-Usage: bots=n, search=y", "bots"},
		{"all=n, train-ai=y allows training", []robots.UsageLine{line(1, "all=n, train-ai=y")}, nil, []string{"ai-train"}, "", "", ""},
		{"tdm=n, inference=y", []robots.UsageLine{line(1, "tdm=n, inference=y")}, nil, []string{"ai-input", "ai-train"}, "ai-train", "Content-Usage: tdm=n, inference=y", "tdm"},
		{"ai-output=n refuses search", []robots.UsageLine{line(1, "ai-output=n")}, nil, []string{"search"}, "search", "Content-Usage: ai-output=n", "ai-output"},
		{"ai-output=n, search=y allows search", []robots.UsageLine{line(1, "ai-output=n, search=y")}, nil, []string{"search"}, "", "", ""},
		{"bots=y, ai-output=n refuses search", []robots.UsageLine{line(1, "bots=y, ai-output=n")}, nil, []string{"search"}, "search", "Content-Usage: bots=y, ai-output=n", "ai-output"},
		{"bots=n, ai-output=y allows search", []robots.UsageLine{line(1, "bots=n, ai-output=y")}, nil, []string{"search"}, "", "", ""},
		// Equal depth: a refusal wins.
		{"train-ai=y, train-genai=n", []robots.UsageLine{line(1, "train-ai=y, train-genai=n")}, nil, []string{"ai-train"}, "ai-train", "Content-Usage: train-ai=y, train-genai=n", "train-genai"},
		// Across expressions any refusal wins; a parent in one line is not
		// overridden by a child in another.
		{"two lines, n wins", []robots.UsageLine{line(1, "train-ai=y"), line(2, "train-ai=n")}, nil, []string{"ai-train"}, "ai-train", "Content-Usage: train-ai=n", "train-ai"},
		{"parent in another line", []robots.UsageLine{line(1, "bots=n"), line(2, "train-ai=y")}, nil, []string{"ai-train"}, "ai-train", "Content-Usage: bots=n", "bots"},
		{"line y, header n", []robots.UsageLine{line(1, "train-ai=y")}, http.Header{"Content-Usage": {"train-ai=n"}}, []string{"ai-train"}, "ai-train", "Content-Usage: train-ai=n", "train-ai"},
		{"content signals default", []robots.UsageLine{cs(4, "search=yes,ai-train=no")}, nil, []string{"search"}, "", "", ""},
		{"content signals default, training", []robots.UsageLine{cs(4, "search=yes,ai-train=no")}, nil, []string{"search", "ai-train"}, "ai-train", "Content-Signal: search=yes,ai-train=no", "ai-train"},
		{"content signals, ai-input unstated", []robots.UsageLine{cs(4, "search=yes,ai-train=no")}, nil, []string{"ai-input"}, "", "", ""},
		{"content signals and aipref", []robots.UsageLine{cs(4, "ai-train=yes"), line(5, "train-ai=n")}, nil, []string{"ai-train"}, "ai-train", "Content-Usage: train-ai=n", "train-ai"},
		{"purposes in order", []robots.UsageLine{cs(4, "ai-train=no, ai-input=no")}, nil, []string{"search", "ai-input", "ai-train"}, "ai-input", "Content-Signal: ai-train=no, ai-input=no", "ai-input"},
		{"first refusal in order", []robots.UsageLine{line(1, "train-ai=n"), cs(4, "ai-train=no")}, nil, []string{"ai-train"}, "ai-train", "Content-Usage: train-ai=n", "train-ai"},
		{"unknown purpose never refused", []robots.UsageLine{line(1, "bots=n"), cs(4, "ai-train=no")}, http.Header{"Tdm-Reservation": {"1"}, "X-Robots-Tag": {"noai"}}, []string{"archive"}, "", "", ""},
		{"no purposes", []robots.UsageLine{line(1, "bots=n")}, nil, nil, "", "", ""},
		{"tdm-reservation refuses training", nil, http.Header{"Tdm-Reservation": {"1"}}, []string{"search", "ai-train"}, "ai-train", "tdm-reservation: 1", "tdm-reservation"},
		{"tdm-reservation refuses ai-input", nil, http.Header{"Tdm-Reservation": {"1"}}, []string{"ai-input"}, "ai-input", "tdm-reservation: 1", "tdm-reservation"},
		{"tdm-reservation leaves search", nil, http.Header{"Tdm-Reservation": {"1"}}, []string{"search"}, "", "", ""},
		{"tdm-reservation 0", nil, http.Header{"Tdm-Reservation": {"0"}}, []string{"ai-train"}, "", "", ""},
		{"noai refuses training", nil, http.Header{"X-Robots-Tag": {"noai"}}, []string{"search", "ai-train"}, "ai-train", "X-Robots-Tag: noai", "noai"},
		{"noai refuses ai-input", nil, http.Header{"X-Robots-Tag": {"noai"}}, []string{"ai-input"}, "ai-input", "X-Robots-Tag: noai", "noai"},
		{"noai for another bot", nil, http.Header{"X-Robots-Tag": {"ccbot: noai"}}, []string{"ai-train"}, "", "", ""},
		{"noimageai on an image", nil, http.Header{"X-Robots-Tag": {"noimageai"}, "Content-Type": {"image/jpeg"}}, []string{"ai-train"}, "ai-train", "X-Robots-Tag: noimageai", "noimageai"},
		{"noimageai on a page", nil, http.Header{"X-Robots-Tag": {"noimageai"}, "Content-Type": {"text/html; charset=utf-8"}}, []string{"ai-train"}, "", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := append(FromRobots(tt.lines), FromResponse(tt.h, "GPTBot")...)
			v := Judge(tt.purposes, st)
			if v.Refused != (tt.refused != "") || v.Purpose != tt.refused || v.By.Text != tt.byText || v.By.Label != tt.byLabel {
				t.Fatalf("Judge(%q) = %+v; want refused %q by %q (%s)", tt.purposes, v, tt.refused, tt.byText, tt.byLabel)
			}
			if v.Refused && v.By.Allows {
				t.Errorf("By allows: %+v", v.By)
			}
		})
	}
}

// TDMRep §3.3: a tdm-reservation header supersedes tdmrep.json.
func TestJudgeTDMRepHeaderSupersedesFile(t *testing.T) {
	file1 := Statement{Form: FormTDMRep, Text: `{"location":"/*","tdm-reservation":1}`, Label: "tdm-reservation", Value: "1"}
	header0 := Statement{Form: FormTDMRep, Header: "Tdm-Reservation", Text: "tdm-reservation: 0", Label: "tdm-reservation", Value: "0", Allows: true}
	ai := []string{PurposeAITrain}
	if v := Judge(ai, []Statement{file1}); !v.Refused || v.By != file1 {
		t.Errorf("file alone: %+v", v)
	}
	if v := Judge(ai, []Statement{file1, header0}); v.Refused {
		t.Errorf("header 0 over file 1: %+v", v)
	}
	// A header does not supersede the other forms.
	noai := FromResponse(http.Header{"X-Robots-Tag": {"noai"}}, "")
	if v := Judge(ai, append([]Statement{file1, header0}, noai...)); !v.Refused || v.By.Form != FormNoAI {
		t.Errorf("noai beside a TDMRep header: %+v", v)
	}
}

// Every row of the vocabulary, stated alone in its own form as a refusal,
// refuses its purpose, and no purpose the label has no row for; stated
// as an allowance (where the form has one), refuses nothing.
func TestVocabularyRows(t *testing.T) {
	for _, row := range Vocabulary() {
		t.Run(row.Form.String()+"/"+row.Label+"/"+row.Purpose, func(t *testing.T) {
			if row.Spec == "" || !strings.HasPrefix(row.URL, "https://") || row.Note == "" {
				t.Errorf("row lacks its source: %+v", row)
			}
			switch row.Purpose {
			case PurposeSearch, PurposeAITrain, PurposeAIInput:
			default:
				t.Errorf("row names purpose %q", row.Purpose)
			}
			refuse, allow := stated(t, row.Form, row.Label)
			speaks := map[string]bool{}
			for _, r := range Vocabulary() {
				if r.Form == row.Form && r.Label == row.Label {
					speaks[r.Purpose] = true
				}
			}
			for _, p := range []string{PurposeSearch, PurposeAITrain, PurposeAIInput, "archive"} {
				v := Judge([]string{p}, refuse)
				if v.Refused != speaks[p] {
					t.Errorf("%s refusing: Judge(%s) = %+v, want refused %v", row.Label, p, v, speaks[p])
				}
				if allow != nil {
					if v := Judge([]string{p}, allow); v.Refused {
						t.Errorf("%s allowing: Judge(%s) = %+v", row.Label, p, v)
					}
				}
			}
		})
	}
}

// stated parses label as its form writes a refusal and an allowance
// (nil where the form has none), through the package's own readers.
func stated(t *testing.T, f Form, label string) (refuse, allow []Statement) {
	t.Helper()
	switch f {
	case FormContentUsage:
		refuse = FromRobots([]robots.UsageLine{cu(1, "", label+"=n")})
		allow = FromRobots([]robots.UsageLine{cu(1, "", label+"=y")})
	case FormContentSignal:
		refuse = FromRobots([]robots.UsageLine{cs(1, label+"=no")})
		allow = FromRobots([]robots.UsageLine{cs(1, label+"=yes")})
	case FormTDMRep:
		refuse = FromResponse(http.Header{"Tdm-Reservation": {"1"}}, "")
		allow = FromResponse(http.Header{"Tdm-Reservation": {"0"}}, "")
	case FormNoAI:
		refuse = FromResponse(http.Header{"X-Robots-Tag": {label}, "Content-Type": {"image/png"}}, "")
	}
	if len(refuse) != 1 || (allow != nil && len(allow) != 1) {
		t.Fatalf("%s %s: statements %+v / %+v", f, label, refuse, allow)
	}
	return refuse, allow
}

func TestStatementString(t *testing.T) {
	tests := []struct {
		s    Statement
		want string
	}{
		{Statement{Form: FormContentSignal, Line: 3, Label: "ai-train", Value: "no"}, "content-signal ai-train=no (line 3)"},
		{Statement{Form: FormContentUsage, Header: "Content-Usage", Label: "train-ai", Value: "n"}, "content-usage train-ai=n (header Content-Usage)"},
		{Statement{Form: FormNoAI, Header: "X-Robots-Tag", Label: "noai"}, "x-robots-tag noai (header X-Robots-Tag)"},
		{Statement{Form: FormTDMRep, Label: "tdm-reservation", Value: "1"}, "tdmrep tdm-reservation=1 (tdmrep.json)"},
	}
	for _, tt := range tests {
		if got := tt.s.String(); got != tt.want {
			t.Errorf("String() = %q, want %q", got, tt.want)
		}
	}
}
