package report

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"testing"
)

// FuzzRead feeds Read any bytes: it must not panic, every line must be
// counted at most once, and each record once in every view of the
// report; writing it as JSON and text must not fail. HTML is left to
// TestWriteHTMLOddReports: html/template's escaper ranges over maps, so
// its coverage changes from run to run, and the fuzzer would spend its
// time minimizing inputs that only seem new.
func FuzzRead(f *testing.F) {
	sample := sampleLog(f, 12)
	lines := bytes.SplitAfter(sample, []byte("\n"))
	// Small seeds: the fuzzer minimizes an input it finds new byte by byte.
	f.Add(bytes.Join(lines[:3], nil))
	f.Add(bytes.ReplaceAll(bytes.Join(lines[3:5], nil), []byte("\n"), []byte("\r\n")))
	f.Add(lines[0][:len(lines[0])/2])
	f.Add(gzipped(f, bytes.Join(lines[5:8], nil)))
	f.Add([]byte("\x1f\x8b"))
	f.Add([]byte("\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"))
	f.Add([]byte("garbage\n\n{\"time\":\"2026-11-25T10:00:00Z\"}\n[]\nnull\n"))
	f.Add([]byte(`{"time":"0001-01-01T00:00:01Z","verdict":"allow"}` + "\n" + `{"time":"9999-12-31T23:59:59Z","verdict":"disallow","origin":"x","robots_outcome":"unreachable"}`))
	f.Add([]byte(`{"time":"1969-12-31T23:59:59.999+23:59","verdict":"error","credential":"c","ua_mismatch":true,"ua_token":null,"pace":"busy","bytes":-9223372036854775808}`))
	f.Add([]byte(`{"time":"2026-11-25T10:00:00Z","verdict":"allow","origin":"x","pace":"held","hold_cause":"retry-after","hold_status":503,"hold_until":"2026-11-25T10:00:03Z","forwarded":false}` + "\n" +
		`{"time":"2026-11-25T10:00:01Z","verdict":"allow","origin":"x","pace":"waited","hold_cause":"backoff","hold_error":"connection refused","backoff_step":2,"forwarded":true,"upstream_status":500}` + "\n" +
		`{"time":"2026-11-25T10:00:02Z","verdict":"allow","origin":"x","pace":"gone","hold_cause":"retry-after","hold_status":503,"hold_origin":"y","hold_at":"2026-11-25T10:00:00Z","forwarded":false}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		rd := NewReader(Options{Top: 5, Now: t0})
		err := rd.Read(context.Background(), "fuzz", bytes.NewReader(data))
		rep := rd.Report()
		src := rep.Sources[0]
		if (err == nil) != (src.Error == "") {
			t.Fatalf("Read said %v, the source %q", err, src.Error)
		}
		if rep.Records+rep.FilteredOut+rep.Malformed > src.Lines {
			t.Fatalf("%d records, %d filtered out, %d malformed of %d lines", rep.Records, rep.FilteredOut, rep.Malformed, src.Lines)
		}
		if int64(len(rep.Problems)) > min(rep.Malformed, maxProblems) {
			t.Fatalf("%d problems listed of %d", len(rep.Problems), rep.Malformed)
		}
		var inTimeline, inCrawlers, inOrigins int64
		for _, b := range rep.Timeline.Buckets {
			inTimeline += b.Requests
		}
		for _, c := range rep.Crawlers {
			inCrawlers += c.Requests
		}
		for _, o := range rep.Origins {
			inOrigins += o.Requests
			var held int64
			for _, h := range o.HoldIncidents {
				held += h.Requests
				if h.Refused+h.Waited+h.Gone+h.Forwarded != h.Requests || h.From.After(h.To) {
					t.Fatalf("hold incident %+v does not add up", h)
				}
			}
			if held > o.Held {
				t.Fatalf("%s: %d requests in hold incidents, %d held", o.Origin, held, o.Held)
			}
		}
		if rep.Totals.Requests != rep.Records || inTimeline != rep.Records || inCrawlers != rep.Records || inOrigins > rep.Records {
			t.Fatalf("%d records; %d requests in all, %d in the timeline, %d by crawler, %d by origin",
				rep.Records, rep.Totals.Requests, inTimeline, inCrawlers, inOrigins)
		}
		if c := rep.Totals; c.Allowed+c.Refused+c.WouldBeRefused+c.DeniedDestination+c.Errors != c.Requests {
			t.Fatalf("totals do not add up: %+v", c)
		}
		if len(rep.Timeline.Buckets) > 2*timelineBars {
			t.Fatalf("%d buckets of %s", len(rep.Timeline.Buckets), rep.Timeline.Interval)
		}
		var out bytes.Buffer
		if err := WriteJSON(&out, rep); err != nil {
			t.Fatal(err)
		}
		var back Report
		if err := json.Unmarshal(out.Bytes(), &back); err != nil {
			t.Fatalf("the JSON report does not read back: %v", err)
		}
		if err := WriteText(io.Discard, rep); err != nil {
			t.Fatal(err)
		}
	})
}
