// Package audit writes robotsgate's audit log: one JSON object per line for
// every decision the proxy takes, so an operator can prove what a crawler
// did and did not fetch.
//
// Records are buffered and flushed at least every FlushInterval and on
// Close, which the proxy calls on shutdown: a SIGTERM loses no record. When
// the log cannot be written (a full disk, a closed pipe), records are kept,
// within a bound, and written again every FlushInterval until the log works
// again; [Writer.Healthy] tells the proxy, which refuses requests meanwhile
// unless told to carry on.
//
// [Writer.Reopen] opens the file anew, for log rotation (logrotate's
// create mode): every record lands whole in exactly one file.
//
// A record is bounded, whatever a client or an origin sends: each text
// field to its own bound, the line to [Options.MaxRecord]. A client's
// 60 KB User-Agent takes 512 bytes of its record, not the 360 KB JSON
// escaping made of it.
package audit

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"math"
	"os"
	"robotsgate/robots"
	"robotsgate/robots/usage"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"
)

// Record is one decision. The JSON names are the audit log's public
// format; README.md documents each field.
type Record struct {
	Time   time.Time `json:"time"`
	Client string    `json:"client"` // the client's address
	Method string    `json:"method"` // CONNECT for tunnels that were not intercepted
	// Decision holds the request (url: the full URL requested, user_agent,
	// token) and the verdict in the words check -json and the 403 use
	// too; verdict is "error" when no verdict could be reached.
	robots.Decision
	// Credential is the name of the proxy credential the client
	// authenticated with; its token is the one judged.
	Credential string `json:"credential,omitempty"`
	// UAToken is the token of the User-Agent, set (even to "") when the
	// token judged came from elsewhere: a credential or the operator's
	// pinned token. UAMismatch says the two differ: a crawler that names
	// itself other than it is.
	UAToken      *string `json:"ua_token,omitempty"`
	UAMismatch   bool    `json:"ua_mismatch,omitempty"`
	Origin       string  `json:"origin,omitempty"`       // whose robots.txt applies
	Tunnel       string  `json:"tunnel,omitempty"`       // the CONNECT target, for requests inside an intercepted tunnel
	PathsChecked bool    `json:"paths_checked"`          // false for a CONNECT (a tunnel not intercepted, or refused before it opened): only the host was judged
	RobotsCache  string  `json:"robots_cache,omitempty"` // hit, loaded, or stale (origin unreachable, last good copy obeyed)

	// CrawlDelay is the interval, in seconds, in force between requests
	// of this identity to this origin; CrawlDelaySource says where it came
	// from (crawl-delay, request-rate, default, cap, min-delay: the
	// ROBOTSGATE_MIN_DELAY floor, policy: the crawler's min_delay in the
	// operator's policy, or delay-factor: ROBOTSGATE_DELAY_FACTOR
	// times the last response time) and CrawlDelayLine the robots.txt line
	// behind it.
	CrawlDelay       float64 `json:"crawl_delay,omitempty"`
	CrawlDelaySource string  `json:"crawl_delay_source,omitempty"`
	CrawlDelayLine   int     `json:"crawl_delay_line,omitempty"`
	// Pace is what pacing did when it did something: waited (held until
	// its slot, or until the origin's hold ended), too_early, busy (the
	// origin's connection bound), full (the schedule table), gone (the
	// client left while held), held (the origin's Retry-After holds it),
	// backoff (a pause after the origin's failures). With forwarded true,
	// too_early, busy, full, held and backoff are what enforcement would
	// have refused.
	Pace     string  `json:"pace,omitempty"`
	WaitedMS float64 `json:"waited_ms,omitempty"`

	// The hold fields are set whenever the request met a hold of its
	// pace group: HoldCause says what set it (retry-after or backoff),
	// HoldStatus the origin's status then (none for a connection failure,
	// which HoldError names in a few words), HoldAt when the origin
	// answered so and HoldUntil when the hold ends. BackoffStep counts
	// the failures in a row behind a backoff.
	HoldCause  string `json:"hold_cause,omitempty"`
	HoldStatus int    `json:"hold_status,omitempty"`
	HoldError  string `json:"hold_error,omitempty"`
	// HoldOrigin is the origin whose answer set the hold, only when it is
	// not the request's own: a group of several hosts
	// (ROBOTSGATE_PACE_BY=domain or address) is held by any one's answer.
	HoldOrigin  string    `json:"hold_origin,omitempty"`
	HoldAt      time.Time `json:"hold_at,omitzero"`
	HoldUntil   time.Time `json:"hold_until,omitzero"`
	BackoffStep int       `json:"backoff_step,omitempty"`
	// PaceGroup is the group whose pace and holds applied
	// ("address:127.0.0.1", "domain:example.com"), set only when
	// ROBOTSGATE_PACE_BY groups otherwise than by host.
	PaceGroup string `json:"pace_group,omitempty"`

	// DeniedDestination says the verdict disallow came from
	// ROBOTSGATE_DENY_DESTINATIONS, not from robots.txt.
	DeniedDestination bool `json:"denied_destination,omitempty"`

	// Policy is the entry of the operator's policy file
	// (ROBOTSGATE_POLICY) that decided or shaped the request; zero, and
	// absent from the line, when the policy changed nothing.
	Policy PolicyFinding `json:"policy,omitzero"`
	// PolicyVersion is the version of the policy file in force, on every
	// record while one is loaded.
	PolicyVersion string `json:"policy_version,omitempty"`
	// Purposes are the crawler's declared purposes: the policy's, else
	// ROBOTSGATE_PURPOSES'.
	Purposes []string `json:"purposes,omitempty"`
	// Usage is the site's usage preference that refused one of the
	// crawler's purposes (refused before the fetch, withheld after it, or
	// only recorded); zero, and absent from the line, when none did.
	Usage UsageFinding `json:"usage,omitzero"`
	// UsageStated are the usage preferences the site states for this
	// request, robots.txt's and the response's: "content-signal
	// ai-train=no".
	UsageStated []string `json:"usage_stated,omitempty"`
	// SignatureKeyID is the id (JWK thumbprint) of the key that signed
	// the forwarded request (Web Bot Auth); absent when none did.
	SignatureKeyID string `json:"signature_keyid,omitempty"`

	Mode string `json:"mode"` // enforce or audit
	// Forwarded says the request went to the origin: the origin answered,
	// the request was sent to it whole, or a blind tunnel to it opened.
	Forwarded bool `json:"forwarded"`
	// Status is what robotsgate answered the client with, its own answer
	// or the origin's; a CONNECT's 200 stays when its tunnel then fails.
	Status   int     `json:"status"`
	Upstream int     `json:"upstream_status,omitempty"`
	Bytes    int64   `json:"bytes"` // response body bytes relayed from the origin
	Duration float64 `json:"duration_ms"`
	// Error is what failed, in a few words: upstream, in the tunnel, the
	// client, a bounded resource; empty when nothing did (a 403 is none).
	Error string `json:"error,omitempty"`
}

// PolicyFinding is the policy's entry behind a decision: the file and line
// of the crawler's or site's entry, what it did, the rule as written and
// the operator's reason.
type PolicyFinding struct {
	File string `json:"file,omitempty"`
	Line int    `json:"line,omitempty"`
	// Kind is what the policy did, one of the Policy* constants.
	Kind   string `json:"kind,omitempty"`
	Rule   string `json:"rule,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// UsageFinding is the usage preference behind a refusal: its form, where
// it is stated (a robots.txt line or a response header), the label and
// value, the crawler's purpose it refuses, and what robotsgate did.
type UsageFinding struct {
	Form    string `json:"form,omitempty"`
	Line    int    `json:"line,omitempty"`
	Header  string `json:"header,omitempty"`
	Label   string `json:"label,omitempty"`
	Value   string `json:"value,omitempty"`
	Purpose string `json:"purpose,omitempty"`
	// Verdict is one of the Usage* constants.
	Verdict string `json:"verdict,omitempty"`
}

// UsageFindingOf is the refusal v in the record's words, verdict one of
// the Usage* constants; zero when v refuses nothing.
func UsageFindingOf(v usage.Verdict, verdict string) UsageFinding {
	if !v.Refused {
		return UsageFinding{}
	}
	by := v.By
	return UsageFinding{Form: by.Form.String(), Line: by.Line, Header: by.Source(), Label: by.Label, Value: by.Value,
		Purpose: v.Purpose, Verdict: verdict}
}

// Verdicts of [UsageFinding].
const (
	// UsageRefused: answered 403 before the fetch; the origin saw nothing.
	UsageRefused = "refused"
	// UsageWithheld: the origin answered; its body was not delivered.
	UsageWithheld = "withheld"
	// UsageRecorded: forwarded and delivered; enforcement would have
	// refused or withheld it (audit mode, or responses only recorded).
	UsageRecorded = "recorded"
)

// Kinds of [PolicyFinding].
const (
	// PolicyDestination: the crawler may not go to this site (allow_sites,
	// deny_sites); refused before any robots.txt fetch.
	PolicyDestination = "destination"
	// PolicyException: a site's exception allowed what robots.txt
	// disallowed.
	PolicyException = "exception"
	// PolicyRule: a rule of the policy refused the path.
	PolicyRule = "rule"
	// PolicyMinDelay and PolicyMaxConcurrency: the crawler's own pace
	// bound refused or held the request.
	PolicyMinDelay       = "min-delay"
	PolicyMaxConcurrency = "max-concurrency"
)

// cutRecord is a record as written when some of its fields had to be cut
// to their bounds. Cut, apart from Record, costs the records that need no
// cutting, every request's, nothing.
type cutRecord struct {
	*Record
	// Cut names the fields cut: a client cannot forge it, as it can a
	// marker inside a value.
	Cut []string `json:"cut,omitempty"`
}

// FlushInterval bounds how long a record waits in the buffer, and is how
// often a failing log is tried again.
const FlushInterval = 200 * time.Millisecond

// Defaults of [Options].
const (
	// DefaultMaxPending bounds the records kept while the log cannot be
	// written; past it new records are dropped and counted.
	DefaultMaxPending = 8 << 20
	// flushAt is how much is buffered before the flush loop is asked to
	// write at once rather than at its next tick.
	flushAt = 64 << 10
	// DefaultMaxRecord bounds a record's line: below the 16 KiB past
	// which Docker's json-file log driver splits a line. The bounds of
	// the fields, which README.md lists, add up to less than 15.5 KiB.
	DefaultMaxRecord = 16 << 10
	// MinMaxRecord is the least MaxRecord taken: the short form of any
	// record fits in it.
	MinMaxRecord = 11 << 9 // 5.5 KiB
)

// ErrDropped is returned by Write for a record that did not fit in the
// bounded buffer of a log that cannot be written.
var ErrDropped = errors.New("audit record dropped: the log cannot be written and its buffer is full")

// ErrClosed is returned by Write and Reopen once the Writer is closed.
var ErrClosed = errors.New("audit log closed")

// ErrStalled is the failure a Writer reports when its log takes records
// more slowly than they come: half of MaxPending waits for it.
var ErrStalled = errors.New("the audit log is not keeping up: records are waiting to be written")

// Options tune a Writer. The zero value is usable.
type Options struct {
	// MaxPending bounds the bytes of records kept while the log cannot be
	// written; 0 means DefaultMaxPending. Past half of it the log counts
	// as failing (ErrStalled), before any record has to be dropped.
	MaxPending int
	// MaxRecord bounds one record's line, its line break included; 0
	// means DefaultMaxRecord, and less than MinMaxRecord is taken as
	// MinMaxRecord. A record whose fields, cut to their bounds, still do
	// not fit is written in its short form: every text field cut to 64
	// bytes. The default bounds never need it.
	MaxRecord int
}

// Writer appends records to a file or standard output. It is safe for
// concurrent use. Writing a record only appends to a buffer under a short
// lock; the sink is written to outside it.
type Writer struct {
	opts Options

	mu      sync.Mutex // guards pending, closed and dropped
	pending []byte
	closed  bool
	dropped uint64

	flushMu sync.Mutex // one flush or Reopen at a time; guards spare, lastErr, sink, file and written
	spare   []byte     // the buffer pending swaps with
	lastErr error
	sink    io.Writer
	file    io.Closer // nil for standard output
	// written is how much of pending's first record the sink already
	// holds, after a short write: the rest goes to the same sink, or the
	// whole record to a reopened one, so no record is split across files.
	written int
	failing atomic.Bool
	watcher atomic.Pointer[func(error)]

	path string // the file Reopen opens; "" for standard output
	open func(path string) (io.WriteCloser, error)

	// encoders hold what encoding a record needs, reused: an ordinary
	// record costs no allocation of its own.
	encoders sync.Pool

	// full asks the flush loop to write now: a request never writes to
	// the sink itself, so a slow sink delays no request.
	full chan struct{}
	done chan struct{}
	wg   sync.WaitGroup
}

// Open opens the audit log: "-" is standard output, anything else a file
// opened for appending (created with mode 0640), which Reopen opens again.
func Open(path string, opts Options) (*Writer, error) {
	if path == "-" || path == "" {
		return NewWriter(os.Stdout, nil, opts), nil
	}
	return openWith(path, openFile, opts)
}

// openWith is Open with the function that opens the file; tests give
// theirs, to have a file misbehave.
func openWith(path string, open func(string) (io.WriteCloser, error), opts Options) (*Writer, error) {
	f, err := open(path)
	if err != nil {
		return nil, fmt.Errorf("open audit log: %w", err)
	}
	return newWriter(f, f, path, open, opts), nil
}

func openFile(path string) (io.WriteCloser, error) {
	return os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o640)
}

// NewWriter writes records to w; closer, when not nil, is closed by Close.
// Such a Writer has no file to reopen.
func NewWriter(w io.Writer, closer io.Closer, opts Options) *Writer {
	return newWriter(w, closer, "", nil, opts)
}

func newWriter(w io.Writer, closer io.Closer, path string, open func(string) (io.WriteCloser, error), opts Options) *Writer {
	if opts.MaxPending <= 0 {
		opts.MaxPending = DefaultMaxPending
	}
	if opts.MaxRecord == 0 {
		opts.MaxRecord = DefaultMaxRecord
	}
	opts.MaxRecord = max(opts.MaxRecord, MinMaxRecord)
	aw := &Writer{
		opts: opts, sink: w, file: closer, path: path, open: open,
		full: make(chan struct{}, 1), done: make(chan struct{}),
	}
	aw.encoders.New = func() any { return newEncoder() }
	aw.wg.Add(1)
	go aw.flushLoop()
	return aw
}

// Path is the file the log is written to, which Reopen opens again; ""
// for standard output or a Writer from NewWriter.
func (w *Writer) Path() string { return w.path }

func (w *Writer) flushLoop() {
	defer w.wg.Done()
	ticker := time.NewTicker(FlushInterval)
	defer ticker.Stop()
	for {
		select {
		case <-w.done:
			return
		case <-ticker.C:
			w.flush()
		case <-w.full:
			if !w.failing.Load() { // a failing log is retried on the ticker
				w.flush()
			}
		}
	}
}

// Write appends one record, bounded (see [Options.MaxRecord]); rec is
// left as it is. It fails only when the log is closed or the record had
// to be dropped (ErrDropped); a log that cannot be written keeps the
// record for the next attempt, and says so through Healthy.
func (w *Writer) Write(rec *Record) error {
	e := w.encoders.Get().(*encoder)
	defer w.encoders.Put(e)
	line, err := e.encode(rec, w.opts.MaxRecord)
	if err != nil {
		return err
	}
	w.mu.Lock()
	switch {
	case w.closed:
		w.mu.Unlock()
		return ErrClosed
	case len(w.pending)+len(line) > w.opts.MaxPending:
		w.dropped++
		w.mu.Unlock()
		return ErrDropped
	}
	w.pending = append(w.pending, line...)
	full := len(w.pending) >= flushAt
	stalled := len(w.pending) > w.opts.MaxPending/2
	w.mu.Unlock()
	if stalled {
		w.fail(ErrStalled)
	}
	if full {
		select {
		case w.full <- struct{}{}:
		default: // a flush is asked for already
		}
	}
	return nil
}

// Healthy reports whether the log keeps up: the last attempt to write it
// succeeded and not too much waits for it.
func (w *Writer) Healthy() bool { return !w.failing.Load() }

// Watch has notify called, from the goroutine that noticed, with the error
// when the log starts failing and with nil when it works again. It
// replaces an earlier watcher.
func (w *Writer) Watch(notify func(err error)) { w.watcher.Store(&notify) }

// fail marks the log failing, telling the watcher the first time.
func (w *Writer) fail(err error) {
	if !w.failing.Swap(true) {
		if notify := w.watcher.Load(); notify != nil {
			(*notify)(err)
		}
	}
}

// Dropped is how many records were dropped because the log could not be
// written for too long.
func (w *Writer) Dropped() uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.dropped
}

// flush writes what is pending.
func (w *Writer) flush() error {
	w.flushMu.Lock()
	defer w.flushMu.Unlock()
	return w.flushLocked()
}

// flushLocked writes what is pending; the caller holds flushMu. What the
// sink refuses is kept, in front of what arrived meanwhile, for the next
// attempt: whole records, the first one's written bytes counted in
// w.written rather than dropped, so that a reopened file gets it whole.
func (w *Writer) flushLocked() error {
	w.mu.Lock()
	buf := w.pending
	w.pending = w.spare[:0]
	w.mu.Unlock()
	if len(buf) == 0 {
		w.spare = buf
		return w.lastErr
	}
	n, err := w.sink.Write(buf[w.written:])
	if err == nil && n < len(buf)-w.written {
		err = io.ErrShortWrite
	}
	if err != nil {
		done := w.written + n
		keep := bytes.LastIndexByte(buf[:done], '\n') + 1 // the records before it are in the sink
		w.written = done - keep
		w.mu.Lock()
		rest := append(buf[:0], buf[keep:]...)
		w.pending, w.spare = append(rest, w.pending...), w.pending[:0]
		w.mu.Unlock()
		w.lastErr = fmt.Errorf("write audit log: %w", err)
		w.fail(w.lastErr)
		return w.lastErr
	}
	w.spare, w.lastErr, w.written = buf[:0], nil, 0
	if w.failing.Swap(false) {
		if notify := w.watcher.Load(); notify != nil {
			(*notify)(nil)
		}
	}
	return nil
}

// Reopen opens the log's file again by its path and writes on to the new
// file, closing the one it replaces: after the file was renamed (log
// rotation), new records go to a new file at the path. What is pending is
// first written to the old file; a record the old file took only part of
// is written whole to the new one (the old file then ends in a partial
// line). If the path cannot be opened, the log carries on in the old file
// and the error says why; a later Reopen may succeed, and no record is lost
// either way.
//
// For standard output, or a Writer from NewWriter, Reopen does nothing and
// returns nil. A closed Writer's returns ErrClosed.
func (w *Writer) Reopen() error {
	w.flushMu.Lock()
	defer w.flushMu.Unlock()
	// Close marks the Writer closed before it takes flushMu: past this
	// check, Close closes the file installed here.
	w.mu.Lock()
	closed := w.closed
	w.mu.Unlock()
	if closed {
		return fmt.Errorf("reopen audit log: %w", ErrClosed)
	}
	if w.open == nil {
		return nil
	}
	// An error here leaves the records pending, for the new file; the
	// Writer reports its health itself.
	_ = w.flushLocked()
	f, err := w.open(w.path)
	if err != nil {
		return fmt.Errorf("reopen audit log: %w; still writing to the file opened before", err)
	}
	old := w.file
	w.sink, w.file, w.written = f, f, 0
	if err := old.Close(); err != nil {
		return fmt.Errorf("reopen audit log %s: closing the file it replaces: %w", w.path, err)
	}
	return nil
}

// Close flushes every record and closes the file. It fails when records
// could not be written or were dropped.
func (w *Writer) Close() error {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return nil
	}
	w.closed = true
	w.mu.Unlock()
	close(w.done)
	w.wg.Wait()

	// Under flushMu: a Reopen in progress may be replacing the file.
	w.flushMu.Lock()
	err := w.flushLocked()
	if w.file != nil {
		if cerr := w.file.Close(); cerr != nil {
			err = errors.Join(err, cerr)
		}
	}
	w.flushMu.Unlock()
	if dropped := w.Dropped(); dropped > 0 {
		err = errors.Join(err, fmt.Errorf("%d audit records were dropped while the log could not be written", dropped))
	}
	if err != nil {
		return fmt.Errorf("close audit log: %w", err)
	}
	return nil
}

// Bounds of a record's fields. Each text field's is in bytes of the log
// line, JSON escaping counted; README.md's audit log table lists them.
const (
	targetBound = 2048 // url: a request target may take 8 KiB
	// reading: the path of a refusal, beside the url that has it whole.
	readingBound = 1024
	reasonBound  = 1024 // reason, error: a few words around a rule, a reading or an origin's answer
	nameBound    = 512  // user_agent, rule, origin, tunnel, robots_txt, hold_origin, pace_group (an origin when its lookup failed)
	// policy.reason: the operator's words, written once per policy entry,
	// and hold_error: a connection failure in a few words; both bounded
	// low to keep the record's bound.
	policyReasonBound = 256
	holdErrorBound    = 256
	stepsBound        = 256 // reading_steps, policy.file, policy.rule (the operator's path and line)
	tokenBound        = 128 // client, token, ua_token, credential, group
	// method, purposes, and the proxy's own words (verdict, mode, ...):
	// bounded so that the bounds, added up, bound the record.
	wordBound = 64
	// maxGroupLines bounds group_lines: a robots.txt may repeat its
	// user-agent line thousands of times.
	maxGroupLines = 32
	// maxPurposes bounds purposes: the union of the crawler's entries.
	maxPurposes = 8
	// maxUsageStated bounds usage_stated, each within wordBound.
	maxUsageStated = 8
	// shortText bounds every text field of a record's short form; a
	// marker takes at most 60 bytes.
	shortText = 64
)

// text is one text field of a record and its bound.
type text struct {
	name  string
	s     *string // nil for a ua_token not set
	bound int
}

// texts are r's text fields with their bounds, in the JSON's order.
func (r *Record) texts() [38]text {
	return [...]text{
		{"client", &r.Client, tokenBound},
		{"method", &r.Method, wordBound},
		{"url", &r.URL, targetBound},
		{"user_agent", &r.UserAgent, nameBound},
		{"token", &r.Token, tokenBound},
		{"verdict", &r.Verdict, wordBound},
		{"reason", &r.Reason, reasonBound},
		{"rule", &r.Rule, nameBound},
		{"group", &r.Group, tokenBound},
		{"reading", &r.Reading, readingBound},
		{"reading_steps", &r.ReadingSteps, stepsBound},
		{"robots_txt", &r.RobotsTxt, nameBound},
		{"robots_outcome", &r.RobotsOutcome, wordBound},
		{"credential", &r.Credential, tokenBound},
		{"ua_token", r.UAToken, tokenBound},
		{"origin", &r.Origin, nameBound},
		{"tunnel", &r.Tunnel, nameBound},
		{"robots_cache", &r.RobotsCache, wordBound},
		{"crawl_delay_source", &r.CrawlDelaySource, wordBound},
		{"pace", &r.Pace, wordBound},
		{"hold_cause", &r.HoldCause, wordBound},
		{"hold_error", &r.HoldError, holdErrorBound},
		{"hold_origin", &r.HoldOrigin, nameBound},
		{"pace_group", &r.PaceGroup, nameBound},
		{"policy.file", &r.Policy.File, stepsBound},
		{"policy.kind", &r.Policy.Kind, wordBound},
		{"policy.rule", &r.Policy.Rule, stepsBound},
		{"policy.reason", &r.Policy.Reason, policyReasonBound},
		{"policy_version", &r.PolicyVersion, wordBound},
		{"usage.form", &r.Usage.Form, wordBound},
		{"usage.header", &r.Usage.Header, wordBound},
		{"usage.label", &r.Usage.Label, wordBound},
		{"usage.value", &r.Usage.Value, wordBound},
		{"usage.purpose", &r.Usage.Purpose, wordBound},
		{"usage.verdict", &r.Usage.Verdict, wordBound},
		{"signature_keyid", &r.SignatureKeyID, wordBound},
		{"mode", &r.Mode, wordBound},
		{"error", &r.Error, reasonBound},
	}
}

// withinBounds reports whether r can be written as it is: the common
// case. It is [Record.texts] written out, for every request pays for it:
// with each bound a constant, most fields are judged by their length
// alone (TestWithinBoundsAgreesWithTexts keeps the two the same).
func (r *Record) withinBounds() bool {
	return len(r.GroupLines) <= maxGroupLines &&
		fits(r.Client, tokenBound) && fits(r.Method, wordBound) && fits(r.URL, targetBound) &&
		fits(r.UserAgent, nameBound) && fits(r.Token, tokenBound) && fits(r.Verdict, wordBound) &&
		fits(r.Reason, reasonBound) && fits(r.Rule, nameBound) && fits(r.Group, tokenBound) &&
		fits(r.Reading, readingBound) && fits(r.ReadingSteps, stepsBound) && fits(r.RobotsTxt, nameBound) &&
		fits(r.RobotsOutcome, wordBound) && fits(r.Credential, tokenBound) &&
		(r.UAToken == nil || fits(*r.UAToken, tokenBound)) &&
		fits(r.Origin, nameBound) && fits(r.Tunnel, nameBound) && fits(r.RobotsCache, wordBound) &&
		fits(r.CrawlDelaySource, wordBound) && fits(r.Pace, wordBound) && fits(r.HoldCause, wordBound) &&
		fits(r.HoldError, holdErrorBound) && fits(r.HoldOrigin, nameBound) && fits(r.PaceGroup, nameBound) &&
		fits(r.Policy.File, stepsBound) && fits(r.Policy.Kind, wordBound) && fits(r.Policy.Rule, stepsBound) &&
		fits(r.Policy.Reason, policyReasonBound) && fits(r.PolicyVersion, wordBound) &&
		len(r.Purposes) <= maxPurposes && allFit(r.Purposes, wordBound) &&
		fits(r.Usage.Form, wordBound) && fits(r.Usage.Header, wordBound) && fits(r.Usage.Label, wordBound) &&
		fits(r.Usage.Value, wordBound) && fits(r.Usage.Purpose, wordBound) && fits(r.Usage.Verdict, wordBound) &&
		len(r.UsageStated) <= maxUsageStated && allFit(r.UsageStated, wordBound) &&
		fits(r.SignatureKeyID, wordBound) && fits(r.Mode, wordBound) && fits(r.Error, reasonBound)
}

// bounded returns a copy of r with each text field cut to its bound, or
// to limit when that is lower, group_lines to its first maxGroupLines,
// and the fields cut named in Cut.
func (r *Record) bounded(limit int, e *encoder) *cutRecord {
	c := *r
	out := &cutRecord{Record: &c}
	if c.UAToken != nil { // cut in the copy only
		token := *c.UAToken
		c.UAToken = &token
	}
	for _, t := range c.texts() {
		if bound := min(t.bound, limit); t.s != nil && !fits(*t.s, bound) {
			*t.s = e.cut(*t.s, bound)
			out.Cut = append(out.Cut, t.name)
		}
	}
	if len(c.GroupLines) > maxGroupLines {
		c.GroupLines = c.GroupLines[:maxGroupLines:maxGroupLines]
		out.Cut = append(out.Cut, "group_lines")
	}
	// The short form drops usage_stated: the usage finding says what
	// decided.
	bound, stated := min(wordBound, limit), maxUsageStated
	if limit <= shortText {
		stated = 0
	}
	if len(c.Purposes) > maxPurposes || !allFit(c.Purposes, bound) {
		c.Purposes = e.cutList(c.Purposes, maxPurposes, bound)
		out.Cut = append(out.Cut, "purposes")
	}
	if len(c.UsageStated) > stated || !allFit(c.UsageStated, bound) {
		c.UsageStated = e.cutList(c.UsageStated, stated, bound)
		out.Cut = append(out.Cut, "usage_stated")
	}
	return out
}

// cutList returns a new slice of values' first most, each cut to bound:
// the caller's is left as it is.
func (e *encoder) cutList(values []string, most, bound int) []string {
	out := make([]string, min(len(values), most))
	for i := range out {
		out[i] = values[i]
		if !fits(out[i], bound) {
			out[i] = e.cut(out[i], bound)
		}
	}
	return out
}

// allFit reports whether every one of values fits in bound.
func allFit(values []string, bound int) bool {
	for _, v := range values {
		if !fits(v, bound) {
			return false
		}
	}
	return true
}

// encoder encodes records into lines; a Writer keeps a pool of them.
type encoder struct {
	buf   bytes.Buffer
	json  *json.Encoder
	sha   hash.Hash
	chunk [4 << 10]byte // what sha is fed through: a long value is not copied whole
}

func newEncoder() *encoder {
	e := &encoder{sha: sha256.New()}
	e.json = json.NewEncoder(&e.buf)
	// <, > and & as they are: escaped, each would take six bytes, and a
	// log is no HTML page.
	e.json.SetEscapeHTML(false)
	return e
}

// encode returns rec's line, its line break included, within maxLine
// bytes: its fields cut to their bounds and, should that not be enough,
// to the short form's. The line is e's until e is used again.
func (e *encoder) encode(rec *Record, maxLine int) ([]byte, error) {
	var out any = rec
	if !rec.withinBounds() {
		out = rec.bounded(math.MaxInt, e)
	}
	e.buf.Reset()
	if err := e.json.Encode(out); err != nil {
		return nil, fmt.Errorf("encode audit record: %w", err)
	}
	if e.buf.Len() <= maxLine {
		return e.buf.Bytes(), nil
	}
	e.buf.Reset()
	if err := e.json.Encode(rec.bounded(shortText, e)); err != nil {
		return nil, fmt.Errorf("encode audit record: %w", err)
	}
	return e.buf.Bytes(), nil
}

// cut returns the longest start of s, whole characters, that fits in
// bound bytes of JSON with a marker after it that gives s's length and the
// start of its SHA-256: "…[cut: 61440 bytes, sha256:1a2b3c4d5e6f7a8b]".
// Two long values that differ anywhere are told apart by it.
func (e *encoder) cut(s string, bound int) string {
	e.sha.Reset()
	for rest := s; rest != ""; {
		n := copy(e.chunk[:], rest)
		e.sha.Write(e.chunk[:n])
		rest = rest[n:]
	}
	var sum [sha256.Size]byte
	marker := make([]byte, 0, shortText)
	marker = append(marker, "…[cut: "...)
	marker = strconv.AppendInt(marker, int64(len(s)), 10)
	marker = append(marker, " bytes, sha256:"...)
	marker = hex.AppendEncode(marker, e.sha.Sum(sum[:0])[:8])
	marker = append(marker, ']')

	n, used := 0, 0
	for n < len(s) {
		width, size := jsonRune(s[n:])
		if used+width > bound-len(marker) {
			break
		}
		n, used = n+size, used+width
	}
	return s[:n] + string(marker)
}

// fits reports whether s takes at most bound bytes in a JSON string. It
// is quick for the text of an ordinary record: short, or printable ASCII.
func fits(s string, bound int) bool {
	return len(s) <= bound/6 || longFits(s, bound) // no byte of s takes more than six
}

// longFits is fits, out of line so that the rest inlines.
func longFits(s string, bound int) bool {
	if len(s) > bound {
		return false
	}
	if plain(s) {
		return true
	}
	n := 0
	for i := 0; i < len(s); {
		width, size := jsonRune(s[i:])
		if n += width; n > bound {
			return false
		}
		i += size
	}
	return true
}

// plain reports whether every byte of s takes one in a JSON string:
// printable ASCII but " and \. It reads eight bytes at a time, to cost
// an ordinary User-Agent little.
func plain(s string) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	i := 0
	for ; i+8 <= len(s); i += 8 {
		b := s[i : i+8]
		x := uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 |
			uint64(b[4])<<32 | uint64(b[5])<<40 | uint64(b[6])<<48 | uint64(b[7])<<56
		// A byte that is not ASCII, is below 0x20, or is " or \ sets its
		// high bit in one of the terms; a borrow may set more above it,
		// never one without it.
		quote, backslash := x^('"'*ones), x^('\\'*ones)
		if (x|(x-0x20*ones)|(quote-ones)&^quote|(backslash-ones)&^backslash)&highs != 0 {
			return false
		}
	}
	for ; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' || c >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// jsonRune returns the bytes that the character s starts with takes in a
// JSON string as a Writer encodes it, never less (six for every control
// character, though \n, \t and a few take two), and its size in s.
func jsonRune(s string) (width, size int) {
	switch c := s[0]; {
	case c < 0x20: // \u00XX
		return 6, 1
	case c == '"' || c == '\\':
		return 2, 1
	case c < utf8.RuneSelf:
		return 1, 1
	}
	r, size := utf8.DecodeRuneInString(s)
	if r == utf8.RuneError && size == 1 || r == '\u2028' || r == '\u2029' {
		return 6, size // \ufffd for a byte that is not UTF-8
	}
	return size, size
}
