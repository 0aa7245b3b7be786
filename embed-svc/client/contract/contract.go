// Package contract is the transport-free part of embed-svc's published contract: the
// messages of its request-reply endpoints, the grammar of the names it keeps (embed
// tenants, group definitions, dashboards' public ids) and the errors a client reports. A
// domain package that names these (workspace-svc's embed grants and read path) imports
// this package and links no NATS client; package client, one level up, carries them
// over NATS.
package contract

import (
	"errors"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"
)

// The viewer lookup's subject, and the queue group its replicas share.
const (
	ViewerSubject = "embed.viewer.groups"
	ViewerQueue   = "embed-viewer"
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

// The group catalogs a membership is in: the account's, or an embed tenant's.
const (
	ScopeAccount = "account"
	ScopeTenant  = "tenant"
)

var tenantNamePattern = regexp.MustCompile(`^[a-z][a-z0-9-]{3,34}[a-z0-9]$`)

// MaxDefinitionNameLength bounds a group or attribute definition's name, in bytes.
const MaxDefinitionNameLength = 255

// ValidTenantName reports whether name is a well-formed embed tenant name: lowercase, 5
// to 36 characters, starting with a letter, ending with a letter or digit, only a-z, 0-9
// and -.
func ValidTenantName(name string) bool { return tenantNamePattern.MatchString(name) }

// ValidGroupName reports whether name can name a group definition: not blank, at most
// MaxDefinitionNameLength bytes of valid UTF-8, no control character.
func ValidGroupName(name string) bool {
	if strings.TrimSpace(name) == "" || len(name) > MaxDefinitionNameLength || !utf8.ValidString(name) {
		return false
	}
	return !strings.ContainsFunc(name, unicode.IsControl)
}

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

// ViewerRequest is {"accountId": 1, "embedTenantName": "acme-corp", "externalId": "u-1"}:
// the external user of an account, and the embed tenant of the session asking.
type ViewerRequest struct {
	AccountID       int64  `json:"accountId"`
	EmbedTenantName string `json:"embedTenantName"`
	ExternalID      string `json:"externalId"`
}

// Valid reports whether the request names an account and an external user.
func (r ViewerRequest) Valid() bool {
	return r.AccountID > 0 && r.ExternalID != "" && len(r.ExternalID) <= 1024
}

// ViewerReply is {"accountGroups": ["finance"], "tenantGroups": ["managers"]}: the
// names of the groups the user is a member of now, in the account's catalog and in the
// tenant's (none when the request named no tenant). A user embed-svc does not know has
// none; a failure is an error answer (natsx: errs' model across the wire).
type ViewerReply struct {
	AccountGroups []string `json:"accountGroups"`
	TenantGroups  []string `json:"tenantGroups"`
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

// ErrUnavailable is any failure to get a viewer lookup's answer: no responder within
// the timeout, a timeout, a busy or unreadable answer or the lookup's own error (its
// store unavailable). It never means the user has no groups.
var ErrUnavailable = errors.New("the embed viewer lookup is unavailable")

// ErrReachUnavailable is any failure to get a reach answer.
var ErrReachUnavailable = errors.New("the dashboard reach is unavailable")
