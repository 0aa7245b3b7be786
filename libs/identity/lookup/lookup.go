// Package lookup is the identity lookup over NATS: the client services ask the identity
// store with, and the server the gateway answers from. It is apart from package identity
// so that a domain package naming an *identity.Principal does not link the NATS client.
package lookup

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

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
//	   | {"deployment": null} (no such deployment) | {"error": "..."}
//	identity.lookup.user        {"accountId": 1, "username": "acme-admin"}
//	  -> {"user": {"id", "username", "email", "firstName", "picture", "role"}}
//	   | {"user": null} (no such user in that account) | {"error": "..."}
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

// DeploymentReply answers a DeploymentRequest: the deployment, nil when there is none,
// or the error that kept the store from answering.
type DeploymentReply struct {
	Deployment *DeploymentInfo `json:"deployment"`
	Error      string          `json:"error,omitempty"`
}

// UserRequest asks for a user of an account by username.
type UserRequest struct {
	AccountID int64  `json:"accountId"`
	Username  string `json:"username"`
}

// UserReply answers a UserRequest (User nil: the account has no such user).
type UserReply struct {
	User  *identity.User `json:"user"`
	Error string         `json:"error,omitempty"`
}

// ErrNotFound means the identity store has no such deployment, or the account no such user.
var ErrNotFound = errors.New("identity: not found")

// Client asks the identity store, through the gateway. A request that finds no
// responder (the gateways reconnecting after losing their NATS server) is sent again
// until one answers or the timeout ends. Every failure to get an answer (no responder
// within the timeout, a timeout, an unreadable reply, the store's own error) wraps
// errs.ErrUnavailable, never ErrNotFound.
type Client struct {
	nc      *nats.Conn
	timeout time.Duration
}

// NewClient returns a client waiting at most timeout (default 2 s) for a reply, retries
// included.
func NewClient(nc *nats.Conn, timeout time.Duration) *Client {
	if timeout <= 0 {
		timeout = 2 * time.Second
	}
	return &Client{nc: nc, timeout: timeout}
}

// Deployment returns deployment id (ErrNotFound when there is none).
func (l *Client) Deployment(ctx context.Context, id int64) (DeploymentInfo, error) {
	var reply DeploymentReply
	if err := l.request(ctx, DeploymentSubject, DeploymentRequest{ID: id}, &reply, &reply.Error); err != nil {
		return DeploymentInfo{}, err
	}
	if reply.Deployment == nil {
		return DeploymentInfo{}, ErrNotFound
	}
	return *reply.Deployment, nil
}

// User returns the account's user with username (ErrNotFound when it has none).
func (l *Client) User(ctx context.Context, accountID int64, username string) (identity.User, error) {
	var reply UserReply
	if err := l.request(ctx, UserSubject, UserRequest{AccountID: accountID, Username: username}, &reply, &reply.Error); err != nil {
		return identity.User{}, err
	}
	if reply.User == nil {
		return identity.User{}, ErrNotFound
	}
	return *reply.User, nil
}

// request sends req on subject with the trace context and decodes the reply; a reply
// that carries an error (replyErr, once decoded) is a failure too.
func (l *Client) request(ctx context.Context, subject string, req, reply any, replyErr *string) error {
	msg := nats.NewMsg(subject)
	msg.Data, _ = json.Marshal(req)
	otel.GetTextMapPropagator().Inject(ctx, propagation.HeaderCarrier(msg.Header))
	ctx, cancel := context.WithTimeout(ctx, l.timeout)
	defer cancel()
	resp, err := natsx.Request(ctx, l.nc, msg)
	if err != nil {
		return errors.Join(errs.ErrUnavailable, fmt.Errorf("%s: %w", subject, err))
	}
	if err := json.Unmarshal(resp.Data, reply); err != nil {
		return errors.Join(errs.ErrUnavailable, fmt.Errorf("%s: an unreadable reply", subject))
	}
	if *replyErr != "" {
		return errors.Join(errs.ErrUnavailable, fmt.Errorf("%s: %s", subject, *replyErr))
	}
	return nil
}

// Directory is what the owner of the identity store answers lookups from.
type Directory interface {
	// LookupDeployment returns a deployment; ErrNotFound when there is none.
	LookupDeployment(ctx context.Context, id int64) (DeploymentInfo, error)
	// LookupUser returns the account's user with username; ErrNotFound when none.
	LookupUser(ctx context.Context, accountID int64, username string) (identity.User, error)
}

// lookupTimeout bounds the work of one answer: the requester stops waiting before.
const lookupTimeout = 5 * time.Second

// maxConcurrentLookups bounds the answers in progress at once on one connection; past
// it, a subscription answers its messages one by one (NATS queues the rest).
const maxConcurrentLookups = 256

const tracerName = "github.com/analyticsco/platform/libs/identity/lookup"

// Serve answers both subjects in the queue group from d, each request in a
// context that continues the requester's trace.
func Serve(nc *nats.Conn, d Directory) ([]*nats.Subscription, error) {
	slots := make(chan struct{}, maxConcurrentLookups)
	serve := func(subject string, answer func(ctx context.Context, data []byte) any) (*nats.Subscription, error) {
		return nc.QueueSubscribe(subject, LookupQueue, func(m *nats.Msg) {
			handle := func() {
				ctx := otel.GetTextMapPropagator().Extract(context.Background(), propagation.HeaderCarrier(m.Header))
				ctx, span := otel.Tracer(tracerName).Start(ctx, subject, trace.WithSpanKind(trace.SpanKindServer))
				defer span.End()
				ctx, cancel := context.WithTimeout(ctx, lookupTimeout)
				defer cancel()
				b, _ := json.Marshal(answer(ctx, m.Data))
				_ = m.Respond(b)
			}
			select {
			case slots <- struct{}{}:
				go func() { defer func() { <-slots }(); handle() }()
			default:
				handle()
			}
		})
	}
	deployments, err := serve(DeploymentSubject, func(ctx context.Context, data []byte) any {
		var req DeploymentRequest
		if json.Unmarshal(data, &req) != nil || req.ID <= 0 {
			return DeploymentReply{Error: `request must be {"id": <positive integer>}`}
		}
		dep, err := d.LookupDeployment(ctx, req.ID)
		switch {
		case errors.Is(err, ErrNotFound):
			return DeploymentReply{}
		case err != nil:
			return DeploymentReply{Error: "the identity store is unavailable"}
		}
		return DeploymentReply{Deployment: &dep}
	})
	if err != nil {
		return nil, err
	}
	users, err := serve(UserSubject, func(ctx context.Context, data []byte) any {
		var req UserRequest
		if json.Unmarshal(data, &req) != nil || req.AccountID <= 0 || req.Username == "" {
			return UserReply{Error: `request must be {"accountId": <positive integer>, "username": <non-empty string>}`}
		}
		u, err := d.LookupUser(ctx, req.AccountID, req.Username)
		switch {
		case errors.Is(err, ErrNotFound):
			return UserReply{}
		case err != nil:
			return UserReply{Error: "the identity store is unavailable"}
		}
		return UserReply{User: &u}
	})
	if err != nil {
		_ = deployments.Unsubscribe()
		return nil, err
	}
	return []*nats.Subscription{deployments, users}, nil
}
