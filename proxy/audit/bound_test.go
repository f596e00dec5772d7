package audit

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"regexp"
	"robotsgate/robots"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// fieldBounds are the bounds proxy/audit/README.md gives each text
// field, in bytes of the log line.
var fieldBounds = map[string]int{
	"client": 128, "method": 64, "url": 2048, "user_agent": 512, "token": 128,
	"verdict": 64, "reason": 1024, "rule": 512, "group": 128, "reading": 1024,
	"reading_steps": 256, "robots_txt": 512, "robots_outcome": 64, "credential": 128,
	"ua_token": 128, "origin": 512, "tunnel": 512, "robots_cache": 64, "signature_keyid": 64,
	"crawl_delay_source": 64, "pace": 64, "mode": 64, "error": 1024,
	"hold_cause": 64, "hold_error": 256, "hold_origin": 512, "pace_group": 512,
	"policy.file": 256, "policy.kind": 64, "policy.rule": 256, "policy.reason": 256, "policy_version": 64,
	"usage.form": 64, "usage.header": 64, "usage.label": 64, "usage.value": 64, "usage.purpose": 64, "usage.verdict": 64,
}

// markerRE matches a cut value's marker, capturing the length and hash.
var markerRE = regexp.MustCompile(`…\[cut: (\d+) bytes, sha256:([0-9a-f]{16})\]$`)

// textField returns the text field of rec whose JSON name is name, made
// settable (ua_token's pointer is set first); "policy.rule" names a
// member of policy.
func textField(t *testing.T, rec *Record, name string) reflect.Value {
	t.Helper()
	v := reflect.ValueOf(rec).Elem()
	if member, ok := strings.CutPrefix(name, "policy."); ok {
		v, name = v.FieldByName("Policy"), member
	}
	if member, ok := strings.CutPrefix(name, "usage."); ok {
		v, name = v.FieldByName("Usage"), member
	}
	for _, f := range reflect.VisibleFields(v.Type()) {
		if tag, _, _ := strings.Cut(f.Tag.Get("json"), ","); tag != name || f.Anonymous {
			continue
		}
		fv := v.FieldByIndex(f.Index)
		if fv.Kind() == reflect.Pointer {
			fv.Set(reflect.New(fv.Type().Elem()))
			fv = fv.Elem()
		}
		return fv
	}
	t.Fatalf("Record has no field %q", name)
	return reflect.Value{}
}

// writeOne writes rec with opts and returns its line, line break
// included, checked to be one JSON object.
func writeOne(t *testing.T, rec *Record, opts Options) []byte {
	t.Helper()
	var buf lockedBuffer
	w := NewWriter(&buf, nil, opts)
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	line := []byte(buf.String())
	if bytes.Count(line, []byte("\n")) != 1 || !bytes.HasSuffix(line, []byte("\n")) {
		t.Fatalf("want one line, got %q", line)
	}
	if !json.Valid(line) {
		t.Fatalf("not JSON: %q", line)
	}
	return line
}

// rawFields are the JSON values of a line, as written; policy's members
// are named "policy.file", ..., in place of policy.
func rawFields(t *testing.T, line []byte) map[string]json.RawMessage {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(line, &m); err != nil {
		t.Fatal(err)
	}
	for _, object := range []string{"policy", "usage"} {
		raw, ok := m[object]
		if !ok {
			continue
		}
		var members map[string]json.RawMessage
		if err := json.Unmarshal(raw, &members); err != nil {
			t.Fatalf("%s: %v", object, err)
		}
		delete(m, object)
		for k, v := range members {
			m[object+"."+k] = v
		}
	}
	return m
}

func shortHash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:8])
}

// TestEveryTextFieldIsBounded: every string a record holds, the embedded
// Decision's included, has its bound, so that the bounds add up to a
// bound of the record; a field added without one fails here.
func TestEveryTextFieldIsBounded(t *testing.T) {
	var rec Record
	named := make(map[string]bool)
	for _, tx := range rec.texts() {
		named[tx.name] = true
		if fieldBounds[tx.name] != tx.bound {
			t.Errorf("%s is bounded to %d bytes, the table says %d", tx.name, tx.bound, fieldBounds[tx.name])
		}
	}
	check := func(prefix string, typ reflect.Type) {
		for _, f := range reflect.VisibleFields(typ) {
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			typ := f.Type
			if typ.Kind() == reflect.Pointer {
				typ = typ.Elem()
			}
			if typ.Kind() == reflect.String && !named[prefix+name] {
				t.Errorf("text field %q has no bound", prefix+name)
			}
		}
	}
	check("", reflect.TypeFor[Record]())
	check("policy.", reflect.TypeFor[PolicyFinding]())
	if len(named) != len(fieldBounds) {
		t.Errorf("%d fields bounded, the table has %d", len(named), len(fieldBounds))
	}
}

// TestWithinBoundsAgreesWithTexts: the quick check every record goes
// through holds each field to the bound its cut uses, to the byte.
func TestWithinBoundsAgreesWithTexts(t *testing.T) {
	for _, tx := range new(Record).texts() {
		for _, c := range []struct {
			value  string
			within bool
		}{
			{strings.Repeat("a", tx.bound), true},
			{strings.Repeat("a", tx.bound+1), false},
			{strings.Repeat("\x01", tx.bound/6), true},
			{strings.Repeat("\x01", tx.bound/6+1), false},
		} {
			rec := fullRecord()
			textField(t, rec, tx.name).SetString(c.value)
			if got := rec.withinBounds(); got != c.within {
				t.Errorf("%s of %d bytes (%q...): withinBounds %v, want %v", tx.name, len(c.value), c.value[:1], got, c.within)
			}
		}
	}
	rec := fullRecord()
	rec.GroupLines = make([]int, maxGroupLines)
	if !rec.withinBounds() {
		t.Errorf("%d group lines: not within bounds", maxGroupLines)
	}
	if rec.GroupLines = append(rec.GroupLines, 1); rec.withinBounds() {
		t.Errorf("%d group lines: within bounds", maxGroupLines+1)
	}
}

// TestFieldsCutToTheirBounds sets each text field in turn past its bound,
// in characters that JSON escapes or that are not UTF-8 at all, and checks
// that the line holds a start of it, whole characters, within the bound
// once escaped, then a marker with its length and hash; that cut names it
// alone; and that the other fields are as they were.
func TestFieldsCutToTheirBounds(t *testing.T) {
	// exact: every character takes what the Writer counts for it, so
	// the cut value fills its bound but for a character and the marker's
	// digits; \t and \n take two bytes where six are counted.
	values := map[string]struct {
		s     string
		exact bool
	}{
		"ascii":          {strings.Repeat("Mozilla/5.0 (compatible; x) ", 2200), true},
		"html":           {strings.Repeat("<a href=x&y>", 5000), true},
		"quotes":         {strings.Repeat(`"\`, 30000), true},
		"controls":       {strings.Repeat("\x01\x1f", 30000), true},
		"tabs":           {strings.Repeat("\t\n", 30000), false},
		"invalid UTF-8":  {strings.Repeat("\xff\xfe", 30000), true},
		"line separator": {strings.Repeat("\u2028", 20000), true},
		"multibyte":      {strings.Repeat("é€😀", 7000), true},
	}
	for name, bound := range fieldBounds {
		for kind, value := range values {
			t.Run(name+"/"+kind, func(t *testing.T) {
				rec := fullRecord()
				textField(t, rec, name).SetString(value.s)
				before := rawFields(t, writeOne(t, fullRecord(), Options{}))
				got := rawFields(t, writeOne(t, rec, Options{}))

				raw := got[name]
				if n := len(raw) - 2; n > bound || value.exact && n < bound-6-6 {
					t.Errorf("%s takes %d bytes of the line, want at most %d and not much less", name, n, bound)
				}
				var s string
				if err := json.Unmarshal(raw, &s); err != nil {
					t.Fatal(err)
				}
				m := markerRE.FindStringSubmatchIndex(s)
				if m == nil {
					t.Fatalf("%s = %q..., no marker at its end", name, s[:min(len(s), 80)])
				}
				if length, hash := s[m[2]:m[3]], s[m[4]:m[5]]; length != fmt.Sprint(len(value.s)) || hash != shortHash(value.s) {
					t.Errorf("marker says %s bytes, sha256 %s; want %d, %s", length, hash, len(value.s), shortHash(value.s))
				}
				kept := s[:m[0]]
				// JSON reads each byte that is not UTF-8 as U+FFFD.
				if want := strings.Map(func(r rune) rune { return r }, value.s); !strings.HasPrefix(want, kept) {
					t.Errorf("%s keeps %q, not a start of the value", name, kept)
				}
				if !utf8.ValidString(kept) {
					t.Errorf("%s keeps a cut character: %q", name, kept[max(0, len(kept)-8):])
				}
				if !bytes.Equal(got["cut"], []byte(`["`+name+`"]`)) {
					t.Errorf("cut = %s, want [%q]", got["cut"], name)
				}
				for k, v := range before {
					if k != name && !bytes.Equal(got[k], v) {
						t.Errorf("%s changed from %s to %s", k, v, got[k])
					}
				}
			})
		}
	}
}

// TestBoundIsInBytesOfTheLine: a value that takes exactly its bound in
// the line is kept whole, one byte more is cut; escaping counts.
func TestBoundIsInBytesOfTheLine(t *testing.T) {
	const bound = 512 // user_agent's
	for _, c := range []struct {
		name  string
		value string
		whole bool
	}{
		{"at the bound", strings.Repeat("a", bound), true},
		{"one past", strings.Repeat("a", bound+1), false},
		{"escaped, at the bound", strings.Repeat(`"`, bound/2), true},
		{"escaped, one past", strings.Repeat(`"`, bound/2) + "a", false},
		{"not UTF-8, at the bound", strings.Repeat("\xff", bound/6) + strings.Repeat("a", bound%6), true},
		{"not UTF-8, one past", strings.Repeat("\xff", bound/6+1), false},
		{"HTML, as it is", strings.Repeat("<", bound), true},
	} {
		t.Run(c.name, func(t *testing.T) {
			rec := fullRecord()
			rec.UserAgent = c.value
			raw := rawFields(t, writeOne(t, rec, Options{}))
			var ua string
			json.Unmarshal(raw["user_agent"], &ua)
			cut := markerRE.MatchString(ua)
			if cut == c.whole || (raw["cut"] != nil) == c.whole {
				t.Errorf("user_agent %q... (%d bytes of the line): cut %v, cut field %s; want cut %v", ua[:min(len(ua), 20)], len(raw["user_agent"])-2, cut, raw["cut"], !c.whole)
			}
			if len(raw["user_agent"])-2 > bound {
				t.Errorf("user_agent takes %d bytes of the line, more than %d", len(raw["user_agent"])-2, bound)
			}
		})
	}
}

// TestMarkerIsStable pins the marker: its format, and a hash an auditor
// can compute from a value to find its record.
func TestMarkerIsStable(t *testing.T) {
	rec := fullRecord()
	rec.URL = "http://h/" + strings.Repeat("x", 3000)
	var got struct {
		URL string `json:"url"`
	}
	json.Unmarshal(writeOne(t, rec, Options{}), &got)
	const marker = "…[cut: 3009 bytes, sha256:f70a770d5851394b]"
	if !strings.HasSuffix(got.URL, marker) || len(got.URL) != 2048 {
		t.Errorf("url = %q...%q (%d bytes), want 2048 bytes ending in %q", got.URL[:20], got.URL[len(got.URL)-50:], len(got.URL), marker)
	}

	// Two long values that differ only at their end are told apart.
	other := fullRecord()
	other.URL = rec.URL[:len(rec.URL)-1] + "y"
	var second struct {
		URL string `json:"url"`
	}
	json.Unmarshal(writeOne(t, other, Options{}), &second)
	if second.URL == got.URL || len(second.URL) != len(got.URL) {
		t.Errorf("two URLs differing at byte 3009 give %q and %q", got.URL[2000:], second.URL[2000:])
	}
}

// TestGroupLinesBounded: group_lines keeps its first lines, and cut
// says it was cut.
func TestGroupLinesBounded(t *testing.T) {
	rec := fullRecord()
	for i := range 5000 {
		rec.GroupLines = append(rec.GroupLines, i+1)
	}
	var got struct {
		GroupLines []int    `json:"group_lines"`
		Cut        []string `json:"cut"`
	}
	json.Unmarshal(writeOne(t, rec, Options{}), &got)
	if !slices.Equal(got.GroupLines, rec.GroupLines[:maxGroupLines]) || !slices.Equal(got.Cut, []string{"group_lines"}) {
		t.Errorf("group_lines %v, cut %q; want the first %d lines, cut [group_lines]", got.GroupLines, got.Cut, maxGroupLines)
	}
}

// checkPurposes checks that purposes, as written, are maxPurposes values
// each cut within bound bytes of the line.
func checkPurposes(t *testing.T, raw json.RawMessage, bound int) {
	t.Helper()
	var values []json.RawMessage
	if err := json.Unmarshal(raw, &values); err != nil || len(values) != maxPurposes {
		t.Fatalf("purposes = %s, want %d values", raw, maxPurposes)
	}
	for _, v := range values {
		var s string
		json.Unmarshal(v, &s)
		if len(v)-2 > bound || !markerRE.MatchString(s) {
			t.Errorf("a purpose takes %d bytes (%.40s...), want it cut within %d", len(v)-2, v, bound)
		}
	}
}

// TestPurposesBounded: purposes keeps its first maxPurposes values, each
// within its bound, cut names it, and the caller's slice is left as it is.
func TestPurposesBounded(t *testing.T) {
	long := strings.Repeat("p", wordBound+1)
	for _, c := range []struct {
		name     string
		purposes []string
		want     []string // whole values, or the start of one cut
		cut      bool
	}{
		{"within", []string{"archive", "search", strings.Repeat("x", wordBound)}, []string{"archive", "search", strings.Repeat("x", wordBound)}, false},
		{"too many", []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j"}, []string{"a", "b", "c", "d", "e", "f", "g", "h"}, false},
		{"too long", []string{"archive", long}, []string{"archive", long[:wordBound-len(cutMarker(long))] + cutMarker(long)}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			rec := fullRecord()
			rec.Purposes = slices.Clone(c.purposes)
			var got struct {
				Purposes []string `json:"purposes"`
				Cut      []string `json:"cut"`
			}
			json.Unmarshal(writeOne(t, rec, Options{}), &got)
			if !slices.Equal(got.Purposes, c.want) {
				t.Errorf("purposes = %q, want %q", got.Purposes, c.want)
			}
			if wantCut := c.cut || len(c.purposes) > maxPurposes; !slices.Equal(got.Cut, []string{"purposes"}) != !wantCut {
				t.Errorf("cut = %q, want purposes named: %v", got.Cut, wantCut)
			}
			if !slices.Equal(rec.Purposes, c.purposes) {
				t.Errorf("Write changed the record's purposes to %q", rec.Purposes)
			}
		})
	}
}

// worstRecord has every field as long as it can be in the line: text that
// JSON escapes six-fold, numbers of the most digits, thousands of group
// lines, a cut list a caller made up.
func worstRecord() *Record {
	huge := strings.Repeat("\xff\x01\u2028", 30000)
	rec := &Record{
		Time: time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.FixedZone("", -(23*3600+59*60))),
		Decision: robots.Decision{
			RuleLine: math.MinInt, RobotsStatus: math.MinInt,
		},
		UAToken: new(string), UAMismatch: true, PathsChecked: true,
		CrawlDelay: -math.MaxFloat64, CrawlDelayLine: math.MinInt, WaitedMS: -math.MaxFloat64 / 3,
		HoldStatus: math.MinInt, BackoffStep: math.MinInt,
		DeniedDestination: true, Forwarded: true, Status: math.MinInt, Upstream: math.MinInt,
		Bytes: math.MinInt64, Duration: -math.SmallestNonzeroFloat64,
		Policy: PolicyFinding{Line: math.MinInt}, Usage: UsageFinding{Line: math.MinInt},
	}
	for range 1000 {
		rec.Purposes = append(rec.Purposes, huge)
		rec.UsageStated = append(rec.UsageStated, huge)
	}
	rec.HoldAt, rec.HoldUntil = rec.Time, rec.Time
	for i := range 10000 {
		rec.GroupLines = append(rec.GroupLines, math.MinInt+i)
	}
	for _, tx := range rec.texts() {
		if tx.s != nil {
			*tx.s = huge
		}
	}
	return rec
}

// TestRecordCap: the worst record fits in DefaultMaxRecord with every
// field cut to its own bound, so the bounds add up to less than the cap;
// under a lower cap it is written in its short form, within the cap,
// never dropped. The record given is left as it was.
func TestRecordCap(t *testing.T) {
	rec := worstRecord()
	line := writeOne(t, rec, Options{})
	// proxy/audit/README.md says: under 15.5 KiB.
	if len(line) >= 31<<9 || len(line) > DefaultMaxRecord {
		t.Fatalf("the worst record takes %d bytes, want less than 15.5 KiB and DefaultMaxRecord (%d)", len(line), DefaultMaxRecord)
	}
	raw := rawFields(t, line)
	for name, bound := range fieldBounds {
		if n := len(raw[name]) - 2; n > bound || n < bound-10 {
			t.Errorf("%s takes %d bytes, want nearly %d: its own bound, not the short form's", name, n, bound)
		}
	}
	var cut []string
	json.Unmarshal(raw["cut"], &cut)
	if len(cut) != len(fieldBounds)+3 || !slices.Contains(cut, "group_lines") || !slices.Contains(cut, "purposes") || !slices.Contains(cut, "usage_stated") {
		t.Errorf("cut = %q, want every text field, group_lines, purposes and usage_stated", cut)
	}
	checkPurposes(t, raw["purposes"], wordBound)
	checkPurposes(t, raw["usage_stated"], wordBound)
	t.Logf("the worst record takes %d bytes of %d", len(line), DefaultMaxRecord)
	if !reflect.DeepEqual(rec, worstRecord()) {
		t.Error("Write changed the record it was given")
	}

	for _, maxRecord := range []int{MinMaxRecord, 1, 6 << 10} {
		t.Run(fmt.Sprint(maxRecord), func(t *testing.T) {
			limit := max(maxRecord, MinMaxRecord)
			line := writeOne(t, worstRecord(), Options{MaxRecord: maxRecord})
			if len(line) > limit {
				t.Fatalf("%d bytes under a cap of %d", len(line), limit)
			}
			raw := rawFields(t, line)
			for name := range fieldBounds {
				var s string
				json.Unmarshal(raw[name], &s)
				if len(raw[name])-2 > shortText || !markerRE.MatchString(s) {
					t.Errorf("short form's %s = %s, want it cut within %d bytes", name, raw[name], shortText)
				}
			}
			// The decision is all there.
			var got struct {
				Forwarded         bool  `json:"forwarded"`
				DeniedDestination bool  `json:"denied_destination"`
				Status            int   `json:"status"`
				GroupLines        []int `json:"group_lines"`
			}
			json.Unmarshal(line, &got)
			if !got.Forwarded || !got.DeniedDestination || got.Status != math.MinInt || len(got.GroupLines) != maxGroupLines {
				t.Errorf("short form's decision: %+v", got)
			}
			checkPurposes(t, raw["purposes"], shortText)
		})
	}

	// An ordinary record under the least cap is written as it is.
	if got, want := writeOne(t, fullRecord(), Options{MaxRecord: MinMaxRecord}), writeOne(t, fullRecord(), Options{}); !bytes.Equal(got, want) {
		t.Errorf("an ordinary record under MinMaxRecord:\n%s\nwant\n%s", got, want)
	}
}

// TestOrdinaryRecordsAsBefore: a record within its bounds is written as
// json.Marshal wrote it before bounds existed, but for <, > and &, which
// are no longer escaped.
func TestOrdinaryRecordsAsBefore(t *testing.T) {
	html := fullRecord()
	html.URL = "https://example.com/search?q=<b>&lang=en"
	html.UserAgent = "Bot/1.0 (<https://example.com/bot> & friends)"
	withToken := fullRecord()
	empty := ""
	withToken.UAToken, withToken.UAMismatch, withToken.Credential = &empty, true, "crawler-a"
	for name, rec := range map[string]*Record{
		"full":       fullRecord(),
		"html":       html,
		"ua_token":   withToken,
		"minimal":    {Method: "CONNECT", Decision: robots.Decision{URL: "example.com:443", Verdict: "allow"}, Mode: "enforce"},
		"longest UA": {Decision: robots.Decision{UserAgent: strings.Repeat("Mozilla/5.0 ", 42)}}, // 504 bytes
	} {
		t.Run(name, func(t *testing.T) {
			old, err := json.Marshal(rec)
			if err != nil {
				t.Fatal(err)
			}
			want := strings.NewReplacer(`\u003c`, "<", `\u003e`, ">", `\u0026`, "&").Replace(string(old)) + "\n"
			if got := string(writeOne(t, rec, Options{})); got != want {
				t.Errorf("got\n%s\nwant\n%s", got, want)
			}
		})
	}
}

// FuzzRecordBounds writes records with two text fields set to anything:
// the line is one JSON object within DefaultMaxRecord, each field within
// its bound; a field is either whole (as JSON reads it) or a start of it
// and its marker, and cut names it then.
func FuzzRecordBounds(f *testing.F) {
	f.Add(uint8(3), "Mozilla/5.0 (compatible; GPTBot/1.0)", uint8(2), "https://example.com/<a>&b")
	f.Add(uint8(0), strings.Repeat("\xff", 100), uint8(14), strings.Repeat("é", 300))
	f.Add(uint8(6), strings.Repeat("\u2028\x00\"", 200), uint8(21), strings.Repeat(`\`, 600))
	var names []string
	for _, tx := range new(Record).texts() {
		names = append(names, tx.name)
	}
	f.Fuzz(func(t *testing.T, i uint8, a string, j uint8, b string) {
		rec := fullRecord()
		set := map[string]string{}
		for _, c := range []struct {
			i uint8
			v string
		}{{i, a}, {j, b}} {
			name := names[int(c.i)%len(names)]
			textField(t, rec, name).SetString(c.v)
			set[name] = c.v
		}
		line := writeOne(t, rec, Options{})
		if len(line) > DefaultMaxRecord {
			t.Fatalf("%d bytes", len(line))
		}
		raw := rawFields(t, line)
		var cut []string
		json.Unmarshal(raw["cut"], &cut)
		for name, value := range set {
			if len(raw[name])-2 > fieldBounds[name] {
				t.Errorf("%s takes %d bytes, more than %d", name, len(raw[name])-2, fieldBounds[name])
			}
			var s string
			json.Unmarshal(raw[name], &s)
			read := strings.Map(func(r rune) rune { return r }, value)
			if s == read {
				if slices.Contains(cut, name) {
					t.Errorf("%s whole, yet cut names it", name)
				}
				continue
			}
			m := markerRE.FindStringIndex(s)
			if m == nil || !strings.HasPrefix(read, s[:m[0]]) || !slices.Contains(cut, name) || !strings.HasSuffix(s, cutMarker(value)) {
				t.Errorf("%s = %q, cut %q; want %q whole or a start of it and its marker", name, s, cut, value)
			}
		}
	})
}

func cutMarker(value string) string {
	return fmt.Sprintf("…[cut: %d bytes, sha256:%s]", len(value), shortHash(value))
}

// TestPlain checks plain's eight bytes at a time against a byte's
// reading, for every byte value at every place of a word and of the tail.
func TestPlain(t *testing.T) {
	naive := func(s string) bool {
		for i := 0; i < len(s); i++ {
			if c := s[i]; c < 0x20 || c == '"' || c == '\\' || c >= 0x80 {
				return false
			}
		}
		return true
	}
	for _, base := range []string{strings.Repeat("a", 19), strings.Repeat(" ", 19), strings.Repeat("~", 19), strings.Repeat("!", 19)} {
		for at := range len(base) {
			for c := range 256 {
				s := base[:at] + string([]byte{byte(c)}) + base[at+1:]
				if got, want := plain(s), naive(s); got != want {
					t.Errorf("plain(%q) = %v, want %v", s, got, want)
				}
			}
		}
	}
}
