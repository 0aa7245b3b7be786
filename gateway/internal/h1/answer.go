package h1

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"
)

// response is a service's response head, parsed where it lies in the connection's
// buffer: the fields are copied from there to the client's answer.
type response struct {
	status int
	// length of the body: >= 0 Content-Length, -1 chunked, -2 until the connection ends.
	length int64
	// close: the connection is not reused after this response.
	close bool
	// fields is the field section within the buffer ([start, end), without the
	// final CRLF CRLF); conn holds the ranges of the Connection tokens.
	start, end int
	conn       [][2]int
}

const (
	lengthChunked = -1
	lengthToClose = -2
)

// errBadAnswer is a response head the gateway cannot read safely.
var errBadAnswer = errors.New("h1: the service sent a malformed response")

// readHead reads the response head to r, skipping interim (1xx) answers.
func (uc *upConn) readHead(resp *response, r *Request) error {
	for {
		end, err := uc.readHeadBytes()
		if err != nil {
			return err
		}
		if err := resp.parse(uc.buf[uc.r:end]); err != nil {
			return err
		}
		resp.start += uc.r
		resp.end += uc.r
		for i := range resp.conn {
			resp.conn[i][0] += uc.r
			resp.conn[i][1] += uc.r
		}
		uc.r = end + 4
		switch {
		case resp.status == http.StatusSwitchingProtocols:
			return errBadAnswer // nothing asked for an upgrade
		case resp.status < 200:
			continue
		case bodyless(r, resp.status):
			resp.length = 0
		}
		return nil
	}
}

// readHeadBytes reads until a whole head is buffered and returns where its final CRLF
// CRLF starts. A close before any byte is errNoAnswer.
func (uc *upConn) readHeadBytes() (int, error) {
	scan := 0 // from uc.r
	for {
		buf := uc.buf[uc.r:uc.w]
		for ; scan < len(buf); scan++ {
			if buf[scan] != '\n' {
				continue
			}
			if scan == 0 || buf[scan-1] != '\r' {
				return 0, errBadAnswer
			}
			if scan >= 3 && buf[scan-2] == '\n' {
				return uc.r + scan - 3, nil
			}
		}
		if uc.r > 0 {
			uc.w = copy(uc.buf, buf)
			uc.r = 0
		}
		if uc.w == len(uc.buf) {
			if len(uc.buf) >= maxResponseHead {
				return 0, errBadAnswer
			}
			nb := make([]byte, min(2*len(uc.buf), maxResponseHead))
			copy(nb, uc.buf[:uc.w])
			uc.buf = nb
		}
		n, err := uc.nc.Read(uc.buf[uc.w:])
		uc.w += n
		if n == 0 && err != nil {
			var ne net.Error
			if uc.w-uc.r == 0 && !(errors.As(err, &ne) && ne.Timeout()) {
				return 0, fmt.Errorf("%w: %w", errNoAnswer, err)
			}
			if errors.Is(err, io.EOF) {
				return 0, io.ErrUnexpectedEOF
			}
			return 0, err
		}
	}
}

// parse reads a status line and fields (head is the head without its final CRLF CRLF);
// positions are relative to head.
func (resp *response) parse(head []byte) error {
	*resp = response{conn: resp.conn[:0], length: lengthToClose}
	line, rest := cutLine(head)
	if len(line) < 12 || string(line[:7]) != "HTTP/1." || (line[7] != '1' && line[7] != '0') || line[8] != ' ' ||
		!isDigit(line[9]) || !isDigit(line[10]) || !isDigit(line[11]) || (len(line) > 12 && line[12] != ' ') {
		return errBadAnswer
	}
	http10 := line[7] == '0'
	resp.close = http10
	resp.status = int(line[9]-'0')*100 + int(line[10]-'0')*10 + int(line[11]-'0')
	if resp.status < 100 {
		return errBadAnswer
	}
	resp.start = len(head) - len(rest)
	resp.end = len(head)
	var haveCL, haveTE bool
	for off := resp.start; off < len(head); {
		line, rest = cutLine(head[off:])
		colon := -1
		for i, c := range line {
			if c == ':' {
				colon = i
				break
			}
			if !isTokenChar(c) {
				return errBadAnswer
			}
		}
		if colon <= 0 {
			return errBadAnswer
		}
		name := line[:colon]
		value := trimOWSBytes(line[colon+1:])
		for _, c := range value {
			if (c < 0x20 && c != '\t') || c == 0x7f {
				return errBadAnswer
			}
		}
		after := line[colon+1:]
		voff := off + colon + 1 + len(after) - len(trimLeftOWS(after)) // where value starts in head
		switch {
		case equalFoldBytes(name, "Content-Length"):
			n, ok := parseContentLength(string(value))
			if haveCL || !ok {
				return errBadAnswer
			}
			haveCL, resp.length = true, n
		case equalFoldBytes(name, "Transfer-Encoding"):
			if haveTE || !equalFoldBytes(value, "chunked") {
				return errBadAnswer
			}
			haveTE, resp.length = true, lengthChunked
		case equalFoldBytes(name, "Connection"):
			for i := 0; i < len(value); {
				j := i
				for j < len(value) && value[j] != ',' {
					j++
				}
				t := trimOWSBytes(value[i:j])
				if equalFoldBytes(t, "close") {
					resp.close = true
				}
				if len(t) > 0 {
					s := voff + i + len(value[i:j]) - len(trimLeftOWS(value[i:j]))
					resp.conn = append(resp.conn, [2]int{s, s + len(t)})
				}
				i = j + 1
			}
		}
		off = len(head) - len(rest)
	}
	// Content-Length with Transfer-Encoding is ambiguous, and Transfer-Encoding in an
	// HTTP/1.0 answer is faulty framing (RFC 9112, 6.1): an HTTP/1.0 reader would take
	// the chunks for a close-delimited body.
	if haveCL && haveTE || haveTE && http10 {
		return errBadAnswer
	}
	if resp.length == lengthToClose {
		resp.close = true
	}
	return nil
}

func cutLine(b []byte) (line, rest []byte) {
	for i := 0; i+1 < len(b); i++ {
		if b[i] == '\r' && b[i+1] == '\n' {
			return b[:i], b[i+2:]
		}
	}
	return b, nil
}

func trimLeftOWS(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t') {
		b = b[1:]
	}
	return b
}

func trimOWSBytes(b []byte) []byte {
	b = trimLeftOWS(b)
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\t') {
		b = b[:len(b)-1]
	}
	return b
}

func equalFoldBytes(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range b {
		if lower(b[i]) != lower(s[i]) {
			return false
		}
	}
	return true
}

// copyResponse writes the service's answer to w: its status and fields (but the
// hop-by-hop and framing ones), the handler's fields that the service did not send
// itself, framing of w's own, and the body.
func (u *Upstream) copyResponse(w *ResponseWriter, r *Request, uc *upConn, resp *response) error {
	w.status = resp.status
	w.commitClose()
	out := w.appendStatus(w.out, resp.status)
	head := uc.buf[:resp.end]
	var shadowed uint64 // bit i: extra field i was sent by the service
	for off := resp.start; off < resp.end; {
		line, rest := cutLine(head[off:])
		off = resp.end - len(rest)
		colon := 0
		for line[colon] != ':' {
			colon++
		}
		name := line[:colon]
		if resp.dropped(name, uc.buf) {
			continue
		}
		for i, f := range w.extra {
			if i < 64 && equalFoldBytes(name, f.Name) {
				shadowed |= 1 << i
			}
		}
		out = append(out, name...)
		out = append(out, ':', ' ')
		out = append(out, trimOWSBytes(line[colon+1:])...)
		out = append(out, '\r', '\n')
	}
	for i, f := range w.extra {
		if i >= 64 || shadowed&(1<<i) == 0 {
			out = appendField(out, f.Name, f.Value)
		}
	}
	for k, vv := range w.hdr {
		if hopByHop(k) || resp.sent(k, uc.buf) {
			continue
		}
		for _, v := range vv {
			out = appendField(out, k, v)
		}
	}
	length := resp.length
	if r.Method == http.MethodHead || length < 0 {
		length = -1
		if r.Method == http.MethodHead {
			length = resp.headLength(uc.buf)
		}
	}
	w.out = w.appendFraming(out, length, resp.status)
	w.committed = true
	if r.Method == http.MethodHead {
		resp.length = 0
	}
	if err := u.copyBody(w, uc, resp); err != nil {
		w.Abort()
		uc.close()
		return err
	}
	if resp.close || uc.r != uc.w {
		uc.close()
	} else {
		u.put(uc, r.Start)
	}
	return nil
}

// dropped reports a response field that is not forwarded: hop-by-hop, framing, or
// named in the service's Connection field.
func (resp *response) dropped(name, buf []byte) bool {
	if hopByHop(string(name)) {
		return true
	}
	for _, c := range resp.conn {
		if len(name) == c[1]-c[0] && equalFoldBytes(name, string(buf[c[0]:c[1]])) {
			return true
		}
	}
	return false
}

// sent reports whether the service's answer has a field called name.
func (resp *response) sent(name string, buf []byte) bool {
	head := buf[:resp.end]
	for off := resp.start; off < resp.end; {
		line, rest := cutLine(head[off:])
		if len(line) > len(name) && line[len(name)] == ':' && equalFoldBytes(line[:len(name)], name) {
			return true
		}
		if len(rest) == 0 {
			break
		}
		off = resp.end - len(rest)
	}
	return false
}

// headLength is the Content-Length of an answer to HEAD (-1: none).
func (resp *response) headLength(buf []byte) int64 {
	head := buf[:resp.end]
	for off := resp.start; off < resp.end; {
		line, rest := cutLine(head[off:])
		if len(line) > 15 && line[14] == ':' && equalFoldBytes(line[:14], "Content-Length") {
			n, _ := strconv.ParseInt(string(trimOWSBytes(line[15:])), 10, 64)
			return n
		}
		if len(rest) == 0 {
			break
		}
		off = resp.end - len(rest)
	}
	return -1
}

// copyBody copies the response body from the service to w.
func (u *Upstream) copyBody(w *ResponseWriter, uc *upConn, resp *response) error {
	switch resp.length {
	case 0:
		return nil
	case lengthChunked:
		return u.copyChunked(w, uc)
	}
	remaining := resp.length // lengthToClose: until EOF
	for remaining != 0 {
		if uc.r == uc.w {
			w.flush()
			if err := u.fillBody(uc); err != nil {
				if remaining == lengthToClose && errors.Is(err, io.EOF) {
					return nil
				}
				return err
			}
		}
		p := uc.buf[uc.r:uc.w]
		if remaining >= 0 && int64(len(p)) > remaining {
			p = p[:remaining]
		}
		w.writeChunk(p)
		uc.r += len(p)
		if remaining >= 0 {
			remaining -= int64(len(p))
		}
		if len(w.out) >= upstreamBuffer {
			w.flush()
		}
		if w.broken {
			return errBroken
		}
	}
	return nil
}

// copyChunked decodes a chunked body from the service (trailer fields are dropped)
// and writes its data to w.
func (u *Upstream) copyChunked(w *ResponseWriter, uc *upConn) error {
	for {
		size, err := u.chunkSize(uc)
		if err != nil {
			return err
		}
		if size == 0 {
			return u.skipTrailer(uc)
		}
		for size > 0 {
			if uc.r == uc.w {
				w.flush()
				if err := u.fillBody(uc); err != nil {
					return err
				}
			}
			p := uc.buf[uc.r:uc.w]
			if int64(len(p)) > size {
				p = p[:size]
			}
			w.writeChunk(p)
			uc.r += len(p)
			size -= int64(len(p))
			if len(w.out) >= upstreamBuffer {
				w.flush()
			}
			if w.broken {
				return errBroken
			}
		}
		line, err := u.line(uc, w)
		if err != nil {
			return err
		}
		if len(line) != 0 {
			return errBadAnswer
		}
	}
}

func (u *Upstream) chunkSize(uc *upConn) (int64, error) {
	line, err := u.line(uc, nil)
	if err != nil {
		return 0, err
	}
	if i := indexByte(line, ';'); i >= 0 {
		line = line[:i] // an extension from the service is ignored
	}
	line = trimOWSBytes(line)
	if len(line) == 0 || len(line) > maxChunkSizeDigits {
		return 0, errBadAnswer
	}
	var n int64
	for _, c := range line {
		d := unhex(c)
		if d < 0 {
			return 0, errBadAnswer
		}
		n = n<<4 | int64(d)
	}
	return n, nil
}

func (u *Upstream) skipTrailer(uc *upConn) error {
	for {
		line, err := u.line(uc, nil)
		if err != nil {
			return err
		}
		if len(line) == 0 {
			return nil
		}
	}
}

// line returns the next CRLF-terminated line of the body (valid until the next read).
func (u *Upstream) line(uc *upConn, w *ResponseWriter) ([]byte, error) {
	for {
		for i := uc.r; i+1 < uc.w; i++ {
			if uc.buf[i] == '\r' && uc.buf[i+1] == '\n' {
				l := uc.buf[uc.r:i]
				uc.r = i + 2
				return l, nil
			}
		}
		if uc.w-uc.r >= 4<<10 {
			return nil, errBadAnswer
		}
		if w != nil {
			w.flush()
		}
		if err := u.fillBody(uc); err != nil {
			return nil, err
		}
	}
}

// fillBody reads more of the body, within the upstream timeout.
func (u *Upstream) fillBody(uc *upConn) error {
	if uc.r > 0 {
		n := copy(uc.buf, uc.buf[uc.r:uc.w])
		uc.r, uc.w = 0, n
	}
	uc.dl.forget()
	_ = uc.nc.SetReadDeadline(time.Now().Add(u.o.Timeout))
	n, err := uc.nc.Read(uc.buf[uc.w:])
	uc.w += n
	if n > 0 {
		return nil
	}
	if err == nil {
		err = io.ErrNoProgress
	}
	return err
}

func indexByte(b []byte, c byte) int {
	for i, x := range b {
		if x == c {
			return i
		}
	}
	return -1
}

func appendInt(out []byte, n int64) []byte { return strconv.AppendInt(out, n, 10) }
func appendHex(out []byte, n int64) []byte { return strconv.AppendInt(out, n, 16) }
