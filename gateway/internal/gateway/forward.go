package gateway

import (
	"net"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/analyticsco/platform/gateway/internal/h1"
	"github.com/analyticsco/platform/libs/identity"
	"github.com/analyticsco/platform/libs/server"
)

// forwarder proxies a request to one service over h1's pooled connections: the request
// line and the fields the gateway chose are written as they are, the answer is copied
// from the service's connection to the client's, all in the goroutine of the client's
// connection.
type forwarder struct {
	replicas []*replica
	next     atomic.Uint64
	onError  func(*h1.ResponseWriter, *h1.Request, error)
}

// replica is one instance of a service. A replica that refused a connection is
// skipped for downFor, so one dead instance costs at most one failed attempt a second.
type replica struct {
	up        *h1.Upstream
	downUntil atomic.Int64 // unix nanoseconds
}

const downFor = time.Second

func newForwarder(targets []*url.URL, o h1.UpstreamOptions, onError func(*h1.ResponseWriter, *h1.Request, error)) *forwarder {
	f := &forwarder{onError: onError}
	for _, t := range targets {
		f.replicas = append(f.replicas, &replica{up: h1.NewUpstream(t, o)})
	}
	return f
}

func (f *forwarder) closeIdle() {
	for _, r := range f.replicas {
		r.up.CloseIdle()
	}
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

// forward sends r to a replica, the next one when a replica refuses the connection (it
// never saw the request, and nothing of the body has been sent), and answers an error
// with onError.
func (f *forwarder) forward(w *h1.ResponseWriter, r *h1.Request, fields *[]byte) {
	defer fieldsPool.Put(fields)
	var err error
	for _, rep := range f.pick() {
		err = rep.up.Forward(w, r, *fields)
		if err == nil || !isDial(err) {
			break
		}
		rep.downUntil.Store(time.Now().Add(downFor).UnixNano())
	}
	if err != nil {
		f.onError(w, r, err)
	}
}

var fieldsPool = sync.Pool{New: func() any { b := make([]byte, 0, 2<<10); return &b }}

// forwardedFields renders the header fields sent to the service: the client's, less the
// hop-by-hop ones, its credential (the services trust the signed identity only) and the
// fields the gateway sets itself, which follow: the client's address as the edge saw
// it, the signed identity, the request ids and the trace context.
func (g *Gateway) forwardedFields(r *h1.Request, identityHeader, rid, clientRID string) *[]byte {
	bp := fieldsPool.Get().(*[]byte)
	out := (*bp)[:0]
	for _, f := range r.Header.Fields() {
		if f.Name == "" || r.NotForwarded(f.Name) || gatewaySets(f.Name) || oneOf(f.Name, g.traceFields) {
			continue
		}
		out = appendField(out, f.Name, f.Value)
	}
	if ip, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		// The gateway is the edge: what a client claims about earlier hops is replaced.
		out = appendField(out, "X-Forwarded-For", ip)
	}
	if r.Host != "" {
		out = appendField(out, "X-Forwarded-Host", r.Host)
	}
	out = appendField(out, "X-Forwarded-Proto", "http")
	out = appendField(out, identity.Header, identityHeader)
	out = appendField(out, server.RequestIDHeader, rid)
	if clientRID != "" {
		out = appendField(out, server.ClientRequestIDHeader, clientRID)
	}
	*bp = out
	g.prop.Inject(r.Context(), appendCarrier{bp})
	return bp
}

// gatewaySets reports the client fields the gateway replaces or never forwards.
func gatewaySets(name string) bool {
	switch len(name) {
	case 12:
		return strings.EqualFold(name, server.RequestIDHeader)
	case 13:
		return strings.EqualFold(name, "Authorization")
	case 15:
		return strings.EqualFold(name, "X-Forwarded-For")
	case 16:
		return strings.EqualFold(name, "X-Forwarded-Host")
	case 17:
		return strings.EqualFold(name, "X-Forwarded-Proto")
	case 19:
		return strings.EqualFold(name, server.ClientRequestIDHeader)
	}
	return false
}

func oneOf(name string, list []string) bool {
	for _, s := range list {
		if len(s) == len(name) && strings.EqualFold(s, name) {
			return true
		}
	}
	return false
}

func appendField(out []byte, name, value string) []byte {
	out = append(out, name...)
	out = append(out, ':', ' ')
	out = append(out, value...)
	return append(out, '\r', '\n')
}

// headerCarrier reads the trace context from a request's fields.
type headerCarrier struct{ h *h1.Header }

func (c headerCarrier) Get(key string) string { return c.h.Get(key) }
func (c headerCarrier) Set(string, string)    {}
func (c headerCarrier) Keys() []string {
	var keys []string
	for _, f := range c.h.Fields() {
		if f.Name != "" {
			keys = append(keys, f.Name)
		}
	}
	return keys
}

// appendCarrier writes the trace context as fields of the forwarded request.
type appendCarrier struct{ out *[]byte }

func (c appendCarrier) Get(string) string     { return "" }
func (c appendCarrier) Keys() []string        { return nil }
func (c appendCarrier) Set(key, value string) { *c.out = appendField(*c.out, key, value) }
