package report

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
)

// Decoding JSON is most of a report's work, so lines are decoded by one
// worker per CPU, in batches, and counted in the order they were read:
// malformed lines and incidents come out as the log has them.

const batchBytes = 256 << 10

// batch is consecutive lines of one source.
type batch struct {
	data    []byte
	lines   []lineSpan
	records []record
	errs    []error
	decoded chan struct{}
}

type lineSpan struct {
	start, end int
	number     int64
	long       bool // longer than maxLine: malformed, not held
	last       bool // the source's last line, without a line break
	cut        bool // the source could not be read past part of it
}

// pipeline decodes one source's lines and counts them into agg.
type pipeline struct {
	agg     *aggregate
	src     *Source
	count   int64 // lines read
	current *batch
	jobs    chan *batch // to the decoders
	ordered chan *batch // to the counter, in read order
	free    chan *batch
	wg      sync.WaitGroup
}

func newPipeline(agg *aggregate, src *Source) *pipeline {
	workers := runtime.GOMAXPROCS(0)
	p := &pipeline{
		agg: agg, src: src,
		jobs:    make(chan *batch, workers),
		ordered: make(chan *batch, 2*workers),
		free:    make(chan *batch, 3*workers+2),
	}
	p.wg.Add(workers + 1)
	for range workers {
		go p.decode()
	}
	go p.tally()
	p.current = p.newBatch()
	return p
}

func (p *pipeline) newBatch() *batch {
	select {
	case b := <-p.free:
		b.data, b.lines, b.records, b.errs = b.data[:0], b.lines[:0], b.records[:0], b.errs[:0]
		b.decoded = make(chan struct{})
		return b
	default:
		return &batch{data: make([]byte, 0, batchBytes+4096), decoded: make(chan struct{})}
	}
}

// add queues one line (without copying a long one).
func (p *pipeline) add(ctx context.Context, line []byte, long, last bool) error {
	p.count++
	b := p.current
	span := lineSpan{start: len(b.data), number: p.count, long: long, last: last}
	if !long {
		b.data = append(b.data, line...)
	}
	span.end = len(b.data)
	b.lines = append(b.lines, span)
	if len(b.data) >= batchBytes || len(b.lines) >= 4096 {
		return p.send(ctx)
	}
	return nil
}

// truncate notes that the source ended inside a line.
func (p *pipeline) truncate() {
	p.count++
	b := p.current
	b.lines = append(b.lines, lineSpan{start: len(b.data), end: len(b.data), number: p.count, last: true, cut: true})
}

func (p *pipeline) send(ctx context.Context) error {
	b := p.current
	p.current = p.newBatch()
	select {
	case p.ordered <- b:
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case p.jobs <- b:
		return nil
	case <-ctx.Done():
		close(b.decoded) // the counter may be waiting for it
		return ctx.Err()
	}
}

// close counts what is queued and stops the workers.
func (p *pipeline) close() {
	if len(p.current.lines) > 0 {
		p.ordered <- p.current
		p.jobs <- p.current
	}
	close(p.jobs)
	close(p.ordered)
	p.wg.Wait()
	p.src.Lines = p.count
}

func (p *pipeline) decode() {
	defer p.wg.Done()
	for b := range p.jobs {
		b.records = append(b.records, make([]record, len(b.lines)-len(b.records))...)[:len(b.lines)]
		b.errs = append(b.errs, make([]error, len(b.lines)-len(b.errs))...)[:len(b.lines)]
		for i, l := range b.lines {
			line := b.data[l.start:l.end]
			switch {
			case l.cut:
				b.errs[i] = errCut
			case l.long:
				b.errs[i] = fmt.Errorf("line longer than %d bytes", maxLine)
			case len(bytes.TrimSpace(line)) == 0:
				b.errs[i] = errBlank
			default:
				b.errs[i] = b.records[i].decode(line)
			}
		}
		close(b.decoded)
	}
}

// tally counts batches in the order they were read.
func (p *pipeline) tally() {
	defer p.wg.Done()
	for b := range p.ordered {
		<-b.decoded
		for i, l := range b.lines {
			if i >= len(b.errs) { // a batch abandoned when ctx ended
				break
			}
			switch err := b.errs[i]; {
			case err == nil:
				p.agg.add(&b.records[i])
			case err == errBlank:
			case l.last && !l.long:
				p.src.Truncated = true
			default:
				p.agg.problem(p.src.Name, l.number, err)
			}
		}
		select {
		case p.free <- b:
		default:
		}
	}
}

// Marks of lines that are not records, and not malformed either.
var (
	errBlank = errors.New("blank line")
	errCut   = errors.New("the source ended inside this line")
)
