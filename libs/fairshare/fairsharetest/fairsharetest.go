// Package fairsharetest checks that a service's route is guarded by a fairshare.Limiter:
// one account's requests past the bound are refused before their body is read, another
// account's are not, and every place is given back.
package fairsharetest

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/analyticsco/platform/libs/fairshare"
	"github.com/analyticsco/platform/libs/identity"
)

// Route is one guarded route of a handler.
type Route struct {
	Handler http.Handler       // the service's router, the principal set as identity.Require leaves it
	Limiter *fairshare.Limiter // the limiter the router was built with
	Class   string             // the route's class
	Method  string
	Path    string
	// Principal is a verified caller of the route of the given account.
	Principal func(account int64) *identity.Principal
	// Unblock, when set, lets every request the test admitted finish (an endpoint that
	// waits): the requests' bodies are also failed, which ends a decoder reading them.
	Unblock func()
}

// countingBody is a request body that never finishes: it counts its reads and fails
// when the test closes it.
type countingBody struct {
	*io.PipeReader
	reads *atomic.Int64
}

func (b countingBody) Read(p []byte) (int, error) {
	b.reads.Add(1)
	return b.PipeReader.Read(p)
}

// Check sends the bound of concurrent slow requests of one account, then one more, which
// must be answered 429 concurrency_limit with Retry-After before a byte of its body was
// read; another account's request is admitted beside them; once they end, the limiter
// holds nothing and the first account is admitted again.
func Check(t *testing.T, r Route) {
	t.Helper()
	const a, b = 901, 902
	bound := r.Limiter.Max()
	var wg sync.WaitGroup
	var pipes []*io.PipeWriter
	start := func(account int64) {
		pr, pw := io.Pipe()
		pipes = append(pipes, pw)
		req := r.request(account, countingBody{pr, new(atomic.Int64)})
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.Handler.ServeHTTP(httptest.NewRecorder(), req)
		}()
	}
	for range bound {
		start(a)
	}
	waitInFlight(t, r, a, bound)

	reads := new(atomic.Int64)
	pr, pw := io.Pipe()
	defer pw.Close()
	rec := httptest.NewRecorder()
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.Handler.ServeHTTP(rec, r.request(a, countingBody{pr, reads}))
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatalf("%s %s: request %d of one account was not answered: it waits on its body", r.Method, r.Path, bound+1)
	}
	var body struct {
		Status  int    `json:"status"`
		Code    string `json:"code"`
		Message string `json:"message"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil || rec.Code != http.StatusTooManyRequests || body.Code != "concurrency_limit" {
		t.Fatalf("%s %s: request %d of one account answered %d %s, want 429 concurrency_limit", r.Method, r.Path, bound+1, rec.Code, rec.Body)
	}
	if got := rec.Header().Get("Retry-After"); got != fairshare.RetryAfter {
		t.Errorf("Retry-After %q, want %q", got, fairshare.RetryAfter)
	}
	if n := reads.Load(); n != 0 {
		t.Errorf("the refused request's body was read %d times, want none", n)
	}
	if got := r.Limiter.InFlight(r.Class, a); got != bound {
		t.Errorf("in flight after the refusal %d, want %d", got, bound)
	}

	start(b)
	waitInFlight(t, r, b, 1)

	if r.Unblock != nil {
		r.Unblock()
	}
	for _, p := range pipes {
		p.CloseWithError(io.ErrUnexpectedEOF)
	}
	wg.Wait()
	if n := r.Limiter.Entries(); n != 0 {
		t.Fatalf("limiter holds %d entries after every request ended, want 0", n)
	}
}

func (r Route) request(account int64, body io.Reader) *http.Request {
	req := httptest.NewRequest(r.Method, r.Path, body)
	req.Header.Set("Content-Type", "application/json")
	req.ContentLength = 1 << 10 // a body that says it is there, and never ends
	return req.WithContext(identity.NewContext(context.Background(), r.Principal(account)))
}

func waitInFlight(t *testing.T, r Route, account int64, want int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for r.Limiter.InFlight(r.Class, account) != want {
		if time.Now().After(deadline) {
			t.Fatalf("account %d has %d %s requests in flight, want %d", account, r.Limiter.InFlight(r.Class, account), r.Class, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
