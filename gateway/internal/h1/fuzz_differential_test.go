package h1

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
)

// deliberateDifferences are where h1's reading of an accepted request head differs from
// net/http's on purpose; FuzzRequestHeadDifferential excuses exactly these.
var deliberateDifferences = []struct {
	name, why string
	// excused reports whether a header field called name (canonical form) that one
	// reader has and the other has not is explained by this difference, given the
	// fields net/http read.
	excused func(name string, netHeader http.Header) bool
}{
	{
		name: "underscore names dropped",
		why: "h1 drops a field whose name contains '_', as nginx does (underscores_in_headers off): " +
			"some servers read X_Foo and X-Foo as one field, so forwarding it would let a client " +
			"shadow a field the gateway sets. net/http keeps it.",
		excused: func(name string, _ http.Header) bool { return strings.Contains(name, "_") },
	},
	{
		name: "net/http adds Cache-Control for Pragma",
		why: "net/http's reader adds Cache-Control: no-cache to a request with Pragma: no-cache and no " +
			"Cache-Control (an HTTP/1.0 compatibility rule of its own); h1 reads the fields as sent.",
		excused: func(name string, h http.Header) bool {
			return name == "Cache-Control" && h.Get("Pragma") == "no-cache" && len(h["Cache-Control"]) == 1 && h.Get("Cache-Control") == "no-cache"
		},
	},
}

// excused reports whether a field difference under name is a deliberate one.
func excused(name string, netHeader http.Header) bool {
	for _, d := range deliberateDifferences {
		if d.excused(name, netHeader) {
			return true
		}
	}
	return false
}

// FuzzRequestHeadDifferential feeds the same bytes to h1's request reader and to
// net/http's (http.ReadRequest). h1 may refuse what net/http accepts (it is stricter by
// design); it fails where h1 accepts a request net/http refuses, or reads its method,
// target, version, a header field's value, or its body's framing (Content-Length,
// chunked, the body bytes and where the next request starts) differently, except for
// the deliberate differences listed above.
func FuzzRequestHeadDifferential(f *testing.F) {
	for _, seed := range []string{
		"GET / HTTP/1.1\r\nHost: a\r\n\r\n",
		"GET /api/v1/groups?first=10&after=x HTTP/1.1\r\nHost: gw.test\r\nAuthorization: Api-Key pk_1_2\r\nAccept: */*\r\n\r\n",
		"POST /api/v1/deployments/1/folders HTTP/1.1\r\nHost: gw.test\r\nContent-Type: application/json\r\nContent-Length: 13\r\n\r\n{\"name\":\"x\"}\n",
		"POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
		"PUT /x HTTP/1.1\r\nHost: a:8080\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\nab",
		"GET /x HTTP/1.0\r\nX-A: 1\r\nX-A: 2\r\nX_B: 3\r\n\r\n",
		"GET /x HTTP/1.1\r\nHost: [::1]:80\r\nPragma: no-cache\r\nConnection: keep-alive, X-Y\r\nX-Y: z\r\n\r\n",
		"DELETE /a%20b HTTP/1.1\r\nHost: a\r\nX-Empty:\r\nX-Tab:\tv \t\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n",
		"POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n",
		"GET /x HTTP/1.1\r\nHost: a\r\nX: \x80\xff\r\n\r\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		srv := &Server{limits: Limits{}.withDefaults()}
		in := bytes.NewReader(data)
		c := &conn{srv: srv, nc: memConn{in}, buf: make([]byte, initialBuffer)}
		if err := c.readRequest(); err != nil {
			return // h1 refuses: allowed whatever net/http does
		}
		r := &c.req
		nin := bytes.NewReader(data)
		br := bufio.NewReader(nin)
		req, err := http.ReadRequest(br)
		if err != nil {
			t.Fatalf("h1 accepts a head net/http refuses (%v):\n%q", err, data)
		}
		if r.Method != req.Method {
			t.Fatalf("method: h1 %q, net/http %q\n%q", r.Method, req.Method, data)
		}
		if r.Target != req.RequestURI {
			t.Fatalf("target: h1 %q, net/http %q\n%q", r.Target, req.RequestURI, data)
		}
		if r.HTTP10 == req.ProtoAtLeast(1, 1) {
			t.Fatalf("version: h1 HTTP/1.0 %v, net/http %s\n%q", r.HTTP10, req.Proto, data)
		}
		if r.Host != req.Host {
			t.Fatalf("host: h1 %q, net/http %q\n%q", r.Host, req.Host, data)
		}
		// Fields, as net/http groups them: its Host is req.Host, its Transfer-Encoding
		// req.TransferEncoding (both compared on their own).
		mine := http.Header{}
		for _, fl := range r.Header.Fields() {
			if fl.Name != "" {
				mine.Add(fl.Name, fl.Value)
			}
		}
		mine.Del("Host")
		mine.Del("Transfer-Encoding")
		theirs := req.Header.Clone()
		theirs.Del("Transfer-Encoding")
		for name := range theirs {
			if !slices.Equal(mine[name], theirs[name]) && !excused(name, req.Header) {
				t.Fatalf("field %s: h1 %q, net/http %q\n%q", name, mine[name], theirs[name], data)
			}
		}
		for name := range mine {
			if _, ok := theirs[name]; !ok && !excused(name, req.Header) {
				t.Fatalf("field %s: h1 %q, net/http has none\n%q", name, mine[name], data)
			}
		}
		chunked := len(req.TransferEncoding) == 1 && req.TransferEncoding[0] == "chunked"
		if (r.ContentLength == -1) != chunked || len(req.TransferEncoding) > 1 || !chunked && r.ContentLength != req.ContentLength {
			t.Fatalf("framing: h1 length %d, net/http length %d transfer-encoding %q\n%q", r.ContentLength, req.ContentLength, req.TransferEncoding, data)
		}
		// The body and where the next request starts: what h1 reads whole, net/http reads
		// alike.
		r.Body.SetLimit(1 << 20)
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return // h1 refuses the body (a chunk extension, a short body): allowed
		}
		theirBody, err := io.ReadAll(req.Body)
		if err != nil {
			t.Fatalf("h1 reads a body net/http refuses (%v): h1 %q\n%q", err, body, data)
		}
		if !bytes.Equal(body, theirBody) {
			t.Fatalf("body: h1 %q, net/http %q\n%q", body, theirBody, data)
		}
		h1Used := len(data) - in.Len() - (c.w - c.r)
		netUsed := len(data) - nin.Len() - br.Buffered()
		if h1Used != netUsed {
			t.Fatalf("the next request starts at byte %d for h1, %d for net/http\n%q", h1Used, netUsed, data)
		}
	})
}
