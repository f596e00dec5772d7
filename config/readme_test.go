package config

import (
	"os"
	"strings"
	"testing"
)

// config/README.md's table must list every variable with its
// default and its description, so the documentation cannot drift from the
// code: the struct tags are the source, config/README.md the copy.
func TestReadmeListsEveryVariable(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	type row struct{ def, desc string }
	rows := make(map[string]row)
	for line := range strings.Lines(string(readme)) {
		cells := strings.Split(line, "|")
		if len(cells) < 5 || !strings.HasPrefix(strings.TrimSpace(cells[1]), "`ROBOTSGATE_") {
			continue
		}
		rows[strings.Trim(strings.TrimSpace(cells[1]), "`")] = row{
			// A derived default's words may wrap names too.
			def: strings.ReplaceAll(strings.TrimSpace(cells[2]), "`", ""),
			// README wraps names and literal values in backticks, which a
			// struct tag cannot hold; the words must be the same.
			desc: strings.ReplaceAll(strings.TrimSpace(cells[3]), "`", ""),
		}
	}
	for _, v := range Variables() {
		r, ok := rows[v.Name]
		if !ok {
			t.Errorf("config/README.md's table does not list %s", v.Name)
			continue
		}
		delete(rows, v.Name)
		if r.def != v.Default {
			t.Errorf("config/README.md gives %s the default %q; the code's is %q", v.Name, r.def, v.Default)
		}
		if r.desc != v.Description {
			t.Errorf("config/README.md describes %s as\n\t%q\nits desc tag says\n\t%q", v.Name, r.desc, v.Description)
		}
	}
	for name := range rows {
		t.Errorf("config/README.md lists %s, which is not a setting", name)
	}
}
