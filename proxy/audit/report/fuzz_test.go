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
	f.Add([]byte(`{"time":"2026-11-25T10:00:00Z","verdict":"disallow","origin":"x","policy":{"file":"p.yaml","line":3,"kind":"rule","rule":"Disallow: /a"},"policy_version":"v1","purposes":["search","search"]}` + "\n" +
		`{"time":"2026-11-25T10:00:01Z","verdict":"disallow","denied_destination":true,"forwarded":true,"policy":{"kind":"destination"},"policy_version":"v1"}` + "\n" +
		`{"time":"2026-11-25T10:00:02Z","verdict":"allow","origin":"y","credential":"c","policy":{"file":"p.yaml","line":9,"kind":"exception","rule":"/r/","reason":"ok"},"policy_version":"v2"}` + "\n" +
		`{"time":"2026-11-25T10:00:03Z","verdict":"allow","pace":"busy","policy":{"kind":"max-concurrency"}}` + "\n" +
		`{"time":"2026-11-25T10:00:04Z","verdict":"error","policy":{"kind":"rule"},"policy_version":"v2"}`))
	f.Add([]byte(`{"time":"2026-11-25T10:00:00Z","verdict":"disallow","origin":"x","usage":{"form":"content-usage","line":7,"label":"train-ai","value":"n","purpose":"ai-train","verdict":"refused"},"usage_stated":["content-usage train-ai=n","content-usage train-ai=n"]}` + "\n" +
		`{"time":"2026-11-25T10:00:01Z","verdict":"allow","origin":"x","forwarded":true,"usage":{"form":"tdmrep","header":"Tdm-Reservation","label":"tdm-reservation","value":"1","purpose":"ai-train","verdict":"withheld"}}` + "\n" +
		`{"time":"2026-11-25T10:00:02Z","verdict":"disallow","origin":"y","pace":"busy","usage":{"form":"content-signal","verdict":"recorded"},"usage_stated":["a","b"]}` + "\n" +
		`{"time":"2026-11-25T10:00:03Z","verdict":"allow","usage":{"verdict":"refused"},"policy":{"kind":"rule"}}`))
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
		// What the policy did is a part of what is counted: the refusals
		// of robots.txt and of the policy add up to the refusals.
		checkPolicyParts := func(what string, c *Counts) {
			if c.RefusedByPolicy < 0 || c.RefusedByPolicy > c.Refused || c.WouldBeRefusedByPolicy < 0 || c.WouldBeRefusedByPolicy > c.WouldBeRefused ||
				c.AllowedByException < 0 || c.AllowedByException > c.Allowed || c.PacedByPolicy < 0 || c.PacedByPolicy > c.Delayed+c.TooEarly+c.WouldBeTooEarly {
				t.Fatalf("%s: the policy's parts exceed their wholes: %+v", what, c)
			}
		}
		checkPolicyParts("totals", &rep.Totals)
		var byPolicy Counts
		for i := range rep.Crawlers {
			c := &rep.Crawlers[i]
			checkPolicyParts(c.Name, &c.Counts)
			byPolicy.merge(&c.Counts)
		}
		if byPolicy.RefusedByPolicy != rep.Totals.RefusedByPolicy || byPolicy.WouldBeRefusedByPolicy != rep.Totals.WouldBeRefusedByPolicy ||
			byPolicy.AllowedByException != rep.Totals.AllowedByException || byPolicy.PacedByPolicy != rep.Totals.PacedByPolicy {
			t.Fatalf("the crawlers' policy counts %+v do not add up to the totals %+v", byPolicy, rep.Totals)
		}
		for i := range rep.Origins {
			checkPolicyParts(rep.Origins[i].Origin, &rep.Origins[i].Counts)
			if o := &rep.Origins[i]; len(o.UsageStated) > maxStated {
				t.Fatalf("%s keeps %d usage preferences", o.Origin, len(o.UsageStated))
			}
		}
		// What usage preferences did is a part of what is counted too,
		// and every such request is in one usage refusal listed, or
		// counted as omitted.
		c := &rep.Totals
		if c.RefusedByUsage < 0 || c.RefusedByPolicy+c.RefusedByUsage > c.Refused || c.WithheldByUsage < 0 || c.WithheldByUsage > c.Allowed ||
			c.WouldBeRefusedByUsage < 0 || c.WithheldByUsage+c.WouldBeRefusedByUsage > c.Allowed+c.WouldBeRefused {
			t.Fatalf("the usage parts exceed their wholes: %+v", c)
		}
		listed := rep.UsageRefusalsOmitted
		for _, u := range rep.UsageRefusals {
			listed += u.Requests
			if u.Refused+u.Withheld+u.Recorded != u.Requests || u.From.After(u.To) || len(u.Crawlers) > crawlerValuesShown {
				t.Fatalf("usage refusal %+v", u)
			}
		}
		if listed != c.RefusedByUsage+c.WithheldByUsage+c.WouldBeRefusedByUsage || len(rep.UsageRefusals) > 5 {
			t.Fatalf("%d usage refusals count %d requests (%d omitted), the totals %+v", len(rep.UsageRefusals), listed, rep.UsageRefusalsOmitted, c)
		}
		// Every request an exception allowed is in one listed exception,
		// or counted as omitted; every record in one version, when any
		// is listed.
		used := rep.ExceptionsOmitted
		for _, e := range rep.Exceptions {
			used += e.Requests
			if e.From.After(e.To) || len(e.Origins) > crawlerValuesShown || len(e.Crawlers) > crawlerValuesShown {
				t.Fatalf("exception %+v", e)
			}
		}
		if used != rep.Totals.AllowedByException || len(rep.Exceptions) > maxExceptions {
			t.Fatalf("%d exceptions used %d times (%d omitted), %d allowed by exception", len(rep.Exceptions), used, rep.ExceptionsOmitted, rep.Totals.AllowedByException)
		}
		versions := rep.PolicyVersionsOmitted
		for _, v := range rep.PolicyVersions {
			versions += v.Requests
		}
		if len(rep.PolicyVersions) > maxPolicyVersions || (len(rep.PolicyVersions) > 0 || rep.PolicyVersionsOmitted > 0) && versions != rep.Records {
			t.Fatalf("%d versions count %d records of %d", len(rep.PolicyVersions), versions, rep.Records)
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
