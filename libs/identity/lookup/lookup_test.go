package lookup_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/analyticsco/platform/libs/errs"
	"github.com/analyticsco/platform/libs/identity/lookup"
	"github.com/analyticsco/platform/libs/natsx"
)

// Without an answer (here no server at all: the request waits in the reconnect buffer)
// a lookup is unavailable, never "not found": a caller must not answer 404 because the
// gateway was down. The round trips themselves are tested where the lookup is served
// (the gateway) and used (embed-svc), with a real nats-server.
func TestLookupWithoutAnswerIsUnavailable(t *testing.T) {
	nc, err := nats.Connect("nats://127.0.0.1:1", nats.RetryOnFailedConnect(true), nats.MaxReconnects(-1))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	l := lookup.NewClient(natsx.NewClient(nc, natsx.ClientOptions{}), 50*time.Millisecond)
	if _, err := l.Deployment(context.Background(), 7); !errors.Is(err, errs.ErrUnavailable) || errors.Is(err, lookup.ErrNotFound) {
		t.Fatalf("deployment lookup without a server: %v", err)
	}
	if _, err := l.User(context.Background(), 1, "ada"); !errors.Is(err, errs.ErrUnavailable) || !errs.IsUnavailable(err) {
		t.Fatalf("user lookup without a server: %v", err)
	}
}
