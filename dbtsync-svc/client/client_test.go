package client_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/analyticsco/platform/dbtsync-svc/client"
	"github.com/analyticsco/platform/devstack"
	"github.com/analyticsco/platform/devstack/apitest"
	"github.com/analyticsco/platform/libs/errs"
	"github.com/analyticsco/platform/libs/natsx"
)

var req = client.ResolveRequest{DeploymentID: 7, BranchName: "feature-x", ProductionBranch: "main"}

// While no API replica subscribes (they are reconnecting after losing their NATS
// server), a resolve is sent again until one answers within the caller's timeout: the
// embed session is minted, not refused.
func TestResolveWaitsForAResponderThatSubscribesWithinItsTimeout(t *testing.T) {
	ns := devstack.NATSForTest(t)
	requester := devstack.NATSConnForTest(t, ns.URL)
	type result struct {
		reply client.ResolveReply
		err   error
	}
	done := make(chan result, 1)
	go func() {
		rep, err := client.NewResolver(natsx.NewClient(requester, natsx.ClientOptions{}), 30*time.Second).Resolve(context.Background(), req)
		done <- result{rep, err}
	}()
	// The server's "no responders" status is the first message the requester receives.
	apitest.Eventually(t, 10*time.Second, "the first request answered: no responders", func() (bool, string) {
		return requester.Stats().InMsgs >= 1, "no answer yet"
	})
	srv := natsx.NewServer(devstack.NATSConnForTest(t, ns.URL), natsx.ServerOptions{})
	t.Cleanup(func() { _ = srv.Close() })
	if err := client.Serve(srv, func(_ context.Context, got client.ResolveRequest) (client.ResolveReply, error) {
		return client.ResolveReply{Exists: got == req, Served: true}, nil
	}); err != nil {
		t.Fatal(err)
	}
	got := <-done
	if got.err != nil || !got.reply.Exists || !got.reply.Served {
		t.Fatalf("resolve once a responder subscribed: %+v, %v; want exists and served", got.reply, got.err)
	}
}

// With no responder for the whole timeout the resolver is unavailable (a 503 upstream),
// never "no such branch".
func TestResolveWithoutResponderIsUnavailableAfterItsTimeout(t *testing.T) {
	ns := devstack.NATSForTest(t)
	requester := devstack.NATSConnForTest(t, ns.URL)
	_, err := client.NewResolver(natsx.NewClient(requester, natsx.ClientOptions{}), 300*time.Millisecond).Resolve(context.Background(), req)
	if !errors.Is(err, client.ErrUnavailable) || !errors.Is(err, nats.ErrNoResponders) {
		t.Fatalf("resolve without a responder: %v; want ErrUnavailable for no responders", err)
	}
	if n := requester.Stats().InMsgs; n < 2 {
		t.Errorf("no-responders answers within the timeout: %d, want the request sent again at least once", n)
	}
}

// A request that names no branch is refused by the resolver with a typed 400 (and, for
// the caller, the resolver is unavailable: it asked wrongly, the branch is not absent).
func TestResolveOfNoBranchIsRefusedTyped(t *testing.T) {
	ns := devstack.NATSForTest(t)
	srv := natsx.NewServer(devstack.NATSConnForTest(t, ns.URL), natsx.ServerOptions{})
	t.Cleanup(func() { _ = srv.Close() })
	var resolved atomic.Bool
	if err := client.Serve(srv, func(context.Context, client.ResolveRequest) (client.ResolveReply, error) {
		resolved.Store(true)
		return client.ResolveReply{Exists: true}, nil
	}); err != nil {
		t.Fatal(err)
	}
	r := client.NewResolver(natsx.NewClient(devstack.NATSConnForTest(t, ns.URL), natsx.ClientOptions{}), 5*time.Second)
	_, err := r.Resolve(context.Background(), client.ResolveRequest{DeploymentID: 7, ProductionBranch: "main"})
	if e, ok := errs.As(err); !ok || e.Kind != errs.Invalid || !errors.Is(err, client.ErrUnavailable) || resolved.Load() {
		t.Fatalf("resolve of no branch: %v (resolver called: %v); want a typed invalid, unavailable to the caller, the resolver not called", err, resolved.Load())
	}
}
