// Package client is dbtsync-svc's published contract with other services: the branch
// resolver over NATS request-reply (subject, messages, a client and the server's
// handler shape). embed-svc imports it to ask whether a deployment's branch exists and
// is served; dbtsync-svc serves it. Both sides carry the trace context in the message
// headers.
package client

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"

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

// ResolveReply is {"exists": true, "served": false, "production": false} or {"error": "..."}.
type ResolveReply struct {
	Exists     bool   `json:"exists"`
	Served     bool   `json:"served"`
	Production bool   `json:"production"`
	Error      string `json:"error,omitempty"`
}

// ErrUnavailable is any failure to get an answer: no responder within the timeout, a
// timeout, an unreadable reply or the resolver's own error (its store unavailable). It
// never means the branch does not exist.
var ErrUnavailable = errors.New("the branch resolver is unavailable")

// Resolver asks dbtsync-svc about branches.
type Resolver struct {
	nc      *nats.Conn
	timeout time.Duration
}

// NewResolver returns a client waiting at most timeout (default 2 s) for a reply. A
// request that finds no responder (the API replicas reconnecting after losing their NATS
// server, or restarting) is sent again until one answers within that time.
func NewResolver(nc *nats.Conn, timeout time.Duration) *Resolver {
	if timeout <= 0 {
		timeout = 2 * time.Second
	}
	return &Resolver{nc: nc, timeout: timeout}
}

// Resolve asks about one branch; every failure wraps ErrUnavailable.
func (r *Resolver) Resolve(ctx context.Context, req ResolveRequest) (ResolveReply, error) {
	body, _ := json.Marshal(req)
	msg := nats.NewMsg(ResolveSubject)
	msg.Data = body
	otel.GetTextMapPropagator().Inject(ctx, propagation.HeaderCarrier(msg.Header))
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	resp, err := natsx.Request(ctx, r.nc, msg)
	if err != nil {
		return ResolveReply{}, errors.Join(ErrUnavailable, err)
	}
	var reply ResolveReply
	if err := json.Unmarshal(resp.Data, &reply); err != nil {
		return ResolveReply{}, errors.Join(ErrUnavailable, errors.New("an unreadable reply"))
	}
	if reply.Error != "" {
		return ResolveReply{}, errors.Join(ErrUnavailable, errors.New(reply.Error))
	}
	return reply, nil
}

// Serve answers resolve requests in the queue group with resolve, in a context that
// continues the requester's trace.
func Serve(nc *nats.Conn, resolve func(ctx context.Context, req ResolveRequest) ResolveReply) (*nats.Subscription, error) {
	return nc.QueueSubscribe(ResolveSubject, ResolveQueue, func(m *nats.Msg) {
		ctx := otel.GetTextMapPropagator().Extract(context.Background(), propagation.HeaderCarrier(m.Header))
		var req ResolveRequest
		var reply ResolveReply
		if err := json.Unmarshal(m.Data, &req); err != nil || !req.Valid() {
			reply.Error = `request must be {"deploymentId": <positive integer>, "branchName": <string>, "productionBranch": <string>}`
		} else {
			reply = resolve(ctx, req)
		}
		b, _ := json.Marshal(reply)
		_ = m.Respond(b)
	})
}
