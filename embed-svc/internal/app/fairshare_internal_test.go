package app

import (
	"log/slog"
	"testing"

	"github.com/analyticsco/platform/embed-svc/internal/embed"
	"github.com/analyticsco/platform/embed-svc/internal/webhooks"
	"github.com/analyticsco/platform/libs/fairshare"
	"github.com/analyticsco/platform/libs/fairshare/fairsharetest"
	"github.com/analyticsco/platform/libs/identity"
)

// generate-session, on the router embed-svc serves, is bounded per account before its
// body is read: the bound served, one more refused 429 concurrency_limit unread, another
// account served.
func TestMintBoundedPerAccount(t *testing.T) {
	fair := fairshare.New(nil, "embed-svc", 2)
	fairsharetest.Check(t, fairsharetest.Route{Handler: newRouter(embed.Endpoints{}, nil, webhooks.Endpoints{}, slog.New(slog.DiscardHandler), fair, nil),
		Limiter: fair, Class: embed.ClassMint, Method: "POST", Path: "/api/v1/embed/generate-session",
		Principal: func(account int64) *identity.Principal {
			return &identity.Principal{Account: identity.Account{ID: account, EmbeddingEnabled: true}, User: &identity.User{ID: 1, Role: "admin"}}
		}})
}
