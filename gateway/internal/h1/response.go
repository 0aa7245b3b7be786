package h1

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/analyticsco/platform/libs/httpx"
)

// ResponseWriter writes one response. It is an http.ResponseWriter for the JSON
// answers the gateway writes itself (httpx); a forwarded answer is copied by
// Upstream.Forward without a header map. The head is written at the first Write that
// does not fit its buffer, or at the end: a buffered answer gets a Content-Length, a
// longer one chunked encoding (HTTP/1.0: the connection's end).
type ResponseWriter struct {
	c      *conn
	req    *Request
	hdr    http.Header
	extra  []Field // AddHeader's fields, written after hdr's
	status int
	// committed: the head has been written to out.
	committed bool
	chunked   bool // the body is sent chunked
	// close: the connection closes after this response.
	close bool
	// broken: a write failed, or the answer was cut short; the connection closes.
	broken bool
	body   []byte // the body buffered before the head is committed
	out    []byte // output not yet written to the connection
	// unsent counts the body bytes of an answer that carries none (HEAD): its length.
	unsent int64
	// writeDeadline: the write deadline has been seen to for this response.
	writeDeadline bool
}

func (w *ResponseWriter) reset(c *conn, r *Request) {
	hdr := w.hdr
	if len(hdr) > 0 {
		clear(hdr)
	}
	extra, body, out := w.extra[:0], w.body[:0], w.out[:0]
	if cap(out) > 4*initialBuffer {
		out = nil
	}
	*w = ResponseWriter{c: c, req: r, hdr: hdr, extra: extra, body: body, out: out, close: r.Close}
}

// Header is the header map of an answer the handler writes itself.
func (w *ResponseWriter) Header() http.Header {
	if w.hdr == nil {
		w.hdr = make(http.Header, 4)
	}
	return w.hdr
}

// AddHeader adds a field to the answer, forwarded or not, without the header map's
// allocations. A forwarded answer's own field of the same name wins.
func (w *ResponseWriter) AddHeader(name, value string) {
	w.extra = append(w.extra, Field{Name: name, Value: value})
}

// WriteHeader sets the status; the head is written later (see the type).
func (w *ResponseWriter) WriteHeader(code int) {
	if w.status == 0 && !w.committed {
		w.status = code
	}
}

// Status is the status written, 200 when none was.
func (w *ResponseWriter) Status() int {
	if w.status == 0 {
		return http.StatusOK
	}
	return w.status
}

// Committed reports whether the head has gone out: the answer can no longer change.
func (w *ResponseWriter) Committed() bool { return w.committed }

// SetClose makes the connection close after this response.
func (w *ResponseWriter) SetClose() { w.close = true }

func (w *ResponseWriter) Write(p []byte) (int, error) {
	if w.broken {
		return 0, errBroken
	}
	if w.status == 0 {
		w.status = http.StatusOK
	}
	if bodyless(w.req, w.status) {
		w.unsent += int64(len(p))
		return len(p), nil
	}
	if !w.committed {
		if len(w.body)+len(p) <= initialBuffer {
			w.body = append(w.body, p...)
			return len(p), nil
		}
		length := int64(-1)
		if cl, ok := parseContentLength(w.hdr.Get("Content-Length")); ok {
			length = cl // the handler said how long its answer is
		}
		w.commit(length)
		w.writeChunk(w.body)
		w.body = w.body[:0]
	}
	w.writeChunk(p)
	if len(w.out) >= initialBuffer {
		w.flush()
	}
	if w.broken {
		return 0, errBroken
	}
	return len(p), nil
}

// ErrClientGone means writing to the client failed (it went away, or stopped reading).
var ErrClientGone = errors.New("h1: the connection to the client failed")

var errBroken = ErrClientGone

// bodyless: the answer to a HEAD, and a 1xx, 204 or 304, carry no body.
func bodyless(r *Request, status int) bool {
	return r.Method == http.MethodHead || status < 200 || status == http.StatusNoContent || status == http.StatusNotModified
}

// writeChunk appends body bytes to the output, framed as a chunk when chunked.
func (w *ResponseWriter) writeChunk(p []byte) {
	if len(p) == 0 {
		return
	}
	if w.chunked {
		w.out = strconv.AppendInt(w.out, int64(len(p)), 16)
		w.out = append(w.out, '\r', '\n')
		w.out = append(w.out, p...)
		w.out = append(w.out, '\r', '\n')
		return
	}
	w.out = append(w.out, p...)
}

// commit writes the status line and the handler's fields; length is the body's length
// (-1: unknown, chunked for HTTP/1.1, the connection's end for HTTP/1.0).
func (w *ResponseWriter) commit(length int64) {
	w.commitClose()
	w.out = w.appendStatus(w.out, w.Status())
	for k, vv := range w.hdr {
		if hopByHop(k) {
			continue
		}
		for _, v := range vv {
			w.out = appendField(w.out, k, v)
		}
	}
	for _, f := range w.extra {
		w.out = appendField(w.out, f.Name, f.Value)
	}
	w.out = w.appendFraming(w.out, length, w.Status())
	w.committed = true
}

// appendFraming appends the Connection and framing fields and the empty line.
func (w *ResponseWriter) appendFraming(out []byte, length int64, status int) []byte {
	if length < 0 && w.req.HTTP10 {
		w.close = true
	}
	if w.close {
		out = append(out, "Connection: close\r\n"...)
	}
	switch {
	case status < 200 || status == http.StatusNoContent || status == http.StatusNotModified:
	case length >= 0:
		out = append(out, "Content-Length: "...)
		out = strconv.AppendInt(out, length, 10)
		out = append(out, '\r', '\n')
	case !w.req.HTTP10 && !bodyless(w.req, status):
		out = append(out, "Transfer-Encoding: chunked\r\n"...)
		w.chunked = true
	}
	return append(out, '\r', '\n')
}

var statusLines = func() map[int]string {
	m := map[int]string{}
	for code := 100; code < 600; code++ {
		if t := http.StatusText(code); t != "" {
			m[code] = "HTTP/1.1 " + strconv.Itoa(code) + " " + t + "\r\n"
		}
	}
	return m
}()

func (w *ResponseWriter) appendStatus(out []byte, code int) []byte {
	if l, ok := statusLines[code]; ok {
		return append(out, l...)
	}
	out = append(out, "HTTP/1.1 "...)
	out = strconv.AppendInt(out, int64(code), 10)
	return append(out, " \r\n"...)
}

func appendField(out []byte, name, value string) []byte {
	out = append(out, name...)
	out = append(out, ':', ' ')
	out = append(out, value...)
	return append(out, '\r', '\n')
}

// finish ends the response: it commits a head not yet written, ends a chunked body and
// writes what is left. False when the connection cannot carry another request.
func (w *ResponseWriter) finish() bool {
	if w.broken {
		return false
	}
	if !w.committed {
		if w.status == 0 {
			w.status = http.StatusOK
		}
		length := int64(len(w.body))
		if w.req.Method == http.MethodHead {
			length = w.unsent // what a GET would have carried
			if cl, ok := parseContentLength(w.hdr.Get("Content-Length")); ok && length == 0 {
				length = cl // a handler that writes no body to a HEAD says its length
			}
		}
		w.commit(length)
		w.out = append(w.out, w.body...)
	} else if w.chunked {
		w.out = append(w.out, "0\r\n\r\n"...)
	}
	w.flush()
	return !w.broken
}

// commitClose decides, before the head goes out, whether the connection closes after
// this answer: when the request's body was neither read nor has it fully arrived.
func (w *ResponseWriter) commitClose() {
	b := &w.c.body
	if !b.done && (b.chunked || int64(w.c.w-w.c.r) < b.remaining) {
		w.close = true
	}
}

// flush writes the pending output to the connection.
func (w *ResponseWriter) flush() {
	if len(w.out) == 0 || w.broken {
		return
	}
	if !w.writeDeadline {
		w.writeDeadline = true
		if c := w.c; c.writeDeadline.need(c.now, c.writeTimeout()) {
			_ = c.nc.SetWriteDeadline(c.writeDeadline.at)
		}
	}
	if _, err := w.c.nc.Write(w.out); err != nil {
		w.broken = true
	}
	w.out = w.out[:0]
}

// Abort marks the answer as cut short: the connection closes without more output.
func (w *ResponseWriter) Abort() { w.broken = true }

// writeError writes the JSON error body of a refused request.
func writeError(w *ResponseWriter, status int, msg string) {
	w.Header().Set("X-Content-Type-Options", "nosniff")
	httpx.WriteError(w, status, msg)
}
