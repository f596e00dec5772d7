package config

import (
	"os"
	"strings"
	"testing"
)

// README.md's configuration table must list every variable with its
// default, so the documentation cannot drift from the code.
func TestReadmeListsEveryVariable(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := make(map[string]string)
	for line := range strings.Lines(string(readme)) {
		cells := strings.Split(line, "|")
		if len(cells) < 4 || !strings.HasPrefix(strings.TrimSpace(cells[1]), "`ROBOTSGATE_") {
			continue
		}
		rows[strings.Trim(strings.TrimSpace(cells[1]), "`")] = strings.Trim(strings.TrimSpace(cells[2]), "`")
	}
	for _, v := range Variables() {
		def, ok := rows[v.Name]
		switch {
		case !ok:
			t.Errorf("README.md's configuration table does not list %s", v.Name)
		case def != v.Default:
			t.Errorf("README.md gives %s the default %q; the code's is %q", v.Name, def, v.Default)
		}
		delete(rows, v.Name)
	}
	for name := range rows {
		t.Errorf("README.md lists %s, which is not a setting", name)
	}
}
