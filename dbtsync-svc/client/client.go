// Package client is dbtsync-svc's published contract with other services: the branch
// resolver over NATS request-reply (subject, messages, a client and the server's
// handler shape). embed-svc imports it to ask whether a deployment's branch exists and
// is served; dbtsync-svc serves it. Both sides are libs/natsx's request-reply (spans,
// timeouts, caps, metrics, typed error answers).
package client

import (
	"context"
	"errors"
	"time"

	"github.com/analyticsco/platform/libs/errs"
	"github.com/analyticsco/platform/libs/natsx"
)

// The resolver's subject, and the queue group its replicas share.
const (
	ResolveSubject = "dbtsync.branches.resolve"
	ResolveQueue   = "dbtsync-resolver"
)

// ResolveRequest is {"deploymentId": 1, "branchName": "feature-x", "productionBranch": "main"}.
type ResolveRequest struct {
	DeploymentID     int64  `json:"deploymentId"`
	BranchName       string `json:"branchName"`
	ProductionBranch string `json:"productionBranch"`
}

// Valid reports whether the request names a deployment and both branches.
func (r ResolveRequest) Valid() bool {
	return r.DeploymentID > 0 && r.BranchName != "" && r.ProductionBranch != ""
}

// ResolveReply is {"exists": true, "served": false, "production": false}; a failure is an
// error answer (natsx: errs' model across the wire).
type ResolveReply struct {
	Exists     bool `json:"exists"`
	Served     bool `json:"served"`
	Production bool `json:"production"`
}

// ErrUnavailable is any failure to get an answer: no responder within the timeout, a
// timeout, a busy or unreadable answer or the resolver's own error (its store
// unavailable). It never means the branch does not exist.
var ErrUnavailable = errors.New("the branch resolver is unavailable")

// Resolver asks dbtsync-svc about branches.
type Resolver struct {
	e *natsx.Endpoint[ResolveRequest, ResolveReply]
}

// NewResolver returns a client waiting at most timeout (default 2 s) for a reply. A
// request that finds no responder (the API replicas reconnecting after losing their NATS
// server, or restarting) or a busy one is sent again until one answers within that time.
func NewResolver(c *natsx.Client, timeout time.Duration) *Resolver {
	return &Resolver{e: natsx.NewEndpoint[ResolveRequest, ResolveReply](c, ResolveSubject, timeout)}
}

// Resolve asks about one branch; every failure wraps ErrUnavailable (and the typed
// answer, when there was one).
func (r *Resolver) Resolve(ctx context.Context, req ResolveRequest) (ResolveReply, error) {
	reply, err := r.e.Call(ctx, req)
	if err != nil {
		return ResolveReply{}, errors.Join(ErrUnavailable, err)
	}
	return reply, nil
}

// Serve answers resolve requests in the queue group on s (its timeout, its cap of
// handlers in flight, its spans continuing the requester's trace) with resolve; a
// request that is not Valid is answered 400.
func Serve(s *natsx.Server, resolve func(ctx context.Context, req ResolveRequest) (ResolveReply, error)) error {
	return natsx.Handle(s, ResolveSubject, ResolveQueue, func(ctx context.Context, req ResolveRequest) (ResolveReply, error) {
		if !req.Valid() {
			return ResolveReply{}, errs.Invalidf(
				`request must be {"deploymentId": <positive integer>, "branchName": <string>, "productionBranch": <string>}`)
		}
		return resolve(ctx, req)
	})
}
