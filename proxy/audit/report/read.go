package report

import (
	"bufio"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"time"
)

// maxLine bounds a line: audit records are a few hundred bytes, and a
// longer line is skipped as malformed without being held in memory.
const maxLine = 1 << 20

// Options tune a Reader. The zero value counts every record.
type Options struct {
	Filter Filter
	// Top is how many rules and paths the top lists hold; 0 means
	// DefaultTop.
	Top int
	// Now is the report's generation time; zero means time.Now().
	Now time.Time
}

// Reader reads audit logs into one report. It is not safe for
// concurrent use: the sources of one report are read one after another,
// as the files of a rotated log are.
type Reader struct {
	opts    Options
	agg     *aggregate
	sources []Source
}

// NewReader starts an empty report.
func NewReader(opts Options) *Reader {
	if opts.Top <= 0 {
		opts.Top = DefaultTop
	}
	return &Reader{opts: opts, agg: newAggregate(opts.Filter)}
}

// Read counts every record of one log, named name in the report. A log
// starting with gzip's magic bytes is decompressed, whatever its name.
// Malformed lines are counted and never stop it; the error says why the
// log could not be read to its end (what was read still counts) or that
// ctx ended.
func (rd *Reader) Read(ctx context.Context, name string, r io.Reader) error {
	src := Source{Name: name}
	err := rd.read(ctx, &src, r)
	if err != nil {
		src.Error = err.Error()
	}
	rd.sources = append(rd.sources, src)
	return err
}

func (rd *Reader) read(ctx context.Context, src *Source, r io.Reader) error {
	br := bufio.NewReaderSize(r, 256<<10)
	if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return fmt.Errorf("%s: gzip: %w", src.Name, err)
		}
		defer zr.Close()
		src.Gzip = true
		br = bufio.NewReaderSize(zr, 256<<10)
	}
	lines := newPipeline(rd.agg, src)
	defer lines.close()
	var long bool // inside a line longer than maxLine
	var held []byte
	for {
		chunk, err := br.ReadSlice('\n')
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			if !long && len(held)+len(chunk) <= maxLine {
				held = append(held, chunk...)
			} else {
				long, held = true, held[:0]
			}
			continue
		case err != nil && !errors.Is(err, io.EOF):
			if len(chunk) > 0 || len(held) > 0 || long {
				lines.truncate()
			}
			return fmt.Errorf("%s: line %d: %w", src.Name, lines.count, err)
		}
		line := chunk
		if len(held) > 0 {
			held = append(held, chunk...)
			line = held
		}
		last := err != nil // without a line break
		if last && len(line) == 0 && !long {
			return nil
		}
		if err := lines.add(ctx, line, long || len(line) > maxLine, last); err != nil {
			return err
		}
		long, held = false, held[:0]
		if last {
			return nil
		}
	}
}

// Report is what the logs read so far say.
func (rd *Reader) Report() *Report {
	rep := rd.agg.report(rd.opts.Top)
	rep.Filter = rd.opts.Filter
	rep.Sources = append([]Source{}, rd.sources...)
	rep.Generated = rd.opts.Now
	if rep.Generated.IsZero() {
		rep.Generated = time.Now()
	}
	return rep
}

// matcher is a Filter made quick to apply.
type matcher struct {
	since, until time.Time
	tokens       []string
	origins      []string
}

func newMatcher(f Filter) matcher {
	m := matcher{since: f.Since, until: f.Until, tokens: f.Tokens}
	for _, o := range f.Origins {
		m.origins = append(m.origins, strings.TrimSuffix(o, "/"))
	}
	return m
}

func (m *matcher) match(r *record) bool {
	if !m.since.IsZero() && r.Time.Before(m.since) || !m.until.IsZero() && !r.Time.Before(m.until) {
		return false
	}
	if len(m.tokens) > 0 && !anyFold(m.tokens, func(t string) bool {
		return strings.EqualFold(t, r.Token) || r.Credential != "" && strings.EqualFold(t, r.Credential)
	}) {
		return false
	}
	if len(m.origins) > 0 && !anyFold(m.origins, func(o string) bool { return originMatches(o, r.Origin) }) {
		return false
	}
	return true
}

func anyFold(patterns []string, match func(string) bool) bool {
	for _, p := range patterns {
		if match(p) {
			return true
		}
	}
	return false
}

// originMatches says whether pattern names origin: the whole origin
// ("https://example.com:8443"), its host and port, or its host alone. A
// default port given (example.com:443) matches the origin written
// without it, as the proxy writes them.
func originMatches(pattern, origin string) bool {
	if strings.Contains(pattern, "://") {
		return strings.EqualFold(pattern, origin)
	}
	scheme, hostport, ok := strings.Cut(origin, "://")
	if !ok {
		return false
	}
	if strings.EqualFold(pattern, hostport) {
		return true
	}
	host, port := hostport, ""
	if h, p, err := net.SplitHostPort(hostport); err == nil {
		host, port = h, p
	}
	if ph, pp, err := net.SplitHostPort(pattern); err == nil {
		if port == "" {
			port = defaultPort(scheme)
		}
		return pp == port && strings.EqualFold(ph, strings.Trim(host, "[]"))
	}
	return strings.EqualFold(strings.Trim(pattern, "[]"), strings.Trim(host, "[]"))
}

func defaultPort(scheme string) string {
	switch strings.ToLower(scheme) {
	case "http":
		return "80"
	case "https":
		return "443"
	}
	return ""
}
