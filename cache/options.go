package cache

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/common/model"
)

// The values DefaultOptions returns.
const (
	DefaultMaxBytes      int64         = 64 << 20
	DefaultMaxAge        time.Duration = 24 * time.Hour
	DefaultMinAge        time.Duration = time.Minute
	DefaultRetryAfter    time.Duration = time.Minute
	DefaultMaxRetryAfter time.Duration = 15 * time.Minute
	DefaultMaxStale      time.Duration = 30 * 24 * time.Hour
	DefaultMetricsPrefix               = "cache"
)

// MinMaxBytes is the smallest accepted memory budget: below it the cache
// could not hold even a couple of values of a few hundred KiB (robots.txt
// files may be parsed up to 500 KiB).
const MinMaxBytes int64 = 1 << 20

// Options configures a Cache. New uses every field as given: start from
// DefaultOptions and change what differs. A zero duration means zero where
// that is safe (MinAge, MaxStale); where it is not (MaxAge, RetryAfter,
// MaxRetryAfter), New rejects it rather than guess.
type Options struct {
	// MaxBytes is the memory budget: the sum of Result.Cost plus the
	// cache's own per-entry overhead never exceeds it. At least MinMaxBytes.
	MaxBytes int64
	// MaxAge is the upper bound on freshness; a result without a freshness
	// preference is kept this long. It must be positive: a cache keeping
	// nothing fresh would load on every Get.
	MaxAge time.Duration
	// MinAge is the lower bound on freshness, so that an origin answering
	// "no-store" cannot make every request refetch. Zero sets no floor: a
	// NoStore result is loaded again by the next Get. At most MaxAge.
	MinAge time.Duration
	// RetryAfter is how long a failed load is trusted before the next
	// attempt; it doubles with each consecutive failure. It must be
	// positive: the backoff is what spares a failing source a load per Get.
	RetryAfter time.Duration
	// MaxRetryAfter caps the doubling of RetryAfter; at least RetryAfter.
	MaxRetryAfter time.Duration
	// LargestCost is the largest Result.Cost the LoadFunc may produce (0:
	// no promise). A just-loaded value that ristretto's admission policy
	// refuses waits for admission in the admission window (see Cache),
	// which is made large enough to hold a value of this cost, though at
	// most half of MaxBytes; ristretto gets the rest, so the budget stays
	// MaxBytes. A value larger than the window holds (see LargestKept) is
	// served to the Gets that waited for it but may not be cached: then
	// every Get loads it again. Not negative.
	LargestCost int64
	// MaxStale is how long, counted from its successful load, a good value
	// keeps being served while later loads fail. Zero serves no stale
	// value: once a value is past its freshness, a failed load is returned.
	MaxStale time.Duration
	// MetricsPrefix starts the names of the metrics the Cache collects as
	// a prometheus.Collector ("<prefix>_lookups_total" and so on). It must
	// make valid metric names.
	MetricsPrefix string
	// Logger receives warnings about failed loads and stale serves;
	// nil discards them.
	Logger *slog.Logger
}

// DefaultOptions returns the Options a Cache is meant to run with.
func DefaultOptions() Options {
	return Options{
		MaxBytes:      DefaultMaxBytes,
		MaxAge:        DefaultMaxAge,
		MinAge:        DefaultMinAge,
		RetryAfter:    DefaultRetryAfter,
		MaxRetryAfter: DefaultMaxRetryAfter,
		MaxStale:      DefaultMaxStale,
		MetricsPrefix: DefaultMetricsPrefix,
	}
}

// windowDivisor sets the admission window's usual size, 1/windowDivisor
// of MaxBytes: room for the few values ristretto refuses at a time.
const windowDivisor = 16

// windowBytes is the admission window's share of MaxBytes: its usual
// size, or room for a value of LargestCost, whichever is larger, up to
// half of MaxBytes.
func (o Options) windowBytes() int64 {
	return min(max(o.MaxBytes/windowDivisor, o.LargestCost+windowEntryBytes), o.MaxBytes/2)
}

// windowEntryBytes is what an entry held in the admission window costs
// beside its Result.Cost, for a key of up to keyAllowance bytes.
const (
	keyAllowance     = 256 // an origin's length, and then some
	windowEntryBytes = entryOverhead + windowNodeBytes + keyAllowance
)

// LargestKept is the largest Result.Cost the cache always keeps, however
// full it is of other values: what fits in its admission window beside
// the cache's own per-entry overhead (for a key of up to 256 bytes). It is at least LargestCost unless
// LargestCost is more than about half of MaxBytes.
func (o Options) LargestKept() int64 { return o.windowBytes() - windowEntryBytes }

// validate reports every invalid field of o, each error naming its field.
func (o Options) validate() error {
	var errs []error
	if o.MaxBytes < MinMaxBytes {
		errs = append(errs, fmt.Errorf("MaxBytes must be at least %d (1 MiB), got %d", MinMaxBytes, o.MaxBytes))
	}
	if o.LargestCost < 0 {
		errs = append(errs, fmt.Errorf("LargestCost must not be negative, got %d", o.LargestCost))
	}
	durations := []struct {
		name     string
		v        time.Duration
		positive bool
	}{
		{"MaxAge", o.MaxAge, true},
		{"MinAge", o.MinAge, false},
		{"RetryAfter", o.RetryAfter, true},
		{"MaxRetryAfter", o.MaxRetryAfter, true},
		{"MaxStale", o.MaxStale, false},
	}
	for _, d := range durations {
		switch {
		case d.v < 0:
			errs = append(errs, fmt.Errorf("%s must not be negative, got %s", d.name, d.v))
		case d.v == 0 && d.positive:
			errs = append(errs, fmt.Errorf("%s must be positive, got 0", d.name))
		}
	}
	if o.MinAge > o.MaxAge && o.MaxAge > 0 {
		errs = append(errs, fmt.Errorf("MinAge (%s) must not exceed MaxAge (%s)", o.MinAge, o.MaxAge))
	}
	if o.RetryAfter > o.MaxRetryAfter && o.MaxRetryAfter > 0 {
		errs = append(errs, fmt.Errorf("RetryAfter (%s) must not exceed MaxRetryAfter (%s)", o.RetryAfter, o.MaxRetryAfter))
	}
	// Checking one full name checks the prefix: the suffixes are valid.
	if o.MetricsPrefix == "" || !model.LegacyValidation.IsValidMetricName(o.MetricsPrefix+"_bytes") {
		errs = append(errs, fmt.Errorf("MetricsPrefix %q does not make valid metric names (letters, digits, _ and :, not starting with a digit)", o.MetricsPrefix))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("cache: invalid options: %w", err)
	}
	return nil
}
