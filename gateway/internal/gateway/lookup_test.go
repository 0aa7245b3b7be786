package gateway_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/analyticsco/platform/devstack"
	"github.com/analyticsco/platform/gateway/internal/store"
	"github.com/analyticsco/platform/libs/identity"
	"github.com/analyticsco/platform/libs/identity/lookup"
	"github.com/analyticsco/platform/libs/natsx"
)

// TestIdentityLookups: the gateway answers the services' identity lookups over NATS from
// its identity store, as libs/identity/lookup's client asks them, and the answer continues the
// requester's trace.
func TestIdentityLookups(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	prevTP, prevProp := otel.GetTracerProvider(), otel.GetTextMapPropagator()
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.TraceContext{})
	t.Cleanup(func() { otel.SetTracerProvider(prevTP); otel.SetTextMapPropagator(prevProp) })

	h := newHarness(t)
	ns := devstack.NATSForTest(t)
	nc, err := nats.Connect(ns.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	srv := natsx.NewServer(nc, natsx.ServerOptions{})
	t.Cleanup(func() { _ = srv.Close() })
	if err := lookup.Serve(srv, h.authn); err != nil {
		t.Fatal(err)
	}
	client := lookup.NewClient(natsx.NewClient(nc, natsx.ClientOptions{}), 5*time.Second)
	acme, globex := h.acme(), h.globex()
	ctx := context.Background()

	t.Run("deployment", func(t *testing.T) {
		ctx, span := tp.Tracer("test").Start(ctx, "requester")
		d, err := client.Deployment(ctx, acme.Deployments[1].ID)
		span.End()
		if err != nil || d.ID != acme.Deployments[1].ID || d.AccountID != acme.ID || d.ProductionBranch != "main" {
			t.Fatalf("acme's deployment: %+v %v", d, err)
		}
		_ = tp.ForceFlush(ctx)
		var served bool
		for _, s := range rec.Ended() {
			if s.Name() == lookup.DeploymentSubject && s.Parent().SpanID() == span.SpanContext().SpanID() {
				served = true
			}
		}
		if !served {
			t.Fatal("the lookup's span does not continue the requester's trace")
		}
	})
	t.Run("deployment-not-found", func(t *testing.T) {
		if d, err := client.Deployment(ctx, 987654321); !errors.Is(err, lookup.ErrNotFound) {
			t.Fatalf("unknown deployment: %+v %v", d, err)
		}
	})
	t.Run("user", func(t *testing.T) {
		admin := acme.Users["admin"]
		u, err := client.User(ctx, acme.ID, admin.Username)
		if err != nil || u.ID != admin.ID || u.Username != admin.Username || u.Email != admin.Email || u.Role != identity.RoleAdmin || u.FirstName != "Ada" {
			t.Fatalf("acme's admin: %+v %v", u, err)
		}
	})
	t.Run("user-of-another-account-not-found", func(t *testing.T) {
		if u, err := client.User(ctx, globex.ID, acme.Users["admin"].Username); !errors.Is(err, lookup.ErrNotFound) {
			t.Fatalf("acme's admin asked as globex's: %+v %v", u, err)
		}
		if u, err := client.User(ctx, acme.ID, "nobody-here"); !errors.Is(err, lookup.ErrNotFound) {
			t.Fatalf("unknown user: %+v %v", u, err)
		}
	})
	t.Run("user-changed-is-seen-after-the-poller", func(t *testing.T) {
		viewer := acme.Users["viewer"]
		if _, err := client.User(ctx, acme.ID, viewer.Username); err != nil { // cached now
			t.Fatal(err)
		}
		since := time.Now().Add(-time.Second)
		if _, err := h.st.UpsertUser(ctx, store.UserSpec{AccountID: acme.ID, Username: viewer.Username, Email: viewer.Email,
			FirstName: "Victor", Role: identity.RoleDeveloper}); err != nil {
			t.Fatal(err)
		}
		if err := h.authn.Evict(ctx, since); err != nil {
			t.Fatal(err)
		}
		if u, err := client.User(ctx, acme.ID, viewer.Username); err != nil || u.Role != identity.RoleDeveloper || u.FirstName != "Victor" {
			t.Fatalf("after the change: %+v %v", u, err)
		}
	})
}
