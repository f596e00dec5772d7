package fetch

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"robotsgate/proxy/egress"
	"robotsgate/proxy/netcause"
	"robotsgate/robots/usage"
)

// MaxTDMRepBytes bounds a tdmrep.json body: a longer one is not parsed
// (Result.TDMRep is nil). Real files hold a few rules, and the report's
// examples are under 400 bytes; 64 KiB holds some 500 rules with a policy
// URL each, while what a cached result may keep for it stays at
// usage.MaxTDMRepRetained(64 KiB), half a MiB. RFC 9309's 500 KiB minimum
// is robots.txt's, not this file's.
const MaxTDMRepBytes = 64 << 10

const (
	// tdmrepPath is where the TDMRep report puts the file.
	tdmrepPath = "/.well-known/tdmrep.json"
	// tdmrepAccept asks for JSON, and takes anything else rather than a
	// 406: the report names no media type.
	tdmrepAccept = "application/json, */*;q=0.1"
	// tdmrepRetry is the longest a result is kept whose tdmrep.json found
	// no parse slot: a limit of this instance's, soon gone, that must not
	// hide a site's reservation for robots.txt's whole lifetime.
	tdmrepRetry = time.Minute
)

// tdmrepLocality says whether a Result's TDMRep is nil for a reason of
// this instance's, which another instance must not take for the
// origin's. Only Load reads it: it is kept beside the Result (see
// fetched), not in it.
type tdmrepLocality uint8

const (
	// tdmrepOrigin: TDMRep is what the origin answered (or not fetched).
	tdmrepOrigin tdmrepLocality = iota
	// tdmrepRefusedHere: this instance's destination policy or upstream
	// proxy refused the fetch; the result is not shared.
	tdmrepRefusedHere
	// tdmrepNoParseSlot: the body found no parse slot; the result is not
	// shared, and kept at most tdmrepRetry.
	tdmrepNoParseSlot
)

// fetchTDMRep requests /.well-known/tdmrep.json of res.Origin once
// robots.txt is done, on ctx (the fetch slot's, its Timeout running), and
// follows redirects as robots.txt's fetch does. It sets res.TDMRep and
// res.TDMRepDetail, nothing else of res, and returns the body parsed, nil
// when none was, and whether a missing TDMRep is this instance's doing.
// It requests nothing when robots.txt got no answer (the origin is
// unreachable) or its fetch is to be discarded (see notFetched).
func (f *Fetcher) fetchTDMRep(ctx context.Context, res *Result) ([]byte, tdmrepLocality) {
	if _, discarded := notFetched(res.Err); discarded {
		return nil, tdmrepOrigin
	}
	if res.Status == 0 {
		res.TDMRepDetail = "tdmrep.json not fetched: robots.txt got no answer"
		return nil, tdmrepOrigin
	}
	scheme, host, _ := strings.Cut(res.Origin, "://")
	target := &url.URL{Scheme: scheme, Host: host, Path: tdmrepPath}
	seen := make([]string, 0, MaxRedirects+1)
	for redirects := 0; ; redirects++ {
		seen = append(seen, redirectKey(target))
		resp, err := f.get(ctx, target, tdmrepAccept)
		if err != nil {
			cause, upstream := egress.Problem(err)
			if !upstream {
				cause = netcause.Of(err)
			}
			res.TDMRepDetail = tdmrepDetail("tdmrep.json unreachable: " + cause)
			if localCause(err) {
				return nil, tdmrepRefusedHere
			}
			return nil, tdmrepOrigin
		}
		code := resp.StatusCode
		if 200 <= code && code <= 299 {
			body, local := f.readTDMRep(ctx, resp, res)
			resp.Body.Close()
			return body, local
		}
		drain(resp)
		if !isRedirect(code) {
			res.TDMRepDetail = "tdmrep.json " + strconv.Itoa(code)
			return nil, tdmrepOrigin
		}
		next, err := redirectTarget(target, resp.Header.Get("Location"))
		switch {
		case err != nil:
			res.TDMRepDetail = tdmrepDetail("tdmrep.json " + strconv.Itoa(code) + ": unusable redirect: " + err.Error())
		case slices.Contains(seen, redirectKey(next)):
			res.TDMRepDetail = "tdmrep.json: redirect loop"
		case redirects == MaxRedirects:
			res.TDMRepDetail = "tdmrep.json: more than 5 redirects"
		default:
			target = next
			continue
		}
		return nil, tdmrepOrigin
	}
}

// readTDMRep reads a 2xx body up to MaxTDMRepBytes and parses it once a
// parse slot is free, and returns the body parsed, and tdmrepNoParseSlot
// when none was free.
func (f *Fetcher) readTDMRep(ctx context.Context, resp *http.Response, res *Result) ([]byte, tdmrepLocality) {
	body, err := readLimited(resp.Body, MaxTDMRepBytes+1, resp.ContentLength)
	switch {
	case err != nil:
		res.TDMRepDetail = tdmrepDetail("tdmrep.json unreachable: " + netcause.Of(err))
		return nil, tdmrepOrigin
	case len(body) > MaxTDMRepBytes:
		res.TDMRepDetail = "tdmrep.json: larger than " + strconv.Itoa(MaxTDMRepBytes>>10) + " KiB"
		return nil, tdmrepOrigin
	}
	tdm, err := f.parseTDMRep(ctx, res.Origin, body)
	if _, noSlot := errors.AsType[*ParseSlotError](err); noSlot {
		res.TDMRepDetail = "tdmrep.json not parsed: no free parse slot"
		return nil, tdmrepNoParseSlot
	}
	if err != nil {
		res.TDMRepDetail = tdmrepDetail(err.Error())
		return nil, tdmrepOrigin
	}
	res.TDMRep, res.TDMRepDetail = tdm, describeTDMRep(tdm)
	return body, tdmrepOrigin
}

// parseTDMRep parses a tdmrep.json body in a parse slot (see
// inParseSlot): it fails with a *ParseSlotError when none came free.
func (f *Fetcher) parseTDMRep(ctx context.Context, origin string, body []byte) (*usage.TDMRep, error) {
	var (
		tdm *usage.TDMRep
		err error
	)
	if slotErr := f.inParseSlot(ctx, origin, func() { tdm, err = usage.ParseTDMRep(body) }); slotErr != nil {
		return nil, slotErr
	}
	return tdm, err
}

// describeTDMRep is the TDMRepDetail of a file parsed: "tdmrep.json: 3
// rules", "tdmrep.json: 2 rules, 1 problem (rule 3: no location)".
func describeTDMRep(tdm *usage.TDMRep) string {
	detail := "tdmrep.json: " + plural(tdm.Len(), "rule")
	if n, first := tdm.Problems(); n > 0 {
		detail += ", " + plural(n, "problem") + " (" + first + ")"
	}
	return tdmrepDetail(detail)
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}

// tdmrepDetail bounds a TDMRepDetail as a shared result bounds its
// messages.
func tdmrepDetail(s string) string { return shortened(s, maxSharedMessage) }
