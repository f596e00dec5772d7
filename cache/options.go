package cache

import (
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// Defaults applied by New to zero-valued Options fields.
const (
	DefaultMaxBytes      int64         = 64 << 20
	DefaultMaxAge        time.Duration = 24 * time.Hour
	DefaultMinAge        time.Duration = time.Minute
	DefaultRetryAfter    time.Duration = time.Minute
	DefaultMaxRetryAfter time.Duration = 15 * time.Minute
	DefaultMaxStale      time.Duration = 30 * 24 * time.Hour
)

// MinMaxBytes is the smallest accepted memory budget: below it the cache
// could not hold even a couple of values of a few hundred KiB (robots.txt
// files may be parsed up to 500 KiB).
const MinMaxBytes int64 = 1 << 20

// Options configures a Cache. A zero field takes its Default value.
type Options struct {
	// MaxBytes is the memory budget: the sum of Result.Cost plus the
	// cache's own per-entry overhead never exceeds it.
	MaxBytes int64
	// MaxAge is the upper bound on freshness; a result without a freshness
	// preference is kept this long.
	MaxAge time.Duration
	// MinAge is the lower bound on freshness, so that an origin answering
	// "no-store" cannot make every request refetch.
	MinAge time.Duration
	// RetryAfter is how long a failed load is trusted before the next
	// attempt; it doubles with each consecutive failure.
	RetryAfter time.Duration
	// MaxRetryAfter caps the doubling of RetryAfter.
	MaxRetryAfter time.Duration
	// MaxStale is how long, counted from its successful load, a good value
	// keeps being served while later loads fail.
	MaxStale time.Duration
	// Logger receives warnings about failed loads and stale serves;
	// nil discards them.
	Logger *slog.Logger
}

// withDefaults validates o and returns a copy with every zero field set to
// its default. Errors name the offending field.
func (o Options) withDefaults() (Options, error) {
	var errs []error
	durations := []struct {
		name string
		v    *time.Duration
		def  time.Duration
	}{
		{"MaxAge", &o.MaxAge, DefaultMaxAge},
		{"MinAge", &o.MinAge, DefaultMinAge},
		{"RetryAfter", &o.RetryAfter, DefaultRetryAfter},
		{"MaxRetryAfter", &o.MaxRetryAfter, DefaultMaxRetryAfter},
		{"MaxStale", &o.MaxStale, DefaultMaxStale},
	}
	for _, d := range durations {
		switch {
		case *d.v < 0:
			errs = append(errs, fmt.Errorf("%s must not be negative, got %s", d.name, *d.v))
		case *d.v == 0:
			*d.v = d.def
		}
	}
	switch {
	case o.MaxBytes == 0:
		o.MaxBytes = DefaultMaxBytes
	case o.MaxBytes < MinMaxBytes:
		errs = append(errs, fmt.Errorf("MaxBytes must be at least %d (1 MiB), got %d", MinMaxBytes, o.MaxBytes))
	}
	if o.MinAge > 0 && o.MaxAge > 0 && o.MinAge > o.MaxAge {
		errs = append(errs, fmt.Errorf("MinAge (%s) must not exceed MaxAge (%s)", o.MinAge, o.MaxAge))
	}
	if o.RetryAfter > 0 && o.MaxRetryAfter > 0 && o.RetryAfter > o.MaxRetryAfter {
		errs = append(errs, fmt.Errorf("RetryAfter (%s) must not exceed MaxRetryAfter (%s)", o.RetryAfter, o.MaxRetryAfter))
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if err := errors.Join(errs...); err != nil {
		return Options{}, fmt.Errorf("cache: invalid options: %w", err)
	}
	return o, nil
}
