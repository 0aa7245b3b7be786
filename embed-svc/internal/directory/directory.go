// Package directory is embed.Directory over the identity lookup the gateway answers for
// its identity store (libs/identity/lookup over libs/natsx's request-reply).
package directory

import (
	"context"
	"errors"
	"time"

	"github.com/analyticsco/platform/embed-svc/internal/embed"
	"github.com/analyticsco/platform/libs/errs"
	"github.com/analyticsco/platform/libs/identity/lookup"
	"github.com/analyticsco/platform/libs/natsx"
)

// Lookup implements embed.Directory.
type Lookup struct{ l *lookup.Client }

// New returns a directory asking through c, waiting at most timeout for each answer.
func New(c *natsx.Client, timeout time.Duration) *Lookup {
	return &Lookup{l: lookup.NewClient(c, timeout)}
}

// unavailable is the answer when the identity store cannot be asked: a 503, never the
// deployment's or user's absence.
var unavailable = errs.New(errs.Unavailable, "the identity store is unavailable; retry shortly")

func answer(err error) error {
	if errors.Is(err, lookup.ErrNotFound) {
		return embed.ErrNotFound
	}
	return errors.Join(unavailable, err)
}

// Deployment asks whose deployment id is and which branch is its production branch.
func (d *Lookup) Deployment(ctx context.Context, id int64) (embed.Deployment, error) {
	dep, err := d.l.Deployment(ctx, id)
	if err != nil {
		return embed.Deployment{}, answer(err)
	}
	return embed.Deployment{ID: dep.ID, AccountID: dep.AccountID, ProductionBranch: dep.ProductionBranch}, nil
}

// InternalUser asks for the account's user with username.
func (d *Lookup) InternalUser(ctx context.Context, accountID int64, username string) (embed.InternalUser, error) {
	u, err := d.l.User(ctx, accountID, username)
	if err != nil {
		return embed.InternalUser{}, answer(err)
	}
	return embed.InternalUser{ID: u.ID, AccountID: accountID, Username: u.Username, Email: u.Email, FirstName: u.FirstName,
		Picture: u.Picture, Role: u.Role}, nil
}
