package usage

import (
	"net/http"
	"reflect"
	"strings"
	"testing"

	"robotsgate/robots"
)

// FuzzStatements reads arbitrary robots.txt usage lines and response
// headers: nothing panics, the output stays within the bounds, every
// statement is one the vocabulary knows, and the same input gives the
// same statements and verdicts.
func FuzzStatements(f *testing.F) {
	for _, seed := range []struct{ robots, header, token string }{
		{"u train-ai=n, search=y\ns search=yes,ai-train=no", "Content-Usage: bots=n, search=y\nX-Robots-Tag: gptbot: noai", "GPTBot"},
		{"u /articles/ train-ai=n;x=1, ai-use=(n)\ns Search=Yes, AI-Train=NO, use=reference", "Tdm-Reservation: 1\nContent-Type: image/png\nX-Robots-Tag: noimageai", ""},
		{"u train-ai=n, train-ai\nu Train-AI=n\ns ai-train=no, ai-train=yes", "Content-Usage: train-ai=y\nContent-Usage: train-ai=n\nX-Robots-Tag: max-snippet: 0, otherbot: noai", "otherbot"},
		{"u " + strings.Repeat("a=n,", 100) + "\ns =,=,", "X-Robots-Tag: unavailable_after: Wednesday, 15-Nov-2026 15:00:00 GMT, noai\nTdm-Reservation: 0", "x"},
	} {
		f.Add(seed.robots, seed.header, seed.token)
	}
	purposes := []string{PurposeSearch, PurposeAITrain, PurposeAIInput, "archive"}
	f.Fuzz(func(t *testing.T, robotsText, headerText, token string) {
		lines := fuzzLines(robotsText)
		h := fuzzHeader(headerText)
		from := FromRobots(lines)
		resp := FromResponse(h, token)
		if len(from) > maxLabels+1 || len(resp) > maxLabels+4 {
			t.Fatalf("%d + %d statements", len(from), len(resp))
		}
		all := append(from, resp...)
		for _, s := range all {
			if len(s.Text) > maxText {
				t.Fatalf("Text of %d bytes", len(s.Text))
			}
			if !s.Unread && !known(s.Form, s.Label) {
				t.Fatalf("statement of an unknown label: %+v", s)
			}
		}
		if again := append(FromRobots(lines), FromResponse(h, token)...); !reflect.DeepEqual(all, again) {
			t.Fatalf("not deterministic:\n%+v\n%+v", all, again)
		}
		for i := range purposes {
			v := Judge(purposes[i:i+1], all)
			if v != Judge(purposes[i:i+1], all) {
				t.Fatal("Judge not deterministic")
			}
			if v.Refused {
				if v.Purpose != purposes[i] || v.By.Allows {
					t.Fatalf("verdict %+v", v)
				}
				// An unread line refuses every purpose the vocabulary knows.
				if _, ok := depth(v.By.Form, v.By.Label, v.Purpose); !ok && !v.By.Unread {
					t.Fatalf("refused by a statement that does not speak for %s: %+v", v.Purpose, v.By)
				}
			}
			if purposes[i] == "archive" && v.Refused {
				t.Fatalf("a purpose no row names refused: %+v", v)
			}
		}
	})
}

// fuzzLines reads "u [path ]value" (Content-Usage) and "s value"
// (Content-Signal) lines; others are Allow lines, which carry no usage.
func fuzzLines(text string) []robots.UsageLine {
	var lines []robots.UsageLine
	for i, l := range strings.Split(text, "\n") {
		kind, value, _ := strings.Cut(l, " ")
		u := robots.UsageLine{Line: i + 1, Value: value, Directive: robots.DirectiveAllow}
		switch kind {
		case "u":
			u.Directive = robots.DirectiveContentUsage
			if strings.HasPrefix(value, "/") {
				u.Path, u.Value, _ = strings.Cut(value, " ")
			}
		case "s":
			u.Directive = robots.DirectiveContentSignal
		}
		lines = append(lines, u)
	}
	return lines
}

// fuzzHeader reads "Name: value" lines, names canonicalised as net/http does.
func fuzzHeader(text string) http.Header {
	h := http.Header{}
	for _, l := range strings.Split(text, "\n") {
		if name, value, ok := strings.Cut(l, ":"); ok {
			h.Add(name, strings.TrimLeft(value, " "))
		}
	}
	return h
}
