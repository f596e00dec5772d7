package fetch

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"robotsgate/robots"
)

// Versions of the encoding [Fetcher.Load] writes for a shared store.
// [Fetcher.Decode] refuses any other, so an instance never misreads what
// another version wrote: the entry is fetched again.
const (
	// sharedVersion: a result fetched without Options.TDMRep.
	sharedVersion = 1
	// sharedVersionTDMRep: a result fetched with Options.TDMRep, which
	// has a tdmrep.json section (sharedHeader.TDMRep). A version of
	// robotsgate before TDMRep refuses it rather than take the tdmrep.json
	// body for a part of robots.txt's.
	sharedVersionTDMRep = 2
)

// Bounds on the text a shared result carries, which ends up in 403 pages
// and audit records: whatever another instance, or whoever can write to
// the store, put there.
const (
	// maxSharedMessage bounds Detail and Err, which are shared shortened.
	maxSharedMessage = 2 << 10
	// maxSharedURL bounds FinalURL, as the proxy bounds a request's URL by
	// default; a result with a longer one is not shared.
	maxSharedURL = 8 << 10
)

// sharedHeader is a Result as a shared store keeps it, its bodies aside.
// The encoding is this header as one line of JSON, then the robots.txt
// body as fetched, then the tdmrep.json body: bodies are kept raw, never
// escaped, and parsed again by each instance, which costs microseconds and
// keeps the entry small and independent of how a version of robotsgate
// lays out what it parsed.
type sharedHeader struct {
	Version int    `json:"v"`
	Origin  string `json:"origin"`
	Outcome string `json:"outcome"`
	Status  int    `json:"status,omitempty"`
	Detail  string `json:"detail,omitempty"`
	// Err is the error's message; ErrKind says which of the package's
	// errors it wraps, so that the decoded one matches as the original did.
	Err       string          `json:"err,omitempty"`
	ErrKind   string          `json:"err_kind,omitempty"`
	Redirects int             `json:"redirects,omitempty"`
	FinalURL  string          `json:"final_url,omitempty"`
	Bytes     int             `json:"bytes,omitempty"`
	Truncated bool            `json:"truncated,omitempty"`
	FetchedAt time.Time       `json:"fetched_at"`
	Duration  time.Duration   `json:"duration_ns"`
	Freshness sharedFreshness `json:"freshness"`
	// TDMRep is the tdmrep.json fetch, with sharedVersionTDMRep only.
	TDMRep *sharedTDMRep `json:"tdmrep,omitempty"`
}

// sharedTDMRep is a Result's tdmrep.json as a shared store keeps it.
type sharedTDMRep struct {
	Detail string `json:"detail"`
	// Bytes is the length of the tdmrep.json body that ends the entry, 0
	// when Result.TDMRep is nil.
	Bytes int `json:"bytes,omitempty"`
}

// sharedFreshness is a Freshness as a shared store keeps it.
type sharedFreshness struct {
	MaxAge     time.Duration `json:"max_age_ns,omitempty"`
	HasMaxAge  bool          `json:"has_max_age,omitempty"`
	NoStore    bool          `json:"no_store,omitempty"`
	NoCache    bool          `json:"no_cache,omitempty"`
	Expires    time.Time     `json:"expires,omitzero"`
	HasExpires bool          `json:"has_expires,omitempty"`
	Date       time.Time     `json:"date"`
	Age        time.Duration `json:"age_ns,omitempty"`
}

// Kinds of error a shared result names in ErrKind: the errors of this
// package a Result may wrap. Any other error is kept as its message.
const (
	errKindStatus           = "status" // a *StatusError
	errKindTooManyRedirects = "too_many_redirects"
	errKindRedirectLoop     = "redirect_loop"
	errKindBadRedirect      = "bad_redirect"
)

// errKindOf names the error of this package err wraps, "" for none.
func errKindOf(err error) string {
	var statusErr *StatusError
	switch {
	case errors.As(err, &statusErr):
		return errKindStatus
	case errors.Is(err, ErrTooManyRedirects):
		return errKindTooManyRedirects
	case errors.Is(err, ErrRedirectLoop):
		return errKindRedirectLoop
	case errors.Is(err, ErrBadRedirect):
		return errKindBadRedirect
	}
	return ""
}

// errOfKind is the error a kind but "status" names, nil for "";
// known is false for a kind this version does not know.
func errOfKind(kind string) (err error, known bool) {
	switch kind {
	case "":
		return nil, true
	case errKindTooManyRedirects:
		return ErrTooManyRedirects, true
	case errKindRedirectLoop:
		return ErrRedirectLoop, true
	case errKindBadRedirect:
		return ErrBadRedirect, true
	}
	return nil, false
}

// outcomeNamed is the outcome whose String is name.
func outcomeNamed(name string) (robots.Outcome, bool) {
	for _, o := range []robots.Outcome{robots.OutcomeOK, robots.OutcomeUnavailable, robots.OutcomeUnreachable, robots.OutcomeRestricted} {
		if o.String() == name {
			return o, true
		}
	}
	return 0, false
}

// sharedError is a decoded Result's Err when no *StatusError decided the
// outcome: the original's message, wrapping what the original wrapped of
// this package's errors.
type sharedError struct {
	msg  string
	kind error // nil when it wraps none
}

func (e *sharedError) Error() string { return e.msg }
func (e *sharedError) Unwrap() error { return e.kind }

// encodeShared encodes res with its Timing and the bodies it parsed (see
// fetchAll). Its details and error message are shortened to what Decode
// takes.
func encodeShared(res *Result, fx fetched) ([]byte, error) {
	if len(res.FinalURL) > maxSharedURL {
		return nil, fmt.Errorf("encode the robots.txt of %s: its final URL is %d bytes long, past %d", res.Origin, len(res.FinalURL), maxSharedURL)
	}
	h := sharedHeader{
		Version:   sharedVersion,
		Origin:    res.Origin,
		Outcome:   res.Outcome.String(),
		Status:    int(res.Status),
		Detail:    shortened(res.Detail, maxSharedMessage),
		Redirects: int(res.Redirects),
		FinalURL:  res.FinalURL,
		Bytes:     int(res.Bytes),
		Truncated: res.Truncated,
		FetchedAt: fx.FetchedAt,
		Duration:  fx.Duration,
		Freshness: sharedFreshness{
			MaxAge:     fx.Freshness.MaxAge,
			HasMaxAge:  fx.Freshness.HasMaxAge,
			NoStore:    fx.Freshness.NoStore,
			NoCache:    fx.Freshness.NoCache,
			Expires:    fx.Freshness.Expires,
			HasExpires: fx.Freshness.HasExpires,
			Date:       fx.Freshness.Date,
			Age:        fx.Freshness.Age,
		},
	}
	if res.Err != nil {
		h.Err, h.ErrKind = shortened(res.Err.Error(), maxSharedMessage), errKindOf(res.Err)
	}
	if res.TDMRepDetail != "" { // fetched with Options.TDMRep
		h.Version = sharedVersionTDMRep
		h.TDMRep = &sharedTDMRep{Detail: shortened(res.TDMRepDetail, maxSharedMessage), Bytes: len(fx.tdmrep)}
	}
	data, err := h.encode(fx.bodies)
	if err != nil {
		return nil, fmt.Errorf("encode the robots.txt of %s: %w", res.Origin, err)
	}
	return data, nil
}

// shortened is s cut to at most limit bytes, at a character's boundary,
// and ended with an ellipsis when it was cut.
func shortened(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	const ellipsis = "…"
	cut := limit - len(ellipsis)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + ellipsis
}

// encode writes h as one line of JSON, then the bodies.
func (h *sharedHeader) encode(b bodies) ([]byte, error) {
	var buf bytes.Buffer
	buf.Grow(512 + len(b.robots) + len(b.tdmrep))
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(h); err != nil { // the line ends with '\n'
		return nil, err
	}
	buf.Write(b.robots)
	buf.Write(b.tdmrep)
	return buf.Bytes(), nil
}

// Decode reads back a result [Fetcher.Load] encoded for a shared store
// (see [Options.Share]) under the key origin; it is a
// [cache.DecodeFunc]. A body is parsed again with this Fetcher's parse
// limit and KeepIgnored. Data that another version wrote, that belongs to
// another origin, that this Fetcher's parse limit would not have produced,
// or that is damaged is an error; so is, for a Fetcher with
// [Options.TDMRep], a result fetched without it (it is fetched again, with
// tdmrep.json). A Fetcher without Options.TDMRep leaves out the tdmrep.json
// of a result fetched with it. The cost is the result's RetainedBytes.
func (f *Fetcher) Decode(origin string, data []byte) (*Result, int64, error) {
	res, _, err := f.decodeShared(origin, data)
	if err != nil {
		return nil, 0, err
	}
	return res, res.RetainedBytes(), nil
}

// decodeShared is Decode, also returning the Timing and the bodies (a
// decoded result's tdmrep.json is always the origin's doing: one that
// was not is never shared).
func (f *Fetcher) decodeShared(origin string, data []byte) (*Result, fetched, error) {
	head, rest, found := bytes.Cut(data, []byte{'\n'})
	if !found {
		return nil, fetched{}, fmt.Errorf("shared robots.txt of %s: no header line", origin)
	}
	var h sharedHeader
	if err := json.Unmarshal(head, &h); err != nil {
		return nil, fetched{}, fmt.Errorf("shared robots.txt of %s: %w", origin, err)
	}
	if err := f.checkSharedVersion(&h, len(rest)); err != nil {
		return nil, fetched{}, fmt.Errorf("shared robots.txt of %s: %w", origin, err)
	}
	var b bodies
	if h.TDMRep != nil {
		cut := len(rest) - h.TDMRep.Bytes
		rest, b.tdmrep = rest[:cut], rest[cut:]
	}
	body := rest
	if err := f.checkShared(origin, &h, body); err != nil {
		return nil, fetched{}, fmt.Errorf("shared robots.txt of %s: %w", origin, err)
	}
	outcome, _ := outcomeNamed(h.Outcome)
	// checkShared bounds Status, Redirects and Bytes to what they hold.
	res := &Result{
		Answer:    robots.Answer{Outcome: outcome, Detail: h.Detail},
		Origin:    h.Origin,
		Status:    uint16(h.Status),
		Redirects: uint8(h.Redirects),
		FinalURL:  h.FinalURL,
		Bytes:     int32(h.Bytes),
		Truncated: h.Truncated,
	}
	fx := fetched{Timing: Timing{
		Duration:  h.Duration,
		FetchedAt: h.FetchedAt,
		Freshness: Freshness{
			MaxAge:     h.Freshness.MaxAge,
			HasMaxAge:  h.Freshness.HasMaxAge,
			NoStore:    h.Freshness.NoStore,
			NoCache:    h.Freshness.NoCache,
			Expires:    h.Freshness.Expires,
			HasExpires: h.Freshness.HasExpires,
			Date:       h.Freshness.Date,
			Age:        h.Freshness.Age,
		},
	}}
	switch {
	case res.Outcome == robots.OutcomeOK:
		// Parsed in a parse slot like a fetched body; a Get waits for it
		// beside (not on) its context, in the cache's refresh.
		rules, slotErr := f.parse(context.Background(), origin, body)
		if slotErr != nil {
			return nil, fetched{}, fmt.Errorf("shared robots.txt of %s: %w", origin, slotErr)
		}
		res.Robots = rules
		fx.robots = body
	case h.ErrKind == errKindStatus:
		res.Err = &StatusError{URL: h.FinalURL, Code: h.Status}
	default:
		kind, _ := errOfKind(h.ErrKind)
		res.Err = &sharedError{msg: h.Err, kind: kind}
	}
	res.compact()
	if h.TDMRep == nil || !f.opts.TDMRep {
		return res, fx, nil
	}
	res.TDMRepDetail, fx.tdmrep = h.TDMRep.Detail, b.tdmrep
	if len(b.tdmrep) > 0 {
		// Parsed in a parse slot, as robots.txt is above.
		tdm, err := f.parseTDMRep(context.Background(), origin, b.tdmrep)
		if err != nil {
			return nil, fetched{}, fmt.Errorf("shared tdmrep.json of %s: %w", origin, err)
		}
		res.TDMRep = tdm
	}
	return res, fx, nil
}

// checkSharedVersion refuses a version, and a tdmrep.json section, that
// no fetch by f could have produced, before the section cuts the bodies,
// rest bytes, in two.
func (f *Fetcher) checkSharedVersion(h *sharedHeader, rest int) error {
	switch {
	case h.Version != sharedVersion && h.Version != sharedVersionTDMRep:
		return fmt.Errorf("version %d, want %d or %d", h.Version, sharedVersion, sharedVersionTDMRep)
	case h.Version == sharedVersion && h.TDMRep != nil:
		return fmt.Errorf("a tdmrep.json section in version %d", sharedVersion)
	case h.Version == sharedVersion && f.opts.TDMRep:
		return errors.New("no tdmrep.json, which this instance fetches")
	case h.Version == sharedVersion:
		return nil
	case h.TDMRep == nil:
		return fmt.Errorf("version %d without a tdmrep.json section", sharedVersionTDMRep)
	case h.TDMRep.Detail == "" || len(h.TDMRep.Detail) > maxSharedMessage:
		return fmt.Errorf("a tdmrep.json detail of %d bytes", len(h.TDMRep.Detail))
	case h.TDMRep.Bytes < 0 || h.TDMRep.Bytes > MaxTDMRepBytes || h.TDMRep.Bytes > rest:
		return fmt.Errorf("a tdmrep.json body of %d bytes, in %d bytes of bodies", h.TDMRep.Bytes, rest)
	}
	return nil
}

// checkShared refuses a header and body that no fetch by f under the key
// origin could have produced.
func (f *Fetcher) checkShared(origin string, h *sharedHeader, body []byte) error {
	if h.Origin != origin {
		return fmt.Errorf("holds the robots.txt of %q", h.Origin)
	}
	outcome, known := outcomeNamed(h.Outcome)
	if !known {
		return fmt.Errorf("unknown outcome %q", h.Outcome)
	}
	if _, known := errOfKind(h.ErrKind); !known && h.ErrKind != errKindStatus {
		return fmt.Errorf("unknown error kind %q", h.ErrKind)
	}
	switch {
	case outcome == robots.OutcomeOK && (h.Err != "" || h.ErrKind != ""):
		return errors.New("an error with outcome ok")
	case outcome != robots.OutcomeOK && h.Err == "" && h.ErrKind != errKindStatus:
		return fmt.Errorf("outcome %s without an error", h.Outcome)
	case outcome != robots.OutcomeOK && len(body) > 0:
		return fmt.Errorf("a body with outcome %s", h.Outcome)
	case len(body) > f.opts.MaxBytes+1:
		return fmt.Errorf("a body of %d bytes, past the parse limit of %d", len(body), f.opts.MaxBytes)
	case outcome == robots.OutcomeOK && h.Bytes != len(body):
		return fmt.Errorf("%d bytes read, but a body of %d", h.Bytes, len(body))
	case outcome == robots.OutcomeOK && h.Truncated != (len(body) > f.opts.MaxBytes):
		return fmt.Errorf("truncated %v at a parse limit of %d: fetched with another limit", h.Truncated, f.opts.MaxBytes)
	case h.Bytes < 0 || h.Bytes > f.opts.MaxBytes+1:
		return fmt.Errorf("%d bytes read, outside 0 to the parse limit of %d plus one", h.Bytes, f.opts.MaxBytes)
	case h.Redirects < 0 || h.Redirects > MaxRedirects:
		return fmt.Errorf("%d redirects", h.Redirects)
	case h.Status != 0 && (h.Status < 100 || h.Status > 999):
		return fmt.Errorf("status %d", h.Status)
	case h.ErrKind == errKindStatus && h.Status == 0:
		return errors.New("a status error without a status")
	case h.Duration < 0:
		return fmt.Errorf("duration %v", h.Duration)
	case len(h.Detail) > maxSharedMessage || len(h.Err) > maxSharedMessage:
		return fmt.Errorf("a detail of %d bytes and an error of %d, past %d", len(h.Detail), len(h.Err), maxSharedMessage)
	case len(h.FinalURL) > maxSharedURL:
		return fmt.Errorf("a final URL of %d bytes, past %d", len(h.FinalURL), maxSharedURL)
	}
	return nil
}
