package h1

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// UpstreamOptions configure an Upstream; zero values take the defaults.
type UpstreamOptions struct {
	// DialTimeout bounds a connection attempt (2 s).
	DialTimeout time.Duration
	// Timeout bounds the wait for the response head once the request is sent, each
	// write of a streamed request body, and each read of the response body (30 s).
	Timeout time.Duration
	// MaxIdle is how many idle connections are kept (512); IdleTimeout how long one is
	// kept unused (90 s).
	MaxIdle     int
	IdleTimeout time.Duration
}

// Upstream is one replica of a service and its pool of keep-alive connections.
type Upstream struct {
	addr, host string
	tls        *tls.Config
	o          UpstreamOptions
	mu         sync.Mutex
	idle       []*upConn // most recently used last
}

// smallBody is the largest request body read whole before it is sent: sent in one write
// with the head, and sent again when a reused connection turns out to be closed.
const smallBody = 64 << 10

// probeAfter: a connection idle this long is checked before reuse (a non-blocking peek)
// for a close by the service; one used more recently is trusted.
const probeAfter = 50 * time.Millisecond

// maxResponseHead bounds a service's response head.
const maxResponseHead = 64 << 10

// upstreamBuffer is the size of an upstream connection's read buffer.
const upstreamBuffer = 16 << 10

// NewUpstream returns the upstream at u (http or https; its path is not used).
func NewUpstream(u *url.URL, o UpstreamOptions) *Upstream {
	if o.DialTimeout <= 0 {
		o.DialTimeout = 2 * time.Second
	}
	if o.Timeout <= 0 {
		o.Timeout = 30 * time.Second
	}
	if o.MaxIdle <= 0 {
		o.MaxIdle = 512
	}
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = 90 * time.Second
	}
	addr := u.Host
	if u.Port() == "" {
		port := "80"
		if u.Scheme == "https" {
			port = "443"
		}
		addr = net.JoinHostPort(u.Hostname(), port)
	}
	up := &Upstream{addr: addr, host: u.Host, o: o}
	if u.Scheme == "https" {
		up.tls = &tls.Config{ServerName: u.Hostname(), MinVersion: tls.VersionTLS12}
	}
	return up
}

// String is the replica's address.
func (u *Upstream) String() string { return u.addr }

type upConn struct {
	nc        net.Conn
	raw       syscall.RawConn // the TCP socket, for the liveness peek
	buf       []byte          // read buffer; unread input is buf[r:w]
	r, w      int
	out       []byte
	idleSince time.Time
	resp      response
	dl        deadline // both directions, as set by arm
}

// arm sets the connection's deadline, both ways, to now+d (see deadline).
func (uc *upConn) arm(now time.Time, d time.Duration) {
	if uc.dl.need(now, d) {
		_ = uc.nc.SetDeadline(uc.dl.at)
	}
}

// ClientBodyError is a failure to read the client's request body while forwarding it:
// the client's fault (the body's own error says which), not the service's.
type ClientBodyError struct{ Err error }

func (e *ClientBodyError) Error() string { return "reading the request body: " + e.Err.Error() }
func (e *ClientBodyError) Unwrap() error { return e.Err }

// Forward sends r to the replica, with the header fields given (the caller chooses
// which of the client's fields go, and adds its own, each line ending in CRLF), and
// copies the answer to w. A dial failure is returned as it is (a *net.OpError with Op
// "dial") before anything of the body has been sent, so the caller may call Forward on
// another replica. Once w's head has gone out an error can only cut the answer short: w
// is then aborted, and the client's connection closes.
func (u *Upstream) Forward(w *ResponseWriter, r *Request, fields []byte) error {
	b := &r.out
	if !b.prepared {
		if err := b.prepare(r); err != nil {
			return err
		}
	}
	for attempt := 0; ; attempt++ {
		uc, reused, err := u.get(r.Start, attempt > 0)
		if err != nil {
			return err
		}
		if b.stream {
			err = u.sendStreaming(uc, r, fields, b)
		} else {
			err = u.send(uc, r, fields, b)
		}
		if err == nil {
			return u.copyResponse(w, r, uc, &uc.resp)
		}
		uc.close()
		if !reused || !b.replayable(r) || !closedBeforeAnswer(err) {
			return err
		}
	}
}

// outBody is what Forward sends as the request body.
type outBody struct {
	prepared bool
	small    []byte // the body, when read whole (or the first part of a chunked stream)
	length   int64  // Content-Length; -1: chunked
	stream   bool   // the body (or its rest) is read from the client while it is sent
	scratch  *[]byte
	written  bool // a write reached the service (a partial write counts)
	// stop tells a streaming writer to stop: the service has answered already.
	stop atomic.Bool
}

func (b *outBody) release() {
	if b.scratch != nil {
		scratchPool.Put(b.scratch)
	}
	b.prepared, b.small, b.length, b.stream, b.scratch, b.written = false, nil, 0, false, nil, false
	b.stop.Store(false)
}

// replayable: the request can be sent again on a fresh connection after a reused one
// failed. A body read whole always; otherwise only a request that is idempotent and
// without a body, or one of which nothing reached the service (as net/http's Transport).
func (b *outBody) replayable(r *Request) bool {
	if b.stream {
		return false
	}
	if !b.written {
		return true
	}
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return b.length == 0
	}
	return false
}

// closedBeforeAnswer: the connection turned out to be closed (by the service, while it
// was idle) before any of an answer arrived: the write failed, or the read ended empty.
func closedBeforeAnswer(err error) bool {
	var ne net.Error
	return errors.Is(err, errNoAnswer) && !(errors.As(err, &ne) && ne.Timeout())
}

var errNoAnswer = errors.New("h1: the service closed the connection without an answer")

var errStopped = errors.New("h1: the service answered before the whole body was sent")

var scratchPool = sync.Pool{New: func() any { b := make([]byte, smallBody); return &b }}

// prepare reads a small body whole (it is usually buffered with the head already): it
// then goes out in one write with the head, and can be sent again.
func (b *outBody) prepare(r *Request) error {
	b.prepared = true
	switch {
	case r.ContentLength == 0:
		return nil
	case r.ContentLength > 0:
		b.length = r.ContentLength
		if p, ok := r.Body.Buffered(); ok {
			b.small = p
			return nil
		}
		if r.ContentLength > smallBody {
			b.stream = true
			return nil
		}
		b.scratch = scratchPool.Get().(*[]byte)
		n, err := io.ReadFull(r.Body, (*b.scratch)[:r.ContentLength])
		if err != nil {
			return &ClientBodyError{Err: r.Body.Err()}
		}
		b.small = (*b.scratch)[:n]
		return nil
	}
	b.scratch = scratchPool.Get().(*[]byte)
	buf := *b.scratch
	n := 0
	for n < len(buf) {
		k, err := r.Body.Read(buf[n:])
		n += k
		if err == io.EOF {
			b.small, b.length = buf[:n], int64(n)
			return nil
		}
		if err != nil {
			return &ClientBodyError{Err: r.Body.Err()}
		}
	}
	b.small, b.length, b.stream = buf[:n], -1, true
	return nil
}

// get returns an idle connection (reused true) or a new one (fresh: only a new one),
// its deadline set from now.
func (u *Upstream) get(now time.Time, fresh bool) (*upConn, bool, error) {
	for !fresh {
		u.mu.Lock()
		n := len(u.idle)
		if n == 0 {
			u.mu.Unlock()
			break
		}
		uc := u.idle[n-1]
		u.idle[n-1] = nil
		u.idle = u.idle[:n-1]
		u.mu.Unlock()
		idle := now.Sub(uc.idleSince)
		if idle > u.o.IdleTimeout {
			uc.close()
			continue
		}
		uc.arm(now, u.o.Timeout)
		if idle >= probeAfter && !uc.alive() {
			uc.close()
			continue
		}
		return uc, true, nil
	}
	uc, err := u.dial()
	if err != nil {
		return nil, false, err
	}
	uc.arm(now, u.o.Timeout)
	return uc, false, nil
}

func (u *Upstream) dial() (*upConn, error) {
	d := net.Dialer{Timeout: u.o.DialTimeout, KeepAlive: 30 * time.Second}
	nc, err := d.Dial("tcp", u.addr)
	if err != nil {
		return nil, err
	}
	uc := &upConn{nc: nc, buf: make([]byte, upstreamBuffer)}
	if tc, ok := nc.(*net.TCPConn); ok {
		uc.raw, _ = tc.SyscallConn()
	}
	if u.tls != nil {
		tc := tls.Client(nc, u.tls)
		ctx, cancel := context.WithTimeout(context.Background(), u.o.DialTimeout)
		defer cancel()
		if err := tc.HandshakeContext(ctx); err != nil {
			_ = nc.Close()
			return nil, &net.OpError{Op: "dial", Net: "tcp", Addr: nc.RemoteAddr(), Err: err}
		}
		uc.nc = tc
	}
	return uc, nil
}

// put returns a connection whose exchange ended cleanly to the pool; the exchange began
// at start.
func (u *Upstream) put(uc *upConn, start time.Time) {
	uc.idleSince = start
	uc.r, uc.w = 0, 0
	u.mu.Lock()
	if len(u.idle) > 0 && uc.idleSince.Sub(u.idle[0].idleSince) > u.o.IdleTimeout {
		// The least recently used connection has expired: drop it.
		old := u.idle[0]
		copy(u.idle, u.idle[1:])
		u.idle[len(u.idle)-1] = nil
		u.idle = u.idle[:len(u.idle)-1]
		defer old.close()
	}
	if len(u.idle) >= u.o.MaxIdle {
		u.mu.Unlock()
		uc.close()
		return
	}
	u.idle = append(u.idle, uc)
	u.mu.Unlock()
}

// CloseIdle closes the idle connections.
func (u *Upstream) CloseIdle() {
	u.mu.Lock()
	idle := u.idle
	u.idle = nil
	u.mu.Unlock()
	for _, uc := range idle {
		uc.close()
	}
}

func (uc *upConn) close() { _ = uc.nc.Close() }

// alive peeks at an idle connection without blocking: a close by the service, or any
// input nobody asked for, means it cannot be used.
func (uc *upConn) alive() bool {
	if uc.raw == nil {
		return true
	}
	ok := true
	var b [1]byte
	err := uc.raw.Read(func(fd uintptr) bool {
		n, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		ok = n < 0 && (err == syscall.EAGAIN || err == syscall.EWOULDBLOCK)
		return true
	})
	return ok && err == nil
}

// appendRequestHead appends the request line, Host, the forwarded fields and the framing.
func (u *Upstream) appendRequestHead(out []byte, r *Request, fields []byte, b *outBody) []byte {
	out = append(out, r.Method...)
	out = append(out, ' ')
	out = append(out, r.Target...)
	out = append(out, " HTTP/1.1\r\nHost: "...)
	out = append(out, u.host...)
	out = append(out, '\r', '\n')
	out = append(out, fields...)
	switch {
	case b.length > 0:
		out = append(out, "Content-Length: "...)
		out = appendInt(out, b.length)
		out = append(out, '\r', '\n')
	case b.length < 0:
		out = append(out, "Transfer-Encoding: chunked\r\n"...)
	case r.Method == http.MethodPost || r.Method == http.MethodPut || r.Method == http.MethodPatch:
		out = append(out, "Content-Length: 0\r\n"...)
	}
	return append(out, '\r', '\n')
}

// send writes a request whose body is empty or read whole, in one write, and reads the
// response head.
func (u *Upstream) send(uc *upConn, r *Request, fields []byte, b *outBody) error {
	out := u.appendRequestHead(uc.out[:0], r, fields, b)
	var n int64
	var err error
	if len(b.small) <= 4<<10 {
		out = append(out, b.small...)
		var k int
		k, err = uc.nc.Write(out)
		n = int64(k)
	} else {
		bufs := net.Buffers{out, b.small}
		n, err = bufs.WriteTo(uc.nc)
	}
	uc.out = out[:0]
	b.written = n > 0
	if err != nil {
		return fmt.Errorf("%w: %w", errNoAnswer, err)
	}
	return uc.readHead(&uc.resp, r)
}

// sendStreaming sends a request whose body is read from the client while it is sent,
// in a goroutine of its own, while this one waits for the response head: a service may
// answer before it has read the whole body (a 413, a 403), and that answer must reach
// the client rather than a failed write. The wait for the head is bounded from the
// moment the body has been sent.
func (u *Upstream) sendStreaming(uc *upConn, r *Request, fields []byte, b *outBody) error {
	resp := &uc.resp
	uc.dl.forget()
	_ = uc.nc.SetReadDeadline(time.Time{})
	b.written = true
	done := make(chan error, 1)
	go func() { done <- u.writeStream(uc, r, fields, b) }()
	err := uc.readHead(resp, r)
	var werr error
	select {
	case werr = <-done:
	default:
		if err == nil {
			// An answer before the whole body: stop sending; neither the service's
			// connection nor the client's (its body unread) is reused.
			resp.close = true
		}
		b.stop.Store(true)
		past := time.Unix(1, 0)
		_ = uc.nc.SetWriteDeadline(past)
		_ = r.Body.c.nc.SetReadDeadline(past)
		werr = <-done
		r.Body.c.readDeadline.forget() // set another way
	}
	var cbe *ClientBodyError
	switch {
	case errors.As(werr, &cbe):
		if err == nil {
			return nil // the service answered; the client's body is left unread
		}
		return werr
	case err != nil:
		return err
	case werr != nil:
		resp.close = true
	}
	return nil
}

// writeStream writes the head and streams the body; on any failure it closes the
// service's connection, which ends the wait for the head.
func (u *Upstream) writeStream(uc *upConn, r *Request, fields []byte, b *outBody) (err error) {
	defer func() {
		if err != nil {
			uc.close()
			return
		}
		_ = uc.nc.SetReadDeadline(time.Now().Add(u.o.Timeout))
	}()
	out := u.appendRequestHead(uc.out[:0], r, fields, b)
	uc.out = out[:0]
	chunked := b.length < 0
	write := func(p []byte) error {
		_ = uc.nc.SetWriteDeadline(time.Now().Add(u.o.Timeout))
		if chunked && len(p) > 0 {
			out = appendHex(out, int64(len(p)))
			out = append(out, '\r', '\n')
			bufs := net.Buffers{out, p, []byte("\r\n")}
			_, err := bufs.WriteTo(uc.nc)
			out = out[:0]
			return err
		}
		if len(out) > 0 {
			bufs := net.Buffers{out, p}
			_, err := bufs.WriteTo(uc.nc)
			out = out[:0]
			return err
		}
		_, err := uc.nc.Write(p)
		return err
	}
	if len(b.small) > 0 || !chunked {
		if err := write(b.small); err != nil {
			return err
		}
	}
	if b.scratch == nil {
		b.scratch = scratchPool.Get().(*[]byte)
	}
	buf := *b.scratch
	for !b.stop.Load() {
		n, rerr := r.Body.Read(buf)
		if n > 0 {
			if err := write(buf[:n]); err != nil {
				return err
			}
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return &ClientBodyError{Err: rerr}
		}
	}
	if b.stop.Load() {
		return errStopped
	}
	if chunked {
		_ = uc.nc.SetWriteDeadline(time.Now().Add(u.o.Timeout))
		if _, err := uc.nc.Write(append(out, "0\r\n\r\n"...)); err != nil {
			return err
		}
	}
	return nil
}
