package fetch

import (
	"context"
	"log/slog"

	"robotsgate/cache"
	"robotsgate/robots"
)

// Load fetches origin's robots.txt for the rules cache (it is a
// [cache.LoadFunc]): an unreachable robots.txt is a transient failure (a
// good copy fetched before keeps being obeyed, and the fetch is retried
// soon); any other outcome is kept for as long as the origin's
// Cache-Control or Expires asks, within the cache's bounds. Each fetch is
// logged at debug level.
func (f *Fetcher) Load(ctx context.Context, origin string) cache.Result[*Result] {
	res := f.Fetch(ctx, origin)
	if log := f.opts.Logger; log.Enabled(ctx, slog.LevelDebug) {
		log.DebugContext(ctx, "fetched robots.txt", "origin", origin, "outcome", res.Outcome.String(),
			"status", res.Status, "bytes", res.Bytes, "truncated", res.Truncated,
			"ignored", res.Robots.IgnoredCount(), "redirects", res.Redirects,
			"duration", res.Duration.String(), "err", res.Err)
	}
	r := cache.Result[*Result]{
		Value:   res,
		Cost:    res.RetainedBytes(),
		Failed:  res.Outcome == robots.OutcomeUnreachable,
		Outcome: res.Outcome.String(),
	}
	if ttl, ok := res.Freshness.TTL(); ok {
		r.MaxAge, r.NoStore = ttl, ttl <= 0
	}
	return r
}
