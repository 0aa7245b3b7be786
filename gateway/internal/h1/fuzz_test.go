package h1

import (
	"bytes"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// memConn is a connection whose input is a fixed byte string and whose output is
// discarded.
type memConn struct{ r *bytes.Reader }

func (m memConn) Read(p []byte) (int, error)     { return m.r.Read(p) }
func (m memConn) Write(p []byte) (int, error)    { return len(p), nil }
func (memConn) Close() error                     { return nil }
func (memConn) LocalAddr() net.Addr              { return &net.TCPAddr{} }
func (memConn) RemoteAddr() net.Addr             { return &net.TCPAddr{} }
func (memConn) SetDeadline(time.Time) error      { return nil }
func (memConn) SetReadDeadline(time.Time) error  { return nil }
func (memConn) SetWriteDeadline(time.Time) error { return nil }

// FuzzRequestHead feeds arbitrary input to the request reader: it never panics, and a
// request it accepts has the shape the gateway relies on (no field that could carry a
// line break or an ambiguous length onward, a target that is an origin-form path).
func FuzzRequestHead(f *testing.F) {
	for _, seed := range []string{
		"GET / HTTP/1.1\r\nHost: a\r\n\r\n",
		"POST /x?y=1 HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nabc",
		"POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
		"POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n",
		"GET /%41%zz HTTP/1.0\r\nX_A: 1\r\n obs\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: a\r\nConnection: close, X-A\r\nExpect: 100-continue\r\n\r\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		srv := &Server{limits: Limits{MaxRequestLine: 1 << 10, MaxHeaderBytes: 1 << 10, MaxFieldBytes: 512}.withDefaults()}
		c := &conn{srv: srv, nc: memConn{bytes.NewReader(data)}, buf: make([]byte, 64)}
		err := c.readRequest()
		if err != nil {
			return
		}
		r := &c.req
		if r.Method == "" || strings.ContainsAny(r.Method, " \t\r\n\x00/:") {
			t.Fatalf("method %q", r.Method)
		}
		if r.Target == "" || r.Target[0] != '/' || strings.ContainsAny(r.Target, " #\x00\r\n\t\x7f") {
			t.Fatalf("target %q", r.Target)
		}
		if r.Host == "" && !r.HTTP10 || r.Host != "" && !validHost(r.Host) {
			t.Fatalf("host %q (HTTP/1.0 %v)", r.Host, r.HTTP10)
		}
		if r.ContentLength < -1 || r.ContentLength == -1 && r.HTTP10 {
			t.Fatalf("content length %d (HTTP/1.0 %v)", r.ContentLength, r.HTTP10)
		}
		for _, fl := range r.Header.Fields() {
			if strings.ContainsAny(fl.Name, "_ :\r\n\x00") || fl.Name == "" || strings.ContainsAny(fl.Value, "\r\n\x00") {
				t.Fatalf("field %q: %q", fl.Name, fl.Value)
			}
		}
		r.Body.SetLimit(1 << 10)
		_, _ = io.Copy(io.Discard, r.Body)
	})
}
