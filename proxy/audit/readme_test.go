package audit

import (
	"os"
	"reflect"
	"strings"
	"testing"
)

// proxy/audit/README.md's field table must document every field of a record.
func TestReadmeDocumentsEveryField(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	documented := make(map[string]bool)
	for line := range strings.Lines(string(readme)) {
		if cells := strings.Split(line, "|"); len(cells) > 2 {
			documented[strings.Trim(strings.TrimSpace(cells[1]), "`")] = true
		}
	}
	for _, f := range reflect.VisibleFields(reflect.TypeFor[cutRecord]()) {
		if f.Anonymous {
			continue // the embedded Decision's own fields follow
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if !documented[name] {
			t.Errorf("audit field %q is not in proxy/audit/README.md's field table", name)
		}
	}
}
