// Package audit writes robotsgate's audit log: one JSON object per line for
// every decision the proxy takes, so an operator can prove what a crawler
// did and did not fetch.
//
// Records are buffered and flushed at least every FlushInterval and on
// Close, which the proxy calls on shutdown: a SIGTERM loses no record.
package audit

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// Record is one decision. The JSON names are the audit log's public
// format; README.md documents each field.
type Record struct {
	Time      time.Time `json:"time"`
	Client    string    `json:"client"`           // the client's address
	Method    string    `json:"method"`           // CONNECT for tunnels that were not intercepted
	URL       string    `json:"url"`              // the full URL requested
	Origin    string    `json:"origin,omitempty"` // whose robots.txt applies
	Tunnel    string    `json:"tunnel,omitempty"` // the CONNECT target, for requests inside an intercepted tunnel
	UserAgent string    `json:"user_agent"`
	Token     string    `json:"token"` // the product token derived from the User-Agent; "" means only "*" groups apply

	Verdict      string `json:"verdict"` // "allow", "disallow", or "error" when no verdict could be reached
	Reason       string `json:"reason"`  // "disallow: /private/ (line 7)", "robots.txt 503: complete disallow", ...
	Rule         string `json:"rule,omitempty"`
	RuleLine     int    `json:"rule_line,omitempty"`
	Group        string `json:"group,omitempty"` // the user-agent group that applied, "*" for the global one
	PathsChecked bool   `json:"paths_checked"`   // false for a tunnel that was not intercepted: only the host was judged

	Robots       string `json:"robots,omitempty"`        // robots.txt fetch outcome: ok, unavailable, unreachable
	RobotsStatus int    `json:"robots_status,omitempty"` // its HTTP status, when there was one
	RobotsCache  string `json:"robots_cache,omitempty"`  // hit, loaded, or stale (origin unreachable, last good copy obeyed)

	Mode      string  `json:"mode"`      // enforce or audit
	Forwarded bool    `json:"forwarded"` // the request went to the origin
	Status    int     `json:"status"`    // the status the client received
	Upstream  int     `json:"upstream_status,omitempty"`
	Bytes     int64   `json:"bytes"` // response body bytes relayed from the origin
	Duration  float64 `json:"duration_ms"`
	Error     string  `json:"error,omitempty"` // what went wrong upstream, in a few words
}

// FlushInterval bounds how long a record waits in the buffer.
const FlushInterval = 200 * time.Millisecond

// Writer appends records to a file or standard output. It is safe for
// concurrent use.
type Writer struct {
	mu     sync.Mutex
	buf    *bufio.Writer
	file   io.Closer // nil for standard output
	err    error     // the first write error; later records are dropped
	done   chan struct{}
	wg     sync.WaitGroup
	closed bool
}

// Open opens the audit log: "-" is standard output, anything else a file
// opened for appending (created with mode 0640).
func Open(path string) (*Writer, error) {
	if path == "-" || path == "" {
		return NewWriter(os.Stdout, nil), nil
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o640)
	if err != nil {
		return nil, fmt.Errorf("open audit log: %w", err)
	}
	return NewWriter(f, f), nil
}

// NewWriter writes records to w; closer, when not nil, is closed by Close.
func NewWriter(w io.Writer, closer io.Closer) *Writer {
	aw := &Writer{buf: bufio.NewWriterSize(w, 64<<10), file: closer, done: make(chan struct{})}
	aw.wg.Add(1)
	go aw.flushLoop()
	return aw
}

func (w *Writer) flushLoop() {
	defer w.wg.Done()
	ticker := time.NewTicker(FlushInterval)
	defer ticker.Stop()
	for {
		select {
		case <-w.done:
			return
		case <-ticker.C:
			w.mu.Lock()
			w.flushLocked()
			w.mu.Unlock()
		}
	}
}

func (w *Writer) flushLocked() {
	if w.err == nil && w.buf.Buffered() > 0 {
		w.err = w.buf.Flush()
	}
}

// Write appends one record. It returns the first write error the log has
// met, so the caller can report a full disk once.
func (w *Writer) Write(rec *Record) error {
	line, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("encode audit record: %w", err)
	}
	line = append(line, '\n')
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return fmt.Errorf("audit log closed")
	}
	if w.err == nil {
		_, w.err = w.buf.Write(line)
	}
	if w.err != nil {
		return fmt.Errorf("write audit log: %w", w.err)
	}
	return nil
}

// Close flushes every record and closes the file.
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

	w.mu.Lock()
	defer w.mu.Unlock()
	w.flushLocked()
	err := w.err
	if w.file != nil {
		if cerr := w.file.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		return fmt.Errorf("close audit log: %w", err)
	}
	return nil
}
