package attack_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/analyticsco/platform/devstack/apitest"
	"github.com/analyticsco/platform/systemtest/stacktest"
)

func TestMain(m *testing.M) { os.Exit(stacktest.Main(m)) }

// noRateLimits: attacks that need volume turn the per-key limits off; the limits have their
// own tests.
var noRateLimits = []string{"RATE_LIMIT_GENERATE_SESSION=0", "RATE_LIMIT_EXCHANGE=0", "RATE_LIMIT_PLAN_FREE=0", "RATE_LIMIT_PLAN_PREMIUM=0", "RATE_LIMIT_PLAN_ENTERPRISE=0"}

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
type api struct{ c *apitest.Client }

func newAPI(s *stacktest.Stack) *api {
	c := apitest.New(s.Gateway)
	c.HTTP.Timeout = requestTimeout
	return &api{c: c}
}

// call sends body (JSON-encoded unless it is a []byte or string) with the Authorization
// header authz (empty: none). It never fails the test, so goroutines can use it; the
// transport error is in the reply.
func (a *api) call(method, path, authz string, body any) reply {
	r := a.c.Do(method, path, authz, body)
	out := reply{status: r.Status, header: r.Header, raw: string(r.Body), err: r.Err}
	_ = json.Unmarshal(r.Body, &out.body)
	return out
}
