package storetest

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/analyticsco/platform/workspace-svc/internal/workspace"
)

func init() {
	cases = append(cases, []struct {
		name string
		run  func(t *testing.T, f *fixture)
	}{
		{"dashboard-versions-are-read-only-once-committed", testVersionsCommitted},
		{"dashboard-versions-page-newest-first-per-workbook-and-deployment", testVersionsPage},
		{"dashboard-versions-past-the-retention-are-pruned-by-the-commit", testVersionsPruned},
		{"a-dashboard-version-id-stored-twice-is-id-taken", testVersionIDTaken},
	}...)
}

// version is a record of version n of workbook wb of deploymentID, with a dashboard of its own.
func (f *fixture) version(deploymentID, wb, n int64) *workspace.DashboardVersion {
	title := "v" + string(rune('0'+n%10))
	desc := "description"
	meta := []byte(`{"q":1}`)
	d := &workspace.Dashboard{ID: 40, PublicID: "pub", DeploymentID: deploymentID, WorkbookID: wb, Status: workspace.StatusPublished,
		AllowEmbed: n%2 == 0, VersionNumber: n, VersionID: f.id(), Title: &title, Description: &desc,
		Config:          workspace.DashboardConfig{Title: &title, Description: &desc},
		ReportSnapshots: []workspace.ReportSnapshot{{ID: 9, ReportID: 8, VersionNumber: n, Name: &title, Title: &title, Meta: meta}}}
	return &workspace.DashboardVersion{VersionID: d.VersionID, DeploymentID: deploymentID, WorkbookID: wb, VersionNumber: n, Title: &title,
		AllowEmbed: d.AllowEmbed, PublishedAt: at.Add(time.Duration(n) * time.Second), PublishedBy: 7, RestoredFrom: n / 3, Dashboard: d}
}

func (f *fixture) keep(v *workspace.DashboardVersion, keep int) *workspace.DashboardVersion {
	f.t.Helper()
	f.check(f.s.InsertDashboardVersion(f.ctx, v))
	ok, err := f.s.CommitDashboardVersion(f.ctx, v.DeploymentID, v.WorkbookID, v.VersionID, v.VersionNumber, keep)
	f.check(err)
	if !ok {
		f.t.Fatalf("version %d not committed", v.VersionNumber)
	}
	return v
}

func (f *fixture) listVersions(deploymentID, wb, before int64, limit int) []int64 {
	f.t.Helper()
	vs, err := f.s.DashboardVersions(f.ctx, deploymentID, wb, before, limit)
	f.check(err)
	out := []int64{}
	for _, v := range vs {
		if v.Dashboard != nil {
			f.t.Fatalf("a listed version carries its dashboard")
		}
		out = append(out, v.VersionNumber)
	}
	return out
}

// jsonOf is v as JSON: dashboards compare as stored.
func jsonOf(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func summary(v *workspace.DashboardVersion) workspace.DashboardVersion {
	out := *v
	out.Dashboard = nil
	out.PublishedAt = v.PublishedAt.UTC()
	return out
}

// testVersionsCommitted: a pending record is neither listed nor read (a publish that did
// not happen); committed, it is both, in full; a drop removes only a pending record.
func testVersionsCommitted(t *testing.T, f *fixture) {
	v := f.version(f.deploymentID, 100, 1)
	f.check(f.s.InsertDashboardVersion(f.ctx, v))
	if got := f.listVersions(f.deploymentID, 100, 0, 10); len(got) != 0 {
		t.Fatalf("pending version listed: %v", got)
	}
	if got, err := f.s.DashboardVersion(f.ctx, f.deploymentID, 100, 1); err != nil || got != nil {
		t.Fatalf("pending version read: %+v %v", got, err)
	}
	if pending, err := f.s.PendingDashboardVersion(f.ctx, f.deploymentID, 100, 1); err != nil || !pending {
		t.Fatalf("pending: %v %v, want true", pending, err)
	}
	if ok, err := f.s.CommitDashboardVersion(f.ctx, f.other, 100, v.VersionID, v.VersionNumber, 50); err != nil || ok {
		t.Fatalf("commit from another deployment: %v %v, want false", ok, err)
	}
	if ok, err := f.s.CommitDashboardVersion(f.ctx, f.deploymentID, 101, v.VersionID, v.VersionNumber, 50); err != nil || ok {
		t.Fatalf("commit for another workbook: %v %v, want false", ok, err)
	}
	if ok, err := f.s.CommitDashboardVersion(f.ctx, f.deploymentID, 100, v.VersionID, 2, 50); err != nil || ok {
		t.Fatalf("commit under another number: %v %v, want false", ok, err)
	}
	for range 2 { // idempotent
		ok, err := f.s.CommitDashboardVersion(f.ctx, f.deploymentID, 100, v.VersionID, v.VersionNumber, 50)
		if err != nil || !ok {
			t.Fatalf("commit: %v %v", ok, err)
		}
	}
	if pending, err := f.s.PendingDashboardVersion(f.ctx, f.deploymentID, 100, 1); err != nil || pending {
		t.Fatalf("pending after commit: %v %v, want false", pending, err)
	}
	got, err := f.s.DashboardVersion(f.ctx, f.deploymentID, 100, 1)
	f.check(err)
	if got == nil || !reflect.DeepEqual(summary(got), summary(v)) || jsonOf(got.Dashboard) != jsonOf(v.Dashboard) {
		t.Fatalf("version read\n got %+v %s\nwant %+v %s", got, jsonOf(got.Dashboard), summary(v), jsonOf(v.Dashboard))
	}
	vs, err := f.s.DashboardVersions(f.ctx, f.deploymentID, 100, 0, 10)
	f.check(err)
	if len(vs) != 1 || !reflect.DeepEqual(summary(vs[0]), summary(v)) {
		t.Fatalf("listed %+v, want %+v", vs, summary(v))
	}
	f.check(f.s.DropDashboardVersion(f.ctx, f.deploymentID, 100, v.VersionID))
	if got := f.listVersions(f.deploymentID, 100, 0, 10); len(got) != 1 {
		t.Fatalf("a drop removed a committed version: %v", got)
	}
	// A drop removes a pending one, of its workbook only.
	p := f.version(f.deploymentID, 100, 2)
	f.check(f.s.InsertDashboardVersion(f.ctx, p))
	f.check(f.s.DropDashboardVersion(f.ctx, f.deploymentID, 101, p.VersionID))
	if pending, _ := f.s.PendingDashboardVersion(f.ctx, f.deploymentID, 100, 2); !pending {
		t.Fatal("a drop for another workbook removed the record")
	}
	f.check(f.s.DropDashboardVersion(f.ctx, f.deploymentID, 100, p.VersionID))
	if pending, _ := f.s.PendingDashboardVersion(f.ctx, f.deploymentID, 100, 2); pending {
		t.Fatal("a dropped record is still pending")
	}
	if ok, err := f.s.CommitDashboardVersion(f.ctx, f.deploymentID, 100, p.VersionID, p.VersionNumber, 50); err != nil || ok {
		t.Fatalf("commit of a dropped record: %v %v, want false", ok, err)
	}
}

// testVersionsPage: newest first, below a number, at most limit; other workbooks' and
// deployments' versions stay apart; a purge removes only the workbook's.
func testVersionsPage(t *testing.T, f *fixture) {
	for n := int64(1); n <= 5; n++ {
		f.keep(f.version(f.deploymentID, 200, n), 50)
	}
	f.keep(f.version(f.deploymentID, 201, 1), 50)
	f.keep(f.version(f.other, 200, 9), 50)
	f.check(f.s.InsertDashboardVersion(f.ctx, f.version(f.deploymentID, 200, 6))) // pending: a publish in flight
	for _, c := range []struct {
		before int64
		limit  int
		want   []int64
	}{{0, 10, []int64{5, 4, 3, 2, 1}}, {0, 2, []int64{5, 4}}, {4, 2, []int64{3, 2}}, {2, 10, []int64{1}}, {1, 10, []int64{}}} {
		if got := f.listVersions(f.deploymentID, 200, c.before, c.limit); !reflect.DeepEqual(got, c.want) {
			t.Fatalf("before %d limit %d: %v, want %v", c.before, c.limit, got, c.want)
		}
	}
	if got := f.listVersions(f.other, 200, 0, 10); !reflect.DeepEqual(got, []int64{9}) {
		t.Fatalf("other deployment: %v, want [9]", got)
	}
	if got, err := f.s.DashboardVersion(f.ctx, f.other, 200, 3); err != nil || got != nil {
		t.Fatalf("version 3 from another deployment: %+v %v", got, err)
	}
	f.check(f.s.DeleteDashboardVersions(f.ctx, f.deploymentID, 200))
	if got := f.listVersions(f.deploymentID, 200, 0, 10); len(got) != 0 {
		t.Fatalf("after the purge: %v", got)
	}
	if pending, _ := f.s.PendingDashboardVersion(f.ctx, f.deploymentID, 200, 6); pending {
		t.Fatal("the purge left a pending record")
	}
	if got := f.listVersions(f.deploymentID, 201, 0, 10); !reflect.DeepEqual(got, []int64{1}) {
		t.Fatalf("another workbook after the purge: %v", got)
	}
}

// testVersionsPruned: a commit keeps the keep newest numbers up to its own and removes
// the rest, pending records included.
func testVersionsPruned(t *testing.T, f *fixture) {
	f.check(f.s.InsertDashboardVersion(f.ctx, f.version(f.deploymentID, 300, 1))) // a publish that lost its race
	for n := int64(1); n <= 5; n++ {
		f.keep(f.version(f.deploymentID, 300, n), 3)
	}
	f.keep(f.version(f.deploymentID, 301, 1), 3)
	if got := f.listVersions(f.deploymentID, 300, 0, 10); !reflect.DeepEqual(got, []int64{5, 4, 3}) {
		t.Fatalf("kept %v, want [5 4 3]", got)
	}
	if pending, _ := f.s.PendingDashboardVersion(f.ctx, f.deploymentID, 300, 1); pending {
		t.Fatal("a pending record below the retention was kept")
	}
	if got := f.listVersions(f.deploymentID, 301, 0, 10); !reflect.DeepEqual(got, []int64{1}) {
		t.Fatalf("another workbook pruned: %v", got)
	}
}

// testVersionIDTaken: a record whose versionId is stored is ErrIDTaken, and the stored
// one stays as it was.
func testVersionIDTaken(t *testing.T, f *fixture) {
	v := f.keep(f.version(f.deploymentID, 400, 1), 50)
	again := f.version(f.deploymentID, 400, 2)
	again.VersionID = v.VersionID
	if err := f.s.InsertDashboardVersion(f.ctx, again); !errors.Is(err, workspace.ErrIDTaken) {
		t.Fatalf("insert of a taken versionId: %v, want ErrIDTaken", err)
	}
	if got := f.listVersions(f.deploymentID, 400, 0, 10); !reflect.DeepEqual(got, []int64{1}) {
		t.Fatalf("after the refused insert: %v, want [1]", got)
	}
}
