package fetch

import (
	"context"
	"errors"
	"io/fs"
	"log/slog"

	"robotsgate/cache"
	"robotsgate/robots"
	"robotsgate/robots/fetch/egress"
)

// Load fetches origin's robots.txt for the rules cache (it is a
// [cache.LoadFunc]): an unreachable robots.txt is a transient failure (a
// good copy fetched before keeps being obeyed, and the fetch is retried
// soon); any other outcome is kept for as long as the origin's
// Cache-Control or Expires asks, within the cache's bounds. Each fetch is
// logged at debug level. With [Options.Share] the result is also encoded
// for a fleet's shared store (see [Fetcher.Decode]).
func (f *Fetcher) Load(ctx context.Context, origin string) cache.Result[*Result] {
	res, body := f.fetchBody(ctx, origin)
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
	if f.opts.Share {
		r.Shared = f.share(ctx, origin, res, body)
	}
	return r
}

// share encodes res, loaded for the key origin, for a shared store, or
// returns nil when other instances must not have it: a failure of this
// instance's own (see localCause), which another instance would take for
// the origin's and refuse it for; a result under a key that is not its
// canonical origin, which would never decode.
func (f *Fetcher) share(ctx context.Context, origin string, res *Result, body []byte) []byte {
	if localCause(res.Err) || res.Origin != origin {
		return nil
	}
	data, err := encodeShared(res, body)
	if err != nil {
		f.opts.Logger.WarnContext(ctx, "robots.txt kept in this instance only", "origin", origin, "err", err)
		return nil
	}
	return data
}

// localCause reports a fetch that failed for a reason of this instance's,
// which says nothing of the origin: its destination policy refused the
// connection (another instance may have another policy), its upstream
// proxy failed or it could not check a name before handing it to that
// proxy, it had no free fetch slot, or the fetch was cancelled.
func localCause(err error) bool {
	_, upstreamFailed := errors.AsType[*egress.Error](err)
	return upstreamFailed || errors.Is(err, fs.ErrPermission) || errors.Is(err, errNoSlot) || errors.Is(err, context.Canceled)
}
