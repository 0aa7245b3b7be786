package e2e_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"

	"github.com/analyticsco/platform/api"
	"github.com/analyticsco/platform/devstack/apitest"
	"github.com/analyticsco/platform/systemtest/internal/prism"
	"github.com/analyticsco/platform/systemtest/stacktest"
)

func TestMain(m *testing.M) { os.Exit(stacktest.Main(m)) }

// platform is the running stack plus the OpenAPI document every response is checked against.
type platform struct {
	s          *stacktest.Stack
	doc        *openapi3.T
	router     routers.Router
	api        *apitest.Client
	seq        atomic.Int64
	acme       stacktest.Account
	globex     stacktest.Account
	initech    stacktest.Account
	dep1, dep2 int64
	prism      *prism.Validator // every exchange is also judged by Prism
	tally      *contractTally
}

var (
	docOnce   sync.Once
	docLoaded *openapi3.T
	docRouter routers.Router
	docErr    error
)

func loadContract(t *testing.T) (*openapi3.T, routers.Router) {
	t.Helper()
	docOnce.Do(func() {
		// The API reference (getApiReference) is an HTML page: its body is checked as the
		// string the document says it is.
		openapi3filter.RegisterBodyDecoder("text/html", openapi3filter.PlainBodyDecoder)
		docLoaded, docErr = openapi3.NewLoader().LoadFromData(api.YAML)
		if docErr != nil {
			return
		}
		// The document's server is a per-tenant host variable; match on paths only.
		byPath := *docLoaded
		byPath.Servers = nil
		docRouter, docErr = legacy.NewRouter(&byPath)
	})
	if docErr != nil {
		t.Fatalf("openapi.yaml: %v", docErr)
	}
	return docLoaded, docRouter
}

// startPlatform starts the stack with the rate limits off: the suite mints many sessions.
func startPlatform(t *testing.T) *platform {
	t.Helper()
	doc, router := loadContract(t)
	s := stacktest.Start(t, stacktest.Options{Env: []string{"RATE_LIMIT_GENERATE_SESSION=0", "RATE_LIMIT_EXCHANGE=0", "RATE_LIMIT_PLAN_FREE=0", "RATE_LIMIT_PLAN_PREMIUM=0", "RATE_LIMIT_PLAN_ENTERPRISE=0"}})
	p := &platform{s: s, doc: doc, router: router,
		acme: s.Seed.Accounts["acme"], globex: s.Seed.Accounts["globex"], initech: s.Seed.Accounts["initech"]}
	p.dep1, p.dep2 = p.acme.Deployments[0].ID, p.acme.Deployments[1].ID
	p.startPrism(t)
	p.api = apitest.New(s.Gateway)
	p.api.Check = p.checkResponse
	return p
}

// unique returns a name no other subtest uses (lowercase, usable as an embed tenant).
func (p *platform) unique(prefix string) string {
	return fmt.Sprintf("%s-%d-%d", prefix, time.Now().UnixNano()%1_000_000, p.seq.Add(1))
}

func bearer(u stacktest.User) string { return "Bearer " + u.Bearer }
func apiKey(k string) string         { return "Api-Key " + k }

// response is one answer of the gateway, already checked against the document.
type response struct {
	status int
	header http.Header
	body   []byte
}

func (r response) decode(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("decode %d body %s: %v", r.status, r.body, err)
	}
}

func (r response) obj(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	r.decode(t, &m)
	return m
}

// message is the message of an Error body.
// wantCode checks the error body's code (a named rule's, the same in every service).
func (r response) wantCode(t *testing.T, code string) response {
	t.Helper()
	var e struct {
		Code string `json:"code"`
	}
	r.decode(t, &e)
	if e.Code != code {
		t.Errorf("error code %q, want %q: %s", e.Code, code, r.body)
	}
	return r
}

func (r response) message(t *testing.T) string {
	t.Helper()
	var e struct {
		Status  int    `json:"status"`
		Message string `json:"message"`
	}
	r.decode(t, &e)
	if e.Status != r.status {
		t.Errorf("error body status %d differs from the HTTP status %d: %s", e.Status, r.status, r.body)
	}
	return e.Message
}

func (r response) want(t *testing.T, status int) response {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d; body %s", r.status, status, r.body)
	}
	return r
}

// call sends a JSON request (body: nil, []byte/string as is, anything else marshalled)
// through the gateway and checks the response against the document.
func (p *platform) call(t *testing.T, method, path, authz string, body any) response {
	t.Helper()
	return fromAPI(p.api.Call(t, method, path, authz, body))
}

// send performs req and checks the response against the document.
func (p *platform) send(t *testing.T, req *http.Request) response {
	t.Helper()
	return fromAPI(p.api.Send(t, req))
}

func fromAPI(r apitest.Response) response {
	return response{status: r.Status, header: r.Header, body: r.Body}
}

// branchFilePath: the {path} of getBranchFile spans the rest of the URL, slashes
// included, which a path router matches segment by segment; it is folded into one
// segment for the lookup.
var branchFilePath = regexp.MustCompile(`^(/build/api/v1/deployments/[^/]+/branches/[^/]+/files/)([^/]+/.+)$`)

// checkResponse validates status, headers and body of a response against the operation
// the request matches in openapi.yaml: an undocumented status, a missing required
// header or field, a field of the wrong type fail the test. A response the document
// describes without content must have an empty body. Prism judges the exchange too: it
// reads nullable strictly, where kin-openapi lets a null through beside an allOf.
func (p *platform) checkResponse(req *http.Request, resp *http.Response, body []byte) error {
	var errs []error
	if err := conformance(p.router, req, resp.StatusCode, resp.Header, body); err != nil {
		errs = append(errs, fmt.Errorf("contract: %w\nbody: %.600s", err, body))
	}
	if err := p.judgeWithPrism(req, resp, body); err != nil {
		errs = append(errs, fmt.Errorf("%w\nbody: %.600s", err, body))
	}
	if err := timestampsInOnePrecision(body); err != nil {
		errs = append(errs, fmt.Errorf("contract: %w", err))
	}
	return errors.Join(errs...)
}

// apiTime is how every API answer writes a timestamp: UTC with exactly milliseconds.
var apiTime = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$`)

// timestampsInOnePrecision checks every timestamp field of a JSON answer (a string field
// named *At) against apiTime: one precision in every service.
func timestampsInOnePrecision(body []byte) error {
	var v any
	if json.Unmarshal(body, &v) != nil {
		return nil // not JSON: nothing to check
	}
	var walk func(key string, v any) error
	walk = func(key string, v any) error {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				if err := walk(k, e); err != nil {
					return err
				}
			}
		case []any:
			for _, e := range x {
				if err := walk(key, e); err != nil {
					return err
				}
			}
		case string:
			if strings.HasSuffix(key, "At") && !apiTime.MatchString(x) {
				return fmt.Errorf("timestamp %s = %q is not RFC 3339 UTC with milliseconds", key, x)
			}
		}
		return nil
	}
	return walk("", v)
}

// conformance is checkResponse's verdict as an error.
func conformance(router routers.Router, req *http.Request, status int, header http.Header, body []byte) error {
	route, err := findRoute(router, req)
	if err != nil {
		return fmt.Errorf("%s %s (answered %d) is no operation of openapi.yaml: %v", req.Method, req.URL.EscapedPath(), status, err)
	}
	input := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: req, Route: route},
		Status:                 status,
		Header:                 header,
		Options:                &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
	}
	input.SetBodyBytes(body)
	if err := openapi3filter.ValidateResponse(context.Background(), input); err != nil {
		return fmt.Errorf("%s %s (%s) answered %d, which does not conform to openapi.yaml: %v",
			req.Method, req.URL.EscapedPath(), route.Operation.OperationID, status, err)
	}
	if ref := route.Operation.Responses.Status(status); ref != nil && ref.Value != nil && len(ref.Value.Content) == 0 && len(body) > 0 {
		return fmt.Errorf("%s %s (%s) answered %d with a body, but the document says it has none",
			req.Method, req.URL.EscapedPath(), route.Operation.OperationID, status)
	}
	return nil
}

func findRoute(router routers.Router, req *http.Request) (*routers.Route, error) {
	path := req.URL.EscapedPath()
	if m := branchFilePath.FindStringSubmatch(path); m != nil {
		path = m[1] + strings.ReplaceAll(m[2], "/", "%2F")
	}
	u := *req.URL
	u.Path, u.RawPath = path, ""
	route, _, err := router.FindRoute(&http.Request{Method: req.Method, URL: &u, Header: req.Header})
	return route, err
}

// jwtClaims decodes the claims of a JWT without verifying it (the gateway verifies it).
func jwtClaims(t *testing.T, token string) map[string]any {
	t.Helper()
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		t.Fatalf("not a JWT: %q", token)
	}
	raw, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var claims map[string]any
	if err := json.Unmarshal(raw, &claims); err != nil {
		t.Fatal(err)
	}
	return claims
}

// eventually polls cond until it holds or the deadline passes (apitest.Eventually).
func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	apitest.Eventually(t, within, what, func() (bool, string) { return cond(), "" })
}
