package usage

import (
	"net/http"
	"os"
	"strings"
	"testing"

	"robotsgate/robots"
)

// The manual's vocabulary table lists every row of the vocabulary.
func TestREADMEListsVocabulary(t *testing.T) {
	b, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]string{} // "form label" → table line
	for _, l := range strings.Split(string(b), "\n") {
		cells := strings.Split(l, "|")
		if len(cells) > 3 {
			rows[strings.TrimSpace(cells[1])+" "+strings.Trim(strings.TrimSpace(cells[2]), "`")] = l
		}
	}
	for _, r := range Vocabulary() {
		l, ok := rows[r.Form.String()+" "+r.Label]
		if !ok || !strings.Contains(l, r.Purpose) {
			t.Errorf("README.md has no row for %s %s → %s", r.Form, r.Label, r.Purpose)
		}
	}
}

// The manual's worked examples, as a search and a training crawler get them.
func TestREADMEExamples(t *testing.T) {
	tests := []struct {
		name            string
		lines           []robots.UsageLine
		h               http.Header
		token           string
		search, aiTrain bool // refused
		by              string
	}{
		{"path-scoped, other path", []robots.UsageLine{cu(3, "", "train-ai=n")}, nil, "GPTBot", false, true, "Content-Usage: train-ai=n"},
		{"path-scoped, /ai-ok/", []robots.UsageLine{cu(4, "/ai-ok/", "train-ai=y")}, nil, "GPTBot", false, false, ""},
		{"older hierarchy", []robots.UsageLine{cu(2, "", "bots=n, search=y")}, nil, "GPTBot", false, true, "Content-Usage: bots=n, search=y"},
		{"header", nil, http.Header{"Content-Usage": {"train-ai=n, search=y"}}, "GPTBot", false, true, "Content-Usage: train-ai=n, search=y"},
		{"cloudflare default", []robots.UsageLine{cs(2, "search=yes,ai-train=no")}, nil, "GPTBot", false, true, "Content-Signal: search=yes,ai-train=no"},
		{"tdmrep", nil, http.Header{"Tdm-Reservation": {"1"}}, "GPTBot", false, true, "tdm-reservation: 1"},
		{"noai for GPTBot", nil, http.Header{"Content-Type": {"image/png"}, "X-Robots-Tag": {"noindex, gptbot: noai"}}, "GPTBot", false, true, "X-Robots-Tag: noindex, gptbot: noai"},
		{"noai, another crawler", nil, http.Header{"Content-Type": {"image/png"}, "X-Robots-Tag": {"noindex, gptbot: noai"}}, "CCBot", false, false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := append(FromRobots(tt.lines), FromResponse(tt.h, tt.token)...)
			if v := Judge([]string{PurposeSearch}, st); v.Refused != tt.search {
				t.Errorf("search: %+v", v)
			}
			v := Judge([]string{PurposeAITrain}, st)
			if v.Refused != tt.aiTrain || v.By.Text != tt.by {
				t.Errorf("ai-train: %+v, want refused %v by %q", v, tt.aiTrain, tt.by)
			}
		})
	}
}
