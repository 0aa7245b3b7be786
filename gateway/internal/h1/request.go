// Package h1 is the gateway's HTTP/1.1 server and its client to the services: one
// goroutine per client connection reads a request, the handler runs in it, and the
// forward to a service (Upstream.Forward) writes and reads on a pooled connection from
// the same goroutine, so a proxied request costs no goroutine hand-off, no channel and
// no per-request copy of its header map.
//
// It is strict where HTTP/1.1 lets a reader guess: a request whose framing or header
// syntax two parsers could read differently is refused with 400 and the connection
// closed, never repaired. What it refuses, and why each is safe, is listed in the
// docs/security.md ("Request framing"); the differential test against nginx
// (gateway/internal/gateway, TestFramingNeverMorePermissiveThanNginx) proves it refuses
// at least what nginx refuses.
package h1

import (
	"context"
	"strings"
	"time"
)

// Field is one header field as the client sent it (name in its own case, value with
// the surrounding whitespace removed).
type Field struct {
	Name, Value string
}

// Header is a request's header fields in the order they came. A deleted field keeps its
// place with an empty name.
type Header struct {
	fields []Field
}

// Get returns the value of the first field called name (case-insensitive), or "".
func (h *Header) Get(name string) string {
	for _, f := range h.fields {
		if len(f.Name) == len(name) && asciiEqualFold(f.Name, name) {
			return f.Value
		}
	}
	return ""
}

// Values returns the values of every field called name.
func (h *Header) Values(name string) []string {
	var out []string
	for _, f := range h.fields {
		if len(f.Name) == len(name) && asciiEqualFold(f.Name, name) {
			out = append(out, f.Value)
		}
	}
	return out
}

// Del removes every field called name.
func (h *Header) Del(name string) {
	for i, f := range h.fields {
		if len(f.Name) == len(name) && asciiEqualFold(f.Name, name) {
			h.fields[i].Name = ""
		}
	}
}

// DelPrefix removes every field whose name starts with prefix (case-insensitive).
func (h *Header) DelPrefix(prefix string) {
	for i, f := range h.fields {
		if hasPrefixFold(f.Name, prefix) {
			h.fields[i].Name = ""
		}
	}
}

// Fields returns the fields left, deleted ones as empty names; the caller must not keep
// the slice past the request.
func (h *Header) Fields() []Field { return h.fields }

// Len is the number of fields (deleted ones included).
func (h *Header) Len() int { return len(h.fields) }

// URL is the parts of a request target the gateway reads.
type URL struct {
	Path     string // decoded
	RawQuery string // what follows the "?", as sent
}

// Request is one request read from a client connection. Its strings slice one copy of
// the request head; the Request itself is reused for the connection's next request, so
// a handler keeps nothing of it past its return.
type Request struct {
	Method string
	// Target is the request-target as sent (origin-form: a path and an optional query).
	Target string
	// URL is the path of Target, its percent-encoding decoded, and its query.
	URL URL
	// HTTP10 is set for an HTTP/1.0 request (the connection closes after it).
	HTTP10 bool
	Host   string
	Header Header
	// ContentLength is the body's length, -1 for a chunked body.
	ContentLength int64
	// Close: the connection closes after this exchange (Connection: close, HTTP/1.0).
	Close bool
	// Expect100: the client waits for 100 Continue before it sends its body.
	Expect100  bool
	RemoteAddr string
	// Start is when the request's head had arrived.
	Start time.Time
	// Connection holds the tokens of the Connection fields (hop-by-hop field names).
	Connection []string
	// Body reads the request body (none: at EOF at once).
	Body *Body

	ctx context.Context
	out outBody // the body as Upstream.Forward sends it
}

// Context is the request's context.
func (r *Request) Context() context.Context { return r.ctx }

// SetContext replaces the request's context (no copy of the request is made).
func (r *Request) SetContext(ctx context.Context) { r.ctx = ctx }

// HasBody reports whether the request has a body to forward.
func (r *Request) HasBody() bool { return r.ContentLength != 0 }

// NotForwarded reports whether a field called name is meaningful for this connection
// only and is never forwarded: the hop-by-hop fields (RFC 9110 7.6.1), the framing fields
// and Expect (the forwarder writes its own framing, and answers 100-continue itself),
// Host (the forwarder names the service), and every field the client named in
// Connection.
func (r *Request) NotForwarded(name string) bool {
	if hopByHop(name) || (len(name) == 4 && asciiEqualFold(name, "Host")) || (len(name) == 6 && asciiEqualFold(name, "Expect")) {
		return true
	}
	for _, c := range r.Connection {
		if len(c) == len(name) && asciiEqualFold(c, name) {
			return true
		}
	}
	return false
}

// hopByHop reports the fields never forwarded in either direction: the hop-by-hop
// fields and the framing fields, which the writer of each message writes itself.
func hopByHop(name string) bool {
	switch len(name) {
	case 2:
		return asciiEqualFold(name, "TE")
	case 7:
		return asciiEqualFold(name, "Trailer") || asciiEqualFold(name, "Upgrade")
	case 10:
		return asciiEqualFold(name, "Connection") || asciiEqualFold(name, "Keep-Alive")
	case 14:
		return asciiEqualFold(name, "Content-Length")
	case 16:
		return asciiEqualFold(name, "Proxy-Connection")
	case 17:
		return asciiEqualFold(name, "Transfer-Encoding")
	case 18:
		return asciiEqualFold(name, "Proxy-Authenticate")
	case 19:
		return asciiEqualFold(name, "Proxy-Authorization")
	}
	return false
}

func (r *Request) reset() {
	r.out.release()
	fields := r.Header.fields[:0]
	conn := r.Connection[:0]
	*r = Request{Header: Header{fields: fields}, Connection: conn}
}

// asciiEqualFold compares two strings of equal length, ASCII letters case-insensitively.
func asciiEqualFold(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		if lower(a[i]) != lower(b[i]) {
			return false
		}
	}
	return true
}

func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && asciiEqualFold(s[:len(prefix)], prefix)
}

func lower(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// tokens calls fn for each comma-separated element of a list field value, trimmed.
func tokens(v string, fn func(string)) {
	for v != "" {
		var t string
		t, v, _ = strings.Cut(v, ",")
		if t = strings.Trim(t, " \t"); t != "" {
			fn(t)
		}
	}
}
