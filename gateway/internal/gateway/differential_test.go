package gateway_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/analyticsco/platform/devstack"
	"github.com/analyticsco/platform/devstack/apitest"
	"github.com/analyticsco/platform/gateway/internal/gateway"
)

// smugglingCase is a raw request, with {AUTH} and {DEP} standing for a valid bearer
// token and the caller's deployment: as sent, it passes the gateway's authentication,
// so what the gateway refuses it refuses for the framing alone.
type smugglingCase struct{ name, raw string }

// smugglingCases are malformed and ambiguous requests of every kind a proxy and the
// server behind it could read differently.
func smugglingCases() []smugglingCase {
	const (
		post   = "POST /api/v1/deployments/{DEP}/folders HTTP/1.1\r\n"
		get    = "GET /api/v1/deployments/{DEP}/workspace HTTP/1.1\r\n"
		host   = "Host: gw.test\r\n"
		auth   = "Authorization: Bearer {AUTH}\r\n"
		json   = "Content-Type: application/json\r\n"
		body   = `{"name":"smuggled"}`
		chunks = "13\r\n" + body + "\r\n0\r\n\r\n"
	)
	te := post + host + auth + json + "Transfer-Encoding: chunked\r\n"
	withTE := func(field string) string { return post + host + auth + json + field + "\r\n\r\n" + chunks }
	withCL := func(field, b string) string { return post + host + auth + json + field + "\r\n\r\n" + b }
	smuggled := "GET /api/v1/deployments/{DEP}/workspace?smuggled=1 HTTP/1.1\r\n" + host + auth + "\r\n"
	line := func(l string) string { return l + "\r\n" + host + auth + "\r\n" }
	field := func(f string) string { return get + host + auth + f + "\r\n\r\n" }
	cases := []smugglingCase{
		// The well-formed baseline: both forward it, and forward it alike.
		{"well-formed-get", get + host + auth + "\r\n"},
		{"well-formed-post", withCL("Content-Length: 19", body)},
		{"well-formed-chunked", te + "\r\n" + chunks},
		{"pipelined-two", get + host + auth + "\r\n" + withCL("Content-Length: 19", body)},
		{"expect-100-continue", withCL("Expect: 100-continue\r\nContent-Length: 19", body)},
		{"get-with-body", get + host + auth + "Content-Length: 5\r\n\r\nhello"},
		{"unknown-method", line("PROPFIND /api/v1/deployments/{DEP}/workspace HTTP/1.1")},
		{"unknown-method-on-unknown-path", line("PROPFIND /api/v1/nowhere HTTP/1.1")},
		{"http10", "GET /api/v1/deployments/{DEP}/workspace HTTP/1.0\r\n" + auth + "\r\n"},
		{"http10-keep-alive", "GET /api/v1/deployments/{DEP}/workspace HTTP/1.0\r\nConnection: keep-alive\r\n" + auth + "\r\n"},
		// Content-Length and Transfer-Encoding together, in every disguise.
		{"cl-te", withCL("Content-Length: 6\r\nTransfer-Encoding: chunked", "0\r\n\r\nG")},
		{"te-cl", withCL("Transfer-Encoding: chunked\r\nContent-Length: 4", "5c\r\nGPOST / HTTP/1.1\r\n\r\n0\r\n\r\n")},
		{"cl-te-smuggled-request", withCL("Content-Length: 4\r\nTransfer-Encoding: chunked", "0\r\n\r\n"+smuggled)},
		{"te-tab-separated", withTE("Transfer-Encoding:\tchunked")},
		{"te-space-before-colon", withTE("Transfer-Encoding : chunked")},
		{"te-xchunked", withTE("Transfer-Encoding: xchunked")},
		{"te-chunked-identity", withTE("Transfer-Encoding: chunked, identity")},
		{"te-gzip-chunked", withTE("Transfer-Encoding: gzip, chunked")},
		{"te-identity", withCL("Transfer-Encoding: identity\r\nContent-Length: 19", body)},
		{"te-twice", withTE("Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked")},
		{"te-twice-differing", withTE("Transfer-Encoding: chunked\r\nTransfer-encoding: x")},
		{"te-upper-case", withTE("TRANSFER-ENCODING: CHUNKED")},
		{"te-obs-fold", withTE("X-A: 1\r\n Transfer-Encoding: chunked")},
		{"te-after-bare-lf", withTE("X-A: 1\nTransfer-Encoding: chunked")},
		{"te-in-http10", "POST /api/v1/deployments/{DEP}/folders HTTP/1.0\r\n" + auth + json + "Transfer-Encoding: chunked\r\n\r\n" + chunks},
		{"te-vertical-tab", withTE("Transfer-Encoding:\x0bchunked")},
		// Content-Length alone, malformed or repeated.
		{"cl-twice-same", withCL("Content-Length: 19\r\nContent-Length: 19", body)},
		{"cl-twice-differing", withCL("Content-Length: 19\r\nContent-Length: 5", body)},
		{"cl-list", withCL("Content-Length: 19, 19", body)},
		{"cl-plus", withCL("Content-Length: +19", body)},
		{"cl-negative", withCL("Content-Length: -1", body)},
		{"cl-hex", withCL("Content-Length: 0x13", body)},
		{"cl-space-inside", withCL("Content-Length: 1 9", body)},
		{"cl-empty", withCL("Content-Length:", body)},
		{"cl-overflow", withCL("Content-Length: 99999999999999999999", body)},
		{"cl-leading-zeros", withCL("Content-Length: 0019", body)},
		{"cl-space-before-colon", withCL("Content-Length : 19", body)},
		{"cl-obs-fold", withCL("Content-Length:\r\n 19", body)},
		{"cl-too-large-for-route", withCL("Content-Length: 2000000", body)},
		{"cl-shorter-than-body-then-request", withCL("Content-Length: 0", smuggled)},
		// Host.
		{"host-twice", get + host + "Host: other.test\r\n" + auth + "\r\n"},
		{"host-missing", get + auth + "\r\n"},
		{"host-empty", get + "Host:\r\n" + auth + "\r\n"},
		{"host-slash", get + "Host: a/b\r\n" + auth + "\r\n"},
		{"host-dot-dot", get + "Host: a..b\r\n" + auth + "\r\n"},
		{"host-space", get + "Host: a b\r\n" + auth + "\r\n"},
		{"host-user-info", get + "Host: u@a\r\n" + auth + "\r\n"},
		{"host-and-absolute-target", line("GET http://evil.test/api/v1/deployments/{DEP}/workspace HTTP/1.1")},
		// Field syntax.
		{"obs-fold", field("X-A: 1\r\n  continued")},
		{"space-before-colon", field("X-A : 1")},
		{"bare-lf-ending", "GET /api/v1/deployments/{DEP}/workspace HTTP/1.1\nHost: gw.test\nAuthorization: Bearer {AUTH}\n\n"},
		{"bare-cr-in-value", field("X-A: a\rb")},
		{"nul-in-value", field("X-A: a\x00b")},
		{"control-in-value", field("X-A: a\x01b")},
		{"no-colon", field("X-A")},
		{"empty-name", field(": x")},
		{"name-not-a-token", field("X@A: 1")},
		{"underscore-identity", field("X_Platform_Identity: forged")},
		{"underscore-name", field("X_Forwarded_For: 6.6.6.6")},
		{"identity-field-forged", field("X-Platform-Identity: forged\r\nx-platform-role: admin")},
		{"utf8-value", field("X-A: \xc3\xa9")},
		// Sizes.
		{"field-of-8200-bytes", field("X-A: " + strings.Repeat("a", 8200))},
		{"field-of-7000-bytes", field("X-A: " + strings.Repeat("a", 7000))},
		{"five-fields-of-7000-bytes", get + host + auth + strings.Repeat("X-A: "+strings.Repeat("a", 7000)+"\r\n", 5) + "\r\n"},
		{"four-fields-of-4097-bytes", get + host + auth + strings.Repeat("X-A: "+strings.Repeat("a", 4090)+"\r\n", 4) + "\r\n"},
		{"target-of-9000-bytes", line("GET /api/v1/deployments/{DEP}/workspace?q=" + strings.Repeat("a", 9000) + " HTTP/1.1")},
		{"many-fields", get + host + auth + strings.Repeat("X-A: 1\r\n", 150) + "\r\n"},
		// Methods.
		{"method-lower-case", line("get /api/v1/deployments/{DEP}/workspace HTTP/1.1")},
		{"method-with-digit", line("GE1 /api/v1/deployments/{DEP}/workspace HTTP/1.1")},
		{"method-with-bang", line("GE! /api/v1/deployments/{DEP}/workspace HTTP/1.1")},
		{"method-trace", line("TRACE /api/v1/deployments/{DEP}/workspace HTTP/1.1")},
		{"method-connect", line("CONNECT gw.test:443 HTTP/1.1")},
		{"method-connect-path", line("CONNECT /api/v1/deployments/{DEP}/workspace HTTP/1.1")},
		// Request lines and targets.
		{"double-space", line("GET  /api/v1/deployments/{DEP}/workspace HTTP/1.1")},
		{"trailing-space", line("GET /api/v1/deployments/{DEP}/workspace HTTP/1.1 ")},
		{"leading-empty-line", "\r\n" + get + host + auth + "\r\n"},
		{"http09", "GET /api/v1/deployments/{DEP}/workspace\r\n\r\n"},
		{"http12", line("GET /api/v1/deployments/{DEP}/workspace HTTP/1.2")},
		{"http20", line("GET /api/v1/deployments/{DEP}/workspace HTTP/2.0")},
		{"http-lower-case", line("GET /api/v1/deployments/{DEP}/workspace http/1.1")},
		{"http-1-10", line("GET /api/v1/deployments/{DEP}/workspace HTTP/1.10")},
		{"target-authority-form", line("GET gw.test:80 HTTP/1.1")},
		{"target-asterisk", line("OPTIONS * HTTP/1.1")},
		{"target-without-slash", line("GET api/v1/deployments/{DEP}/workspace HTTP/1.1")},
		{"target-dot-dot", line("GET /api/v1/deployments/{DEP}/../{DEP}/workspace HTTP/1.1")},
		{"target-dot-dot-above-root", line("GET /../api/v1/deployments/{DEP}/workspace HTTP/1.1")},
		{"target-encoded-dot-dot", line("GET /api/v1/deployments/{DEP}/%2e%2e/{DEP}/workspace HTTP/1.1")},
		{"target-encoded-slash", line("GET /api/v1/deployments%2f{DEP}/workspace HTTP/1.1")},
		{"target-encoded-nul", line("GET /api/v1/deployments/{DEP}/workspace%00 HTTP/1.1")},
		{"target-bad-escape", line("GET /api/v1/deployments/{DEP}/workspace%zz HTTP/1.1")},
		{"target-fragment", line("GET /api/v1/deployments/{DEP}/workspace#x HTTP/1.1")},
		{"target-non-ascii", line("GET /api/v1/deployments/{DEP}/workspace\xc3\xa9 HTTP/1.1")},
		{"target-control", line("GET /api/v1/deployments/{DEP}/work\x01space HTTP/1.1")},
		{"target-tab", line("GET /api/v1/deployments/{DEP}/work\tspace HTTP/1.1")},
		// Chunked bodies.
		{"chunk-extension", te + "\r\n13;x=y\r\n" + body + "\r\n0\r\n\r\n"},
		{"chunk-size-not-hex", te + "\r\nzz\r\n" + body + "\r\n0\r\n\r\n"},
		{"chunk-size-0x", te + "\r\n0x13\r\n" + body + "\r\n0\r\n\r\n"},
		{"chunk-size-negative", te + "\r\n-13\r\n" + body + "\r\n0\r\n\r\n"},
		{"chunk-size-overflow", te + "\r\nffffffffffffffffff\r\n" + body + "\r\n0\r\n\r\n"},
		{"chunk-size-leading-space", te + "\r\n 13\r\n" + body + "\r\n0\r\n\r\n"},
		{"chunk-size-trailing-space", te + "\r\n13 \r\n" + body + "\r\n0\r\n\r\n"},
		{"chunk-size-leading-zeros", te + "\r\n000000000000000013\r\n" + body + "\r\n0\r\n\r\n"},
		{"chunk-bare-lf", te + "\r\n13\n" + body + "\n0\n\n"},
		{"chunk-data-longer-than-size", te + "\r\n12\r\n" + body + "\r\n0\r\n\r\n"},
		{"chunk-data-shorter-than-size", te + "\r\n14\r\n" + body + "\r\n0\r\n\r\n"},
		{"chunk-trailer-field", te + "\r\n" + "13\r\n" + body + "\r\n0\r\nX-Trailer: 1\r\n\r\n"},
		{"chunk-trailer-content-length", te + "\r\n" + "13\r\n" + body + "\r\n0\r\nContent-Length: 50\r\n\r\n"},
		{"chunk-then-smuggled-request", te + "\r\n" + chunks + smuggled},
		// Expectations and upgrades.
		{"expect-other", withCL("Expect: 200-ok\r\nContent-Length: 19", body)},
		{"upgrade-h2c", field("Connection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA")},
		{"upgrade-websocket", field("Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==")},
		{"connection-names-authorization", field("Connection: Authorization")},
	}
	return cases
}

// recorded is one request as it reached the upstream.
type recorded struct {
	method, uri string
	header      http.Header
	body        string
	bodyErr     error
}

// recorder is the upstream behind both proxies: it records every request it reads and
// answers each with 200 and "{}".
type recorder struct {
	mu   sync.Mutex
	reqs []recorded
	url  *url.URL
}

func newRecorder(t *testing.T) *recorder {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{url: &url.URL{Scheme: "http", Host: ln.Addr().String()}}
	var wg sync.WaitGroup
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
				br := bufio.NewReader(c)
				for {
					req, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					b, berr := io.ReadAll(req.Body)
					rec.mu.Lock()
					rec.reqs = append(rec.reqs, recorded{method: req.Method, uri: req.RequestURI, header: req.Header, body: string(b), bodyErr: berr})
					rec.mu.Unlock()
					if _, err := io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"); err != nil || berr != nil {
						return
					}
				}
			}()
		}
	}()
	t.Cleanup(func() { _ = ln.Close(); wg.Wait() })
	return rec
}

func (r *recorder) since(n int) []recorded {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.reqs[n:])
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.reqs)
}

// nginxConf proxies to the recorder as the bench's nginx row and an ingress do:
// HTTP/1.1 to the upstream with keep-alive, nginx's defaults for everything a client
// sends (header buffers, a 1 MiB body limit, request buffering).
const nginxConf = `worker_processes 1;
pid %[1]s/nginx.pid;
error_log %[1]s/error.log warn;
events { worker_connections 256; }
http {
  access_log off;
  client_body_temp_path %[1]s/client_body;
  proxy_temp_path %[1]s/proxy;
  fastcgi_temp_path %[1]s/fastcgi;
  uwsgi_temp_path %[1]s/uwsgi;
  scgi_temp_path %[1]s/scgi;
  upstream recorder {
    server %[2]s;
    keepalive 8;
  }
  server {
    listen %[3]s;
    location / {
      proxy_pass http://recorder;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
    }
  }
}
`

// startNginx runs Debian's nginx as a child on a free port in front of upstream, until
// the test ends; it fails (never skips) when nginx is not installed.
func startNginx(t *testing.T, upstream string) string {
	t.Helper()
	bin, err := exec.LookPath("nginx")
	if err != nil {
		if _, serr := os.Stat("/usr/sbin/nginx"); serr != nil {
			t.Fatal("nginx is not installed: the differential framing test runs the gateway's requests through it; install it with 'sudo apt-get install -y nginx'")
		}
		bin = "/usr/sbin/nginx"
	}
	dir := t.TempDir()
	addr := devstack.FreeAddr(t)
	conf := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(conf, fmt.Appendf(nil, nginxConf, dir, upstream, addr), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-p", dir, "-e", filepath.Join(dir, "error.log"), "-c", conf, "-g", "daemon off;")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start nginx: %v", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGQUIT)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	apitest.Eventually(t, 30*time.Second, "nginx listening", func() (bool, string) {
		select {
		case <-exited:
			log, _ := os.ReadFile(filepath.Join(dir, "error.log"))
			t.Fatalf("nginx exited: %s %s", stderr.String(), log)
		default:
		}
		c, err := net.Dial("tcp", addr)
		if err != nil {
			return false, err.Error()
		}
		_ = c.Close()
		return true, ""
	})
	return addr
}

// exchangeRaw sends raw, then a sentinel request that asks for the connection's end, and
// returns the statuses of every answer read until the server closed the connection.
func exchangeRaw(t *testing.T, addr, raw, sentinel string) []int {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(15 * time.Second))
	go func() { _, _ = io.WriteString(c, raw+sentinel) }()
	br := bufio.NewReader(c)
	var statuses []int
	for {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			return statuses
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		statuses = append(statuses, resp.StatusCode)
	}
}

// gatewayOwnFields are the fields the gateway writes itself to the service (or that
// frame the message): whether nginx forwards a client's field of that name says nothing.
var gatewayOwnFields = map[string]bool{
	"host": true, "content-length": true, "transfer-encoding": true, "x-platform-identity": true, "x-request-id": true,
	"x-client-request-id": true, "x-forwarded-for": true, "x-forwarded-host": true, "x-forwarded-proto": true,
	"traceparent": true, "tracestate": true, "baggage": true,
}

// TestFramingNeverMorePermissiveThanNginx sends the same malformed and ambiguous
// requests over raw TCP to the gateway and to Debian's nginx, both in front of the same
// recording upstream: whatever nginx refuses, the gateway refuses too; every request the
// gateway forwards, nginx forwards the same way (method, target, body); and no client
// field that nginx drops reaches the service through the gateway.
func TestFramingNeverMorePermissiveThanNginx(t *testing.T) {
	rec := newRecorder(t)
	h := newHarness(t, func(o *gateway.Options) {
		for _, svc := range []string{"workspace-svc", "embed-svc", "dbtsync-svc"} {
			o.Upstreams[svc] = []*url.URL{rec.url}
		}
	})
	ngx := startNginx(t, rec.url.Host)
	gw := strings.TrimPrefix(h.gw.URL, "http://")
	acme := h.acme()
	expand := strings.NewReplacer("{AUTH}", acme.Users["admin"].Bearer, "{DEP}", fmt.Sprint(acme.Deployments[0].ID))
	sentinel := expand.Replace("GET /api/v1/deployments/{DEP}/workspace?sentinel=1 HTTP/1.1\r\nHost: gw.test\r\nAuthorization: Bearer {AUTH}\r\nConnection: close\r\n\r\n")
	var table strings.Builder
	for _, tc := range smugglingCases() {
		raw := expand.Replace(tc.raw)
		n0 := rec.count()
		nginxStatuses := exchangeRaw(t, ngx, raw, sentinel)
		byNginx := rec.since(n0)
		n1 := rec.count()
		gatewayStatuses := exchangeRaw(t, gw, raw, sentinel)
		byGateway := rec.since(n1)
		fmt.Fprintf(&table, "%-36s nginx %v forwarded %d | gateway %v forwarded %d\n", tc.name, nginxStatuses, len(byNginx), gatewayStatuses, len(byGateway))
		t.Run(tc.name, func(t *testing.T) {
			if len(nginxStatuses) > 0 && nginxStatuses[0] >= 400 && (len(gatewayStatuses) == 0 || gatewayStatuses[0] < 400) {
				t.Errorf("nginx refused the request (%d), the gateway answered %v", nginxStatuses[0], gatewayStatuses)
			}
			unmatched := slices.Clone(byNginx)
			for _, g := range byGateway {
				i := slices.IndexFunc(unmatched, func(n recorded) bool {
					return n.method == g.method && n.uri == g.uri && n.body == g.body && (n.bodyErr == nil) == (g.bodyErr == nil)
				})
				if i < 0 {
					t.Errorf("the gateway forwarded %s %.80s (body %q) and nginx did not forward it so; nginx forwarded %s",
						g.method, g.uri, g.body, describe(byNginx))
					continue
				}
				for name, vals := range g.header {
					lname := strings.ToLower(name)
					if gatewayOwnFields[lname] {
						continue
					}
					if _, ok := unmatched[i].header[name]; !ok && strings.Contains(strings.ToLower(raw), lname+":") {
						t.Errorf("the gateway forwarded the client's %s %q, which nginx drops", name, vals)
					}
				}
				if forged := g.header.Get("X-Platform-Identity"); forged == "" || strings.Contains(raw, forged) {
					t.Errorf("the service got X-Platform-Identity %q", forged)
				}
				unmatched = slices.Delete(unmatched, i, i+1)
			}
		})
	}
	t.Logf("case, answers and requests forwarded (the sentinel included) by each:\n%s", table.String())
}

func describe(rs []recorded) string {
	var parts []string
	for _, r := range rs {
		parts = append(parts, fmt.Sprintf("%s %.60s (body %q)", r.method, r.uri, r.body))
	}
	return "[" + strings.Join(parts, "; ") + "]"
}
