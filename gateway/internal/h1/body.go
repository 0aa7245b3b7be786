package h1

import (
	"errors"
	"io"
	"strconv"
	"time"
)

// TooLargeError is a body longer than the limit set with SetLimit.
type TooLargeError struct{ Limit int64 }

func (e *TooLargeError) Error() string {
	return "request body is larger than the limit of " + strconv.FormatInt(e.Limit, 10) + " bytes"
}

// Body reads a request body off its connection: Content-Length bytes, or a chunked
// body decoded (sizes in hex without extensions, no trailer fields). Its errors are
// sticky: once reading failed, every later Read fails the same way, and Err says why.
type Body struct {
	c         *conn
	chunked   bool
	remaining int64 // Content-Length: bytes left; chunked: bytes left in the current chunk
	done      bool
	limit     int64 // 0: none
	timeout   time.Duration
	n         int64
	err       error
	started   bool
	// crlf: a chunk's data has been read and its CRLF is next.
	crlf bool
}

func (b *Body) reset(c *conn, r *Request) {
	*b = Body{c: c, chunked: r.ContentLength < 0, remaining: max(r.ContentLength, 0), done: r.ContentLength == 0,
		timeout: c.srv.bodyTimeout()}
}

// SetLimit makes reading past n bytes fail with *TooLargeError.
func (b *Body) SetLimit(n int64) { b.limit = n }

// SetTimeout bounds how long the body may take to arrive, from its first read (the
// server's BodyTimeout by default); past it a read fails with a timeout.
func (b *Body) SetTimeout(d time.Duration) { b.timeout = d }

// Err is why reading the body failed (nil: it did not, or not yet).
func (b *Body) Err() error { return b.err }

// Done reports whether the body has been read to its end.
func (b *Body) Done() bool { return b.done }

// Buffered returns the whole body when it has a Content-Length and has already arrived
// with the request head, consuming it; ok is false (and nothing consumed) otherwise.
// The bytes are valid until the connection's next read.
func (b *Body) Buffered() (p []byte, ok bool) {
	if b.chunked || b.done || b.started || b.err != nil || b.limit > 0 && b.remaining > b.limit {
		return nil, false
	}
	c := b.c
	if int64(c.w-c.r) < b.remaining {
		return nil, false
	}
	p = c.buf[c.r : c.r+int(b.remaining)]
	c.r += int(b.remaining)
	b.n, b.remaining, b.done, b.started = b.remaining, 0, true, true
	return p, true
}

func (b *Body) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	if b.done {
		return 0, io.EOF
	}
	if !b.started {
		b.started = true
		if err := b.c.startBody(); err != nil {
			return 0, b.fail(err)
		}
	}
	if b.chunked && b.remaining == 0 {
		if err := b.nextChunk(); err != nil {
			return 0, b.fail(err)
		}
		if b.done {
			return 0, io.EOF
		}
	}
	if int64(len(p)) > b.remaining {
		p = p[:b.remaining]
	}
	n, err := b.c.readInto(p)
	b.remaining -= int64(n)
	b.n += int64(n)
	if b.limit > 0 && b.n > b.limit {
		return 0, b.fail(&TooLargeError{Limit: b.limit})
	}
	if b.remaining == 0 {
		if b.chunked {
			b.crlf = true
		} else {
			b.done = true
		}
	}
	if err != nil {
		if n > 0 {
			b.err = b.wrap(err)
			return n, nil
		}
		return 0, b.fail(err)
	}
	return n, nil
}

func (b *Body) fail(err error) error {
	b.err = b.wrap(err)
	return b.err
}

func (b *Body) wrap(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// nextChunk reads the CRLF that ends the previous chunk's data, and the next size line;
// a zero size must be followed by the final empty line (no trailer fields).
func (b *Body) nextChunk() error {
	if b.crlf {
		if err := b.c.expectCRLF(); err != nil {
			return err
		}
		b.crlf = false
	}
	size, err := b.c.readChunkSize()
	if err != nil {
		return err
	}
	if size == 0 {
		if err := b.c.expectCRLF(); err != nil {
			return err
		}
		b.done = true
		return nil
	}
	b.remaining = size
	return nil
}
