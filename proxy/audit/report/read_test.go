package report

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"
)

// gzipped is data compressed as logrotate's compress does.
func gzipped(tb testing.TB, data []byte) []byte {
	tb.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(data); err != nil {
		tb.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes()
}

func TestMalformedLines(t *testing.T) {
	good := strings.TrimSuffix(string(encode(t, allowed(t0))), "\n")
	lines := []string{
		good,                                 // 1
		"not json",                           // 2
		"",                                   // 3: blank, skipped
		good,                                 // 4
		`{"time":"2026-11-25T10:00:00Z"}`,    // 5: no verdict
		`{"verdict":"allow","url":"/x"}`,     // 6: no time
		`{"time":"yesterday","verdict":"x"}`, // 7
		"   \t ",                             // 8: blank
		`[1,2,3]`,                            // 9
		`{"time":"2026-11-25T10:00:00Z","verdict":"allow"`, // 10: cut short inside the log
	}
	for range 8 { // 11 to 18
		lines = append(lines, "{")
	}
	lines = append(lines, good) // 19
	_, rep := readLogs(t, Options{}, []byte(strings.Join(lines, "\n")+"\n"))
	if rep.Records != 3 || rep.Malformed != 14 || rep.Sources[0].Lines != 19 || rep.Sources[0].Truncated {
		t.Errorf("%d records, %d malformed, source %+v; want 3, 14, 19 lines", rep.Records, rep.Malformed, rep.Sources[0])
	}
	var got []int64
	for _, p := range rep.Problems {
		got = append(got, p.Line)
		if p.Source != "log1" || p.Error == "" {
			t.Errorf("problem %+v", p)
		}
	}
	if want := []int64{2, 5, 6, 7, 9, 10, 11, 12, 13, 14}; !reflect.DeepEqual(got, want) {
		t.Errorf("malformed lines listed %v, want %v", got, want)
	}
	if rep.Problems[1].Error != errNotRecord.Error() || rep.Problems[2].Error != errNotRecord.Error() {
		t.Errorf("a record without a time or a verdict: %q, %q", rep.Problems[1].Error, rep.Problems[2].Error)
	}
}

func TestLastLine(t *testing.T) {
	log := encode(t, allowed(t0), allowed(t0.Add(time.Second)))
	whole := log[:len(log)-1] // the last record, without its line break
	for _, c := range []struct {
		name      string
		log       []byte
		records   int64
		lines     int64
		truncated bool
	}{
		{"with its line break", log, 2, 2, false},
		{"without a line break, whole", whole, 2, 2, false},
		{"without a line break, cut", whole[:len(whole)-10], 1, 2, true},
		{"cut after one byte", append(append([]byte{}, encode(t, allowed(t0))...), '{'), 1, 2, true},
		{"blank after the last line break", append(append([]byte{}, log...), "  "...), 2, 3, false},
		{"empty", nil, 0, 0, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, rep := readLogs(t, Options{}, c.log)
			src := rep.Sources[0]
			if rep.Records != c.records || src.Lines != c.lines || src.Truncated != c.truncated || rep.Malformed != 0 {
				t.Errorf("%d records, %d malformed, source %+v; want %d records, %d lines, truncated %v",
					rep.Records, rep.Malformed, src, c.records, c.lines, c.truncated)
			}
		})
	}
}

// Logs edited or copied on Windows end their lines in CRLF.
func TestCRLF(t *testing.T) {
	log := sampleLog(t, 500)
	crlf := bytes.ReplaceAll(log, []byte("\n"), []byte("\r\n"))
	crlf = append(crlf, "\r\n\r\n"...) // blank lines
	// Cut between the last record's CR and LF.
	noLF := crlf[:len(crlf)-len("\n\r\n\r\n")]
	_, want := readLogs(t, Options{}, log)
	for name, log := range map[string][]byte{"CRLF": crlf, "last line without LF": noLF} {
		t.Run(name, func(t *testing.T) {
			_, rep := readLogs(t, Options{}, log)
			if rep.Records != 500 || rep.Malformed != 0 || rep.Sources[0].Truncated {
				t.Fatalf("%d records, %d malformed %v, truncated %v", rep.Records, rep.Malformed, rep.Problems, rep.Sources[0].Truncated)
			}
			rep.Sources, want.Sources = nil, nil
			if !reflect.DeepEqual(rep, want) {
				t.Errorf("the report differs from that of the log with LF")
			}
		})
	}
}

// padded is a record padded to n bytes, line break included.
func padded(tb testing.TB, n int) []byte {
	tb.Helper()
	line := encode(tb, allowed(t0))
	prefix := `{"pad":"`
	fill := n - (len(prefix) + len(`",`) + len(line) - 1) // line's { is not repeated
	return []byte(prefix + strings.Repeat("x", fill) + `",` + string(line[1:]))
}

func TestLongLines(t *testing.T) {
	good := encode(t, allowed(t0))
	for _, c := range []struct {
		name      string
		log       []byte
		records   int64
		malformed []int64
	}{
		{"just within the bound", append(padded(t, maxLine), good...), 2, nil},
		{"past the bound", append(append(append([]byte{}, good...), padded(t, maxLine+2)...), good...), 2, []int64{2}},
		{"far past the bound", bytes.Join([][]byte{good, padded(t, 5*maxLine), good, padded(t, maxLine+2), good}, nil), 3, []int64{2, 4}},
		{"the last line, without a line break", append(append([]byte{}, good...), bytes.TrimSuffix(padded(t, 3*maxLine), []byte("\n"))...), 1, []int64{2}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, rep := readLogs(t, Options{}, c.log)
			var lines []int64
			for _, p := range rep.Problems {
				lines = append(lines, p.Line)
			}
			if rep.Records != c.records || !reflect.DeepEqual(lines, c.malformed) || rep.Sources[0].Truncated {
				t.Errorf("%d records, malformed lines %v, truncated %v; want %d records, malformed %v",
					rep.Records, lines, rep.Sources[0].Truncated, c.records, c.malformed)
			}
		})
	}
}

// endless is a line that never ends: bytes of x, n of them.
type endless struct{ n int64 }

func (e *endless) Read(p []byte) (int, error) {
	if e.n <= 0 {
		return 0, io.EOF
	}
	n := min(int64(len(p)), e.n)
	for i := range p[:n] {
		p[i] = 'x'
	}
	e.n -= n
	return int(n), nil
}

// A long line is skipped, not held: reading a 256 MiB line allocates a
// small fraction of it.
func TestLongLineNotHeld(t *testing.T) {
	const size = 256 << 20
	log := io.MultiReader(bytes.NewReader(encode(t, allowed(t0))), &endless{n: size}, strings.NewReader("\n"), bytes.NewReader(encode(t, allowed(t0))))
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	rd := NewReader(Options{})
	if err := rd.Read(context.Background(), "log", log); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	if rep := rd.Report(); rep.Records != 2 || rep.Malformed != 1 {
		t.Errorf("%d records, %d malformed", rep.Records, rep.Malformed)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > size/8 {
		t.Errorf("reading a %d MiB line allocated %d MiB", size>>20, alloc>>20)
	}
}

func TestGzip(t *testing.T) {
	log := sampleLog(t, 1000)
	_, plain := readLogs(t, Options{}, log)
	for _, name := range []string{"audit.jsonl", "audit.jsonl.gz", "audit.log.1"} {
		t.Run(name, func(t *testing.T) {
			rd := NewReader(Options{Now: plain.Generated})
			if err := rd.Read(context.Background(), name, bytes.NewReader(gzipped(t, log))); err != nil {
				t.Fatal(err)
			}
			rep := rd.Report()
			if want := (Source{Name: name, Lines: 1000, Gzip: true}); !reflect.DeepEqual(rep.Sources, []Source{want}) {
				t.Errorf("sources %+v, want %+v", rep.Sources, want)
			}
			rep.Sources = plain.Sources
			if !reflect.DeepEqual(rep, plain) {
				t.Errorf("the report of the gzip log differs from that of the plain one")
			}
		})
	}
	// A plain log named .gz is read as it is.
	rd := NewReader(Options{})
	if err := rd.Read(context.Background(), "audit.jsonl.gz", bytes.NewReader(log)); err != nil {
		t.Fatal(err)
	}
	if rep := rd.Report(); rep.Records != 1000 || rep.Sources[0].Gzip {
		t.Errorf("a plain log named .gz: %d records, source %+v", rep.Records, rep.Sources[0])
	}
}

func TestGzipCut(t *testing.T) {
	log := sampleLog(t, 5000)
	z := gzipped(t, log)
	for _, c := range []struct {
		name   string
		cut    int
		middle bool
	}{
		{"in the middle", len(z) / 2, true},
		{"before its trailer", len(z) - 4, false},
		{"in its header", 5, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			cut := z[:c.cut]
			// What can be decompressed before the cut: its whole lines
			// are what must count.
			var whole int64
			if zr, err := gzip.NewReader(bytes.NewReader(cut)); err == nil {
				partial, _ := io.ReadAll(zr)
				whole = int64(bytes.Count(partial, []byte("\n")))
			}
			rd := NewReader(Options{})
			err := rd.Read(context.Background(), "audit.jsonl.gz", bytes.NewReader(cut))
			if err == nil {
				t.Fatal("Read of a cut gzip stream succeeded")
			}
			rep := rd.Report()
			src := rep.Sources[0]
			if src.Error != err.Error() || !strings.Contains(src.Error, "audit.jsonl.gz") {
				t.Errorf("source error %q, Read said %q", src.Error, err)
			}
			if rep.Records != whole || rep.Malformed != 0 {
				t.Errorf("%d records, %d malformed; want %d, the lines before the cut", rep.Records, rep.Malformed, whole)
			}
			if c.middle && (whole == 0 || whole >= 5000) {
				t.Errorf("%d whole lines before a cut in the middle", whole)
			}
		})
	}
}

// The files of a rotated log are one log.
func TestSourcesAddUp(t *testing.T) {
	log := sampleLog(t, 3000)
	// Incidents that run from one file into the next.
	var more []byte
	for i := range 6 {
		r := allowed(t0.Add(2 * time.Hour).Add(time.Duration(i) * time.Second))
		if i > 0 && i < 5 {
			r.RobotsOutcome = "unreachable"
		}
		more = append(more, encode(t, r)...)
	}
	log = append(log, more...)
	lines := bytes.SplitAfter(log, []byte("\n"))
	lines = lines[:len(lines)-1] // after the last line break
	third := len(lines) / 3
	parts := [][]byte{bytes.Join(lines[:third], nil), bytes.Join(lines[third:len(lines)-3], nil), bytes.Join(lines[len(lines)-3:], nil)}
	_, one := readLogs(t, Options{}, log)
	_, three := readLogs(t, Options{}, parts...)
	if len(three.Sources) != 3 || three.Sources[0].Lines+three.Sources[1].Lines+three.Sources[2].Lines != one.Sources[0].Lines {
		t.Errorf("sources %+v, one log of %d lines", three.Sources, one.Sources[0].Lines)
	}
	one.Sources, three.Sources = nil, nil
	if !reflect.DeepEqual(one, three) {
		t.Errorf("three parts of a log make another report than the log")
	}
	for _, o := range three.Origins {
		if o.Origin == "https://example.com" && (len(o.Incidents) != 1 || o.Incidents[0].Requests != 4) {
			t.Errorf("incidents %+v, want one of 4 requests", o.Incidents)
		}
	}
}

// Reading the next file of a log changes no report already made.
func TestReportIsASnapshot(t *testing.T) {
	down := allowed(t0)
	down.RobotsOutcome, down.RobotsStatus = "unreachable", 503
	rd, before := readLogs(t, Options{}, append(encode(t, down), "junk\n"...))
	want, err := jsonOf(before)
	if err != nil {
		t.Fatal(err)
	}
	down.Time, down.RobotsStatus = t0.Add(time.Second), 500
	if err := rd.Read(context.Background(), "next", bytes.NewReader(append(encode(t, down), "junk\n"...))); err != nil {
		t.Fatal(err)
	}
	got, err := jsonOf(before)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("a report changed as the next log was read:\n%s\nwas:\n%s", got, want)
	}
}

func jsonOf(rep *Report) ([]byte, error) {
	var buf bytes.Buffer
	err := WriteJSON(&buf, rep)
	return buf.Bytes(), err
}

// cancelling is a log without end that cancels its reader's context
// once it has given some of it.
type cancelling struct {
	log    []byte
	at     int
	after  int
	cancel context.CancelFunc
}

func (c *cancelling) Read(p []byte) (int, error) {
	if c.at >= c.after {
		c.cancel()
	}
	n := 0
	for n < len(p) {
		k := copy(p[n:], c.log[c.at%len(c.log):])
		n += k
		c.at += k
	}
	return n, nil
}

func TestCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rd := NewReader(Options{})
	err := rd.Read(ctx, "endless", &cancelling{log: sampleLog(t, 100), after: 4 << 20, cancel: cancel})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Read of an endless log, its context cancelled: %v", err)
	}
	rep := rd.Report()
	if rep.Sources[0].Error != err.Error() {
		t.Errorf("source %+v", rep.Sources[0])
	}
	if rep.Malformed != 0 || rep.Records == 0 {
		t.Errorf("%d records, %d malformed", rep.Records, rep.Malformed)
	}
}
