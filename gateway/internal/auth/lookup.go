package auth

import (
	"context"
	"errors"

	"github.com/analyticsco/platform/gateway/internal/store"
	"github.com/analyticsco/platform/libs/identity"
	"github.com/analyticsco/platform/libs/identity/lookup"
)

// The Authenticator is the gateway's lookup.Directory: it answers the services'
// identity lookups (lookup.Serve) from the same caches, evicted by the same
// change poller, that authenticate requests.
var _ lookup.Directory = (*Authenticator)(nil)

// usernameKey names a user by account and username; the cache maps it to the user's id,
// and the user itself is read through the users cache, which the poller evicts by id.
type usernameKey struct {
	account  int64
	username string
}

// LookupDeployment returns deployment id; lookup.ErrNotFound when there is none.
func (a *Authenticator) LookupDeployment(ctx context.Context, id int64) (lookup.DeploymentInfo, error) {
	d, err := a.Deployment(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return lookup.DeploymentInfo{}, lookup.ErrNotFound
	}
	if err != nil {
		return lookup.DeploymentInfo{}, err
	}
	return lookup.DeploymentInfo{ID: d.ID, AccountID: d.AccountID, ProductionBranch: d.ProductionBranch}, nil
}

// LookupUser returns the account's user with username; lookup.ErrNotFound when the
// account has none. A cached name whose user has since been renamed, moved or deleted is
// forgotten and looked up again.
func (a *Authenticator) LookupUser(ctx context.Context, accountID int64, username string) (identity.User, error) {
	k := usernameKey{account: accountID, username: username}
	if id, ok := a.usernames.Get(k); ok {
		u, err := a.user(ctx, id)
		switch {
		case err == nil && u.AccountID == accountID && u.Username == username:
			return *u.Identity(), nil
		case err != nil && !errors.Is(err, ErrUnauthenticated):
			return identity.User{}, err
		}
		a.usernames.Delete(k)
	}
	u, err := a.dir.UserByUsername(ctx, accountID, username)
	if errors.Is(err, store.ErrNotFound) {
		return identity.User{}, lookup.ErrNotFound
	}
	if err != nil {
		return identity.User{}, err
	}
	exp := a.now().Add(a.ttl)
	a.users.Put(u.ID, u, exp)
	a.usernames.Put(k, u.ID, exp)
	return *u.Identity(), nil
}
