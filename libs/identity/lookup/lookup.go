// Package lookup is the identity lookup over NATS: the client services ask the identity
// store with, and the server the gateway answers from. It is apart from package identity
// so that a domain package naming an *identity.Principal does not link the NATS client.
package lookup

import (
	"context"
	"errors"
	"time"

	"github.com/analyticsco/platform/libs/errs"
	"github.com/analyticsco/platform/libs/identity"
	"github.com/analyticsco/platform/libs/natsx"
)

// The identity lookup: what a service may ask of the identity store (accounts,
// deployments, users, API keys), which the gateway owns. The gateway answers from its
// caches over NATS request-reply; no service reads the store's collections. Its replicas
// share the requests (queue group LookupQueue), and the requester's trace context
// travels in the message headers.
//
//	identity.lookup.deployment  {"id": 7}
//	  -> {"deployment": {"id": 7, "accountId": 1, "productionBranch": "main"}}
//	   | {"deployment": null} (no such deployment) | an error answer (natsx)
//	identity.lookup.user        {"accountId": 1, "username": "acme-admin"}
//	  -> {"user": {"id", "username", "email", "firstName", "picture", "role"}}
//	   | {"user": null} (no such user in that account) | an error answer (natsx)
const (
	DeploymentSubject = "identity.lookup.deployment"
	UserSubject       = "identity.lookup.user"
	LookupQueue       = "identity-lookup"
)

// DeploymentRequest asks for one deployment.
type DeploymentRequest struct {
	ID int64 `json:"id"`
}

// DeploymentInfo is a deployment as the identity store knows it: whose it is and which
// branch is its production branch.
type DeploymentInfo struct {
	ID               int64  `json:"id"`
	AccountID        int64  `json:"accountId"`
	ProductionBranch string `json:"productionBranch"`
}

// DeploymentReply answers a DeploymentRequest: the deployment, nil when there is none.
type DeploymentReply struct {
	Deployment *DeploymentInfo `json:"deployment"`
}

// UserRequest asks for a user of an account by username.
type UserRequest struct {
	AccountID int64  `json:"accountId"`
	Username  string `json:"username"`
}

// UserReply answers a UserRequest (User nil: the account has no such user).
type UserReply struct {
	User *identity.User `json:"user"`
}

// ErrNotFound means the identity store has no such deployment, or the account no such user.
var ErrNotFound = errors.New("identity: not found")

// Client asks the identity store, through the gateway, with natsx's request-reply (a
// request finding no responder or a busy one is sent again within the timeout). A
// failure to get an answer (no responder, a timeout, the store's own failure) is
// unavailable (errs.IsUnavailable), never ErrNotFound.
type Client struct {
	deployments *natsx.Endpoint[DeploymentRequest, DeploymentReply]
	users       *natsx.Endpoint[UserRequest, UserReply]
}

// NewClient returns a client waiting at most timeout (default 2 s) for each answer,
// retries included.
func NewClient(c *natsx.Client, timeout time.Duration) *Client {
	return &Client{
		deployments: natsx.NewEndpoint[DeploymentRequest, DeploymentReply](c, DeploymentSubject, timeout),
		users:       natsx.NewEndpoint[UserRequest, UserReply](c, UserSubject, timeout),
	}
}

// Deployment returns deployment id (ErrNotFound when there is none).
func (l *Client) Deployment(ctx context.Context, id int64) (DeploymentInfo, error) {
	reply, err := l.deployments.Call(ctx, DeploymentRequest{ID: id})
	switch {
	case err != nil:
		return DeploymentInfo{}, err
	case reply.Deployment == nil:
		return DeploymentInfo{}, ErrNotFound
	}
	return *reply.Deployment, nil
}

// User returns the account's user with username (ErrNotFound when it has none).
func (l *Client) User(ctx context.Context, accountID int64, username string) (identity.User, error) {
	reply, err := l.users.Call(ctx, UserRequest{AccountID: accountID, Username: username})
	switch {
	case err != nil:
		return identity.User{}, err
	case reply.User == nil:
		return identity.User{}, ErrNotFound
	}
	return *reply.User, nil
}

// Directory is what the owner of the identity store answers lookups from.
type Directory interface {
	// LookupDeployment returns a deployment; ErrNotFound when there is none.
	LookupDeployment(ctx context.Context, id int64) (DeploymentInfo, error)
	// LookupUser returns the account's user with username; ErrNotFound when none.
	LookupUser(ctx context.Context, accountID int64, username string) (identity.User, error)
}

// Serve answers both subjects in the queue group LookupQueue from d, on s (its timeout
// and cap of handlers in flight, its spans continuing the requester's trace).
func Serve(s *natsx.Server, d Directory) error {
	err := natsx.Handle(s, DeploymentSubject, LookupQueue, func(ctx context.Context, req DeploymentRequest) (DeploymentReply, error) {
		if req.ID <= 0 {
			return DeploymentReply{}, errs.Invalidf(`request must be {"id": <positive integer>}`)
		}
		dep, err := d.LookupDeployment(ctx, req.ID)
		switch {
		case errors.Is(err, ErrNotFound):
			return DeploymentReply{}, nil
		case err != nil:
			return DeploymentReply{}, errors.Join(errs.ErrUnavailable, err) // answered 503 (never 404), the cause logged
		}
		return DeploymentReply{Deployment: &dep}, nil
	})
	if err != nil {
		return err
	}
	return natsx.Handle(s, UserSubject, LookupQueue, func(ctx context.Context, req UserRequest) (UserReply, error) {
		if req.AccountID <= 0 || req.Username == "" {
			return UserReply{}, errs.Invalidf(`request must be {"accountId": <positive integer>, "username": <non-empty string>}`)
		}
		u, err := d.LookupUser(ctx, req.AccountID, req.Username)
		switch {
		case errors.Is(err, ErrNotFound):
			return UserReply{}, nil
		case err != nil:
			return UserReply{}, errors.Join(errs.ErrUnavailable, err) // answered 503 (never 404), the cause logged
		}
		return UserReply{User: &u}, nil
	})
}
