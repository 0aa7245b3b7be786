package embed

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	httptransport "github.com/go-kit/kit/transport/http"

	"github.com/analyticsco/platform/libs/httpx"
	"github.com/analyticsco/platform/libs/identity"
)

// clientError fails the fuzz run unless err is nil or a client error as the transport
// encodes it: an *httpx.Error or a domain *Error with a 4xx status and a message.
func clientError(t *testing.T, input string, err error) {
	t.Helper()
	if err == nil {
		return
	}
	var he *httpx.Error
	if errors.As(err, &he) {
		if he.Status < 400 || he.Status > 499 || he.Message == "" {
			t.Fatalf("input %q: %d %q is not a client error", input, he.Status, he.Message)
		}
		return
	}
	var de *Error
	if !errors.As(err, &de) || StatusOf(de.Kind) < 400 || StatusOf(de.Kind) > 499 || de.Message == "" {
		t.Fatalf("input %q: want a 4xx client error, got %#v", input, err)
	}
}

// serveDecoder runs dec on a request routed by the service's own pattern, body limited
// as the handler limits it, with a principal as the gateway would sign it.
func serveDecoder(t *testing.T, pattern, method, target, rawQuery string, body []byte, dec httptransport.DecodeRequestFunc) (any, error) {
	t.Helper()
	mux := http.NewServeMux()
	var (
		req    any
		err    error
		served bool
	)
	mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, MaxBodyBytes)
		served = true
		req, err = dec(r.Context(), r)
	})
	r := httptest.NewRequest(method, target, bytes.NewReader(body))
	r.URL.RawQuery = rawQuery // set directly: a hostile query need not survive a request line
	r.Header.Set("Content-Type", "application/json")
	p := &identity.Principal{Account: identity.Account{ID: 1}, User: &identity.User{ID: 1, Role: identity.RoleAdmin}, Credential: identity.CredentialAPIKey}
	mux.ServeHTTP(httptest.NewRecorder(), r.WithContext(identity.NewContext(context.Background(), p)))
	if !served {
		t.Fatalf("pattern %s did not match %s %s", pattern, method, target)
	}
	return req, err
}

// FuzzDecodeSessionIDRequest: the body of exchange and revoke decodes to a non-empty
// session id or fails with a 4xx; never a panic.
func FuzzDecodeSessionIDRequest(f *testing.F) {
	for _, s := range []string{`{"sessionId":"es_abc"}`, `{"sessionId":""}`, `{"sessionId":null}`, `{}`, `{"sessionId":1}`,
		`{"sessionId":"a","x":1}`, `{"sessionId":"a"}{}`, `[]`, `null`, `{`, "\"\xff\"", `{"sessionId":"\u0000"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, path := range []string{"/api/v1/embed/session/exchange", "/api/v1/embed/session/revoke"} {
			req, err := serveDecoder(t, "POST "+path, "POST", path, "", body, decodeSessionIDRequest)
			clientError(t, string(body), err)
			if err == nil && req.(sessionIDRequest).SessionID == "" {
				t.Fatalf("body %q: accepted an empty session id", body)
			}
		}
	})
}

// FuzzDecodeCreateDefinition: POST /api/v1/groups and /api/v1/user-attributes decode and
// validate to a definition or a 4xx; never a panic.
func FuzzDecodeCreateDefinition(f *testing.F) {
	for _, s := range []string{`{"name":"finance"}`, `{"name":"region","type":"string","displayName":"Region","defaultValue":"eu","description":"d"}`,
		`{"name":"q","type":"number_array"}`, `{"name":""}`, `{"name":"g","type":"string"}`, `{"type":"date"}`, `{"name":1}`,
		`{"name":"a","extra":true}`, `{"name":"a"} []`, `[]`, `null`, `{`, `{"name":"` + string(bytes.Repeat([]byte("n"), 300)) + `"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, c := range []struct{ path, kind string }{{"/api/v1/groups", KindGroup}, {"/api/v1/user-attributes", KindAttribute}} {
			req, err := serveDecoder(t, "POST "+c.path, "POST", c.path, "", body, decodeCreateDefinition(c.kind))
			clientError(t, string(body), err)
			if err != nil {
				continue
			}
			in := req.(createDefinitionRequest).Body
			clientError(t, string(body), ValidateDefinition(c.kind, in, "body"))
		}
	})
}

// FuzzDecodeListDefinitions: any first/after query of the catalog lists decodes to a page
// size within 1..MaxPageSize or fails with a 4xx.
func FuzzDecodeListDefinitions(f *testing.F) {
	for _, s := range []string{"", "first=1", "first=200", "first=201", "first=0", "first=-1", "first= 5 ", "first=1e2",
		"after=abc", "after=%ff", "first=99999999999999999999", "first=5&first=6", "after="} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, query string) {
		for _, c := range []struct{ pattern, path string }{
			{"GET /api/v1/groups", "/api/v1/groups"},
			{"GET /api/v1/embed-tenants/{embedTenantName}/user-attributes", "/api/v1/embed-tenants/acme-north/user-attributes"},
		} {
			req, err := serveDecoder(t, c.pattern, "GET", c.path, query, nil, decodeListDefinitions(KindGroup))
			clientError(t, query, err)
			if err == nil {
				if q := req.(listDefinitionsRequest).Query; q.First < 1 || q.First > MaxPageSize {
					t.Fatalf("query %q: accepted first=%d", query, q.First)
				}
			}
		}
	})
}
