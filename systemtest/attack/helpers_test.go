package attack_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/analyticsco/platform/systemtest/stacktest"
)

func TestMain(m *testing.M) { os.Exit(stacktest.Main(m)) }

// noRateLimits: attacks that need volume turn the per-key limits off; the limits have their
// own tests.
var noRateLimits = []string{"RATE_LIMIT_GENERATE_SESSION=0", "RATE_LIMIT_EXCHANGE=0"}

// requestTimeout is the attacker's patience: every answer must come well within it.
const requestTimeout = 10 * time.Second

// reply is one answered (or unanswered) request.
type reply struct {
	status int
	header http.Header
	body   map[string]any
	raw    string
	err    error // transport error
}

func (r reply) String() string {
	if r.err != nil {
		return "no answer: " + r.err.Error()
	}
	raw := r.raw
	if len(raw) > 300 {
		raw = raw[:300] + "..."
	}
	return fmt.Sprintf("%d %s", r.status, raw)
}

// message is the error body's message ("" when there is none).
func (r reply) message() string { s, _ := r.body["message"].(string); return s }

// api talks to the stack's gateway as a client does.
type api struct {
	base   string
	client *http.Client
}

func newAPI(s *stacktest.Stack) *api {
	return &api{base: s.Gateway, client: &http.Client{Timeout: requestTimeout}}
}

// call sends body (JSON-encoded unless it is a []byte or string) with the Authorization
// header authz (empty: none). It never fails the test, so goroutines can use it.
func (a *api) call(method, path, authz string, body any) reply {
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		rd = bytes.NewReader(b)
	case string:
		rd = strings.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			return reply{err: err}
		}
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, a.base+path, rd)
	if err != nil {
		return reply{err: err}
	}
	if authz != "" {
		req.Header.Set("Authorization", authz)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := a.client.Do(req)
	if err != nil {
		return reply{err: err}
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	r := reply{status: resp.StatusCode, header: resp.Header, raw: string(raw), err: err}
	_ = json.Unmarshal(raw, &r.body)
	return r
}

func bearer(token string) string { return "Bearer " + token }
func apiKey(key string) string   { return "Api-Key " + key }

// eventually polls check until it reports done or the deadline passes.
func eventually(t *testing.T, timeout time.Duration, what string, check func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		done, state := check()
		if done {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not reached within %s; last: %s", what, timeout, state)
		}
		time.Sleep(100 * time.Millisecond) // polling interval of a deadline loop
	}
}
