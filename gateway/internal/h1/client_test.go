package h1_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/analyticsco/platform/gateway/internal/h1"
)

// fakeService accepts connections and runs serve on each: a service whose answers the
// test writes byte for byte.
func fakeService(t *testing.T, serve func(n int, c net.Conn, br *bufio.Reader)) *url.URL {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var conns atomic.Int64
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(10 * time.Second))
				serve(int(conns.Add(1)), c, bufio.NewReader(c))
			}()
		}
	}()
	t.Cleanup(func() { _ = ln.Close(); wg.Wait() })
	return &url.URL{Scheme: "http", Host: ln.Addr().String()}
}

// proxy serves h1 on a free port, forwarding every request to up with one added field;
// a failed forward is answered 502 with the error in X-Error.
func proxy(t *testing.T, up *h1.Upstream) string {
	t.Helper()
	srv := &h1.Server{Handler: h1.HandlerFunc(func(w *h1.ResponseWriter, r *h1.Request) {
		var fields []byte
		for _, f := range r.Header.Fields() {
			if f.Name != "" && !r.NotForwarded(f.Name) {
				fields = append(fields, f.Name+": "+f.Value+"\r\n"...)
			}
		}
		fields = append(fields, "X-Forwarded-By: test\r\n"...)
		if err := up.Forward(w, r, fields); err != nil && !w.Committed() {
			w.Header().Set("X-Error", err.Error())
			w.WriteHeader(http.StatusBadGateway)
		}
	})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = srv.Serve(ln); close(done) }()
	t.Cleanup(func() { _ = srv.Close(); <-done; up.CloseIdle() })
	return ln.Addr().String()
}

// answerEach reads requests off the connection and writes answer for each.
func answerEach(answer string) func(int, net.Conn, *bufio.Reader) {
	return func(_ int, c net.Conn, br *bufio.Reader) {
		for {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			_, _ = io.Copy(io.Discard, req.Body)
			if _, err := io.WriteString(c, answer); err != nil {
				return
			}
		}
	}
}

// answerOnce answers one request and closes the connection (a close-delimited body
// ends there).
func answerOnce(answer string) func(int, net.Conn, *bufio.Reader) {
	return func(_ int, c net.Conn, br *bufio.Reader) {
		if _, err := http.ReadRequest(br); err == nil {
			_, _ = io.WriteString(c, answer)
		}
	}
}

// Each framing a service may answer with reaches the client with framing of the
// gateway's own: the body intact, hop-by-hop fields and interim answers dropped.
func TestForwardCopiesEveryAnswerFraming(t *testing.T) {
	for _, tc := range []struct {
		name, method, answer string
		status               int
		body                 string
		chunked              bool
		once                 bool // the service closes after its answer
	}{
		{"content-length", "GET", "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", 200, "hello", false, false},
		{"chunked", "GET", "HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nX-Trailer: t\r\n\r\n", 201, "hello world", true, false},
		{"until-close", "GET", "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nuntil the end", 200, "until the end", true, true},
		{"http10-service", "GET", "HTTP/1.0 200 OK\r\n\r\nold", 200, "old", true, true},
		{"head", "HEAD", "HTTP/1.1 200 OK\r\nContent-Length: 42\r\n\r\n", 200, "", false, false},
		{"no-content", "DELETE", "HTTP/1.1 204 No Content\r\n\r\n", 204, "", false, false},
		{"interim-answers-skipped", "GET", "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", 200, "ok", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			serve := answerEach(tc.answer)
			if tc.once {
				serve = answerOnce(tc.answer)
			}
			svc := fakeService(t, serve)
			addr := proxy(t, h1.NewUpstream(svc, h1.UpstreamOptions{}))
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(10 * time.Second))
			fmt.Fprintf(c, "%s /x HTTP/1.1\r\n%s\r\n", tc.method, host)
			resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: tc.method})
			if err != nil {
				t.Fatal(err)
			}
			body, err := io.ReadAll(resp.Body)
			if err != nil || resp.StatusCode != tc.status || string(body) != tc.body {
				t.Fatalf("%d %q %v, want %d %q", resp.StatusCode, body, err, tc.status, tc.body)
			}
			if chunked := len(resp.TransferEncoding) > 0; chunked != tc.chunked {
				t.Fatalf("chunked %v, want %v", chunked, tc.chunked)
			}
			if tc.method == "HEAD" && resp.ContentLength != 42 {
				t.Fatalf("HEAD answer's Content-Length %d, want the service's 42", resp.ContentLength)
			}
			if resp.Header.Get("Link") != "" || resp.Header.Get("X-Trailer") != "" {
				t.Fatalf("an interim answer's or a trailer's field reached the client: %v", resp.Header)
			}
		})
	}
}

// The service's hop-by-hop fields, and those it names in Connection, stay between it and
// the gateway; its own X-Request-Id wins over the handler's field of that name.
func TestForwardDropsTheAnswersHopByHopFields(t *testing.T) {
	svc := fakeService(t, answerEach("HTTP/1.1 200 OK\r\nConnection: X-Secret, keep-alive\r\nX-Secret: s\r\nKeep-Alive: timeout=5\r\n"+
		"Upgrade: h2c\r\nProxy-Authenticate: Basic\r\nX-Request-Id: from-service\r\nX-Kept: yes\r\nContent-Length: 0\r\n\r\n"))
	up := h1.NewUpstream(svc, h1.UpstreamOptions{})
	srv := &h1.Server{Handler: h1.HandlerFunc(func(w *h1.ResponseWriter, r *h1.Request) {
		w.AddHeader("X-Request-Id", "from-gateway")
		w.AddHeader("X-Gateway", "yes")
		_ = up.Forward(w, r, nil)
	})}
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close(); up.CloseIdle() })
	answers := exchange(t, ln.Addr().String(), "GET / HTTP/1.1\r\n"+host+"\r\n", 1)
	if len(answers) != 1 {
		t.Fatal("no answer")
	}
	h := answers[0].Header
	for _, f := range []string{"X-Secret", "Keep-Alive", "Upgrade", "Proxy-Authenticate"} {
		if h.Get(f) != "" {
			t.Errorf("%s reached the client", f)
		}
	}
	if h.Get("X-Kept") != "yes" || h.Get("X-Gateway") != "yes" || strings.Join(h.Values("X-Request-Id"), ",") != "from-service" {
		t.Fatalf("fields: %v", h)
	}
}

// An answer the gateway cannot read safely is an error (the handler's 502), never passed on.
func TestForwardRefusesMalformedAnswers(t *testing.T) {
	for name, answer := range map[string]string{
		"bare-lf":                      "HTTP/1.1 200 OK\nContent-Length: 0\n\n",
		"content-length-and-chunked":   "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
		"content-length-twice":         "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\nok",
		"transfer-coding-not-chunked":  "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n",
		"status-line":                  "HTTP/1.1 2000 OK\r\n\r\n",
		"http2-status-line":            "HTTP/2 200\r\n\r\n",
		"field-without-colon":          "HTTP/1.1 200 OK\r\nX-A\r\n\r\n",
		"control-in-value":             "HTTP/1.1 200 OK\r\nX-A: a\x00b\r\nContent-Length: 0\r\n\r\n",
		"switching-protocols-unasked":  "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n",
		"closed-without-answer":        "",
		"closed-in-the-middle-of-head": "HTTP/1.1 200 OK\r\nContent-Le",
	} {
		t.Run(name, func(t *testing.T) {
			svc := fakeService(t, func(_ int, c net.Conn, br *bufio.Reader) {
				if _, err := http.ReadRequest(br); err == nil {
					_, _ = io.WriteString(c, answer)
				}
			})
			answers := exchange(t, proxy(t, h1.NewUpstream(svc, h1.UpstreamOptions{})), "GET / HTTP/1.1\r\n"+host+"\r\n", 1)
			if len(answers) != 1 || answers[0].StatusCode != http.StatusBadGateway {
				t.Fatalf("answers %v, want the handler's 502", answers)
			}
		})
	}
}

// A connection the service closed while it sat idle in the pool is noticed: a GET that
// meets one is sent again on a new connection, one idle a while is checked before use,
// and a POST that reached a connection the service then closed is not sent twice.
func TestForwardSurvivesConnectionsTheServiceClosed(t *testing.T) {
	var requests atomic.Int64
	answer := func(c net.Conn, br *bufio.Reader) bool {
		req, err := http.ReadRequest(br)
		if err != nil {
			return false
		}
		requests.Add(1)
		_, _ = io.Copy(io.Discard, req.Body)
		_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		return true
	}
	// Each connection answers one request; a second one gets as far as the service,
	// which then closes the connection without an answer.
	oneThenClose := fakeService(t, func(_ int, c net.Conn, br *bufio.Reader) {
		if answer(c, br) {
			_, _ = br.ReadByte()
		}
	})
	addr := proxy(t, h1.NewUpstream(oneThenClose, h1.UpstreamOptions{}))
	get, post := "GET / HTTP/1.1\r\n"+host+"\r\n", "POST / HTTP/1.1\r\n"+host+"Content-Length: 2\r\n\r\nab"
	answers := exchange(t, addr, get+get+get, 3)
	for i, a := range answers {
		if a.StatusCode != 200 {
			t.Fatalf("GET %d on a connection the service closed: %d %s", i, a.StatusCode, a.Header.Get("X-Error"))
		}
	}
	if len(answers) != 3 {
		t.Fatalf("%d answers", len(answers))
	}
	before := requests.Load()
	answers = exchange(t, addr, get+post, 2)
	if len(answers) != 2 || answers[1].StatusCode != http.StatusBadGateway || requests.Load() != before+1 {
		t.Fatalf("POST on a connection the service closed: %v, the service answered %d requests", answers, requests.Load()-before)
	}

	// Each connection answers one request and is closed right away: idle in the pool
	// for longer than the probe threshold (50 ms), it is checked and not used.
	closedAtOnce := fakeService(t, func(_ int, c net.Conn, br *bufio.Reader) { answer(c, br) })
	addr = proxy(t, h1.NewUpstream(closedAtOnce, h1.UpstreamOptions{}))
	if a := exchange(t, addr, get, 1); len(a) != 1 || a[0].StatusCode != 200 {
		t.Fatalf("first GET: %v", a)
	}
	time.Sleep(100 * time.Millisecond) // not a wait for an event: the connection must sit idle this long
	if a := exchange(t, addr, post, 1); len(a) != 1 || a[0].StatusCode != 200 {
		t.Fatalf("POST after the pooled connection was closed: %v", a)
	}
}

// Bodies larger than what is read whole are streamed, with Content-Length or chunked,
// and arrive intact.
func TestForwardStreamsLargeBodies(t *testing.T) {
	got := make(chan string, 2)
	svc := fakeService(t, func(_ int, c net.Conn, br *bufio.Reader) {
		for {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			b, _ := io.ReadAll(req.Body)
			got <- fmt.Sprintf("%d %v", len(b), req.TransferEncoding)
			_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
		}
	})
	addr := proxy(t, h1.NewUpstream(svc, h1.UpstreamOptions{}))
	big := strings.Repeat("x", 1<<20)
	var chunked strings.Builder
	for i := 0; i < 20; i++ {
		fmt.Fprintf(&chunked, "%x\r\n%s\r\n", 10000, strings.Repeat("y", 10000))
	}
	chunked.WriteString("0\r\n\r\n")
	answers := exchange(t, addr, fmt.Sprintf("POST / HTTP/1.1\r\n%sContent-Length: %d\r\n\r\n%sPOST / HTTP/1.1\r\n%sTransfer-Encoding: chunked\r\n\r\n%s",
		host, len(big), big, host, chunked.String()), 2)
	if len(answers) != 2 || answers[0].StatusCode != 200 || answers[1].StatusCode != 200 {
		t.Fatalf("answers %v", answers)
	}
	if a, b := <-got, <-got; a != "1048576 []" || b != "200000 [chunked]" {
		t.Fatalf("the service got %q and %q", a, b)
	}
}

// A service that answers before it has read a streamed body (a 413) gets its answer to
// the client; the client's connection then closes, its body unread.
func TestAnAnswerBeforeTheWholeUploadReachesTheClient(t *testing.T) {
	svc := fakeService(t, func(_ int, c net.Conn, br *bufio.Reader) {
		if _, err := http.ReadRequest(br); err == nil {
			// As net/http's server does: answer, stop writing, and let the rest come
			// for a while before the close, so the answer is read rather than reset.
			_, _ = io.WriteString(c, "HTTP/1.1 413 Request Entity Too Large\r\nConnection: close\r\nContent-Length: 4\r\n\r\nbig!")
			_ = c.(*net.TCPConn).CloseWrite()
			_ = c.SetReadDeadline(time.Now().Add(time.Second))
			_, _ = io.Copy(io.Discard, c)
		}
	})
	addr := proxy(t, h1.NewUpstream(svc, h1.UpstreamOptions{}))
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(c, "POST / HTTP/1.1\r\n%sContent-Length: %d\r\n\r\n", host, 8<<20)
	go func() { _, _ = c.Write(make([]byte, 1<<20)) }() // a part of it, then nothing
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 413 || string(body) != "big!" || !resp.Close {
		t.Fatalf("%d %q close %v", resp.StatusCode, body, resp.Close)
	}
}

// A replica nothing listens on fails with a dial error, and one that never answers with a
// timeout: the gateway tells them apart (503, 504).
func TestForwardErrorsTellDownFromSlow(t *testing.T) {
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	down := &url.URL{Scheme: "http", Host: ln.Addr().String()}
	_ = ln.Close()
	slow := fakeService(t, func(_ int, c net.Conn, br *bufio.Reader) {
		_, _ = http.ReadRequest(br)
		_, _ = br.ReadByte() // never answers
	})
	for name, tc := range map[string]struct {
		u     *url.URL
		check func(error) bool
	}{
		"down": {down, func(err error) bool { var op *net.OpError; return errors.As(err, &op) && op.Op == "dial" }},
		"slow": {slow, func(err error) bool { var ne net.Error; return errors.As(err, &ne) && ne.Timeout() }},
	} {
		t.Run(name, func(t *testing.T) {
			up := h1.NewUpstream(tc.u, h1.UpstreamOptions{Timeout: 200 * time.Millisecond, DialTimeout: time.Second})
			var got error
			srv := &h1.Server{Handler: h1.HandlerFunc(func(w *h1.ResponseWriter, r *h1.Request) {
				got = up.Forward(w, r, nil)
			})}
			ln, _ := net.Listen("tcp", "127.0.0.1:0")
			go func() { _ = srv.Serve(ln) }()
			t.Cleanup(func() { _ = srv.Close() })
			exchange(t, ln.Addr().String(), "GET / HTTP/1.1\r\n"+host+"\r\n", 1)
			if got == nil || !tc.check(got) {
				t.Fatalf("error %v", got)
			}
		})
	}
}
