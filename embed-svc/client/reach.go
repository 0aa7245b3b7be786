package client

import (
	"context"
	"errors"
	"time"

	"github.com/analyticsco/platform/libs/errs"
	"github.com/analyticsco/platform/libs/natsx"
)

// The dashboard reach: which published dashboards a viewer would open, and through
// which grant. embed-svc's dry-run mint asks it; workspace-svc, which keeps the
// dashboards and their embed grants, answers it. The contract is here, with the asker,
// so that the module graph stays one way (workspace-svc imports embed-svc/client, never
// the reverse).
const (
	ReachSubject = "workspace.embed.reach"
	ReachQueue   = "workspace-embed-reach"
	// MaxReachDashboards bounds the dashboards one reach answer lists.
	MaxReachDashboards = 100
)

// ValidDashboardPublicID reports whether id has the form of a dashboard's public id:
// 16 base64url characters (12 random bytes), as workspace-svc makes them at the first
// publish. generate-session's resources are format-checked by it.
func ValidDashboardPublicID(id string) bool {
	if len(id) != 16 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// ReachRequest describes a viewer: the deployment and tenant of the session, the
// viewer's groups in each catalog, and the session's narrowing (Resources nil: none).
// An internal user (InternalUserID > 0) is decided by their own role and folder grants,
// not by embed grants.
type ReachRequest struct {
	AccountID       int64     `json:"accountId"`
	DeploymentID    int64     `json:"deploymentId"`
	EmbedTenantName string    `json:"embedTenantName"`
	AccountGroups   []string  `json:"accountGroups"`
	TenantGroups    []string  `json:"tenantGroups"`
	Resources       *[]string `json:"resources,omitempty"`
	InternalUserID  int64     `json:"internalUserId,omitempty"`
	InternalRole    string    `json:"internalRole,omitempty"`
}

// Valid reports whether the request names an account and a deployment and stays within
// its bounds.
func (r ReachRequest) Valid() bool {
	return r.AccountID > 0 && r.DeploymentID > 0 && len(r.AccountGroups) <= 1000 && len(r.TenantGroups) <= 1000 &&
		(r.Resources == nil || len(*r.Resources) <= 50)
}

// ReachSubjectRef is the grant subject that decided a dashboard: {"type": "tenant",
// "embedTenantName": "acme-corp"}, {"type": "group", "scope": "account"|"tenant",
// "embedTenantName"?, "groupName": "finance"}, {"type": "allEmbedUsers"}, or
// {"type": "user"} for an internal user's own access.
type ReachSubjectRef struct {
	Type            string `json:"type"`
	Scope           string `json:"scope,omitempty"`
	EmbedTenantName string `json:"embedTenantName,omitempty"`
	GroupName       string `json:"groupName,omitempty"`
}

// ReachDashboard is one dashboard the viewer would open: accessSource is "tenant",
// "group" or "allEmbedUsers" for a grant on the workbook itself, "folder" for one
// inherited (viaFolderId the folder, or viaRoot), "user" for an internal user's own
// access.
type ReachDashboard struct {
	PublicID     string          `json:"publicId"`
	WorkbookID   int64           `json:"workbookId"`
	Title        *string         `json:"title"`
	AccessSource string          `json:"accessSource"`
	Subject      ReachSubjectRef `json:"subject"`
	ViaFolderID  *int64          `json:"viaFolderId,omitempty"`
	ViaRoot      bool            `json:"viaRoot,omitempty"`
}

// ReachReply lists at most MaxReachDashboards dashboards by workbook id; Truncated when
// the viewer would open more.
type ReachReply struct {
	Dashboards []ReachDashboard `json:"dashboards"`
	Truncated  bool             `json:"truncated"`
}

// ErrReachUnavailable is any failure to get a reach answer.
var ErrReachUnavailable = errors.New("the dashboard reach is unavailable")

// Reach asks workspace-svc which dashboards a viewer would open.
type Reach struct {
	e *natsx.Endpoint[ReachRequest, ReachReply]
}

// NewReach returns a client waiting at most timeout (default 2 s) for a reply.
func NewReach(c *natsx.Client, timeout time.Duration) *Reach {
	return &Reach{e: natsx.NewEndpoint[ReachRequest, ReachReply](c, ReachSubject, timeout)}
}

// Dashboards asks about one viewer; every failure wraps ErrReachUnavailable.
func (r *Reach) Dashboards(ctx context.Context, req ReachRequest) (ReachReply, error) {
	reply, err := r.e.Call(ctx, req)
	if err != nil {
		return ReachReply{}, errors.Join(ErrReachUnavailable, err)
	}
	return reply, nil
}

// ServeReach answers reach requests in the queue group on s with reach; a request that
// is not Valid is answered 400.
func ServeReach(s *natsx.Server, reach func(ctx context.Context, req ReachRequest) (ReachReply, error)) error {
	return natsx.Handle(s, ReachSubject, ReachQueue, func(ctx context.Context, req ReachRequest) (ReachReply, error) {
		if !req.Valid() {
			return ReachReply{}, errs.Invalidf(`request must name accountId and deploymentId, at most 1000 groups per catalog and at most 50 resources`)
		}
		return reach(ctx, req)
	})
}
