package h1_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/analyticsco/platform/gateway/internal/h1"
)

// seen is what the echo handler answers: the request as the server parsed it.
type seen struct {
	Method, Target, Path, Query, Host string
	Body                              string
	BodyErr                           string
	Fields                            map[string]string
	HTTP10                            bool
}

// echoServer serves h1 on a free port with a handler that reads the body (up to limit
// bytes) and answers what it saw as JSON; calls counts the requests that reached it.
func echoServer(t *testing.T, limit int64) (addr string, calls *atomic.Int64) {
	t.Helper()
	calls = &atomic.Int64{}
	srv := &h1.Server{Handler: h1.HandlerFunc(func(w *h1.ResponseWriter, r *h1.Request) {
		calls.Add(1)
		s := seen{Method: r.Method, Target: r.Target, Path: r.URL.Path, Query: r.URL.RawQuery, Host: r.Host, HTTP10: r.HTTP10, Fields: map[string]string{}}
		for _, f := range r.Header.Fields() {
			s.Fields[strings.ToLower(f.Name)] = f.Value
		}
		if limit > 0 {
			r.Body.SetLimit(limit)
		}
		b, err := io.ReadAll(r.Body)
		s.Body = string(b)
		if err != nil {
			s.BodyErr = err.Error()
			w.WriteHeader(http.StatusBadRequest)
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(s)
	}), BodyTimeout: 2 * time.Second, ReadHeaderTimeout: 2 * time.Second}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = srv.Serve(ln); close(done) }()
	t.Cleanup(func() { _ = srv.Close(); <-done })
	return ln.Addr().String(), calls
}

// exchange sends raw on a new connection and reads every answer until the server
// closes it (or the client does, after closeAfter answers).
func exchange(t *testing.T, addr, raw string, closeAfter int) []*http.Response {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	var out []*http.Response
	for closeAfter <= 0 || len(out) < closeAfter {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			break
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body = io.NopCloser(strings.NewReader(string(body)))
		out = append(out, resp)
	}
	return out
}

func decodeSeen(t *testing.T, resp *http.Response) seen {
	t.Helper()
	var s seen
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
		t.Fatalf("answer %d is not the echo: %v", resp.StatusCode, err)
	}
	return s
}

const host = "Host: gw.test\r\n"

// Every request head HTTP/1.1 lets a reader guess at is refused before the handler, with
// the status that names the problem, and the connection is closed (answers: exactly one).
func TestAmbiguousOrMalformedHeadsAreRefusedBeforeTheHandler(t *testing.T) {
	addr, calls := echoServer(t, 0)
	for _, tc := range []struct {
		name, raw string
		status    int
	}{
		{"content-length-and-transfer-encoding", "POST / HTTP/1.1\r\n" + host + "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400},
		{"transfer-encoding-twice", "POST / HTTP/1.1\r\n" + host + "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400},
		{"transfer-encoding-list", "POST / HTTP/1.1\r\n" + host + "Transfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n", 400},
		{"transfer-encoding-after-a-tab", "POST / HTTP/1.1\r\n" + host + "Transfer-Encoding:\tchunked\r\n\r\n0\r\n\r\n", 400},
		{"field-value-leading-tab", "GET / HTTP/1.1\r\n" + host + "X-A:  \ta b\r\n\r\n", 400},
		{"field-value-trailing-tab", "GET / HTTP/1.1\r\n" + host + "X-A: a b\t \r\n\r\n", 400},
		{"transfer-encoding-identity", "POST / HTTP/1.1\r\n" + host + "Transfer-Encoding: identity\r\n\r\n", 400},
		{"transfer-encoding-http10", "POST / HTTP/1.0\r\n" + host + "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400},
		{"content-length-twice-same", "POST / HTTP/1.1\r\n" + host + "Content-Length: 2\r\nContent-Length: 2\r\n\r\nab", 400},
		{"content-length-list", "POST / HTTP/1.1\r\n" + host + "Content-Length: 2, 2\r\n\r\nab", 400},
		{"content-length-sign", "POST / HTTP/1.1\r\n" + host + "Content-Length: +2\r\n\r\nab", 400},
		{"content-length-hex", "POST / HTTP/1.1\r\n" + host + "Content-Length: 0x2\r\n\r\nab", 400},
		{"content-length-empty", "POST / HTTP/1.1\r\n" + host + "Content-Length:\r\n\r\n", 400},
		{"content-length-overflow", "POST / HTTP/1.1\r\n" + host + "Content-Length: 99999999999999999999\r\n\r\n", 400},
		{"space-before-colon", "POST / HTTP/1.1\r\n" + host + "Content-Length : 2\r\n\r\nab", 400},
		{"obs-fold", "GET / HTTP/1.1\r\n" + host + "X-A: 1\r\n  2\r\n\r\n", 400},
		{"obs-fold-first-field", "GET / HTTP/1.1\r\n Host: gw.test\r\n\r\n", 400},
		{"bare-lf-request-line", "GET / HTTP/1.1\n" + host + "\r\n", 400},
		{"bare-lf-field", "GET / HTTP/1.1\r\nHost: gw.test\nX-A: 1\r\n\r\n", 400},
		{"bare-cr-in-value", "GET / HTTP/1.1\r\n" + host + "X-A: a\rb\r\n\r\n", 400},
		{"control-in-value", "GET / HTTP/1.1\r\n" + host + "X-A: a\x01b\r\n\r\n", 400},
		{"nul-in-value", "GET / HTTP/1.1\r\n" + host + "X-A: a\x00b\r\n\r\n", 400},
		{"field-without-colon", "GET / HTTP/1.1\r\n" + host + "X-A\r\n\r\n", 400},
		{"field-name-not-a-token", "GET / HTTP/1.1\r\n" + host + "X@A: 1\r\n\r\n", 400},
		{"empty-field-name", "GET / HTTP/1.1\r\n" + host + ": 1\r\n\r\n", 400},
		{"host-missing", "GET / HTTP/1.1\r\n\r\n", 400},
		{"host-twice", "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400},
		{"host-empty", "GET / HTTP/1.1\r\nHost:\r\n\r\n", 400},
		{"host-user-info", "GET / HTTP/1.1\r\nHost: u@a\r\n\r\n", 400},
		{"host-path", "GET / HTTP/1.1\r\nHost: a/b\r\n\r\n", 400},
		{"method-not-a-token", "G@T / HTTP/1.1\r\n" + host + "\r\n", 400},
		{"method-with-control", "G\x01T / HTTP/1.1\r\n" + host + "\r\n", 400},
		{"double-space", "GET  / HTTP/1.1\r\n" + host + "\r\n", 400},
		{"trailing-space", "GET / HTTP/1.1 \r\n" + host + "\r\n", 400},
		{"leading-empty-line", "\r\nGET / HTTP/1.1\r\n" + host + "\r\n", 400},
		{"http09", "GET /\r\n\r\n", 400},
		{"version-lower-case", "GET / http/1.1\r\n" + host + "\r\n", 400},
		{"version-two-digit-minor", "GET / HTTP/1.10\r\n" + host + "\r\n", 400},
		{"version-2", "GET / HTTP/2.0\r\n" + host + "\r\n", 400},
		{"version-1.2", "GET / HTTP/1.2\r\n" + host + "\r\n", 400},
		{"absolute-form", "GET http://evil/x HTTP/1.1\r\n" + host + "\r\n", 400},
		{"authority-form", "CONNECT a:443 HTTP/1.1\r\n" + host + "\r\n", 400},
		{"asterisk-form", "OPTIONS * HTTP/1.1\r\n" + host + "\r\n", 400},
		{"fragment", "GET /a#b HTTP/1.1\r\n" + host + "\r\n", 400},
		{"control-in-target", "GET /a\x01b HTTP/1.1\r\n" + host + "\r\n", 400},
		{"non-ascii-target", "GET /a\xc3\xa9 HTTP/1.1\r\n" + host + "\r\n", 400},
		{"bad-percent-escape", "GET /a%zz HTTP/1.1\r\n" + host + "\r\n", 400},
		{"expect-other", "POST / HTTP/1.1\r\n" + host + "Expect: 200-ok\r\nContent-Length: 2\r\n\r\nab", 417},
		{"field-over-8k", "GET / HTTP/1.1\r\n" + host + "X-A: " + strings.Repeat("a", 8200) + "\r\n\r\n", 431},
		{"fields-over-16k", "GET / HTTP/1.1\r\n" + host + strings.Repeat("X-A: "+strings.Repeat("a", 4000)+"\r\n", 5) + "\r\n", 431},
		{"too-many-fields", "GET / HTTP/1.1\r\n" + host + strings.Repeat("X-A: 1\r\n", 101) + "\r\n", 431},
		{"request-line-over-64k", "GET /" + strings.Repeat("a", 65<<10) + " HTTP/1.1\r\n" + host + "\r\n", 414},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := calls.Load()
			answers := exchange(t, addr, tc.raw+"GET /after HTTP/1.1\r\n"+host+"\r\n", 0)
			if len(answers) != 1 || answers[0].StatusCode != tc.status {
				var got []int
				for _, a := range answers {
					got = append(got, a.StatusCode)
				}
				t.Fatalf("answers %v, want one %d (and the connection closed)", got, tc.status)
			}
			if !answers[0].Close || answers[0].Header.Get("Content-Type") != "application/json" {
				t.Errorf("refusal without Connection: close or a JSON body: %v", answers[0].Header)
			}
			if calls.Load() != before {
				t.Errorf("the handler saw a refused request")
			}
		})
	}
}

// What HTTP/1.1 allows and the gateway serves reaches the handler as sent: the target
// raw and its path decoded, header names in their case, underscore names dropped (as
// nginx drops them), bodies framed by Content-Length or chunked.
func TestWellFormedRequestsReachTheHandler(t *testing.T) {
	addr, _ := echoServer(t, 0)
	for _, tc := range []struct {
		name, raw string
		want      seen
	}{
		{"get", "GET /a/b?x=1 HTTP/1.1\r\n" + host + "X-Keep: yes\r\n\r\n",
			seen{Method: "GET", Target: "/a/b?x=1", Path: "/a/b", Query: "x=1", Host: "gw.test", Fields: map[string]string{"host": "gw.test", "x-keep": "yes"}}},
		{"escaped-path", "GET /a%20b/%2e%2e HTTP/1.1\r\n" + host + "\r\n",
			seen{Method: "GET", Target: "/a%20b/%2e%2e", Path: "/a b/..", Host: "gw.test", Fields: map[string]string{"host": "gw.test"}}},
		{"any-token-method", "propFind1 / HTTP/1.1\r\n" + host + "\r\n",
			seen{Method: "propFind1", Target: "/", Path: "/", Host: "gw.test", Fields: map[string]string{"host": "gw.test"}}},
		{"underscore-field-dropped", "GET / HTTP/1.1\r\n" + host + "X_Platform_Identity: forged\r\n\r\n",
			seen{Method: "GET", Target: "/", Path: "/", Host: "gw.test", Fields: map[string]string{"host": "gw.test"}}},
		{"content-length-body", "POST / HTTP/1.1\r\n" + host + "Content-Length: 5\r\n\r\nhello",
			seen{Method: "POST", Target: "/", Path: "/", Host: "gw.test", Body: "hello", Fields: map[string]string{"host": "gw.test", "content-length": "5"}}},
		{"content-length-leading-zeros", "POST / HTTP/1.1\r\n" + host + "Content-Length: 005\r\n\r\nhello",
			seen{Method: "POST", Target: "/", Path: "/", Host: "gw.test", Body: "hello", Fields: map[string]string{"host": "gw.test", "content-length": "005"}}},
		{"chunked-body", "POST / HTTP/1.1\r\n" + host + "Transfer-Encoding: Chunked\r\n\r\n5\r\nhello\r\nA\r\n, world!!!\r\n0\r\n\r\n",
			seen{Method: "POST", Target: "/", Path: "/", Host: "gw.test", Body: "hello, world!!!", Fields: map[string]string{"host": "gw.test", "transfer-encoding": "Chunked"}}},
		{"http10-without-host", "GET / HTTP/1.0\r\n\r\n",
			seen{Method: "GET", Target: "/", Path: "/", HTTP10: true, Fields: map[string]string{}}},
		{"field-value-spaces-trimmed-inner-tab-kept", "GET / HTTP/1.1\r\n" + host + "X-A:  a\tb \r\n\r\n",
			seen{Method: "GET", Target: "/", Path: "/", Host: "gw.test", Fields: map[string]string{"host": "gw.test", "x-a": "a\tb"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			answers := exchange(t, addr, tc.raw, 1)
			if len(answers) != 1 || answers[0].StatusCode != 200 {
				t.Fatalf("answers: %v", answers)
			}
			got := decodeSeen(t, answers[0])
			gotJSON, _ := json.Marshal(got)
			wantJSON, _ := json.Marshal(tc.want)
			if string(gotJSON) != string(wantJSON) {
				t.Fatalf("handler saw %s\nwant %s", gotJSON, wantJSON)
			}
		})
	}
}

// A chunked body is decoded strictly: a malformed size, an extension, a missing CRLF or
// trailer fields end the body with an error, which the handler sees; the connection
// closes after the answer.
func TestMalformedChunkedBodiesFailTheRead(t *testing.T) {
	addr, _ := echoServer(t, 0)
	for name, body := range map[string]string{
		"size-not-hex":        "zz\r\nab\r\n0\r\n\r\n",
		"size-0x":             "0x2\r\nab\r\n0\r\n\r\n",
		"size-negative":       "-2\r\nab\r\n0\r\n\r\n",
		"size-overflow":       "ffffffffffffffffff\r\nab\r\n0\r\n\r\n",
		"size-leading-space":  " 2\r\nab\r\n0\r\n\r\n",
		"size-trailing-space": "2 \r\nab\r\n0\r\n\r\n",
		"extension":           "2;x=y\r\nab\r\n0\r\n\r\n",
		"bare-lf":             "2\nab\n0\n\n",
		"data-longer":         "2\r\nabc\r\n0\r\n\r\n",
		"trailer-field":       "2\r\nab\r\n0\r\nX-T: 1\r\n\r\n",
		"empty-size":          "\r\nab\r\n0\r\n\r\n",
	} {
		t.Run(name, func(t *testing.T) {
			answers := exchange(t, addr, "POST / HTTP/1.1\r\n"+host+"Transfer-Encoding: chunked\r\n\r\n"+body+"GET /after HTTP/1.1\r\n"+host+"\r\n", 0)
			if len(answers) != 1 || answers[0].StatusCode != 400 {
				t.Fatalf("want one 400 and the connection closed, got %d answers", len(answers))
			}
			if s := decodeSeen(t, answers[0]); s.BodyErr == "" {
				t.Fatalf("the handler read %q without an error", s.Body)
			}
		})
	}
}

// Requests sent back to back are answered in order on one connection; Connection: close
// ends it after its answer, and so does HTTP/1.0.
func TestPipelinedRequestsAndConnectionClose(t *testing.T) {
	addr, _ := echoServer(t, 0)
	answers := exchange(t, addr, "GET /1 HTTP/1.1\r\n"+host+"\r\nPOST /2 HTTP/1.1\r\n"+host+"Content-Length: 3\r\n\r\nabcGET /3 HTTP/1.1\r\n"+host+
		"Connection: close\r\n\r\nGET /4 HTTP/1.1\r\n"+host+"\r\n", 0)
	var paths []string
	for _, a := range answers {
		paths = append(paths, decodeSeen(t, a).Path)
	}
	if strings.Join(paths, ",") != "/1,/2,/3" || !answers[2].Close {
		t.Fatalf("answered %v, want /1,/2,/3 then the end (Connection: close)", paths)
	}
	answers = exchange(t, addr, "GET /1 HTTP/1.0\r\n\r\nGET /2 HTTP/1.0\r\n\r\n", 0)
	if len(answers) != 1 {
		t.Fatalf("HTTP/1.0: %d answers on one connection, want 1", len(answers))
	}
}

// A client that sends Expect: 100-continue gets 100 Continue when the handler starts
// reading the body, and not before.
func TestExpectContinueIsAnsweredWhenTheBodyIsRead(t *testing.T) {
	addr, _ := echoServer(t, 0)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(c, "POST /up HTTP/1.1\r\n%sExpect: 100-continue\r\nContent-Length: 4\r\n\r\n", host)
	br := bufio.NewReader(c)
	line, err := br.ReadString('\n')
	if err != nil || line != "HTTP/1.1 100 Continue\r\n" {
		t.Fatalf("first line %q, %v", line, err)
	}
	if l, _ := br.ReadString('\n'); l != "\r\n" {
		t.Fatalf("100 Continue not ended by an empty line: %q", l)
	}
	_, _ = io.WriteString(c, "body")
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("%v %v", resp, err)
	}
	if s := decodeSeen(t, resp); s.Body != "body" {
		t.Fatalf("body %q", s.Body)
	}
}

// A body over the handler's limit fails its read with *h1.TooLargeError.
func TestBodyOverTheLimitFailsTheRead(t *testing.T) {
	addr, _ := echoServer(t, 4)
	answers := exchange(t, addr, "POST / HTTP/1.1\r\n"+host+"Transfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n3\r\ndef\r\n0\r\n\r\n", 1)
	if len(answers) != 1 || answers[0].StatusCode != 400 {
		t.Fatalf("answers %v", answers)
	}
	if s := decodeSeen(t, answers[0]); !strings.Contains(s.BodyErr, "limit of 4 bytes") {
		t.Fatalf("body error %q", s.BodyErr)
	}
}

// A body that stops arriving fails its read once the body timeout passes.
func TestStalledBodyTimesOut(t *testing.T) {
	addr, _ := echoServer(t, 0)
	answers := exchange(t, addr, "POST / HTTP/1.1\r\n"+host+"Content-Length: 10\r\n\r\nabc", 1)
	if len(answers) != 1 {
		t.Fatalf("no answer to a stalled body")
	}
	if s := decodeSeen(t, answers[0]); !strings.Contains(s.BodyErr, "timeout") {
		t.Fatalf("body error %q, want a timeout", s.BodyErr)
	}
}

// A net/http handler that says its length and writes no body to a HEAD (http.ServeContent
// does) gets that length in the HEAD's answer, as net/http's server would send it; the
// GET on the same connection gets the body.
func TestHeadAnswerCarriesTheLengthTheHandlerSet(t *testing.T) {
	page := strings.Repeat("<p>reference</p>", 1000)
	srv := &h1.Server{Handler: h1.HandlerFunc(func(w *h1.ResponseWriter, r *h1.Request) {
		req, err := http.NewRequest(r.Method, r.Target, http.NoBody)
		if err != nil {
			t.Error(err)
			return
		}
		http.ServeContent(w, req, "", time.Time{}, strings.NewReader(page))
	}), ReadHeaderTimeout: 2 * time.Second}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = srv.Serve(ln); close(done) }()
	t.Cleanup(func() { _ = srv.Close(); <-done })

	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, "HEAD /docs HTTP/1.1\r\n"+host+"\r\nGET /docs HTTP/1.1\r\n"+host+"Connection: close\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	head, err := http.ReadResponse(br, &http.Request{Method: http.MethodHead})
	if err != nil {
		t.Fatal(err)
	}
	if head.StatusCode != 200 || head.ContentLength != int64(len(page)) || len(head.Header.Values("Content-Length")) != 1 {
		t.Fatalf("HEAD: %d, Content-Length %v, want 200 and %d once", head.StatusCode, head.Header.Values("Content-Length"), len(page))
	}
	get, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(get.Body)
	if err != nil || get.StatusCode != 200 || string(body) != page || len(get.Header.Values("Content-Length")) != 1 {
		t.Fatalf("GET after HEAD: %d, %d bytes, Content-Length %v, %v", get.StatusCode, len(body), get.Header.Values("Content-Length"), err)
	}
}
