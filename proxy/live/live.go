// Package live keeps an operator's file in force: it reads the file once at
// start, puts what it builds from it in force atomically, and reads it again
// on demand (SIGHUP) or when it changes (Watch). A file that does not load
// leaves the value in force as it was; the error, with the lines the loader
// named, is logged, counted and reported by State until a later attempt
// succeeds.
//
// Readers call Current, which never blocks: a request reads the value once
// and keeps it, so a request in flight finishes under the file it started
// with while the next one sees the new file. Reloads are serialised: when a
// SIGHUP and Watch see a change at the same moment, one of them puts it in
// force (and logs it) and the other finds it in force already (a SIGHUP
// then logs "unchanged", Watch nothing).
//
// Each value in force has a version, the first 12 hex digits of the SHA-256
// of the file's bytes, so the same file has the same version on every
// instance of a fleet. A reload that finds the bytes in force keeps the
// value (and whatever it remembers) and counts "unchanged".
//
// Watch costs one stat per interval. It sees a file written in place, and
// one replaced by a rename (as editors and configuration tools do), by its
// size, modification time, inode and change time. A changed file is read
// once its stat has held still for one interval, so a file written in
// place is not read half-written (replacing it by a rename is safer
// still); a file missing for a while (between an unlink and its
// replacement) is logged once and keeps the value in force.
package live

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// DefaultMaxBytes is the bound on a file read when Options.MaxBytes is 0.
const DefaultMaxBytes = 16 << 20

// racyWindow is how close to the moment a file was read its modification
// time may be for a later write to leave its stat unchanged: file systems
// stamp times coarsely (a kernel tick, a second or two on some), so a write
// in the same tick as the read could otherwise go unseen for good. Such a
// file is read again on the next tick of Watch, quietly if it is the same.
const racyWindow = 2 * time.Second

// Options configure a File.
type Options[T any] struct {
	// Name says what the file is, in log messages ("<Name> reloaded") and
	// State: "policy", "credentials".
	Name string
	// Path is the file.
	Path string
	// Load builds the value from the file's bytes; its error should name
	// the file and line. Reloads wait for it (readers do not), so it must
	// not call Reload.
	Load func(path string, data []byte) (T, error)
	// Replaces, if set, is asked on each reload whether next may replace
	// the value in force, cur; its error refuses next as a Load error does
	// (a file cut short to nothing, say).
	Replaces func(next, cur T) error
	// Attrs, if set, gives log attributes (key, value pairs) describing a
	// value put in force, such as how many entries it has.
	Attrs func(T) []any
	// MaxBytes bounds the file (DefaultMaxBytes when 0): a larger one does
	// not load.
	MaxBytes int64
	// MetricsPrefix names the metrics, "robotsgate_" + Name when empty:
	// <prefix>_reloads_total{result}, <prefix>_info{version,file} and
	// <prefix>_loaded_timestamp_seconds.
	MetricsPrefix string
	Logger        *slog.Logger
}

// File is a file read, put in force, and read again on demand or when it
// changes. It is safe for concurrent use.
type File[T any] struct {
	opts Options[T]
	log  *slog.Logger
	// file is Path as a metric label (valid UTF-8).
	file  string
	cur   atomic.Pointer[inForce[T]]
	state atomic.Pointer[State]

	// mu serialises the attempts to read the file, and guards what follows.
	mu sync.Mutex
	// seen is the stat of the file last read, seenSum its bytes' hash, and
	// racy whether it was read so soon after a write that another write
	// could leave seen unchanged.
	seen    stamp
	seenSum [sha256.Size]byte
	racy    bool
	// pending is a changed stat Watch saw at its last tick, not read yet.
	pending stamp
	// failed is why the last attempt failed (nil if it did not), at when.
	failed   error
	failedAt time.Time
	// missing is why Watch cannot stat the file (nil while it can), since
	// missingAt: one log line per streak.
	missing   error
	missingAt time.Time

	reloads                            *prometheus.CounterVec
	reloadOK, reloadSame, reloadFailed prometheus.Counter
	infoDesc, loadedDesc               *prometheus.Desc
}

// inForce is the value in force and what it was built from.
type inForce[T any] struct {
	value   T
	sum     [sha256.Size]byte
	version string
	loaded  time.Time
}

// State is what a File has in force, for /healthz and `robotsgate config`.
type State struct {
	Name string
	Path string
	// Version is the first 12 hex digits of the SHA-256 of the bytes in
	// force; empty when there is no file.
	Version string
	// Loaded is when the version in force was put in force.
	Loaded time.Time
	// Err is why the last attempt to read the file failed, at Failed; nil
	// when it succeeded. The version in force is then still Version.
	Err    error
	Failed time.Time
}

var metricName = regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*$`)

// New reads the file and puts what Load builds from it in force. Its error
// (the file cannot be read or does not load) should stop the start.
func New[T any](opts Options[T]) (*File[T], error) {
	if opts.Load == nil {
		return nil, errors.New("live: no Load function")
	}
	if opts.MaxBytes <= 0 {
		opts.MaxBytes = DefaultMaxBytes
	}
	if opts.MetricsPrefix == "" {
		opts.MetricsPrefix = "robotsgate_" + opts.Name
	}
	if !metricName.MatchString(opts.MetricsPrefix) {
		return nil, fmt.Errorf("live: %q is not a metric name prefix", opts.MetricsPrefix)
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	p := opts.MetricsPrefix
	f := &File[T]{
		opts: opts,
		log:  opts.Logger,
		file: strings.ToValidUTF8(opts.Path, "\uFFFD"),
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: p + "_reloads_total",
			Help: fmt.Sprintf("Reloads of the %s file (SIGHUP or a change seen), by result: ok; unchanged, the bytes in force again; failed, the previous one stays in force.", opts.Name),
		}, []string{"result"}),
		infoDesc: prometheus.NewDesc(p+"_info",
			fmt.Sprintf("The %s file in force: its version (the first 12 hex digits of the SHA-256 of its bytes) and path.", opts.Name),
			[]string{"version", "file"}, nil),
		loadedDesc: prometheus.NewDesc(p+"_loaded_timestamp_seconds",
			fmt.Sprintf("When the %s file in force was loaded, in seconds since the Unix epoch.", opts.Name), nil, nil),
	}
	f.reloadOK = f.reloads.WithLabelValues("ok")
	f.reloadSame = f.reloads.WithLabelValues("unchanged")
	f.reloadFailed = f.reloads.WithLabelValues("failed")

	data, st, start, err := f.read()
	if err != nil {
		return nil, err
	}
	value, err := opts.Load(opts.Path, data)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(data)
	f.saw(st, sum, start)
	f.cur.Store(&inForce[T]{value: value, sum: sum, version: version(sum), loaded: time.Now()})
	f.publish()
	return f, nil
}

// Current is the value in force. It never blocks; a caller that reads it
// once per request keeps that value for the whole request, whatever
// reloads meanwhile.
func (f *File[T]) Current() T { return f.cur.Load().value }

// State says which version is in force, since when, and whether the last
// attempt to read the file failed. It never waits for a reload.
func (f *File[T]) State() State { return *f.state.Load() }

// Reload reads the file again and puts it in force. A file that cannot be
// read or does not load leaves the value in force; the error says why.
// The same bytes as those in force keep the value in force.
func (f *File[T]) Reload() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	data, st, start, err := f.read()
	if err != nil {
		f.unreadable(st, err)
		return err
	}
	return f.apply(data, st, start)
}

// Watch, until ctx ends, stats the file every interval and reloads it once
// a change has held still for one interval. every <= 0 watches nothing.
func (f *File[T]) Watch(ctx context.Context, every time.Duration) {
	if every <= 0 {
		return
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			f.check()
		}
	}
}

// check is one tick of Watch.
func (f *File[T]) check() {
	f.mu.Lock()
	defer f.mu.Unlock()
	fi, err := os.Stat(f.opts.Path)
	if err != nil {
		if f.missing == nil {
			f.missing, f.missingAt = err, time.Now()
			f.log.Warn(f.opts.Name+" file cannot be read; keeping the one in force",
				"file", f.opts.Path, "version", f.cur.Load().version, "err", err)
			f.publish()
		}
		return
	}
	if f.missing != nil {
		f.missing = nil
		f.publish()
	}
	switch now := stampOf(fi); {
	case now == f.seen && !f.racy:
		f.pending = stamp{}
		return
	case now != f.seen && now != f.pending:
		// Changed since the last tick: read once it has held still for a
		// tick, so that a file written in place (truncated, then written)
		// is not read half-written.
		f.pending = now
		return
	}
	f.pending = stamp{}
	data, st, start, err := f.read()
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return // gone again since the stat: the next tick says so
	case err != nil:
		if st == (stamp{}) {
			st = stampOf(fi)
		}
		f.unreadable(st, err)
		return
	}
	// A file still being written is read again once it holds still.
	if fi, err := os.Stat(f.opts.Path); err != nil || stampOf(fi) != st {
		return
	}
	if sum := sha256.Sum256(data); st == f.seen && sum == f.seenSum {
		f.saw(st, sum, start) // a racy file read again: nothing new
		return
	}
	f.apply(data, st, start)
}

// apply puts data, read with stat st from start on, in force; f.mu is held.
func (f *File[T]) apply(data []byte, st stamp, start time.Time) error {
	sum := sha256.Sum256(data)
	f.saw(st, sum, start)
	f.missing = nil
	cur := f.cur.Load()
	if sum == cur.sum {
		f.failed = nil
		f.reloadSame.Inc()
		f.publish()
		f.log.Info(f.opts.Name+" reloaded", f.attrs(cur, "unchanged", true)...)
		return nil
	}
	value, err := f.opts.Load(f.opts.Path, data)
	if err == nil && f.opts.Replaces != nil {
		err = f.opts.Replaces(value, cur.value)
	}
	if err != nil {
		f.fail(err)
		return err
	}
	next := &inForce[T]{value: value, sum: sum, version: version(sum), loaded: time.Now()}
	f.cur.Store(next)
	f.failed = nil
	f.reloadOK.Inc()
	f.publish()
	f.log.Info(f.opts.Name+" reloaded", f.attrs(next)...)
	return nil
}

// fail records a failed attempt; f.mu is held.
func (f *File[T]) fail(err error) {
	f.failed, f.failedAt = err, time.Now()
	f.reloadFailed.Inc()
	f.publish()
	f.log.Error(f.opts.Name+" file not reloaded; keeping the previous one",
		"file", f.opts.Path, "version", f.cur.Load().version, "err", err)
}

// unreadable records a failed attempt to read the file of stat st (zero if
// it could not be opened); f.mu is held. Watch tries that file again only
// once it changes.
func (f *File[T]) unreadable(st stamp, err error) {
	if st != (stamp{}) {
		f.seen, f.racy = st, false
	}
	f.fail(err)
}

// saw records the file read; f.mu is held (or f is not shared yet).
func (f *File[T]) saw(st stamp, sum [sha256.Size]byte, start time.Time) {
	f.seen, f.seenSum = st, sum
	d := start.Sub(time.Unix(0, st.mtime))
	f.racy = d < racyWindow && d > -racyWindow
}

// attrs are the log attributes of v put in force, then extra.
func (f *File[T]) attrs(v *inForce[T], extra ...any) []any {
	a := []any{"file", f.opts.Path, "version", v.version}
	if f.opts.Attrs != nil {
		a = append(a, f.opts.Attrs(v.value)...)
	}
	return append(a, extra...)
}

// publish makes State say what f has now; f.mu is held.
func (f *File[T]) publish() {
	cur := f.cur.Load()
	s := State{Name: f.opts.Name, Path: f.opts.Path, Version: cur.version, Loaded: cur.loaded}
	switch {
	case f.missing != nil:
		s.Err, s.Failed = f.missing, f.missingAt
	case f.failed != nil:
		s.Err, s.Failed = f.failed, f.failedAt
	}
	f.state.Store(&s)
}

// read reads the file, bounded. st is its stat, taken before the bytes
// (also when they could not be read, once the file is open); start is when
// the read began.
func (f *File[T]) read() (data []byte, st stamp, start time.Time, err error) {
	start = time.Now()
	file, err := os.Open(f.opts.Path)
	if err != nil {
		return nil, stamp{}, start, err
	}
	defer file.Close()
	fi, err := file.Stat()
	if err != nil {
		return nil, stamp{}, start, fmt.Errorf("stat %s: %w", f.opts.Path, err)
	}
	st = stampOf(fi)
	if !fi.Mode().IsRegular() {
		return nil, st, start, fmt.Errorf("%s is not a regular file", f.opts.Path)
	}
	data, err = io.ReadAll(io.LimitReader(file, f.opts.MaxBytes+1))
	if err != nil {
		return nil, st, start, fmt.Errorf("read %s: %w", f.opts.Path, err)
	}
	if int64(len(data)) > f.opts.MaxBytes {
		return nil, st, start, fmt.Errorf("%s is larger than %s", f.opts.Path, size(f.opts.MaxBytes))
	}
	return data, st, start, nil
}

func size(n int64) string {
	if n%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d bytes", n)
}

func version(sum [sha256.Size]byte) string { return hex.EncodeToString(sum[:6]) }

// String renders s on one line, as /healthz shows it:
// "policy: policy.yaml version 3f2a9c1b04de loaded 2026-11-26T12:00:00Z",
// followed by "; not reloaded at TIME: ERR" when the last attempt failed.
func (s State) String() string {
	if s.Version == "" {
		return s.Name + ": none"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s version %s loaded %s", s.Name, s.Path, s.Version, s.Loaded.UTC().Format(time.RFC3339))
	if s.Err != nil {
		// An error may list several lines: one line here.
		msg := strings.Join(strings.Fields(strings.ReplaceAll(s.Err.Error(), "\n", "; ")), " ")
		fmt.Fprintf(&b, "; not reloaded at %s: %s", s.Failed.UTC().Format(time.RFC3339), msg)
	}
	return b.String()
}

// Describe and Collect make a File a prometheus.Collector: its reloads, the
// version in force and when it was loaded.
func (f *File[T]) Describe(ch chan<- *prometheus.Desc) { prometheus.DescribeByCollect(f, ch) }

func (f *File[T]) Collect(ch chan<- prometheus.Metric) {
	f.reloads.Collect(ch)
	cur := f.cur.Load()
	ch <- prometheus.MustNewConstMetric(f.infoDesc, prometheus.GaugeValue, 1, cur.version, f.file)
	ch <- prometheus.MustNewConstMetric(f.loadedDesc, prometheus.GaugeValue, float64(cur.loaded.UnixNano())/1e9)
}
