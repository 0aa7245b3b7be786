package fairshare_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/analyticsco/platform/libs/fairshare"
	"github.com/analyticsco/platform/libs/fairshare/fairsharetest"
	"github.com/analyticsco/platform/libs/identity"
)

func principal(account int64) *identity.Principal {
	return &identity.Principal{Account: identity.Account{ID: account}}
}

func request(ctx context.Context, account int64) *http.Request {
	r := httptest.NewRequest("POST", "/x", strings.NewReader("{}"))
	return r.WithContext(identity.NewContext(ctx, principal(account)))
}

// A handler that reads its body: the bound of one account's slow requests is served, the
// next refused unread, another account's served, every place released.
func TestGuardRefusesPastTheBoundBeforeTheBody(t *testing.T) {
	reg := prometheus.NewRegistry()
	l := fairshare.New(reg, "test-svc", 3)
	h := l.Guard("upload")(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
	}))
	fairsharetest.Check(t, fairsharetest.Route{Handler: h, Limiter: l, Class: "upload", Method: "POST", Path: "/x", Principal: principal})
	if got := testutil.ToFloat64(l.Refusals("upload")); got != 1 {
		t.Errorf("refusals of upload %v, want 1", got)
	}
}

// The message names the bound and its value.
func TestRefusalNamesTheBound(t *testing.T) {
	l := fairshare.New(nil, "test-svc", 1)
	release, ok := l.Acquire("mint", 7)
	if !ok {
		t.Fatal("first acquire refused")
	}
	defer release()
	rec := httptest.NewRecorder()
	l.Guard("mint")(http.NotFoundHandler()).ServeHTTP(rec, request(context.Background(), 7))
	if rec.Code != 429 || !strings.Contains(rec.Body.String(), "account 7 has 1 mint requests in flight") {
		t.Fatalf("got %d %s, want 429 naming the bound 1", rec.Code, rec.Body)
	}
}

// A handler that panics, or that returns because its client went away, gives its place
// back; a release called twice counts once.
func TestGuardReleasesOnEveryPath(t *testing.T) {
	l := fairshare.New(nil, "test-svc", 1)
	panicking := l.Guard("bulk_move")(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic("boom") }))
	func() {
		defer func() { _ = recover() }()
		panicking.ServeHTTP(httptest.NewRecorder(), request(context.Background(), 1))
	}()
	if n := l.Entries(); n != 0 {
		t.Fatalf("after a panic the limiter holds %d entries, want 0", n)
	}

	ctx, cancel := context.WithCancel(context.Background())
	entered := make(chan struct{})
	waiting := l.Guard("bulk_move")(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		close(entered)
		<-r.Context().Done()
	}))
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); waiting.ServeHTTP(httptest.NewRecorder(), request(ctx, 1)) }()
	<-entered
	if got := l.InFlight("bulk_move", 1); got != 1 {
		t.Fatalf("in flight %d, want 1", got)
	}
	cancel()
	wg.Wait()
	if n := l.Entries(); n != 0 {
		t.Fatalf("after the client went away the limiter holds %d entries, want 0", n)
	}

	release, _ := l.Acquire("bulk_move", 1)
	other, _ := l.Acquire("bulk_move", 2)
	release()
	release()
	if got := l.InFlight("bulk_move", 2); got != 1 {
		t.Fatalf("a double release took another account's place: in flight %d, want 1", got)
	}
	if _, ok := l.Acquire("bulk_move", 1); !ok {
		t.Fatal("account 1 refused after its release")
	}
	other()
}

// Classes count on their own; a bound of 0 bounds nothing.
func TestClassesAndNoBound(t *testing.T) {
	l := fairshare.New(nil, "test-svc", 1)
	if _, ok := l.Acquire("publish", 1); !ok {
		t.Fatal("publish refused")
	}
	if _, ok := l.Acquire("bulk_move", 1); !ok {
		t.Fatal("bulk_move refused while only publish is at its bound")
	}
	if _, ok := l.Acquire("publish", 1); ok {
		t.Fatal("second publish admitted past a bound of 1")
	}
	free := fairshare.New(nil, "test-svc", 0)
	for range 100 {
		if _, ok := free.Acquire("publish", 1); !ok {
			t.Fatal("a bound of 0 refused")
		}
	}
}
