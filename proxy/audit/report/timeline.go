package report

import (
	"fmt"
	"time"
)

// The timeline counts records in fine buckets whose width grows along
// fineWidths whenever more than maxFineBuckets are in use: a log of any
// span costs at most that many buckets. Each width divides the next, so
// buckets merge exactly, and all are aligned on the Unix epoch (UTC).
var fineWidths = [...]time.Duration{
	time.Second, 10 * time.Second, time.Minute, 10 * time.Minute, time.Hour, 24 * time.Hour,
	10 * 24 * time.Hour, 100 * 24 * time.Hour, 1000 * 24 * time.Hour, 10000 * 24 * time.Hour,
	100000 * 24 * time.Hour,
}

const maxFineBuckets = 4096

// timelineBars is how many intervals the timeline has at most (unless a
// log spans more than 60 times the widest interval).
const timelineBars = 60

// niceIntervals are the intervals a reader expects; the report picks the
// smallest that keeps the timeline within timelineBars and is a multiple
// of the fine width.
var niceIntervals = [...]time.Duration{
	time.Second, 2 * time.Second, 5 * time.Second, 10 * time.Second, 15 * time.Second, 30 * time.Second,
	time.Minute, 2 * time.Minute, 5 * time.Minute, 10 * time.Minute, 15 * time.Minute, 30 * time.Minute,
	time.Hour, 2 * time.Hour, 3 * time.Hour, 6 * time.Hour, 12 * time.Hour,
	24 * time.Hour, 2 * 24 * time.Hour, 10 * 24 * time.Hour, 30 * 24 * time.Hour, 100 * 24 * time.Hour,
	1000 * 24 * time.Hour, 10000 * 24 * time.Hour, 100000 * 24 * time.Hour,
}

type timeline struct {
	width   int // index in fineWidths
	buckets map[int64]*Counts
}

func newTimeline() *timeline { return &timeline{buckets: make(map[int64]*Counts)} }

// bucket returns the counts of the fine bucket holding at.
func (tl *timeline) bucket(at time.Time) *Counts {
	key := floorDiv(at.Unix(), int64(fineWidths[tl.width]/time.Second))
	if b, ok := tl.buckets[key]; ok {
		return b
	}
	b := &Counts{}
	tl.buckets[key] = b
	if len(tl.buckets) > maxFineBuckets && tl.width < len(fineWidths)-1 {
		tl.coarsen()
		return tl.bucket(at)
	}
	return b
}

// coarsen merges the buckets into the next width.
func (tl *timeline) coarsen() {
	for len(tl.buckets) > maxFineBuckets && tl.width < len(fineWidths)-1 {
		factor := int64(fineWidths[tl.width+1] / fineWidths[tl.width])
		tl.width++
		merged := make(map[int64]*Counts, len(tl.buckets)/int(factor)+1)
		for key, b := range tl.buckets {
			k := floorDiv(key, factor)
			if m, ok := merged[k]; ok {
				m.merge(b)
			} else {
				merged[k] = b
			}
		}
		tl.buckets = merged
	}
}

// result lays the buckets out from..to at the interval chosen for the
// span, empty intervals included.
func (tl *timeline) result(from, to time.Time) Timeline {
	fine := fineWidths[tl.width]
	// Bars are counted in whole intervals from the epoch, not from
	// to.Sub(from), which stops at 292 years: a log whose clock went wrong
	// may span more.
	interval := niceIntervals[len(niceIntervals)-1]
	for _, d := range niceIntervals {
		step := int64(d / time.Second)
		if d%fine == 0 && floorDiv(to.Unix(), step)-floorDiv(from.Unix(), step) < timelineBars {
			interval = d
			break
		}
	}
	out := Timeline{Interval: durationWords(interval), IntervalSeconds: int64(interval / time.Second), Buckets: []Bucket{}}
	if len(tl.buckets) == 0 {
		return out
	}
	step := int64(interval / time.Second)
	first, last := floorDiv(from.Unix(), step), floorDiv(to.Unix(), step)
	sums := make([]Counts, last-first+1)
	perFine := int64(fine / time.Second)
	for key, b := range tl.buckets {
		i := floorDiv(key*perFine, step) - first
		if i >= 0 && i < int64(len(sums)) {
			sums[i].merge(b)
		}
	}
	// JSON writes years 0 to 9999 only: an interval aligned on the epoch
	// starts before year 0 for a record of the first centuries, or in
	// 10000 for one of 9999 west of UTC; such a start is moved to the edge.
	earliest, latest := time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC).Unix(), time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC).Unix()
	for i := range sums {
		s := &sums[i]
		out.Buckets = append(out.Buckets, Bucket{
			Start:    time.Unix(min(max((first+int64(i))*step, earliest), latest), 0).UTC(),
			Requests: s.Requests, Allowed: s.Allowed, Refused: s.Refused, WouldBeRefused: s.WouldBeRefused,
			TooEarly: s.TooEarly, WouldBeTooEarly: s.WouldBeTooEarly, DeniedDestination: s.DeniedDestination, Errors: s.Errors,
		})
	}
	return out
}

// durationWords writes an interval the way people say it: 10s, 5m, 2h, 1d.
func durationWords(d time.Duration) string {
	switch {
	case d%(24*time.Hour) == 0:
		return fmt.Sprintf("%dd", d/(24*time.Hour))
	case d%time.Hour == 0:
		return fmt.Sprintf("%dh", d/time.Hour)
	case d%time.Minute == 0:
		return fmt.Sprintf("%dm", d/time.Minute)
	}
	return fmt.Sprintf("%ds", d/time.Second)
}

// floorDiv divides rounding towards minus infinity, so times before 1970
// fall in their own bucket.
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}
