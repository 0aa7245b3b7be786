package h1

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/url"
	"testing"
)

// captureConn is a memConn that keeps what is written to it.
type captureConn struct {
	memConn
	out *bytes.Buffer
}

func (c captureConn) Write(p []byte) (int, error) { return c.out.Write(p) }

// FuzzUpstreamAnswer feeds arbitrary bytes, as a service's answer, to the forwarder's
// response reader (status line, fields, Content-Length, chunked and close-delimited
// framing) and copies the answer to a client connection, as Forward does. It never
// panics, and:
//   - an answer copied whole is one well-formed HTTP/1.1 response to the client, read by
//     net/http with nothing after it (the client connection cannot be desynchronised);
//   - its status and body are what net/http reads from the service's bytes whenever
//     net/http reads them at all: a Content-Length body is never longer (nor shorter)
//     than its framing says, a chunked one is its decoded data;
//   - an answer cut short never reads as a complete response to the client.
func FuzzUpstreamAnswer(f *testing.F) {
	for _, seed := range []string{
		"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}",
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3;x=y\r\nabc\r\n0\r\nTrailer: 1\r\n\r\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcd\r\n0\r\n\r\n",
		"HTTP/1.1 200 OK\r\nConnection: close, X-Secret\r\nX-Secret: 1\r\n\r\nuntil the end",
		"HTTP/1.0 200 OK\r\n\r\nclose-delimited",
		"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 1\r\n\r\nx",
		"HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\n\r\n",
		"HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\nhello",
		"HTTP/1.1 304 Not Modified\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\nabc",
		"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n",
		"HTTP/1.1 200 OK\nContent-Length: 0\n\n",
		"HTTP/1.1 999 Whatever\r\nX: \xff\r\nContent-Length: 0\r\n\r\n",
	} {
		f.Add([]byte(seed), false)
		f.Add([]byte(seed), true)
	}
	f.Fuzz(func(t *testing.T, data []byte, head bool) {
		method := http.MethodGet
		if head {
			method = http.MethodHead
		}
		up := NewUpstream(&url.URL{Scheme: "http", Host: "svc.test:80"}, UpstreamOptions{})
		uc := &upConn{nc: memConn{bytes.NewReader(data)}, buf: make([]byte, upstreamBuffer)}
		var out bytes.Buffer
		srv := &Server{limits: Limits{}.withDefaults()}
		c := &conn{srv: srv, nc: captureConn{out: &out}, buf: make([]byte, initialBuffer)}
		c.req.reset()
		c.req.Method = method
		c.body = Body{c: c, done: true}
		c.rw.reset(c, &c.req)
		if err := uc.readHead(&uc.resp, &c.req); err != nil {
			return // nothing was written: the forwarder answers 502 itself
		}
		copied := up.copyResponse(&c.rw, &c.req, uc, &uc.resp) == nil && c.rw.finish()
		got := out.Bytes()
		if !copied {
			if completeAnswer(got, method) {
				t.Fatalf("an answer cut short reads as complete to the client:\n%q", got)
			}
			return
		}
		br := bufio.NewReader(bytes.NewReader(got))
		resp, err := http.ReadResponse(br, &http.Request{Method: method})
		if err != nil {
			t.Fatalf("the client's answer is malformed: %v\n%q", err, got)
		}
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatalf("the client's answer body: %v\n%q", err, got)
		}
		if rest, _ := io.ReadAll(br); len(rest) != 0 {
			t.Fatalf("%d bytes after the client's answer (a desync): %q\nanswer %q", len(rest), rest, got)
		}
		if resp.StatusCode != uc.resp.status || resp.StatusCode < 200 {
			t.Fatalf("status %d to the client, the service's %d", resp.StatusCode, uc.resp.status)
		}
		// net/http's reading of the service's bytes, when it reads them, is the reference.
		want, status, ok := reference(data, method)
		if !ok {
			return
		}
		if status != resp.StatusCode {
			t.Fatalf("status %d, net/http reads %d from %q", resp.StatusCode, status, data)
		}
		if !bytes.Equal(body, want) {
			t.Fatalf("body %q, net/http reads %q from %q", body, want, data)
		}
	})
}

// completeAnswer reports whether b reads as one whole response to method.
func completeAnswer(b []byte, method string) bool {
	resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(b)), &http.Request{Method: method})
	if err != nil {
		return false
	}
	_, err = io.ReadAll(resp.Body)
	return err == nil && (resp.ContentLength != -1 || len(resp.TransferEncoding) > 0)
}

// reference is the final status and body net/http reads from a service's bytes (1xx
// answers skipped); ok false when it refuses them or the body is cut short.
func reference(data []byte, method string) (body []byte, status int, ok bool) {
	br := bufio.NewReader(bytes.NewReader(data))
	for {
		resp, err := http.ReadResponse(br, &http.Request{Method: method})
		if err != nil {
			return nil, 0, false
		}
		if resp.StatusCode >= 100 && resp.StatusCode < 200 {
			if resp.StatusCode == http.StatusSwitchingProtocols {
				return nil, 0, false
			}
			continue
		}
		body, err = io.ReadAll(resp.Body)
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, 0, false
		}
		return body, resp.StatusCode, true
	}
}
