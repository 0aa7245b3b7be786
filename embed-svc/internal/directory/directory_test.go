package directory_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/analyticsco/platform/devstack"
	"github.com/analyticsco/platform/devstack/apitest"
	"github.com/analyticsco/platform/embed-svc/internal/directory"
	"github.com/analyticsco/platform/libs/errs"
	"github.com/analyticsco/platform/libs/identity"
	"github.com/analyticsco/platform/libs/identity/lookup"
	"github.com/analyticsco/platform/libs/natsx"
)

// store answers lookups for deployment 7 of account 1.
type store struct{}

func (store) LookupDeployment(_ context.Context, id int64) (lookup.DeploymentInfo, error) {
	if id != 7 {
		return lookup.DeploymentInfo{}, lookup.ErrNotFound
	}
	return lookup.DeploymentInfo{ID: 7, AccountID: 1, ProductionBranch: "main"}, nil
}

func (store) LookupUser(context.Context, int64, string) (identity.User, error) {
	return identity.User{}, lookup.ErrNotFound
}

// While no gateway answers the identity lookups (the gateways reconnecting after losing
// their NATS server), a lookup is sent again until one answers within the lookup's
// timeout: the session is minted, not refused.
func TestDeploymentLookupWaitsForAGatewayThatSubscribesWithinItsTimeout(t *testing.T) {
	ns := devstack.NATSForTest(t)
	requester := devstack.NATSConnForTest(t, ns.URL)
	type result struct {
		dep int64
		acc int64
		err error
	}
	done := make(chan result, 1)
	go func() {
		d, err := directory.New(natsx.NewClient(requester, natsx.ClientOptions{}), 30*time.Second).Deployment(context.Background(), 7)
		done <- result{d.ID, d.AccountID, err}
	}()
	// The server's "no responders" status is the first message the requester receives.
	apitest.Eventually(t, 10*time.Second, "the first lookup answered: no responders", func() (bool, string) {
		return requester.Stats().InMsgs >= 1, "no answer yet"
	})
	srv := natsx.NewServer(devstack.NATSConnForTest(t, ns.URL), natsx.ServerOptions{})
	t.Cleanup(func() { _ = srv.Close() })
	if err := lookup.Serve(srv, store{}); err != nil {
		t.Fatal(err)
	}
	got := <-done
	if got.err != nil || got.dep != 7 || got.acc != 1 {
		t.Fatalf("lookup once a gateway subscribed: %+v; want deployment 7 of account 1", got)
	}
}

// With no gateway for the whole timeout the lookup is unavailable (503), never "not found".
func TestDeploymentLookupWithoutGatewayIsUnavailableAfterItsTimeout(t *testing.T) {
	ns := devstack.NATSForTest(t)
	requester := devstack.NATSConnForTest(t, ns.URL)
	_, err := directory.New(natsx.NewClient(requester, natsx.ClientOptions{}), 300*time.Millisecond).Deployment(context.Background(), 7)
	if !errs.IsUnavailable(err) || !errors.Is(err, nats.ErrNoResponders) {
		t.Fatalf("lookup without a gateway: %v; want unavailable for no responders", err)
	}
	if n := requester.Stats().InMsgs; n < 2 {
		t.Errorf("no-responders answers within the timeout: %d, want the lookup sent again at least once", n)
	}
}
