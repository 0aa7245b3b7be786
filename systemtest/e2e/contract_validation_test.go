package e2e_test

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/analyticsco/platform/devstack"
	"github.com/analyticsco/platform/systemtest/internal/prism"
)

// contractTally is what Prism found in the suite's exchanges: every answer must conform
// (a violation fails the test that received it); requests the document does not allow
// are counted, since the suite sends many on purpose (bad bodies, missing credentials,
// out-of-range pages), and must not be answered 2xx (the document and the code would
// disagree on what is allowed).
type contractTally struct {
	mu        sync.Mutex
	exchanges int
	invalid   int            // requests with at least one violation
	byRule    map[string]int // request violations: "field (rule)" -> count
	responses int            // response violations
	beyondJS  int            // Prism's int64 bound (see prism.Verdict.BeyondJavaScript)
	start     time.Duration  // Prism's start
	judging   time.Duration  // the suite's time spent waiting for Prism's verdicts
}

// startPrism starts the validator for the suite and logs its verdict when t ends.
func (p *platform) startPrism(t *testing.T) {
	t.Helper()
	began := time.Now()
	p.prism = prism.Start(t, filepath.Join(devstack.RepoRoot(t), "api", "openapi.yaml"))
	p.tally = &contractTally{byRule: map[string]int{}, start: time.Since(began)}
	t.Cleanup(func() {
		cpu, err := p.prism.CPU()
		if err != nil {
			t.Logf("Prism's processor time: %v", err)
		}
		t.Log(p.tally.summary(cpu))
	})
}

// judgeWithPrism replays one exchange through Prism: a response violation is returned
// naming the operation, the field and the rule; request violations are counted.
func (p *platform) judgeWithPrism(req *http.Request, resp *http.Response, body []byte) error {
	// A branch file's path may be sent with literal slashes, which no OpenAPI path template
	// matches; the document also allows it as one %2F-encoded segment, which Prism matches.
	uri := req.URL.RequestURI()
	if m := branchFilePath.FindStringSubmatch(req.URL.EscapedPath()); m != nil {
		uri = strings.Replace(uri, m[0], m[1]+strings.ReplaceAll(m[2], "/", "%2F"), 1)
	}
	x := &prism.Exchange{Method: req.Method, URI: uri, Header: req.Header.Clone(),
		Status: resp.StatusCode, RespHeader: resp.Header, RespBody: body}
	if req.GetBody != nil {
		rc, err := req.GetBody()
		if err != nil {
			return err
		}
		x.Body, _ = io.ReadAll(rc)
	}
	began := time.Now()
	v, err := p.prism.Judge(context.Background(), x)
	p.tally.waited(time.Since(began))
	if err != nil {
		return fmt.Errorf("contract (Prism %s): %w", prism.Version, err)
	}
	op := "no operation of the document"
	if route, err := findRoute(p.router, req); err == nil {
		op = route.Operation.OperationID
	}
	p.tally.add(v)
	var errs []string
	if len(v.Request) > 0 && resp.StatusCode < 300 {
		errs = append(errs, fmt.Sprintf("api/openapi.yaml does not allow the request, yet it was answered %d (the document and the code disagree):\n  %s",
			resp.StatusCode, violations(v.Request)))
	}
	if len(v.Response) > 0 {
		errs = append(errs, fmt.Sprintf("the answer violates api/openapi.yaml:\n  %s", violations(v.Response)))
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("contract (Prism %s): %s %s (%s) answered %d: %s",
		prism.Version, req.Method, req.URL.EscapedPath(), op, resp.StatusCode, strings.Join(errs, "\n"))
}

func violations(vs []prism.Violation) string {
	found := make([]string, len(vs))
	for i, f := range vs {
		found[i] = f.String()
	}
	return strings.Join(found, "\n  ")
}

func (c *contractTally) waited(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.judging += d
}

func (c *contractTally) add(v prism.Verdict) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.exchanges++
	c.responses += len(v.Response)
	c.beyondJS += len(v.BeyondJavaScript)
	if len(v.Request) > 0 {
		c.invalid++
	}
	for _, f := range v.Request {
		c.byRule[f.String()]++
	}
}

// summary is the verdict over the whole run, the lines the suite prints.
func (c *contractTally) summary(cpu time.Duration) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var b strings.Builder
	fmt.Fprintf(&b, "contract validation (Prism %s): %d exchanges, %d response violations, %d int64 values beyond JavaScript's integers (Prism's bound, not the document's)",
		prism.Version, c.exchanges, c.responses, c.beyondJS)
	fmt.Fprintf(&b, "\nits cost: Prism started in %.1f s, the suite waited %.1f s for its verdicts, Prism used %.1f s of processor time",
		c.start.Seconds(), c.judging.Seconds(), cpu.Seconds())
	fmt.Fprintf(&b, "\n%d requests the document does not allow, sent on purpose, by rule:", c.invalid)
	for _, r := range slices.Sorted(maps.Keys(c.byRule)) {
		fmt.Fprintf(&b, "\n  %4d × %s", c.byRule[r], r)
	}
	return b.String()
}
