// Package embedaccess is the embed grant model: which embed viewers may open a
// workbook's published dashboard. Grants sit on a workbook, on folders (reaching
// everything below them) and on a deployment's root (reaching everything); Decide walks
// from the workbook up to the root and the first explicit answer met decides. It is
// pure: the service reads the grants along the walk and the viewer's groups, and asks
// Decide.
package embedaccess

import (
	"slices"

	"github.com/analyticsco/platform/embed-svc/client/contract"
)

// Access is what a grant entry answers: read, or none. "" is no entry (inherit).
type Access string

// The two answers of a grant entry.
const (
	Read Access = "read"
	None Access = "none"
)

// The group catalogs a group entry names (embed-svc's scopes).
const (
	ScopeAccount = contract.ScopeAccount
	ScopeTenant  = contract.ScopeTenant
)

// The accessSource of a decision, and the subject types.
const (
	SourceTenant        = "tenant"
	SourceGroup         = "group"
	SourceAllEmbedUsers = "allEmbedUsers"
	SourceFolder        = "folder" // inherited from a folder or the root
	SourceUser          = "user"   // an internal user's own access (roles and folder grants)
)

// TenantEntry is a grant to every viewer of one embed tenant.
type TenantEntry struct {
	EmbedTenantName string `json:"embedTenantName"`
	Access          Access `json:"access"`
}

// GroupEntry is a grant to the members of one group: of the account's catalog (scope
// account, no tenant) or of one tenant's (scope tenant, EmbedTenantName set).
type GroupEntry struct {
	Scope           string `json:"scope"`
	EmbedTenantName string `json:"embedTenantName,omitempty"`
	GroupName       string `json:"groupName"`
	Access          Access `json:"access"`
}

// Grants are one object's own embed grants. A missing key or entry is no entry here
// (the object inherits), never none.
type Grants struct {
	AllEmbedUsers Access        `json:"allEmbedUsers,omitempty"`
	Tenants       []TenantEntry `json:"tenants"`
	Groups        []GroupEntry  `json:"groups"`
}

// Empty reports whether g has no entry at all.
func (g Grants) Empty() bool {
	return g.AllEmbedUsers == "" && len(g.Tenants) == 0 && len(g.Groups) == 0
}

// Entries is the number of g's entries (allEmbedUsers, tenants and groups).
func (g Grants) Entries() int {
	n := len(g.Tenants) + len(g.Groups)
	if g.AllEmbedUsers != "" {
		n++
	}
	return n
}

// Viewer is an external embed viewer as a decision needs it: the session's embed tenant
// and the names of the groups the user is a member of now, in each catalog.
type Viewer struct {
	Tenant        string
	AccountGroups []string
	TenantGroups  []string
}

// Level is one object along the walk from a workbook to the root: the workbook itself,
// a folder above it (FolderID), or the root.
type Level struct {
	Grants   Grants
	FolderID int64 // the folder, 0 for the workbook itself and for the root
	Root     bool
}

// Subject is the grant entry that decided: {"type": "tenant"|"group"|"allEmbedUsers"}
// with the tenant or group it names.
type Subject = contract.ReachSubjectRef

// Decision is the outcome of a walk: Access read or none ("" when no object along it has
// an entry for the viewer: no access), the entry that decided (Subject) and where it was
// (Source: the subject's type on the workbook itself, SourceFolder when inherited, from
// ViaFolderID or ViaRoot).
type Decision struct {
	Access      Access
	Source      string
	Subject     Subject
	ViaFolderID int64
	ViaRoot     bool
}

// Allowed reports whether the decision lets the viewer open the dashboard.
func (d Decision) Allowed() bool { return d.Access == Read }

// Decide walks chain (the workbook first, then its folders from the nearest up, then
// the root) and answers the first explicit read or none met for v. At each object the
// most specific entry matching v decides: a group of theirs (any read among their groups'
// entries wins over none), then their tenant, then allEmbedUsers.
func Decide(v Viewer, chain []Level) Decision {
	for _, l := range chain {
		access, subj, ok := match(v, l.Grants)
		if !ok {
			continue
		}
		d := Decision{Access: access, Subject: subj, Source: subj.Type}
		if l.Root || l.FolderID != 0 {
			d.Source, d.ViaFolderID, d.ViaRoot = SourceFolder, l.FolderID, l.Root
		}
		return d
	}
	return Decision{}
}

// match is one object's answer for v: its most specific matching entry.
func match(v Viewer, g Grants) (Access, Subject, bool) {
	var none *GroupEntry
	for i := range g.Groups {
		e := &g.Groups[i]
		if !memberOf(v, e) {
			continue
		}
		if e.Access == Read {
			return Read, groupSubject(e), true
		}
		if none == nil {
			none = e
		}
	}
	if none != nil {
		return None, groupSubject(none), true
	}
	if v.Tenant != "" {
		for _, e := range g.Tenants {
			if e.EmbedTenantName == v.Tenant {
				return e.Access, Subject{Type: SourceTenant, EmbedTenantName: e.EmbedTenantName}, true
			}
		}
	}
	if g.AllEmbedUsers != "" {
		return g.AllEmbedUsers, Subject{Type: SourceAllEmbedUsers}, true
	}
	return "", Subject{}, false
}

// memberOf reports whether v is a current member of the group e names.
func memberOf(v Viewer, e *GroupEntry) bool {
	switch e.Scope {
	case ScopeAccount:
		return slices.Contains(v.AccountGroups, e.GroupName)
	case ScopeTenant:
		return v.Tenant != "" && e.EmbedTenantName == v.Tenant && slices.Contains(v.TenantGroups, e.GroupName)
	}
	return false
}

func groupSubject(e *GroupEntry) Subject {
	return Subject{Type: SourceGroup, Scope: e.Scope, EmbedTenantName: e.EmbedTenantName, GroupName: e.GroupName}
}

// TenantReach is a tenant's effective access along chain, as an admin's listing of the
// tenant's workbooks shows it: what a viewer of the tenant without groups gets, or else,
// when some group's members read it (a group of the account's catalog, or of the
// tenant's), the first such group's decision. False when no viewer of the tenant reads it.
func TenantReach(tenant string, chain []Level) (Decision, bool) {
	if d := Decide(Viewer{Tenant: tenant}, chain); d.Allowed() {
		return d, true
	}
	for _, l := range chain {
		for _, e := range l.Grants.Groups {
			if e.Access != Read || e.Scope == ScopeTenant && e.EmbedTenantName != tenant {
				continue
			}
			v := Viewer{Tenant: tenant}
			if e.Scope == ScopeAccount {
				v.AccountGroups = []string{e.GroupName}
			} else {
				v.TenantGroups = []string{e.GroupName}
			}
			if d := Decide(v, chain); d.Allowed() {
				return d, true
			}
		}
	}
	return Decision{}, false
}
