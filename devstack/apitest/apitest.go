// Package apitest is the one HTTP client of the tests: every suite (a service's black-box
// tests behind the real gateway, the end-to-end, access, attack and fault suites) talks to
// the platform through it.
package apitest

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// Client sends JSON requests to one base URL.
type Client struct {
	Base string
	HTTP *http.Client
	// Check, when set, judges every response a test receives (the e2e suite validates
	// each against openapi.yaml); an error fails the test.
	Check func(req *http.Request, resp *http.Response, body []byte) error
}

// New returns a client of base with a 30 s timeout: a request must be answered, never hang.
func New(base string) *Client {
	return &Client{Base: strings.TrimSuffix(base, "/"), HTTP: &http.Client{Timeout: 30 * time.Second}}
}

// Response is one answer, or the transport error that stood for it.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
	Err    error // no answer: refused, reset, timed out
}

// Bearer and APIKey build Authorization values.
func Bearer(token string) string { return "Bearer " + token }

// APIKey builds an Api-Key Authorization value.
func APIKey(key string) string { return "Api-Key " + key }

// Request builds a request: body nil is none, a string or []byte is sent as it is (with a
// JSON content type), anything else is marshalled; authz "" sends no Authorization.
func (c *Client) Request(method, path, authz string, body any) (*http.Request, error) {
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, c.Base+path, rd)
	if err != nil {
		return nil, err
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if authz != "" {
		req.Header.Set("Authorization", authz)
	}
	return req, nil
}

// Do sends a request and never fails a test, so goroutines can use it (fault and load
// suites): a transport error is in Response.Err. Check is not applied.
func (c *Client) Do(method, path, authz string, body any) Response {
	req, err := c.Request(method, path, authz, body)
	if err != nil {
		return Response{Err: err}
	}
	return c.DoRequest(req)
}

// DoRequest sends req (headers of the caller's choice); see Do.
func (c *Client) DoRequest(req *http.Request) Response {
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return Response{Err: err}
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	return Response{Status: resp.StatusCode, Header: resp.Header, Body: raw, Err: err}
}

// Call sends a request as Do, failing t when there is no answer or Check rejects it.
func (c *Client) Call(t testing.TB, method, path, authz string, body any) Response {
	t.Helper()
	req, err := c.Request(method, path, authz, body)
	if err != nil {
		t.Fatal(err)
	}
	return c.Send(t, req)
}

// Send is Call for a request built by the caller.
func (c *Client) Send(t testing.TB, req *http.Request) Response {
	t.Helper()
	resp, err := c.HTTP.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL.Path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading the answer: %v", req.Method, req.URL.Path, err)
	}
	if c.Check != nil {
		if err := c.Check(req, resp, raw); err != nil {
			t.Errorf("%s %s (answered %d): %v", req.Method, req.URL.Path, resp.StatusCode, err)
		}
	}
	return Response{Status: resp.StatusCode, Header: resp.Header, Body: raw}
}

// Decode unmarshals the body into v, failing t when it is not that JSON.
func (r Response) Decode(t testing.TB, v any) {
	t.Helper()
	if err := json.Unmarshal(r.Body, v); err != nil {
		t.Fatalf("status %d, body %q: %v", r.Status, r.Body, err)
	}
}

// Object is the body as a JSON object.
func (r Response) Object(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	r.Decode(t, &m)
	return m
}

// ErrorBody is the platform's error body.
type ErrorBody struct {
	Status  int    `json:"status"`
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Error decodes the error body, failing t unless it is one whose status is the answer's
// and whose code and message are set.
func (r Response) Error(t testing.TB) ErrorBody {
	t.Helper()
	var e ErrorBody
	r.Decode(t, &e)
	if e.Status != r.Status || e.Code == "" || e.Message == "" {
		t.Errorf("error body %s of a %d: want {status: %d, code, message}", r.Body, r.Status, r.Status)
	}
	return e
}

// String describes the answer for a failure message.
func (r Response) String() string {
	if r.Err != nil {
		return "no answer: " + r.Err.Error()
	}
	b := string(r.Body)
	if len(b) > 300 {
		b = b[:300] + "..."
	}
	return http.StatusText(r.Status) + " " + b
}

// Eventually polls check every 100 ms until it reports done, failing t when within passes
// first; check describes the state it saw, which goes into the failure. The one polling
// loop of the suites: a test waits for a condition, never for a fixed time.
func Eventually(t testing.TB, within time.Duration, what string, check func() (done bool, state string)) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		done, state := check()
		if done {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not reached within %s; last: %s", what, within, state)
		}
		time.Sleep(100 * time.Millisecond) // polling interval of a deadline loop
	}
}
