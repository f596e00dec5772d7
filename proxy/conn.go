package proxy

import (
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// connTracker wraps every accepted client connection: it closes one that
// stays silent for the idle timeout, bounds how many are open at once, in
// all and from one client (clientPrefix), and can close all of them at
// shutdown. net/http forgets a connection once it is hijacked for a
// tunnel, so without this an idle or stuck tunnel would live forever; a
// tunnel stays the client connection it was accepted as.
type connTracker struct {
	idle      time.Duration
	max       int           // 0: no bound
	perClient int           // 0: no bound
	refusal   chan struct{} // bounds the goroutines answering clients over a bound
	// refused and refusedShare count the connections refused at max and
	// at perClient.
	refused, refusedShare atomic.Uint64
	mu                    sync.Mutex
	conns                 map[*idleConn]struct{}
	clients               map[netip.Prefix]int // connections open by clientPrefix, while perClient bounds them
	empty                 chan struct{}        // made by drain, closed when the last connection closes
}

// maxRefusing bounds the connections being answered 503 at once; past it
// a connection over the bound is closed without a word.
const maxRefusing = 32

// refusedHead starts what a client over a connection bound gets; the
// length and one of the bodies below follow.
const refusedHead = "HTTP/1.1 503 Service Unavailable\r\n" +
	"Content-Type: text/plain; charset=utf-8\r\nCache-Control: no-store\r\nRetry-After: 1\r\nConnection: close\r\n" +
	"Content-Length: "

// Why a connection is refused, at the bound in all and at one client's.
const (
	tooManyClients     = "robotsgate has too many clients (ROBOTSGATE_MAX_CONNECTIONS); try again\n"
	tooManyFromAClient = "robotsgate has too many connections from this client (ROBOTSGATE_MAX_CONNECTIONS_PER_CLIENT); close one or try again\n"
)

// DefaultMaxConnectionsPerClient is how many of maxConnections client
// connections one client may hold unless told otherwise: a quarter (at
// least 1), so that it takes several clients at their share to fill them.
func DefaultMaxConnectionsPerClient(maxConnections int) int { return max(maxConnections/4, 1) }

// newConnTracker bounds the connections open at once to max in all and to
// perClient from one client; 0 is no bound.
func newConnTracker(idle time.Duration, max, perClient int) *connTracker {
	t := &connTracker{idle: idle, max: max, perClient: perClient, refusal: make(chan struct{}, maxRefusing), conns: make(map[*idleConn]struct{})}
	if perClient > 0 {
		t.clients = make(map[netip.Prefix]int)
	}
	return t
}

// clientKey is the client a peer's address (host:port, as net/http's
// Request.RemoteAddr spells it) belongs to, for its share of robotsgate's
// bounded resources: the spelling of its clientPrefix, which keeps a ':'
// at its end, as no credential name does, so that no name can pass for an
// address. A name that is no IP address is kept as it is, its port cut.
func clientKey(remote string) string {
	if strings.HasPrefix(remote, "[") {
		if ap, err := netip.ParseAddrPort(remote); err == nil {
			return prefixKey(clientPrefix(ap.Addr()))
		}
	}
	// An IPv4 address:port, as net/http spells every IPv4 peer (a mapped
	// one too): cut to what prefixKey would spell, without an allocation.
	if i := strings.LastIndexByte(remote, ':'); i >= 0 {
		return remote[:i+1]
	}
	return remote
}

// clientPrefix is the client a peer's IP address belongs to: the address,
// an IPv6 one by its /64 (one host's usual allocation: it may use any
// address in it), an IPv4-mapped one as IPv4.
func clientPrefix(addr netip.Addr) netip.Prefix {
	if addr = addr.Unmap(); addr.Is4() {
		return netip.PrefixFrom(addr, 32)
	}
	prefix, _ := addr.Prefix(64) // cannot fail: 64 bits of an IPv6 address
	return prefix
}

// prefixKey spells a clientPrefix as clientKey does: "127.0.0.2:",
// "2001:db8::/64:".
func prefixKey(p netip.Prefix) string {
	if p.Addr().Is4() {
		return p.Addr().String() + ":"
	}
	return p.String() + ":"
}

// remotePrefix is the clientPrefix of c's peer; the zero Prefix, one
// client, for a peer without an IP address. A comparable value rather
// than clientKey's string, so that accepting a connection formats nothing.
func remotePrefix(c net.Conn) netip.Prefix {
	switch addr := c.RemoteAddr().(type) {
	case *net.TCPAddr:
		return clientPrefix(addr.AddrPort().Addr())
	case nil:
		return netip.Prefix{}
	default:
		if ap, err := netip.ParseAddrPort(addr.String()); err == nil {
			return clientPrefix(ap.Addr())
		}
		return netip.Prefix{}
	}
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

// refuse answers a connection over a bound with 503 saying why and closes
// it, without holding up the accept loop or the connections within the
// bounds.
func (t *connTracker) refuse(c net.Conn, why string) {
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
		answer := refusedHead + strconv.Itoa(len(why)) + "\r\n\r\n" + why
		if _, err := io.WriteString(c, answer); err != nil {
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
// it has finished writing what it was writing (a blind tunnel or an
// upgraded connection ends at its next read), and waits for all of them
// to close, or for ctx to end. Closing them outright could cut a
// response's last bytes, written after its body was read.
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
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if ic := l.t.admit(c); ic != nil {
			return ic, nil
		}
	}
}

// admit tracks c, or refuses it and returns nil when it is over a bound:
// the one in all first, as a client within its share still finds no room
// past it.
func (t *connTracker) admit(c net.Conn) *idleConn {
	ic := &idleConn{Conn: c, t: t}
	if t.perClient > 0 {
		ic.client = remotePrefix(c)
	}
	t.mu.Lock()
	switch {
	case t.max > 0 && len(t.conns) >= t.max:
		t.mu.Unlock()
		t.refused.Add(1)
		t.refuse(c, tooManyClients)
		return nil
	case t.perClient > 0 && t.clients[ic.client] >= t.perClient:
		t.mu.Unlock()
		t.refusedShare.Add(1)
		t.refuse(c, tooManyFromAClient)
		return nil
	}
	// The timer starts under the lock, so that drain and closeAll, which
	// may close ic once it is in conns, find it set.
	ic.opened = time.Now()
	ic.timer = time.AfterFunc(t.idle, ic.expire)
	t.conns[ic] = struct{}{}
	if t.perClient > 0 {
		t.clients[ic.client]++
	}
	t.mu.Unlock()
	return ic
}

// idleConn is closed when no byte has moved for the idle timeout. A read
// or write starting pushes the deadline back; one blocked longer than that
// is cut.
type idleConn struct {
	net.Conn
	t      *connTracker
	client netip.Prefix // its peer's clientPrefix, while the tracker bounds them per client
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
		if c.t.perClient > 0 {
			if n := c.t.clients[c.client] - 1; n > 0 {
				c.t.clients[c.client] = n
			} else {
				delete(c.t.clients, c.client)
			}
		}
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
