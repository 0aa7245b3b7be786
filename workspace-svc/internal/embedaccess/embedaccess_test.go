package embedaccess_test

import (
	"testing"

	"github.com/analyticsco/platform/workspace-svc/internal/embedaccess"
)

const (
	read = embedaccess.Read
	none = embedaccess.None
)

func tenant(name string, a embedaccess.Access) embedaccess.TenantEntry {
	return embedaccess.TenantEntry{EmbedTenantName: name, Access: a}
}

func accountGroup(name string, a embedaccess.Access) embedaccess.GroupEntry {
	return embedaccess.GroupEntry{Scope: embedaccess.ScopeAccount, GroupName: name, Access: a}
}

func tenantGroup(t, name string, a embedaccess.Access) embedaccess.GroupEntry {
	return embedaccess.GroupEntry{Scope: embedaccess.ScopeTenant, EmbedTenantName: t, GroupName: name, Access: a}
}

// walk is a workbook's chain: its own grants, the folders above it nearest first (ids 11,
// 12, ...), the root.
func walk(wb embedaccess.Grants, root embedaccess.Grants, folders ...embedaccess.Grants) []embedaccess.Level {
	chain := []embedaccess.Level{{Grants: wb}}
	for i, f := range folders {
		chain = append(chain, embedaccess.Level{Grants: f, FolderID: int64(11 + i)})
	}
	return append(chain, embedaccess.Level{Grants: root, Root: true})
}

var (
	acme    = "acme-corp"
	globex  = "globex-inc"
	noGrant = embedaccess.Grants{}
)

// TestDecidePrecedence: at each object the most specific entry matching the viewer
// decides (a group of theirs, then their tenant, then allEmbedUsers; read between two of
// their groups), the nearest object with an entry decides, and no entry anywhere is no
// access.
func TestDecidePrecedence(t *testing.T) {
	sales := embedaccess.Viewer{Tenant: acme, AccountGroups: []string{"sales"}}
	for _, c := range []struct {
		name   string
		viewer embedaccess.Viewer
		chain  []embedaccess.Level
		want   embedaccess.Decision
	}{
		{"a group over the tenant over allEmbedUsers at one object", sales,
			walk(embedaccess.Grants{AllEmbedUsers: none, Tenants: []embedaccess.TenantEntry{tenant(acme, none)},
				Groups: []embedaccess.GroupEntry{accountGroup("sales", read)}}, noGrant),
			embedaccess.Decision{Access: read, Source: "group", Subject: embedaccess.Subject{Type: "group", Scope: "account", GroupName: "sales"}}},
		{"a group's none over the tenant's read", sales,
			walk(embedaccess.Grants{Tenants: []embedaccess.TenantEntry{tenant(acme, read)}, Groups: []embedaccess.GroupEntry{accountGroup("sales", none)}}, noGrant),
			embedaccess.Decision{Access: none, Source: "group", Subject: embedaccess.Subject{Type: "group", Scope: "account", GroupName: "sales"}}},
		{"the tenant over allEmbedUsers", embedaccess.Viewer{Tenant: acme},
			walk(embedaccess.Grants{AllEmbedUsers: read, Tenants: []embedaccess.TenantEntry{tenant(acme, none)}}, noGrant),
			embedaccess.Decision{Access: none, Source: "tenant", Subject: embedaccess.Subject{Type: "tenant", EmbedTenantName: acme}}},
		{"allEmbedUsers when nothing more specific matches", embedaccess.Viewer{Tenant: acme},
			walk(embedaccess.Grants{AllEmbedUsers: read, Tenants: []embedaccess.TenantEntry{tenant(globex, none)}}, noGrant),
			embedaccess.Decision{Access: read, Source: "allEmbedUsers", Subject: embedaccess.Subject{Type: "allEmbedUsers"}}},
		{"read wins between two of the viewer's groups", embedaccess.Viewer{Tenant: acme, AccountGroups: []string{"a", "b"}},
			walk(embedaccess.Grants{Groups: []embedaccess.GroupEntry{accountGroup("a", none), accountGroup("b", read)}}, noGrant),
			embedaccess.Decision{Access: read, Source: "group", Subject: embedaccess.Subject{Type: "group", Scope: "account", GroupName: "b"}}},
		{"read wins between groups of the two catalogs", embedaccess.Viewer{Tenant: acme, AccountGroups: []string{"a"}, TenantGroups: []string{"t"}},
			walk(embedaccess.Grants{Groups: []embedaccess.GroupEntry{accountGroup("a", none), tenantGroup(acme, "t", read)}}, noGrant),
			embedaccess.Decision{Access: read, Source: "group", Subject: embedaccess.Subject{Type: "group", Scope: "tenant", EmbedTenantName: acme, GroupName: "t"}}},
		{"the nearest object decides: the workbook's none over the folder's read", embedaccess.Viewer{Tenant: acme},
			walk(embedaccess.Grants{Tenants: []embedaccess.TenantEntry{tenant(acme, none)}}, embedaccess.Grants{AllEmbedUsers: read},
				embedaccess.Grants{AllEmbedUsers: read}),
			embedaccess.Decision{Access: none, Source: "tenant", Subject: embedaccess.Subject{Type: "tenant", EmbedTenantName: acme}}},
		{"the nearest object decides even with a less specific entry", sales,
			walk(embedaccess.Grants{AllEmbedUsers: none}, noGrant, embedaccess.Grants{Groups: []embedaccess.GroupEntry{accountGroup("sales", read)}}),
			embedaccess.Decision{Access: none, Source: "allEmbedUsers", Subject: embedaccess.Subject{Type: "allEmbedUsers"}}},
		{"explicit none at the workbook overrides read above", embedaccess.Viewer{Tenant: acme},
			walk(embedaccess.Grants{AllEmbedUsers: none}, embedaccess.Grants{Tenants: []embedaccess.TenantEntry{tenant(acme, read)}},
				embedaccess.Grants{Tenants: []embedaccess.TenantEntry{tenant(acme, read)}}),
			embedaccess.Decision{Access: none, Source: "allEmbedUsers", Subject: embedaccess.Subject{Type: "allEmbedUsers"}}},
		{"inherited from the second folder up", embedaccess.Viewer{Tenant: acme},
			walk(noGrant, embedaccess.Grants{AllEmbedUsers: none}, noGrant, embedaccess.Grants{Tenants: []embedaccess.TenantEntry{tenant(acme, read)}}),
			embedaccess.Decision{Access: read, Source: "folder", Subject: embedaccess.Subject{Type: "tenant", EmbedTenantName: acme}, ViaFolderID: 12}},
		{"inherited from the root", embedaccess.Viewer{Tenant: acme},
			walk(noGrant, embedaccess.Grants{AllEmbedUsers: read}, noGrant),
			embedaccess.Decision{Access: read, Source: "folder", Subject: embedaccess.Subject{Type: "allEmbedUsers"}, ViaRoot: true}},
		{"an entry for someone else is no entry: the object above decides", embedaccess.Viewer{Tenant: acme},
			walk(embedaccess.Grants{Tenants: []embedaccess.TenantEntry{tenant(globex, read)}}, noGrant, embedaccess.Grants{Tenants: []embedaccess.TenantEntry{tenant(acme, none)}}),
			embedaccess.Decision{Access: none, Source: "folder", Subject: embedaccess.Subject{Type: "tenant", EmbedTenantName: acme}, ViaFolderID: 11}},
		{"no entry anywhere: no access", sales, walk(noGrant, noGrant, noGrant, noGrant), embedaccess.Decision{}},
		{"a tenant-scope group of another tenant does not match", embedaccess.Viewer{Tenant: acme, TenantGroups: []string{"ops"}},
			walk(embedaccess.Grants{Groups: []embedaccess.GroupEntry{tenantGroup(globex, "ops", read)}}, noGrant),
			embedaccess.Decision{}},
		{"a tenant-scope group does not match an account group of that name", embedaccess.Viewer{Tenant: acme, AccountGroups: []string{"ops"}},
			walk(embedaccess.Grants{Groups: []embedaccess.GroupEntry{tenantGroup(acme, "ops", read)}}, noGrant),
			embedaccess.Decision{}},
		{"an account-scope group matches whatever the viewer's tenant", embedaccess.Viewer{Tenant: globex, AccountGroups: []string{"ops"}},
			walk(embedaccess.Grants{Groups: []embedaccess.GroupEntry{accountGroup("ops", read)}}, noGrant),
			embedaccess.Decision{Access: read, Source: "group", Subject: embedaccess.Subject{Type: "group", Scope: "account", GroupName: "ops"}}},
		{"an account-scope group matches a viewer without a tenant", embedaccess.Viewer{AccountGroups: []string{"ops"}},
			walk(embedaccess.Grants{Groups: []embedaccess.GroupEntry{accountGroup("ops", read)}}, noGrant),
			embedaccess.Decision{Access: read, Source: "group", Subject: embedaccess.Subject{Type: "group", Scope: "account", GroupName: "ops"}}},
		{"an empty tenant matches no tenant entry and no tenant group", embedaccess.Viewer{TenantGroups: []string{"ops"}},
			walk(embedaccess.Grants{Tenants: []embedaccess.TenantEntry{{EmbedTenantName: "", Access: read}},
				Groups: []embedaccess.GroupEntry{tenantGroup("", "ops", read)}}, noGrant),
			embedaccess.Decision{}},
		{"an empty tenant still gets allEmbedUsers", embedaccess.Viewer{},
			walk(noGrant, embedaccess.Grants{AllEmbedUsers: read}),
			embedaccess.Decision{Access: read, Source: "folder", Subject: embedaccess.Subject{Type: "allEmbedUsers"}, ViaRoot: true}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := embedaccess.Decide(c.viewer, c.chain)
			if got != c.want {
				t.Fatalf("Decide: %+v, want %+v", got, c.want)
			}
			if got.Allowed() != (c.want.Access == read) {
				t.Fatalf("Allowed %v for %+v", got.Allowed(), got)
			}
		})
	}
}

// TestTenantReach: what a viewer of the tenant without groups reads, or else the first
// group of theirs (either catalog) whose members read it.
func TestTenantReach(t *testing.T) {
	for _, c := range []struct {
		name   string
		tenant string
		chain  []embedaccess.Level
		want   embedaccess.Decision
		ok     bool
	}{
		{"the tenant's own read", acme, walk(embedaccess.Grants{Tenants: []embedaccess.TenantEntry{tenant(acme, read)}}, noGrant),
			embedaccess.Decision{Access: read, Source: "tenant", Subject: embedaccess.Subject{Type: "tenant", EmbedTenantName: acme}}, true},
		{"allEmbedUsers from the root", acme, walk(noGrant, embedaccess.Grants{AllEmbedUsers: read}),
			embedaccess.Decision{Access: read, Source: "folder", Subject: embedaccess.Subject{Type: "allEmbedUsers"}, ViaRoot: true}, true},
		{"the tenant's none: not reached", acme, walk(embedaccess.Grants{Tenants: []embedaccess.TenantEntry{tenant(acme, none)}}, embedaccess.Grants{AllEmbedUsers: read}),
			embedaccess.Decision{}, false},
		{"a group of the tenant's catalog reads it", acme, walk(embedaccess.Grants{AllEmbedUsers: none, Groups: []embedaccess.GroupEntry{tenantGroup(acme, "ops", read)}}, noGrant),
			embedaccess.Decision{Access: read, Source: "group", Subject: embedaccess.Subject{Type: "group", Scope: "tenant", EmbedTenantName: acme, GroupName: "ops"}}, true},
		{"a group of another tenant's catalog does not", acme, walk(embedaccess.Grants{Groups: []embedaccess.GroupEntry{tenantGroup(globex, "ops", read)}}, noGrant),
			embedaccess.Decision{}, false},
		{"an account group reads it through a folder", acme,
			walk(noGrant, noGrant, embedaccess.Grants{Groups: []embedaccess.GroupEntry{accountGroup("all-staff", read)}}),
			embedaccess.Decision{Access: read, Source: "folder", Subject: embedaccess.Subject{Type: "group", Scope: "account", GroupName: "all-staff"}, ViaFolderID: 11}, true},
		{"a group's read above a nearer none for the tenant: the nearer none decides", acme,
			walk(embedaccess.Grants{Tenants: []embedaccess.TenantEntry{tenant(acme, none)}}, noGrant, embedaccess.Grants{Groups: []embedaccess.GroupEntry{accountGroup("ops", read)}}),
			embedaccess.Decision{}, false},
		{"nothing anywhere", acme, walk(noGrant, noGrant, noGrant), embedaccess.Decision{}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, ok := embedaccess.TenantReach(c.tenant, c.chain)
			if ok != c.ok || got != c.want {
				t.Fatalf("TenantReach: %+v %v, want %+v %v", got, ok, c.want, c.ok)
			}
		})
	}
}

// TestGrantsEntries: allEmbedUsers, tenants and groups each count; nothing is Empty.
func TestGrantsEntries(t *testing.T) {
	g := embedaccess.Grants{AllEmbedUsers: read, Tenants: []embedaccess.TenantEntry{tenant(acme, read)}, Groups: []embedaccess.GroupEntry{accountGroup("a", none)}}
	if g.Entries() != 3 || g.Empty() {
		t.Fatalf("%+v: %d entries, empty %v", g, g.Entries(), g.Empty())
	}
	if (embedaccess.Grants{}).Entries() != 0 || !(embedaccess.Grants{Tenants: []embedaccess.TenantEntry{}}).Empty() {
		t.Fatal("no entries is empty")
	}
}
