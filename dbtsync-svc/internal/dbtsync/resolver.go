package dbtsync

import (
	"context"
	"encoding/json"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
)

// Branch resolution for embed-svc over NATS request-reply.
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

// ResolveReply is {"exists": true, "served": false, "production": false} or {"error": "..."}.
type ResolveReply struct {
	Exists     bool   `json:"exists"`
	Served     bool   `json:"served"`
	Production bool   `json:"production"`
	Error      string `json:"error,omitempty"`
}

// ServeResolver answers resolve requests in the queue group, so API replicas share them.
func ServeResolver(nc *nats.Conn, store *Store, logger *slog.Logger) (*nats.Subscription, error) {
	return nc.QueueSubscribe(ResolveSubject, ResolveQueue, func(m *nats.Msg) {
		var req ResolveRequest
		var reply ResolveReply
		if err := json.Unmarshal(m.Data, &req); err != nil || req.DeploymentID <= 0 || req.BranchName == "" || req.ProductionBranch == "" {
			reply.Error = "request must be {\"deploymentId\": <positive integer>, \"branchName\": <string>, \"productionBranch\": <string>}"
		} else {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			exists, served, prod, err := store.Resolve(ctx, req.DeploymentID, req.BranchName, req.ProductionBranch)
			cancel()
			if err != nil {
				logger.Warn("resolve branch", "err", err)
				reply.Error = "branch lookup failed: data-model store unavailable"
			} else {
				reply = ResolveReply{Exists: exists, Served: served, Production: prod}
			}
		}
		b, _ := json.Marshal(reply)
		_ = m.Respond(b)
	})
}
