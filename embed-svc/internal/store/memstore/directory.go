package memstore

import (
	"context"
	"sync"

	"github.com/analyticsco/platform/embed-svc/internal/embed"
)

// Directory answers as the identity lookup (the gateway's identity store) does, from the
// deployments and users given to it.
type Directory struct {
	mu          sync.Mutex
	deployments map[int64]embed.Deployment
	users       map[userKey]embed.InternalUser
	err         error
}

// Fail makes err every answer from now on (nil: answer again), as when the gateway
// cannot be reached.
func (d *Directory) Fail(err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.err = err
}

// NewDirectory returns an empty directory.
func NewDirectory() *Directory {
	return &Directory{deployments: map[int64]embed.Deployment{}, users: map[userKey]embed.InternalUser{}}
}

// AddDeployment puts a deployment in the identity store.
func (d *Directory) AddDeployment(dep embed.Deployment) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.deployments[dep.ID] = dep
}

// AddUser puts an internal user in the identity store.
func (d *Directory) AddUser(u embed.InternalUser) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.users[userKey{u.AccountID, u.Username}] = u
}

// Deployment returns a deployment (embed.ErrNotFound when there is none).
func (d *Directory) Deployment(_ context.Context, id int64) (embed.Deployment, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.err != nil {
		return embed.Deployment{}, d.err
	}
	dep, ok := d.deployments[id]
	if !ok {
		return embed.Deployment{}, embed.ErrNotFound
	}
	return dep, nil
}

// InternalUser returns the account's user with username (embed.ErrNotFound when none).
func (d *Directory) InternalUser(_ context.Context, accountID int64, username string) (embed.InternalUser, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.err != nil {
		return embed.InternalUser{}, d.err
	}
	u, ok := d.users[userKey{accountID, username}]
	if !ok {
		return embed.InternalUser{}, embed.ErrNotFound
	}
	return u, nil
}
