// Package client is embed-svc's published contract with other services: the embed
// viewer lookup over NATS request-reply (subject, messages, a client and the server's
// handler shape), and the grammar of the names embed-svc keeps (embed tenants, group
// definitions), which a service that stores those names checks the same way.
// workspace-svc imports it to learn an embed viewer's current group memberships when it
// decides which dashboards the viewer may open; embed-svc serves it. Both sides are
// libs/natsx's request-reply (spans, timeouts, caps, metrics, typed error answers).
package client

import (
	"context"
	"errors"
	"regexp"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/analyticsco/platform/libs/errs"
	"github.com/analyticsco/platform/libs/natsx"
)

// The viewer lookup's subject, and the queue group its replicas share.
const (
	ViewerSubject = "embed.viewer.groups"
	ViewerQueue   = "embed-viewer"
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

// ViewerRequest is {"accountId": 1, "embedTenantName": "acme-corp", "externalId": "u-1"}:
// the external user of an account, and the embed tenant of the session asking.
type ViewerRequest struct {
	AccountID       int64  `json:"accountId"`
	EmbedTenantName string `json:"embedTenantName"`
	ExternalID      string `json:"externalId"`
}

// Valid reports whether the request names an account and an external user.
func (r ViewerRequest) Valid() bool { return r.AccountID > 0 && r.ExternalID != "" && len(r.ExternalID) <= 1024 }

// ViewerReply is {"accountGroups": ["finance"], "tenantGroups": ["managers"]}: the
// names of the groups the user is a member of now, in the account's catalog and in the
// tenant's (none when the request named no tenant). A user embed-svc does not know has
// none; a failure is an error answer (natsx: errs' model across the wire).
type ViewerReply struct {
	AccountGroups []string `json:"accountGroups"`
	TenantGroups  []string `json:"tenantGroups"`
}

// ErrUnavailable is any failure to get an answer: no responder within the timeout, a
// timeout, a busy or unreadable answer or the lookup's own error (its store
// unavailable). It never means the user has no groups.
var ErrUnavailable = errors.New("the embed viewer lookup is unavailable")

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
