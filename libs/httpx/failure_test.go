package httpx_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/go-kit/kit/endpoint"
	kithttp "github.com/go-kit/kit/transport/http"

	"github.com/analyticsco/platform/libs/errs"
	"github.com/analyticsco/platform/libs/httpx"
)

// failureCases are an endpoint's errors: business (a client's), and not.
var failureCases = []struct {
	name     string
	err      error
	business bool
}{
	{"not-found", errs.NotFoundf("folder %d not found", 12), true},
	{"named-rule", errs.Invalidf("too deep").WithCode(errs.CodeDepthLimit), true},
	{"unauthorized", errs.Unauthorizedf("session ended"), true},
	{"wrapped", errors.Join(errors.New("context"), errs.Forbiddenf("admins only")), true},
	{"status-and-header", errs.Statusf(http.StatusTooManyRequests, "slow down").WithCode(errs.CodeJobLimit).WithHeader("Retry-After", "7"), true},
	{"unavailable-kind", errs.Unavailablef("the tree kept changing; retry"), false},
	{"unavailable-dependency", errors.Join(errs.ErrUnavailable, errors.New("dial tcp: refused")), false},
	{"bug", errors.New("nil map"), false},
}

// A business error comes back from the endpoint as a response whose Failed() reports it,
// with no endpoint error; any other error stays the endpoint's error.
func TestBusinessErrorsAreFailedResponses(t *testing.T) {
	for _, c := range failureCases {
		t.Run(c.name, func(t *testing.T) {
			ep := httpx.BusinessErrors(func(context.Context, any) (any, error) { return nil, c.err })
			resp, err := ep(context.Background(), nil)
			f, failer := resp.(endpoint.Failer)
			switch {
			case c.business && (err != nil || !failer || f.Failed() != c.err):
				t.Fatalf("business error: response %#v, endpoint error %v; want a failed response and no error", resp, err)
			case !c.business && (err != c.err || resp != nil):
				t.Fatalf("response %#v, endpoint error %v; want the endpoint error %v", resp, err, c.err)
			}
		})
	}
	ok := httpx.BusinessErrors(func(context.Context, any) (any, error) { return "done", nil })
	if resp, err := ok(context.Background(), nil); resp != "done" || err != nil {
		t.Fatalf("a success: %v, %v", resp, err)
	}
}

// The answer of a route (Handle) to each error is the one errs.Encoder gives the
// endpoint's error when it is not a response: status, header fields and body.
func TestHandleAnswersFailedResponsesAsEndpointErrors(t *testing.T) {
	dec := func(context.Context, *http.Request) (any, error) { return nil, nil }
	for _, c := range failureCases {
		t.Run(c.name, func(t *testing.T) {
			ep := func(context.Context, any) (any, error) { return nil, c.err }
			r := httpx.NewRouter()
			httpx.Handle(r, http.MethodGet, "/x", ep, dec, httpx.HandleOptions{Logger: discardLogger(), Encode: httpx.EncodeResponse})
			got := httptest.NewRecorder()
			r.ServeHTTP(got, httptest.NewRequest(http.MethodGet, "/x", nil))

			plain := kithttp.NewServer(ep, dec, httpx.EncodeResponse, kithttp.ServerErrorEncoder(errs.Encoder(discardLogger())))
			want := httptest.NewRecorder()
			plain.ServeHTTP(want, httptest.NewRequest(http.MethodGet, "/x", nil))

			if got.Code != want.Code || got.Body.String() != want.Body.String() {
				t.Fatalf("answer %d %s, want %d %s", got.Code, got.Body, want.Code, want.Body)
			}
			for _, k := range []string{"Content-Type", "WWW-Authenticate", "Retry-After"} {
				if got.Header().Get(k) != want.Header().Get(k) {
					t.Errorf("%s: %q, want %q", k, got.Header().Get(k), want.Header().Get(k))
				}
			}
			if len(got.Header()) != len(want.Header()) {
				t.Errorf("header %v, want %v", got.Header(), want.Header())
			}
		})
	}
}
