package proxy

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// connTracker wraps every accepted client connection: it closes one that
// stays silent for the idle timeout, bounds how many are open at once, and
// can close all of them at shutdown. net/http forgets a connection once it
// is hijacked for a tunnel, so without this an idle or stuck tunnel would
// live forever.
type connTracker struct {
	idle    time.Duration
	max     int           // 0: no bound
	refusal chan struct{} // bounds the goroutines answering clients over the bound
	refused atomic.Uint64
	mu      sync.Mutex
	conns   map[*idleConn]struct{}
	empty   chan struct{} // made by drain, closed when the last connection closes
}

// maxRefusing bounds the connections being answered 503 at once; past it
// a connection over the bound is closed without a word.
const maxRefusing = 32

// refusedAnswer is what a client over the connection bound gets.
const refusedAnswer = "HTTP/1.1 503 Service Unavailable\r\n" +
	"Content-Type: text/plain; charset=utf-8\r\nCache-Control: no-store\r\nRetry-After: 1\r\nConnection: close\r\n" +
	"Content-Length: 72\r\n\r\n" +
	"robotsgate has too many clients (ROBOTSGATE_MAX_CONNECTIONS); try again\n"

func newConnTracker(idle time.Duration, max int) *connTracker {
	return &connTracker{idle: idle, max: max, refusal: make(chan struct{}, maxRefusing), conns: make(map[*idleConn]struct{})}
}

// open is how many client connections are open.
func (t *connTracker) open() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.conns)
}

// closeWrite half-closes c when it can: a TCP connection, or a wrapper
// that passes CloseWrite on.
func closeWrite(c net.Conn) error {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return errors.ErrUnsupported
}

// refuse answers a connection over the bound with 503 and closes it,
// without holding up the accept loop or the connections within the bound.
func (t *connTracker) refuse(c net.Conn) {
	t.refused.Add(1)
	select {
	case t.refusal <- struct{}{}:
	default:
		c.Close()
		return
	}
	go func() {
		defer func() { <-t.refusal }()
		defer c.Close()
		c.SetDeadline(time.Now().Add(time.Second))
		if _, err := io.WriteString(c, refusedAnswer); err != nil {
			return
		}
		// Read what the client sent until it closes, so that closing with
		// its request unread does not reset the connection before it has
		// read the answer.
		closeWrite(c)
		io.Copy(io.Discard, io.LimitReader(c, 64<<10))
	}()
}

func (t *connTracker) listen(ln net.Listener) net.Listener {
	return &trackingListener{Listener: ln, t: t}
}

// drain ends every connection's reads now, so each one closes as soon as
// it has finished writing what it was writing (goproxy closes a tunnel
// whose next request cannot be read), and waits for all of them to close,
// or for ctx to end. Closing them outright could cut a response's last
// bytes, written after its body was read.
func (t *connTracker) drain(ctx context.Context) {
	t.mu.Lock()
	now := time.Now()
	for c := range t.conns {
		c.Conn.SetReadDeadline(now)
	}
	if t.empty == nil {
		t.empty = make(chan struct{})
	}
	empty := t.empty
	if len(t.conns) == 0 {
		close(empty)
		t.empty = nil
	}
	t.mu.Unlock()
	select {
	case <-empty:
	case <-ctx.Done():
	}
}

func (t *connTracker) closeAll() {
	t.mu.Lock()
	conns := make([]*idleConn, 0, len(t.conns))
	for c := range t.conns {
		conns = append(conns, c)
	}
	t.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
}

type trackingListener struct {
	net.Listener
	t *connTracker
}

func (l *trackingListener) Accept() (net.Conn, error) {
	var c net.Conn
	for {
		var err error
		if c, err = l.Listener.Accept(); err != nil {
			return nil, err
		}
		if l.t.max <= 0 || l.t.open() < l.t.max {
			break
		}
		l.t.refuse(c)
	}
	ic := &idleConn{Conn: c, t: l.t, opened: time.Now()}
	ic.timer = time.AfterFunc(l.t.idle, ic.expire)
	l.t.mu.Lock()
	l.t.conns[ic] = struct{}{}
	l.t.mu.Unlock()
	return ic, nil
}

// idleConn is closed when no byte has moved for the idle timeout. A read
// or write starting pushes the deadline back; one blocked longer than that
// is cut.
type idleConn struct {
	net.Conn
	t      *connTracker
	timer  *time.Timer
	opened time.Time
	// active is when the last read or write started, as time since
	// opened: an atomic store per call, where resetting the timer on each
	// would take the runtime's timer lock twice per request.
	active    atomic.Int64
	closed    atomic.Bool
	closeOnce sync.Once
}

func (c *idleConn) Read(p []byte) (int, error) {
	c.active.Store(int64(time.Since(c.opened)))
	return c.Conn.Read(p)
}

func (c *idleConn) Write(p []byte) (int, error) {
	c.active.Store(int64(time.Since(c.opened)))
	return c.Conn.Write(p)
}

// expire runs when the timer fires: it closes the connection if it has
// been silent for the idle timeout, and otherwise waits for the rest.
func (c *idleConn) expire() {
	silent := time.Since(c.opened) - time.Duration(c.active.Load())
	if silent < c.t.idle {
		c.timer.Reset(c.t.idle - silent)
		if c.closed.Load() {
			c.timer.Stop() // Close stopped it before this Reset: it stays stopped
		}
		return
	}
	c.Close()
}

func (c *idleConn) Close() error {
	err := net.ErrClosed
	c.closeOnce.Do(func() {
		c.closed.Store(true)
		c.timer.Stop()
		c.t.mu.Lock()
		delete(c.t.conns, c)
		if len(c.t.conns) == 0 && c.t.empty != nil {
			close(c.t.empty)
			c.t.empty = nil
		}
		c.t.mu.Unlock()
		err = c.Conn.Close()
	})
	return err
}

// CloseWrite and CloseRead let a tunnel be half-closed, as a bare TCP
// connection can be.
func (c *idleConn) CloseWrite() error { return closeWrite(c.Conn) }

func (c *idleConn) CloseRead() error {
	if hc, ok := c.Conn.(interface{ CloseRead() error }); ok {
		return hc.CloseRead()
	}
	return errors.ErrUnsupported
}
