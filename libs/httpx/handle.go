package httpx

import (
	"log/slog"
	"net/http"

	"github.com/go-kit/kit/endpoint"
	kithttp "github.com/go-kit/kit/transport/http"

	"github.com/analyticsco/platform/libs/errs"
)

// DefaultMaxBody bounds a request body when the route's options name no limit.
const DefaultMaxBody = 1 << 20

// HandleOptions are what every route of a service shares.
type HandleOptions struct {
	Logger  *slog.Logger               // errs.Encoder logs a 500's cause and an unnamed 503 here
	MaxBody int64                      // the body limit (413 past it); 0: DefaultMaxBody
	Encode  kithttp.EncodeResponseFunc // the service's response encoder
	Server  []kithttp.ServerOption     // more go-kit server options (the error encoder is set)
	// Wrap, when set, wraps every route's handler inside the body limit (the service's
	// Idempotency-Key middleware): it sees the method and the pattern of the route and
	// returns the handler itself for the routes it leaves alone.
	Wrap func(method, path string, h http.Handler) http.Handler
	// Admit, when set, wraps the route's handler outside the body limit: what refuses a
	// request before a byte of its body is read (fairshare's bound of requests in flight).
	Admit func(http.Handler) http.Handler
	// First serves the route before the ServeMux's patterns (Router.HandleFirst): for a
	// path with a literal segment where other routes have a wildcard.
	First bool
}

// WithFirst is o for a route matched before the others (Router.HandleFirst).
func (o HandleOptions) WithFirst() HandleOptions {
	o.First = true
	return o
}

// WithAdmit is o with the admission wrapper of one route.
func (o HandleOptions) WithAdmit(admit func(http.Handler) http.Handler) HandleOptions {
	o.Admit = admit
	return o
}

// WithMaxBody is o with another body limit, for a route whose body is larger by design.
func (o HandleOptions) WithMaxBody(n int64) HandleOptions {
	o.MaxBody = n
	return o
}

// Handle serves method on path with the go-kit endpoint ep, decoding with dec: the one
// way a service registers a route. The body is bounded before dec reads it, with the
// response writer, so a request over the limit is answered 413 and its connection is
// closed instead of drained; every error goes through errs.Encoder. A client's error
// comes back from the endpoint as a failed response (BusinessErrors), which the response
// encoder answers with errs.Encoder too.
func Handle(r *Router, method, path string, ep endpoint.Endpoint, dec kithttp.DecodeRequestFunc, o HandleOptions) {
	limit := o.MaxBody
	if limit <= 0 {
		limit = DefaultMaxBody
	}
	logger := o.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	encodeError := errs.Encoder(logger)
	opts := append([]kithttp.ServerOption{kithttp.ServerErrorEncoder(encodeError)}, o.Server...)
	var srv http.Handler = kithttp.NewServer(BusinessErrors(ep), dec, encodeFailures(o.Encode, encodeError), opts...)
	if o.Wrap != nil {
		srv = o.Wrap(method, path, srv)
	}
	var h http.Handler = http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Body != nil {
			req.Body = http.MaxBytesReader(w, req.Body, limit)
		}
		srv.ServeHTTP(w, req)
	})
	if o.Admit != nil {
		h = o.Admit(h)
	}
	if o.First {
		r.HandleFirst(method, path, h)
		return
	}
	r.Handle(method, path, h)
}
