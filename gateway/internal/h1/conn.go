package h1

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"runtime/debug"
	"sync/atomic"
	"time"
)

// initialBuffer is the size of a connection's read and write buffers; a head that does
// not fit grows the read buffer up to the limits for that request only.
const initialBuffer = 4 << 10

// lingerTimeout bounds how long a connection closed with unread input is drained, so
// the client reads the answer instead of a reset (net/http waits as long).
const lingerTimeout = 500 * time.Millisecond

// Connection states, for the graceful shutdown: an idle connection waits for a request
// and may be closed; an active one is finishing one.
const (
	stateIdle int32 = iota
	stateActive
)

type conn struct {
	srv   *Server
	nc    net.Conn
	buf   []byte // read buffer; unread input is buf[r:w]
	r, w  int
	req   Request
	body  Body
	rw    ResponseWriter
	state atomic.Int32
	ctx   context.Context
	// remote is the client's address, host:port.
	remote string
	// now is when the current request's head arrived (the previous one's while waiting
	// for the next): the one reading of the clock a request's deadlines are set from.
	now time.Time
	// readDeadline and writeDeadline are the deadlines as last set.
	readDeadline, writeDeadline deadline
	// counted: c counts against the connection caps, under key (ConnLimits);
	// refused: it is over a cap, answered 503 and closed.
	counted, refused bool
	key              netip.Prefix
}

// deadline is a deadline as last set on a connection, so that setting it again to about
// the same instant, request after request, costs no timer update and no reading of the
// clock: a deadline armed at most a 64th of its duration earlier than asked for is kept.
type deadline struct{ at time.Time }

// need reports whether the deadline must be set to now+d, recording it if so.
func (dl *deadline) need(now time.Time, d time.Duration) bool {
	t := now.Add(d)
	if !dl.at.IsZero() && !dl.at.After(t) && t.Sub(dl.at) <= d/64 {
		return false
	}
	dl.at = t
	return true
}

// forget records that the deadline was set another way.
func (dl *deadline) forget() { dl.at = time.Time{} }

func (c *conn) serve() {
	defer c.srv.forget(c)
	for {
		if c.srv.shuttingDown() {
			c.closeNow()
			return
		}
		err := c.readRequest()
		if err != nil {
			var e *Error
			if errors.As(err, &e) {
				c.state.Store(stateActive)
				c.refuse(e)
			}
			c.closeNow()
			return
		}
		c.state.Store(stateActive)
		c.rw.reset(c, &c.req)
		ok := c.handle() && c.rw.finish()
		c.req.out.release()
		if !ok {
			c.closeLingering()
			return
		}
		if !c.body.done {
			// What is left of an unread body is discarded when it has already arrived;
			// otherwise the connection closes (the head said so: see commitClose).
			if c.body.chunked || int64(c.w-c.r) < c.body.remaining {
				c.closeLingering()
				return
			}
			c.r += int(c.body.remaining)
		}
		if c.rw.close {
			if c.r == c.w {
				c.closeNow() // nothing unread: the client reads the answer, then the end
			} else {
				c.closeLingering()
			}
			return
		}
		c.state.Store(stateIdle)
		c.shrink()
	}
}

// handle runs the handler; false when it panicked (the connection is then closed).
func (c *conn) handle() (ok bool) {
	defer func() {
		if v := recover(); v != nil {
			ok = false
			if v != http.ErrAbortHandler && c.srv.Logger != nil {
				c.srv.Logger.Error("panic serving a request", "panic", v, "stack", string(debug.Stack()))
			}
		}
	}()
	c.srv.Handler.ServeH1(&c.rw, &c.req)
	return true
}

// refuse answers a request refused before the handler, then the connection closes.
func (c *conn) refuse(e *Error) {
	c.req.Close = true
	c.rw.reset(c, &c.req)
	c.rw.close = true
	if c.refused {
		c.rw.Header().Set("Retry-After", "1")
	}
	if c.srv.OnError != nil {
		c.srv.OnError(&c.rw, &c.req, e)
	} else {
		writeError(&c.rw, e.Status, e.Msg)
	}
	if c.rw.finish() {
		c.closeLingering()
	}
}

// readRequest reads and parses the next request head into c.req. It returns a nil
// error, an *Error to answer, or the read error that ends the connection quietly (EOF
// or the idle timeout before a request began).
func (c *conn) readRequest() error {
	c.req.reset()
	c.body = Body{c: c, done: true}
	if c.r == c.w {
		c.armRead(c.now, c.srv.idleTimeout())
	}
	head, waited, err := c.readHead()
	if err != nil {
		return err
	}
	if waited {
		c.now = time.Now()
	}
	r := &c.req
	r.Start = c.now
	r.RemoteAddr = c.remote
	r.ContentLength = 0
	if e := parseHead(head, r, &c.srv.limits); e != nil {
		return e
	}
	r.ctx = c.ctx
	c.body.reset(c, r)
	r.Body = &c.body
	return nil
}

// readHead reads until a complete head is buffered and returns it, without its final
// CRLF CRLF, as one string; every line must end in CRLF, and the limits are checked as
// the lines arrive. waited: it had to read from the connection.
func (c *conn) readHead() (head string, waited bool, err error) {
	lim := &c.srv.limits
	scan, lineStart := 0, 0 // offsets from c.r
	first, fields := true, 0
	headerDeadline := false
	for {
		buf := c.buf[c.r:c.w]
		for ; scan < len(buf); scan++ {
			if buf[scan] != '\n' {
				continue
			}
			if scan == 0 || buf[scan-1] != '\r' {
				return "", waited, errBareLF
			}
			n := scan + 1 - lineStart // the line with its CRLF
			switch {
			case n == 2 && first:
				return "", waited, errRequestLine
			case n == 2:
				head := string(buf[:lineStart-2])
				c.r += scan + 1
				return head, waited, nil
			case first:
				if n-2 > lim.MaxRequestLine {
					return "", waited, errRequestLineLong
				}
				first = false
			case n > lim.MaxFieldBytes:
				return "", waited, headerTooLarge("a header field is", lim.MaxFieldBytes, "MaxFieldBytes")
			default:
				if fields += n; fields > lim.MaxHeaderBytes {
					return "", waited, headerTooLarge("the header fields are", lim.MaxHeaderBytes, "MaxHeaderBytes")
				}
			}
			lineStart = scan + 1
		}
		partial := len(buf) - lineStart
		switch {
		case first && partial > lim.MaxRequestLine:
			return "", waited, errRequestLineLong
		case !first && partial > lim.MaxFieldBytes:
			return "", waited, headerTooLarge("a header field is", lim.MaxFieldBytes, "MaxFieldBytes")
		case !first && fields+partial > lim.MaxHeaderBytes:
			return "", waited, headerTooLarge("the header fields are", lim.MaxHeaderBytes, "MaxHeaderBytes")
		}
		if len(buf) > 0 && !headerDeadline {
			// A request has begun: the rest of its head must arrive in time.
			c.state.Store(stateActive)
			c.armRead(time.Now(), c.srv.readHeaderTimeout())
			headerDeadline = true
		}
		waited = true
		if err := c.fill(lim.MaxRequestLine + lim.MaxHeaderBytes + 4); err != nil {
			if len(buf) > 0 && errors.Is(err, io.EOF) {
				return "", waited, io.ErrUnexpectedEOF
			}
			return "", waited, err
		}
	}
}

// fill reads more input, moving unread bytes to the front and growing the buffer up to
// max bytes when it is full.
func (c *conn) fill(max int) error {
	if c.r > 0 {
		c.w = copy(c.buf, c.buf[c.r:c.w])
		c.r = 0
	}
	if c.w == len(c.buf) {
		if len(c.buf) >= max {
			return errRequestLineLong
		}
		nb := make([]byte, min(2*len(c.buf), max))
		copy(nb, c.buf[:c.w])
		c.buf = nb
	}
	n, err := c.nc.Read(c.buf[c.w:])
	c.w += n
	if n > 0 {
		return nil
	}
	if err == nil {
		err = io.ErrNoProgress
	}
	return err
}

// shrink gives back a read buffer that grew for one large head.
func (c *conn) shrink() {
	if len(c.buf) > initialBuffer && c.w-c.r <= initialBuffer {
		nb := make([]byte, initialBuffer)
		c.w = copy(nb, c.buf[c.r:c.w])
		c.r = 0
		c.buf = nb
	}
}

// startBody is called at the first read of the body: the body must arrive within the
// handler's body timeout, and a client that waits for 100 Continue gets it now.
func (c *conn) startBody() error {
	if !c.body.chunked && int64(c.w-c.r) >= c.body.remaining {
		return nil // it has arrived
	}
	c.armRead(time.Now(), c.body.timeout)
	if c.req.Expect100 && !c.rw.committed && c.r == c.w {
		if _, err := c.nc.Write([]byte("HTTP/1.1 100 Continue\r\n\r\n")); err != nil {
			return err
		}
	}
	return nil
}

// readInto reads body bytes: buffered ones first, then from the connection (straight
// into p when it is at least as large as the buffer).
func (c *conn) readInto(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if c.r == c.w {
		if len(p) >= len(c.buf) {
			return c.nc.Read(p)
		}
		c.r, c.w = 0, 0
		if err := c.fill(len(c.buf)); err != nil {
			return 0, err
		}
	}
	n := copy(p, c.buf[c.r:c.w])
	c.r += n
	return n, nil
}

// expectCRLF consumes the CRLF that must come next in a chunked body.
func (c *conn) expectCRLF() error {
	for c.w-c.r < 2 {
		if err := c.fill(len(c.buf)); err != nil {
			return err
		}
	}
	if c.buf[c.r] != '\r' || c.buf[c.r+1] != '\n' {
		return errChunked
	}
	c.r += 2
	return nil
}

// maxChunkSizeDigits bounds a chunk size line: 15 hex digits cannot overflow an int64.
const maxChunkSizeDigits = 15

// readChunkSize reads a chunk size line: 1 to 15 hex digits and CRLF, nothing else.
func (c *conn) readChunkSize() (int64, error) {
	for {
		buf := c.buf[c.r:c.w]
		var size int64
		i := 0
		for ; i < len(buf) && buf[i] != '\r'; i++ {
			d := unhex(buf[i])
			if d < 0 || i >= maxChunkSizeDigits {
				return 0, errChunked
			}
			size = size<<4 | int64(d)
		}
		if i+1 < len(buf) {
			if i == 0 || buf[i+1] != '\n' {
				return 0, errChunked
			}
			c.r += i + 2
			return size, nil
		}
		if err := c.fill(len(c.buf)); err != nil {
			return 0, err
		}
	}
}

func unhex(c byte) int {
	switch {
	case '0' <= c && c <= '9':
		return int(c - '0')
	case 'a' <= c && c <= 'f':
		return int(c - 'a' + 10)
	case 'A' <= c && c <= 'F':
		return int(c - 'A' + 10)
	}
	return -1
}

// armRead sets the read deadline to now+d (see deadline).
func (c *conn) armRead(now time.Time, d time.Duration) {
	if c.readDeadline.need(now, d) {
		_ = c.nc.SetReadDeadline(c.readDeadline.at)
	}
}

func (c *conn) closeNow() { _ = c.nc.Close() }

// closeLingering closes a connection that may have unread input: it stops writing,
// then reads and discards until the client closes too or lingerTimeout passes, so that
// the client reads the answer rather than a reset.
func (c *conn) closeLingering() {
	if cw, ok := c.nc.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
		_ = c.nc.SetReadDeadline(time.Now().Add(lingerTimeout))
		buf := c.buf[:cap(c.buf)]
		for {
			if _, err := c.nc.Read(buf); err != nil {
				break
			}
		}
	}
	c.closeNow()
}
