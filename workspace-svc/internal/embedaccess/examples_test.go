package embedaccess_test

import (
	"os"
	"regexp"
	"testing"

	"github.com/analyticsco/platform/workspace-svc/internal/embedaccess"
)

// The worked examples of docs/embed-access.md, row by row: the tree root › Sales (10) ›
// EMEA (11) › W, a viewer of tenant acme-corp in the account's group finance and the
// tenant's group managers. TestDocumentedExamples decides each; the doc's table must keep
// the same number of rows, so a row added there is added here.
func TestDocumentedExamples(t *testing.T) {
	const tenant = "acme-corp"
	viewer := embedaccess.Viewer{Tenant: tenant, AccountGroups: []string{"finance"}, TenantGroups: []string{"managers"}}
	finance := func(a embedaccess.Access) embedaccess.GroupEntry {
		return embedaccess.GroupEntry{Scope: embedaccess.ScopeAccount, GroupName: "finance", Access: a}
	}
	managers := func(t string, a embedaccess.Access) embedaccess.GroupEntry {
		return embedaccess.GroupEntry{Scope: embedaccess.ScopeTenant, EmbedTenantName: t, GroupName: "managers", Access: a}
	}
	ten := func(name string, a embedaccess.Access) []embedaccess.TenantEntry {
		return []embedaccess.TenantEntry{{EmbedTenantName: name, Access: a}}
	}
	type want struct {
		read    bool
		source  string
		subject string
		via     int64
		viaRoot bool
	}
	rows := []struct {
		w, emea, sales, root embedaccess.Grants
		want                 want
	}{
		{want: want{}},
		{root: embedaccess.Grants{AllEmbedUsers: embedaccess.Read}, want: want{true, embedaccess.SourceFolder, embedaccess.SourceAllEmbedUsers, 0, true}},
		{sales: embedaccess.Grants{Tenants: ten(tenant, embedaccess.Read)}, want: want{true, embedaccess.SourceFolder, embedaccess.SourceTenant, 10, false}},
		{w: embedaccess.Grants{Tenants: ten(tenant, embedaccess.Read)}, want: want{true, embedaccess.SourceTenant, embedaccess.SourceTenant, 0, false}},
		{w: embedaccess.Grants{Tenants: ten(tenant, embedaccess.None)}, sales: embedaccess.Grants{AllEmbedUsers: embedaccess.Read}, want: want{}},
		{w: embedaccess.Grants{AllEmbedUsers: embedaccess.None, Groups: []embedaccess.GroupEntry{finance(embedaccess.Read)}},
			want: want{true, embedaccess.SourceGroup, embedaccess.SourceGroup, 0, false}},
		{w: embedaccess.Grants{Tenants: ten(tenant, embedaccess.Read), Groups: []embedaccess.GroupEntry{managers(tenant, embedaccess.None)}}, want: want{}},
		{w: embedaccess.Grants{Groups: []embedaccess.GroupEntry{finance(embedaccess.None), managers(tenant, embedaccess.Read)}},
			want: want{true, embedaccess.SourceGroup, embedaccess.SourceGroup, 0, false}},
		{emea: embedaccess.Grants{AllEmbedUsers: embedaccess.None}, root: embedaccess.Grants{Tenants: ten(tenant, embedaccess.Read)}, want: want{}},
		{w: embedaccess.Grants{Groups: []embedaccess.GroupEntry{{Scope: embedaccess.ScopeAccount, GroupName: "sales", Access: embedaccess.Read}}},
			sales: embedaccess.Grants{Tenants: ten(tenant, embedaccess.Read)}, want: want{true, embedaccess.SourceFolder, embedaccess.SourceTenant, 10, false}},
		{w: embedaccess.Grants{Tenants: ten("other-corp", embedaccess.Read)}, want: want{}},
		{w: embedaccess.Grants{Groups: []embedaccess.GroupEntry{managers("other-corp", embedaccess.Read)}},
			root: embedaccess.Grants{AllEmbedUsers: embedaccess.None}, want: want{}},
	}
	doc, err := os.ReadFile("../../../docs/embed-access.md")
	if err != nil {
		t.Fatal(err)
	}
	if n := len(regexp.MustCompile(`(?m)^\| \d+ \|`).FindAll(doc, -1)); n != len(rows) {
		t.Fatalf("docs/embed-access.md has %d worked examples, this test %d: keep them the same", n, len(rows))
	}
	for i, r := range rows {
		chain := []embedaccess.Level{{Grants: r.w}, {Grants: r.emea, FolderID: 11}, {Grants: r.sales, FolderID: 10}, {Grants: r.root, Root: true}}
		d := embedaccess.Decide(viewer, chain)
		got := want{d.Allowed(), d.Source, d.Subject.Type, d.ViaFolderID, d.ViaRoot}
		if !got.read {
			got = want{}
		}
		if got != r.want {
			t.Errorf("example %d: got %+v, want %+v (the doc's row %d)", i+1, got, r.want, i+1)
		}
	}
}
