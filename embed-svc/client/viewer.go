// Package client is embed-svc's published contract with other services over NATS
// request-reply: the embed viewer lookup (workspace-svc asks it for an embed viewer's
// current group memberships when it decides which dashboards the viewer may open;
// embed-svc serves it) and the dashboard reach (embed-svc's dry-run mint asks it;
// workspace-svc serves it). The messages and name grammar are package contract's, so
// that a domain naming them links no NATS client; this package carries them with
// libs/natsx's request-reply (spans, timeouts, caps, metrics, typed error answers).
package client

import (
	"context"
	"errors"
	"time"

	"github.com/analyticsco/platform/embed-svc/client/contract"
	"github.com/analyticsco/platform/libs/errs"
	"github.com/analyticsco/platform/libs/natsx"
)

// The contract's names, as this package's clients and servers use them.
const (
	ViewerSubject           = contract.ViewerSubject
	ViewerQueue             = contract.ViewerQueue
	ReachSubject            = contract.ReachSubject
	ReachQueue              = contract.ReachQueue
	MaxReachDashboards      = contract.MaxReachDashboards
	ScopeAccount            = contract.ScopeAccount
	ScopeTenant             = contract.ScopeTenant
	MaxDefinitionNameLength = contract.MaxDefinitionNameLength
)

// The contract's messages.
type (
	ViewerRequest   = contract.ViewerRequest
	ViewerReply     = contract.ViewerReply
	ReachRequest    = contract.ReachRequest
	ReachReply      = contract.ReachReply
	ReachDashboard  = contract.ReachDashboard
	ReachSubjectRef = contract.ReachSubjectRef
)

// The contract's errors: every failure of a call wraps one.
var (
	ErrUnavailable      = contract.ErrUnavailable
	ErrReachUnavailable = contract.ErrReachUnavailable
)

// The contract's grammar.
var (
	ValidTenantName        = contract.ValidTenantName
	ValidGroupName         = contract.ValidGroupName
	ValidDashboardPublicID = contract.ValidDashboardPublicID
)

// Viewers asks embed-svc about embed viewers.
type Viewers struct {
	e *natsx.Endpoint[ViewerRequest, ViewerReply]
}

// NewViewers returns a client waiting at most timeout (default 2 s) for a reply, sending
// a request that finds no responder or a busy one again until one answers within it.
func NewViewers(c *natsx.Client, timeout time.Duration) *Viewers {
	return &Viewers{e: natsx.NewEndpoint[ViewerRequest, ViewerReply](c, ViewerSubject, timeout)}
}

// Groups asks for one viewer's current groups; every failure wraps ErrUnavailable (and
// the typed answer, when there was one).
func (v *Viewers) Groups(ctx context.Context, req ViewerRequest) (ViewerReply, error) {
	reply, err := v.e.Call(ctx, req)
	if err != nil {
		return ViewerReply{}, errors.Join(ErrUnavailable, err)
	}
	return reply, nil
}

// Serve answers viewer lookups in the queue group on s with groups; a request that is
// not Valid is answered 400.
func Serve(s *natsx.Server, groups func(ctx context.Context, req ViewerRequest) (ViewerReply, error)) error {
	return natsx.Handle(s, ViewerSubject, ViewerQueue, func(ctx context.Context, req ViewerRequest) (ViewerReply, error) {
		if !req.Valid() {
			return ViewerReply{}, errs.Invalidf(`request must be {"accountId": <positive integer>, "embedTenantName": <string>, "externalId": <non-empty string>}`)
		}
		return groups(ctx, req)
	})
}
