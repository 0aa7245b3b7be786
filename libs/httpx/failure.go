package httpx

import (
	"context"
	"net/http"

	"github.com/go-kit/kit/endpoint"
	kithttp "github.com/go-kit/kit/transport/http"

	"github.com/analyticsco/platform/libs/errs"
)

// Failure is the response of an endpoint that a client's error ended (go-kit's
// endpoint.Failer): the request was handled, and its answer is Err.
type Failure struct{ Err error }

// Failed is the business error the response reports.
func (f Failure) Failed() error { return f.Err }

// BusinessErrors is the endpoint middleware that returns a client's error (an
// *errs.Error answered with a 4xx: a rule refused the request, the thing is not there)
// as a Failure response with no endpoint error, so endpoint middleware (a circuit
// breaker, an error rate) counts a 404 as a handled request. Any other error (a
// dependency unavailable, a bug) stays the endpoint's error. Handle applies it to every
// route, innermost.
func BusinessErrors(next endpoint.Endpoint) endpoint.Endpoint {
	return func(ctx context.Context, req any) (any, error) {
		resp, err := next(ctx, req)
		if e, ok := errs.As(err); ok && e.StatusCode() < http.StatusInternalServerError {
			return Failure{Err: err}, nil
		}
		return resp, err
	}
}

// encodeFailures is enc for a route whose failed responses (endpoint.Failer) are
// answered by the error encoder, as an endpoint's error is.
func encodeFailures(enc kithttp.EncodeResponseFunc, encodeError kithttp.ErrorEncoder) kithttp.EncodeResponseFunc {
	return func(ctx context.Context, w http.ResponseWriter, resp any) error {
		if f, ok := resp.(endpoint.Failer); ok && f.Failed() != nil {
			encodeError(ctx, f.Failed(), w)
			return nil
		}
		return enc(ctx, w, resp)
	}
}
