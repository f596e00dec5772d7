package audit

import (
	"errors"
	"io"
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
func BenchmarkWrite(b *testing.B) {
	rec := fullRecord()
	for _, bc := range []struct {
		name        string
		parallelism int
	}{{"serial", 0}, {"parallel-32", 16}} {
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
