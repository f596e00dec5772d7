package fetch

import (
	"context"
	"errors"
	"io/fs"
	"log/slog"

	"robotsgate/cache"
	"robotsgate/proxy/egress"
	"robotsgate/robots"
)

// Load fetches origin's robots.txt for the rules cache (it is a
// [cache.LoadFunc]): an unreachable robots.txt is a transient failure (a
// good copy fetched before keeps being obeyed, and the fetch is retried
// soon); any other outcome is kept for as long as the origin's
// Cache-Control or Expires asks, within the cache's bounds. A fetch never
// made, for want of a free slot (a *[SlotError]), a body not parsed for
// want of a free parse slot (a *[ParseSlotError]), or a fetch cut short
// because ctx was cancelled, says nothing of the origin: it is discarded
// (cache.Result.Discard), kept nowhere and counted under the outcome
// "no_slot", "no_parse_slot" or "cancelled". Each fetch is logged at debug level.
// With [Options.Share] the result is also encoded for a fleet's shared
// store (see [Fetcher.Decode]). With [Options.TDMRep] tdmrep.json is
// cached with robots.txt, for as long; but a result whose tdmrep.json
// found no parse slot is kept a minute at most, and neither it nor one
// whose tdmrep.json this instance refused to fetch (see localCause) is
// shared.
func (f *Fetcher) Load(ctx context.Context, origin string) cache.Result[*Result] {
	res, fx := f.fetchAll(ctx, origin)
	if log := f.opts.Logger; log.Enabled(ctx, slog.LevelDebug) {
		log.DebugContext(ctx, "fetched robots.txt", "origin", origin, "client", clientOf(ctx), "outcome", res.Outcome.String(),
			"status", res.Status, "bytes", res.Bytes, "truncated", res.Truncated,
			"ignored", res.Robots.IgnoredCount(), "redirects", res.Redirects,
			"duration", fx.Duration.String(), "err", res.Err)
		if f.opts.TDMRep {
			log.DebugContext(ctx, "fetched tdmrep.json", "origin", origin, "client", clientOf(ctx),
				"found", res.TDMRep != nil, "rules", res.TDMRep.Len(), "bytes", len(fx.tdmrep), "detail", res.TDMRepDetail)
		}
	}
	r := cache.Result[*Result]{
		Value:   res,
		Cost:    res.RetainedBytes(),
		Outcome: res.Outcome.String(),
	}
	if notMade, ok := notFetched(res.Err); ok {
		r.Discard, r.Outcome = true, notMade
		return r
	}
	r.Failed = res.Outcome == robots.OutcomeUnreachable
	if ttl, ok := fx.Freshness.TTL(); ok {
		r.MaxAge, r.NoStore = ttl, ttl <= 0
	}
	if fx.tdmrepLocal == tdmrepNoParseSlot && !r.NoStore && (r.MaxAge == 0 || r.MaxAge > tdmrepRetry) {
		r.MaxAge = tdmrepRetry
	}
	if f.opts.Share {
		r.Shared = f.share(ctx, origin, res, fx)
	}
	return r
}

// notFetched returns the outcome label of a fetch that was never made, was
// not parsed or was cancelled (see Load), or false.
func notFetched(err error) (string, bool) {
	if err == nil {
		return "", false
	}
	if _, ok := errors.AsType[*SlotError](err); ok {
		return "no_slot", true
	}
	if _, ok := errors.AsType[*ParseSlotError](err); ok {
		return "no_parse_slot", true
	}
	if errors.Is(err, context.Canceled) {
		return "cancelled", true
	}
	return "", false
}

// share encodes res, loaded for the key origin, for a shared store, or
// returns nil when other instances must not have it: a failure of this
// instance's own (see localCause), which another instance would take for
// the origin's and refuse it for, robots.txt's or tdmrep.json's; a result
// under a key that is not its canonical origin, which would never decode.
func (f *Fetcher) share(ctx context.Context, origin string, res *Result, fx fetched) []byte {
	if localCause(res.Err) || fx.tdmrepLocal != tdmrepOrigin || res.Origin != origin {
		return nil
	}
	data, err := encodeShared(res, fx)
	if err != nil {
		f.opts.Logger.WarnContext(ctx, "robots.txt kept in this instance only", "origin", origin, "err", err)
		return nil
	}
	return data
}

// localCause reports a fetch that failed for a reason of this instance's,
// which says nothing of the origin: its destination policy refused the
// connection (another instance may have another policy), or its upstream
// proxy failed or it could not check a name before handing it to that
// proxy. (A fetch never made, see notFetched, is not even kept.)
func localCause(err error) bool {
	_, upstreamFailed := errors.AsType[*egress.Error](err)
	return upstreamFailed || errors.Is(err, fs.ErrPermission)
}
