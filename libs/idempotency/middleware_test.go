package idempotency_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/analyticsco/platform/libs/idempotency"
	"github.com/analyticsco/platform/libs/identity"
)

type harness struct {
	h       http.Handler
	calls   atomic.Int64
	block   chan struct{}
	entered chan struct{}
}

func newHarness(t *testing.T, s idempotency.Settings) *harness {
	t.Helper()
	hs := &harness{}
	m := idempotency.New(idempotency.Options{Store: idempotency.NewMemory(), Settings: s, Exclude: []string{"POST /revoke"}})
	inner := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := hs.calls.Add(1)
		if hs.block != nil {
			hs.entered <- struct{}{}
			<-hs.block
		}
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Location", "/things/"+strconv.FormatInt(n, 10))
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"n":` + strconv.FormatInt(n, 10) + `,"echo":` + strconv.Quote(string(b)) + `}`))
	})
	mux := http.NewServeMux()
	mux.Handle("POST /things", m.Wrap("POST", "/things", inner))
	mux.Handle("POST /revoke", m.Wrap("POST", "/revoke", inner))
	hs.h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := &identity.Principal{Credential: identity.CredentialAPIKey, KeyID: r.Header.Get("X-Key"), Account: identity.Account{ID: 1}}
		mux.ServeHTTP(w, r.WithContext(identity.NewContext(r.Context(), p)))
	})
	return hs
}

func (hs *harness) post(path, key, cred, body string) *httptest.ResponseRecorder {
	r := httptest.NewRequest("POST", path, strings.NewReader(body))
	if key != "" {
		r.Header.Set(idempotency.Header, key)
	}
	r.Header.Set("X-Key", cred)
	w := httptest.NewRecorder()
	hs.h.ServeHTTP(w, r)
	return w
}

func code(t *testing.T, w *httptest.ResponseRecorder) string {
	t.Helper()
	var e struct{ Code string }
	_ = json.Unmarshal(w.Body.Bytes(), &e)
	return e.Code
}

func TestRetryIsAnsweredOnceAndReplayed(t *testing.T) {
	hs := newHarness(t, idempotency.Settings{})
	first := hs.post("/things", "k1", "a", `{"x":1}`)
	again := hs.post("/things", `"k1"`, "a", `{"x":1}`)
	if hs.calls.Load() != 1 {
		t.Fatalf("the handler ran %d times, want 1", hs.calls.Load())
	}
	if again.Code != 201 || again.Body.String() != first.Body.String() || again.Header().Get("Location") != first.Header().Get("Location") {
		t.Fatalf("replay = %d %q, first = %d %q", again.Code, again.Body, first.Code, first.Body)
	}
	if again.Header().Get(idempotency.ReplayedHeader) != "true" || first.Header().Get(idempotency.ReplayedHeader) != "" {
		t.Fatalf("Idempotent-Replayed: first %q, replay %q", first.Header().Get(idempotency.ReplayedHeader), again.Header().Get(idempotency.ReplayedHeader))
	}
	// Another credential's same key acts on its own.
	if w := hs.post("/things", "k1", "b", `{"x":1}`); w.Header().Get(idempotency.ReplayedHeader) != "" || hs.calls.Load() != 2 {
		t.Fatalf("another credential was replayed the first's answer: %q", w.Body)
	}
	// No key: no deduplication.
	hs.post("/things", "", "a", `{"x":1}`)
	hs.post("/things", "", "a", `{"x":1}`)
	if hs.calls.Load() != 4 {
		t.Fatalf("calls = %d, want 4", hs.calls.Load())
	}
}

func TestReuseWithAnotherBodyIs422(t *testing.T) {
	hs := newHarness(t, idempotency.Settings{})
	hs.post("/things", "k", "a", `{"x":1}`)
	w := hs.post("/things", "k", "a", `{"x":2}`)
	if w.Code != 422 || code(t, w) != "idempotency_key_reused" || hs.calls.Load() != 1 {
		t.Fatalf("got %d %s after %d calls", w.Code, w.Body, hs.calls.Load())
	}
}

func TestKeyInUseIs409WithRetryAfter(t *testing.T) {
	hs := newHarness(t, idempotency.Settings{})
	hs.block, hs.entered = make(chan struct{}), make(chan struct{})
	done := make(chan *httptest.ResponseRecorder)
	go func() { done <- hs.post("/things", "k", "a", `{}`) }()
	<-hs.entered
	w := hs.post("/things", "k", "a", `{}`)
	close(hs.block)
	if first := <-done; first.Code != 201 {
		t.Fatalf("first = %d", first.Code)
	}
	if w.Code != 409 || code(t, w) != "idempotency_key_in_use" || w.Header().Get("Retry-After") == "" {
		t.Fatalf("concurrent = %d %s Retry-After %q", w.Code, w.Body, w.Header().Get("Retry-After"))
	}
}

func TestInvalidKeyIs400AndDoesNothing(t *testing.T) {
	hs := newHarness(t, idempotency.Settings{})
	for _, k := range []string{strings.Repeat("k", 256), "a\x01b", "clé", `"open`} {
		w := hs.post("/things", k, "a", `{}`)
		if w.Code != 400 || code(t, w) != "invalid_idempotency_key" {
			t.Errorf("key %q: %d %s", k, w.Code, w.Body)
		}
	}
	if hs.calls.Load() != 0 {
		t.Fatalf("the handler ran %d times", hs.calls.Load())
	}
}

func TestExcludedRouteIgnoresTheKey(t *testing.T) {
	hs := newHarness(t, idempotency.Settings{})
	hs.post("/revoke", "k", "a", `{}`)
	hs.post("/revoke", "k", "a", `{}`)
	if hs.calls.Load() != 2 {
		t.Fatalf("calls = %d, want 2", hs.calls.Load())
	}
}

func TestRecordsPastTheAccountBoundAre429(t *testing.T) {
	hs := newHarness(t, idempotency.Settings{MaxRecords: 2})
	hs.post("/things", "k1", "a", `{}`)
	hs.post("/things", "k2", "a", `{}`)
	w := hs.post("/things", "k3", "a", `{}`)
	if w.Code != 429 || code(t, w) != "idempotency_limit" || !strings.Contains(w.Body.String(), "at most 2 are kept") {
		t.Fatalf("third key = %d %s", w.Code, w.Body)
	}
	if hs.calls.Load() != 2 {
		t.Fatalf("calls = %d", hs.calls.Load())
	}
	if w := hs.post("/things", "k1", "a", `{}`); w.Header().Get(idempotency.ReplayedHeader) != "true" {
		t.Fatalf("a replay past the bound = %d %s", w.Code, w.Body)
	}
}

func TestAnswerOverTheBoundIsReplayedWithoutBody(t *testing.T) {
	hs := newHarness(t, idempotency.Settings{MaxAnswerBytes: 16})
	hs.post("/things", "k", "a", `{"long":"enough to pass the bound"}`)
	w := hs.post("/things", "k", "a", `{"long":"enough to pass the bound"}`)
	if w.Code != 201 || w.Body.Len() != 0 || w.Header().Get(idempotency.ReplayedHeader) != "true" || w.Header().Get("Location") != "/things/1" || hs.calls.Load() != 1 {
		t.Fatalf("replay = %d %q %v", w.Code, w.Body, w.Header())
	}
}

func TestAnswersAreSealedAtRest(t *testing.T) {
	signer, err := identity.NewSigner("MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=")
	if err != nil {
		t.Fatal(err)
	}
	sealer, err := idempotency.NewSealer(signer.SealKey("idempotency"))
	if err != nil {
		t.Fatal(err)
	}
	store := &keptAnswers{Store: idempotency.NewMemory()}
	m := idempotency.New(idempotency.Options{Store: store, Sealer: sealer})
	calls := 0
	secret := `{"token":"ak_secret_value_1234"}`
	h := m.Wrap("POST", "/keys", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls++
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(secret))
	}))
	post := func(m *idempotency.Middleware, h http.Handler) *httptest.ResponseRecorder {
		r := httptest.NewRequest("POST", "/keys", strings.NewReader(`{}`))
		r.Header.Set(idempotency.Header, "k")
		p := &identity.Principal{Credential: identity.CredentialAPIKey, KeyID: "a", Account: identity.Account{ID: 1}}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r.WithContext(identity.NewContext(r.Context(), p)))
		return w
	}
	post(m, h)
	if len(store.bodies) != 1 || strings.Contains(string(store.bodies[0]), "ak_secret") {
		t.Fatalf("the kept answer is not sealed: %q", store.bodies)
	}
	if again := post(m, h); calls != 1 || again.Body.String() != secret || again.Code != 201 {
		t.Fatalf("replay = %d %q after %d calls, want the first answer", again.Code, again.Body, calls)
	}
	// A process whose key cannot open the record replays status and headers only, and
	// still does not act again.
	other, _ := identity.NewSigner("ZmVkY2JhOTg3NjU0MzIxMGZlZGNiYTk4NzY1NDMyMTA=")
	otherSealer, _ := idempotency.NewSealer(other.SealKey("idempotency"))
	m2 := idempotency.New(idempotency.Options{Store: store, Sealer: otherSealer})
	if w := post(m2, m2.Wrap("POST", "/keys", h)); calls != 1 || w.Code != 201 || w.Body.Len() != 0 {
		t.Fatalf("unopenable record: %d %q after %d calls", w.Code, w.Body, calls)
	}
}

// keptAnswers records the answer bodies the store is given.
type keptAnswers struct {
	idempotency.Store
	bodies [][]byte
}

func (k *keptAnswers) Complete(ctx context.Context, c *idempotency.Claim, fp []byte, a idempotency.Answer) error {
	k.bodies = append(k.bodies, append([]byte(nil), a.Body...))
	return k.Store.Complete(ctx, c, fp, a)
}
