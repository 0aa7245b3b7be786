package gateway

import (
	"io"
	"net"
	"net/http"
	"net/textproto"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/propagation"
)

// forwarder proxies a request to one service. It is a lean version of
// httputil.ReverseProxy for our case — requests the gateway owns and may change in
// place, JSON answers, no protocol upgrades — which spares the clone of every request
// and header map, the work that dominates a proxy's CPU beside the I/O itself.
type forwarder struct {
	replicas  []*replica
	next      atomic.Uint64
	transport http.RoundTripper
	pool      *bufferPool
	prop      propagation.TextMapPropagator
	onError   func(http.ResponseWriter, *http.Request, error)
}

// replica is one instance of a service. A replica that refused a connection is
// skipped for downFor, so one dead instance costs at most one failed attempt a second.
type replica struct {
	target    *url.URL
	downUntil atomic.Int64 // unix nanoseconds
}

const downFor = time.Second

func newForwarder(targets []*url.URL, transport http.RoundTripper, pool *bufferPool, prop propagation.TextMapPropagator,
	onError func(http.ResponseWriter, *http.Request, error)) *forwarder {
	f := &forwarder{transport: transport, pool: pool, prop: prop, onError: onError}
	for _, t := range targets {
		f.replicas = append(f.replicas, &replica{target: t})
	}
	return f
}

// pick returns the replicas to try, round robin, healthy ones first.
func (f *forwarder) pick() []*replica {
	n := len(f.replicas)
	if n == 1 {
		return f.replicas
	}
	start := int(f.next.Add(1) % uint64(n))
	now := time.Now().UnixNano()
	order := make([]*replica, 0, n)
	var down []*replica
	for i := 0; i < n; i++ {
		r := f.replicas[(start+i)%n]
		if r.downUntil.Load() > now {
			down = append(down, r)
			continue
		}
		order = append(order, r)
	}
	return append(order, down...)
}

// hopHeaders are meaningful for one connection only and are never forwarded (RFC 9110 7.6.1).
var hopHeaders = []string{"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

func removeHopHeaders(h http.Header) {
	for _, f := range h["Connection"] {
		for _, name := range strings.Split(f, ",") {
			if name = textproto.TrimString(name); name != "" {
				h.Del(name)
			}
		}
	}
	for _, k := range hopHeaders {
		delete(h, k)
	}
}

func (f *forwarder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	out := r.WithContext(r.Context()) // shallow: the header map is ours to change
	out.Host = ""
	out.RequestURI = ""
	out.Close = false
	if r.ContentLength == 0 {
		out.Body = nil // a GET must not turn into a chunked upload
	}
	h := out.Header
	removeHopHeaders(h)
	// The services trust the signed identity only; the client's credential stays here.
	delete(h, "Authorization")
	if ip, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		// The gateway is the edge: what a client claims about earlier hops is replaced.
		h["X-Forwarded-For"] = []string{ip}
	}
	h["X-Forwarded-Host"] = []string{r.Host}
	if r.TLS != nil {
		h["X-Forwarded-Proto"] = []string{"https"}
	} else {
		h["X-Forwarded-Proto"] = []string{"http"}
	}
	f.prop.Inject(r.Context(), propagation.HeaderCarrier(h))

	// A replica that refuses the connection never saw the request, so the next one may
	// take it — when the body can be sent again (none, or one the gateway buffered).
	var resp *http.Response
	var err error
	for i, rep := range f.pick() {
		if i > 0 {
			if out.Body != nil && out.GetBody == nil {
				break
			}
			if out.Body != nil {
				if out.Body, err = out.GetBody(); err != nil {
					break
				}
			}
		}
		u := *rep.target
		u.Path, u.RawPath, u.RawQuery = r.URL.Path, r.URL.RawPath, r.URL.RawQuery
		out.URL = &u
		resp, err = f.transport.RoundTrip(out)
		if err == nil || !isDial(err) {
			break
		}
		rep.downUntil.Store(time.Now().Add(downFor).UnixNano())
	}
	if err != nil {
		f.onError(w, r, err)
		return
	}
	defer resp.Body.Close()
	removeHopHeaders(resp.Header)
	dst := w.Header()
	for k, vv := range resp.Header {
		dst[k] = vv
	}
	if len(resp.Trailer) > 0 {
		for k := range resp.Trailer {
			dst.Add("Trailer", k)
		}
	}
	w.WriteHeader(resp.StatusCode)
	buf := f.pool.Get()
	_, err = io.CopyBuffer(w, resp.Body, *buf)
	f.pool.Put(buf)
	if err != nil {
		// Headers are out; the only honest signal left is to abort the connection.
		panic(http.ErrAbortHandler)
	}
	for k, vv := range resp.Trailer {
		dst[k] = vv
	}
}
