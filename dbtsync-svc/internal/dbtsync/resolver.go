package dbtsync

import (
	"context"
	"errors"
	"time"
)

// BranchStatus is what generate-session needs to know of a branch.
type BranchStatus struct {
	Exists     bool
	Served     bool
	Production bool
}

// Resolver answers embed-svc's question about a branch (the spec's branch selection of
// generate-session): whether it exists and whether it is served.
type Resolver struct {
	branches BranchStore
	now      func() time.Time
}

// NewResolver resolves over branches; now is the clock (nil: time.Now).
func NewResolver(branches BranchStore, now func() time.Time) *Resolver {
	if now == nil {
		now = time.Now
	}
	return &Resolver{branches: branches, now: now}
}

// Resolve reports on branch name of deployment deploymentID, whose production branch is
// production: that one always exists and is served.
func (r *Resolver) Resolve(ctx context.Context, deploymentID int64, name, production string) (BranchStatus, error) {
	if name == production {
		return BranchStatus{Exists: true, Served: true, Production: true}, nil
	}
	st, err := r.branches.Branch(ctx, deploymentID, name)
	if errors.Is(err, ErrNotFound) {
		return BranchStatus{}, nil
	}
	if err != nil {
		return BranchStatus{}, err
	}
	return BranchStatus{Exists: true, Served: st.Served(production, r.now())}, nil
}
