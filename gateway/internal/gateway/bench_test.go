package gateway_test

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/analyticsco/platform/devstack"
	"github.com/analyticsco/platform/gateway/internal/app"
	"github.com/analyticsco/platform/gateway/internal/auth"
	"github.com/analyticsco/platform/gateway/internal/credentials"
	"github.com/analyticsco/platform/gateway/internal/platformctl"
	"github.com/analyticsco/platform/gateway/internal/ratelimit"
	"github.com/analyticsco/platform/gateway/internal/store"
	"github.com/analyticsco/platform/libs/identity"
	"github.com/analyticsco/platform/libs/logging"
	"github.com/analyticsco/platform/libs/mongox"
	"github.com/analyticsco/platform/libs/obs"
)

// BenchmarkRequestPath measures one proxied request through the gateway as production
// wires it (its server, metrics, tracing SDK without an exporter, Redis for the limits,
// AUTH_FAILURE_LIMIT on) with both credential kinds on the same route, method and body:
// POST /api/v1/embed/session/revoke with a 60-byte JSON body, which accepts an API key
// and a user's bearer token alike. The identity store (FerretDB) and Redis run in child
// processes, and the client and the backend are raw sockets that allocate nothing, so
// allocs/op and B/op are the gateway's own. Run it with
//
//	go test -run '^$' -bench RequestPath -benchmem ./internal/gateway/
//
// Under valgrind, which cannot follow the fork of a child process, start the identity
// store and Redis outside and name them in GATEWAY_BENCH_MONGODB_URI and
// GATEWAY_BENCH_REDIS_URL.
func BenchmarkRequestPath(b *testing.B) {
	st := newBenchStack(b)
	for _, c := range []struct{ name, addr, authz string }{
		// The client and the backend alone, without the gateway: what to subtract from a
		// whole-process count (instructions under callgrind, syscalls under strace).
		{"backend-direct", st.backend, "Bearer x"},
		{"bearer-jwt", st.addr, "Bearer " + st.seed.Accounts["acme"].Users["admin"].Bearer},
		{"api-key", st.addr, "Api-Key " + st.seed.Accounts["acme"].APIKeys["admin"]},
	} {
		b.Run(c.name, func(b *testing.B) {
			body := `{"sessionId":"0123456789abcdef0123456789abcdef0123456789ab"}`
			req := fmt.Appendf(nil, "POST /api/v1/embed/session/revoke HTTP/1.1\r\nHost: gateway.bench\r\nUser-Agent: bench\r\n"+
				"Authorization: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", c.authz, len(body), body)
			const conns = 4
			clients := make([]*rawClient, conns)
			for i := range clients {
				clients[i] = dialRaw(b, c.addr)
				clients[i].roundTrip(b, req) // warm: the credential is verified and cached
			}
			b.ReportAllocs()
			b.ResetTimer()
			var wg sync.WaitGroup
			for i, cl := range clients {
				n := b.N / conns
				if i < b.N%conns {
					n++
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range n {
						cl.roundTrip(b, req)
					}
				}()
			}
			wg.Wait()
		})
	}
}

type benchStack struct {
	addr, backend string // host:port of the gateway and of the backend
	seed          platformctl.SeedOutput
}

func newBenchStack(b *testing.B) *benchStack {
	b.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	mongoURI, redisURL := os.Getenv("GATEWAY_BENCH_MONGODB_URI"), os.Getenv("GATEWAY_BENCH_REDIS_URL")
	if mongoURI == "" {
		mongoURI = devstack.MongoProcessForTest(b)
	}
	if redisURL == "" {
		redisURL = devstack.RedisForTest(b).URL
	}
	client, err := mongox.Connect(ctx, mongoURI, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = client.Disconnect(context.Background()) })
	idStore := store.New(client.Database(devstack.UniqueName(b, "identity")))
	if err := idStore.EnsureIndexes(ctx); err != nil {
		b.Fatal(err)
	}
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	issuer := credentials.Issuer{Key: priv, KeyID: credentials.KeyID(pub), Issuer: "https://auth.test", Audience: "platform-api"}
	seed, err := platformctl.Seed(ctx, idStore, issuer, "http://gateway.bench")
	if err != nil {
		b.Fatalf("seed: %v", err)
	}
	var key [32]byte
	_, _ = rand.Read(key[:])
	signer, err := identity.NewSigner(base64.StdEncoding.EncodeToString(key[:]))
	if err != nil {
		b.Fatal(err)
	}
	ropts, _ := redis.ParseURL(redisURL)
	rdb := redis.NewClient(ropts)
	b.Cleanup(func() { _ = rdb.Close() })
	shutdown, err := obs.SetupTracing(ctx, "gateway", "")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = shutdown(context.Background()) })
	backend := rawBackend(b)
	upstreams := map[string][]*url.URL{}
	for _, name := range []string{"workspace-svc", "embed-svc", "dbtsync-svc"} {
		upstreams[name] = []*url.URL{backend}
	}
	logger := logging.New(io.Discard, "warn", "gateway")
	a, err := app.New(ctx, app.Deps{Logger: logger, Registry: obs.NewRegistry(), Store: idStore, Signer: signer,
		Keys: auth.NewKeySet([]crypto.PublicKey{pub}, ""), Issuer: issuer.Issuer, Audience: issuer.Audience, Upstreams: upstreams,
		Redis: rdb, AuthFailureLimit: ratelimit.Limit{N: 60, Window: time.Minute}, RevocationPoll: -1,
		EmbedJWKSURL: "http://127.0.0.1:1/jwks.json"})
	if err != nil {
		b.Fatal(err)
	}
	gw := serveGateway(b, a)
	return &benchStack{addr: strings.TrimPrefix(gw.URL, "http://"), backend: backend.Host, seed: seed}
}

// rawBackend answers every request with a fixed 100-byte JSON body, reading requests
// with Content-Length or chunked bodies off the socket without allocating.
func rawBackend(b *testing.B) *url.URL {
	b.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = ln.Close() })
	resp := []byte("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n" +
		`{"status":"ok","padding":"` + string(bytes.Repeat([]byte("x"), 100-28)) + `"}`)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := &rawReader{c: c, buf: make([]byte, 64<<10)}
				for {
					if err := r.skipRequest(); err != nil {
						return
					}
					if _, err := c.Write(resp); err != nil {
						return
					}
				}
			}()
		}
	}()
	return &url.URL{Scheme: "http", Host: ln.Addr().String()}
}

type rawClient struct {
	c net.Conn
	r *rawReader
}

func dialRaw(b *testing.B, addr string) *rawClient {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = c.Close() })
	return &rawClient{c: c, r: &rawReader{c: c, buf: make([]byte, 64<<10)}}
}

func (cl *rawClient) roundTrip(b *testing.B, req []byte) {
	if _, err := cl.c.Write(req); err != nil {
		b.Error(err)
		return
	}
	status, err := cl.r.skipResponse()
	if err != nil || status != 200 {
		b.Errorf("status %d: %v", status, err)
	}
}

// rawReader reads HTTP/1.1 messages of the shapes the benchmark exchanges.
type rawReader struct {
	c          net.Conn
	buf        []byte
	start, end int
}

func (r *rawReader) fill() error {
	if r.start > 0 {
		r.end = copy(r.buf, r.buf[r.start:r.end])
		r.start = 0
	}
	if r.end == len(r.buf) {
		return errors.New("message head too large")
	}
	n, err := r.c.Read(r.buf[r.end:])
	r.end += n
	if n > 0 {
		return nil
	}
	return err
}

// head returns the message head (up to the blank line) and consumes it.
func (r *rawReader) head() ([]byte, error) {
	for {
		if i := bytes.Index(r.buf[r.start:r.end], []byte("\r\n\r\n")); i >= 0 {
			h := r.buf[r.start : r.start+i+2]
			r.start += i + 4
			return h, nil
		}
		if err := r.fill(); err != nil {
			return nil, err
		}
	}
}

func (r *rawReader) skip(n int) error {
	for n > 0 {
		if r.start == r.end {
			if err := r.fill(); err != nil {
				return err
			}
		}
		k := min(n, r.end-r.start)
		r.start += k
		n -= k
	}
	return nil
}

func (r *rawReader) line() ([]byte, error) {
	for {
		if i := bytes.Index(r.buf[r.start:r.end], []byte("\r\n")); i >= 0 {
			l := r.buf[r.start : r.start+i]
			r.start += i + 2
			return l, nil
		}
		if err := r.fill(); err != nil {
			return nil, err
		}
	}
}

func (r *rawReader) skipBody(h []byte) error {
	if cl := headerValue(h, "content-length"); cl != nil {
		n, err := strconv.Atoi(string(cl))
		if err != nil {
			return err
		}
		return r.skip(n)
	}
	if te := headerValue(h, "transfer-encoding"); te == nil {
		return nil
	}
	for {
		l, err := r.line()
		if err != nil {
			return err
		}
		n, err := strconv.ParseInt(string(l), 16, 64)
		if err != nil {
			return err
		}
		if n == 0 {
			_, err := r.line()
			return err
		}
		if err := r.skip(int(n) + 2); err != nil {
			return err
		}
	}
}

func (r *rawReader) skipRequest() error {
	h, err := r.head()
	if err != nil {
		return err
	}
	return r.skipBody(h)
}

func (r *rawReader) skipResponse() (int, error) {
	h, err := r.head()
	if err != nil {
		return 0, err
	}
	if len(h) < 12 {
		return 0, fmt.Errorf("short status line %q", h)
	}
	status := int(h[9]-'0')*100 + int(h[10]-'0')*10 + int(h[11]-'0')
	return status, r.skipBody(h)
}

// headerValue returns the value of the first field named name (lower case) in the head h.
func headerValue(h []byte, name string) []byte {
	for len(h) > 0 {
		i := bytes.Index(h, []byte("\r\n"))
		if i < 0 {
			return nil
		}
		line := h[:i]
		h = h[i+2:]
		colon := bytes.IndexByte(line, ':')
		if colon == len(name) && bytes.EqualFold(line[:colon], []byte(name)) {
			return bytes.TrimSpace(line[colon+1:])
		}
	}
	return nil
}
