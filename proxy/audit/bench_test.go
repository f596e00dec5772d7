package audit

import (
	"errors"
	"io"
	"strings"
	"sync/atomic"
	"testing"
)

// BenchmarkWrite measures what writing a record costs the request that
// makes it (encoding and appending under the lock; the flush loop writes
// to io.Discard on its own), from one goroutine and from 32 at once, as
// concurrent requests write their records. 32 goroutines doing nothing
// else produce records far faster than any proxy serves requests and,
// never blocking, keep the flush loop waiting for a preemption (10 ms):
// the bound on pending records is raised so that no record is dropped
// for that (dropped/op says if one was).
//
// policy is the same record with the operator's policy's fields set, as
// every record is while a policy is loaded.
func BenchmarkWrite(b *testing.B) {
	withPolicy := fullRecord()
	withPolicy.Policy = PolicyFinding{File: "/etc/robotsgate/policy.yaml", Line: 12, Kind: PolicyRule, Rule: "Disallow: /private/", Reason: "asked by mail, 2026-10-01"}
	withPolicy.PolicyVersion, withPolicy.Purposes = "0123456789ab", []string{"search", "ai-train"}
	for _, bc := range []struct {
		name        string
		rec         *Record
		parallelism int
	}{{"serial", fullRecord(), 0}, {"parallel-32", fullRecord(), 16}, {"policy", withPolicy, 0}} {
		rec := bc.rec
		b.Run(bc.name, func(b *testing.B) {
			w := NewWriter(io.Discard, nil, Options{MaxPending: 512 << 20})
			defer w.Close()
			b.ReportAllocs()
			if bc.parallelism == 0 {
				for b.Loop() {
					if err := w.Write(rec); err != nil {
						b.Fatal(err)
					}
				}
				return
			}
			b.SetParallelism(bc.parallelism)
			var dropped atomic.Int64
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					switch err := w.Write(rec); {
					case errors.Is(err, ErrDropped):
						dropped.Add(1)
					case err != nil:
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(dropped.Load())/float64(b.N), "dropped/op")
		})
	}
}

// countingSink counts the bytes written to it.
type countingSink struct{ n atomic.Int64 }

func (c *countingSink) Write(p []byte) (int, error) {
	c.n.Add(int64(len(p)))
	return len(p), nil
}

// BenchmarkWriteLong measures records with a long User-Agent, and the
// bytes each takes in the log (log-B/op): a real one that is within its
// bound but long enough to be measured against it (Googlebot's for
// smartphones, 200 bytes), and a client's 60 KB one of characters JSON
// escapes, which is cut.
func BenchmarkWriteLong(b *testing.B) {
	for _, bc := range []struct{ name, ua string }{
		{"googlebot-smartphone", "Mozilla/5.0 (Linux; Android 6.0.1; Nexus 5X Build/MMB29P) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.6778.204 Mobile Safari/537.36 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)"},
		{"60KB-escaped", strings.Repeat("<>&", 20<<10)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			rec := fullRecord()
			rec.UserAgent = bc.ua
			var sink countingSink
			w := NewWriter(&sink, nil, Options{MaxPending: 512 << 20})
			b.ReportAllocs()
			for b.Loop() {
				if err := w.Write(rec); err != nil {
					b.Fatal(err)
				}
			}
			if err := w.Close(); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(sink.n.Load())/float64(b.N), "log-B/op")
		})
	}
}
