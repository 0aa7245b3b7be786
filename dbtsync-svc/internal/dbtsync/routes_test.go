package dbtsync_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"

	"github.com/analyticsco/platform/api"
	"github.com/analyticsco/platform/dbtsync-svc/internal/convert"
	"github.com/analyticsco/platform/dbtsync-svc/internal/dbtsync"
	"github.com/analyticsco/platform/libs/fairshare"
	"github.com/analyticsco/platform/libs/fairshare/fairsharetest"
	"github.com/analyticsco/platform/libs/identity"
)

// TestRouterServesWhatTheDocumentSays: the router NewHTTPHandler builds (with no
// endpoints behind it: only its table is read) holds exactly the operations openapi.yaml
// says dbtsync-svc serves.
func TestRouterServesWhatTheDocumentSays(t *testing.T) {
	h, ok := dbtsync.NewHTTPHandler(dbtsync.Endpoints{}, nil, 1, convert.ManifestLimits{}, nil, nil, 0).(interface{ Routes() []string })
	if !ok {
		t.Fatal("NewHTTPHandler no longer returns a router that lists its routes")
	}
	if err := api.CheckRoutes("dbtsync-svc", h.Routes()); err != nil {
		t.Fatal(err)
	}
}

// A sync start (POST .../dbt-sync: a manifest upload or a repository sync) is bounded per
// account before its body is read: the bound served, one more refused 429
// concurrency_limit unread, another account served.
func TestStartSyncBoundedPerAccount(t *testing.T) {
	fair := fairshare.New(nil, "dbtsync-svc", 2)
	gate := make(chan struct{})
	e := dbtsync.Endpoints{StartSync: func(ctx context.Context, _ any) (any, error) {
		<-gate // a start that takes its time: its upload streams, its job is published
		return nil, errors.New("ended by the test")
	}}
	fairsharetest.Check(t, fairsharetest.Route{Handler: dbtsync.NewHTTPHandler(e, slog.New(slog.DiscardHandler), 1<<20, convert.ManifestLimits{}, fair, nil, 0),
		Limiter: fair, Class: dbtsync.ClassUpload, Method: "POST", Path: "/api/v1/deployments/1/dbt-sync",
		Principal: func(account int64) *identity.Principal {
			return &identity.Principal{Account: identity.Account{ID: account}, User: &identity.User{ID: 1, Role: "admin"}, Deployment: &identity.Deployment{ID: 1}}
		},
		Unblock: func() { close(gate) }})
}
