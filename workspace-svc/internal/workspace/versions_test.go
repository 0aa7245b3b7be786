package workspace_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"sync"
	"testing"

	"github.com/analyticsco/platform/libs/errs"
	"github.com/analyticsco/platform/libs/httpx"
	"github.com/analyticsco/platform/workspace-svc/internal/workspace"
)

// publishDraft sets the workbook's draft to one titled title naming reports, and
// publishes it with allowEmbed.
func (f *fixture) publishDraft(wb int64, title string, allowEmbed bool, reports ...int64) *workspace.Dashboard {
	f.t.Helper()
	cfg := draftNaming(reports...)
	cfg.Title = &title
	if _, err := f.svc.UpdateItem(f.ctx, ai, f.dep, workspace.TypeWorkbook, wb, workspace.UpdateItemInput{DashboardDraft: cfg}); err != nil {
		f.t.Fatal(err)
	}
	w, err := f.svc.Publish(f.ctx, ai, f.dep, wb, &allowEmbed)
	if err != nil {
		f.t.Fatalf("publish %q: %v", title, err)
	}
	return w.PublishedDashboard
}

func (f *fixture) versionNumbers(wb int64, first int) []int64 {
	f.t.Helper()
	out := []int64{}
	after := ""
	for {
		pg, err := f.svc.DashboardVersions(f.ctx, ai, f.dep, wb, first, after)
		if err != nil {
			f.t.Fatalf("list versions of %d: %v", wb, err)
		}
		for _, v := range pg.Items {
			out = append(out, v.VersionNumber)
		}
		if !pg.PageInfo.HasNextPage {
			return out
		}
		after = *pg.PageInfo.EndCursor
	}
}

func asJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestRestoreIsANewVersionEqualToTheOld: three publishes are three versions, newest
// first; restoring the first publishes a fourth equal to it (config, snapshots as taken,
// allowEmbed) under the same public id, the draft left alone and no kept version changed.
func TestRestoreIsANewVersionEqualToTheOld(t *testing.T) {
	f := newFixture(t)
	rep := f.item(ai, workspace.TypeReport, "r", 0)
	wb := f.item(ai, workspace.TypeWorkbook, "board", 0)
	v1 := f.publishDraft(wb, "one", true, rep)
	f.publishDraft(wb, "two", false)
	v3 := f.publishDraft(wb, "three", false)
	if got := f.versionNumbers(wb, 2); !reflect.DeepEqual(got, []int64{3, 2, 1}) {
		t.Fatalf("versions %v, want [3 2 1]", got)
	}
	pg, err := f.svc.DashboardVersions(f.ctx, viewer, f.dep, wb, 10, "")
	if err != nil {
		t.Fatalf("a viewer lists versions: %v", err)
	}
	if s := pg.Items[2]; s.VersionNumber != 1 || s.VersionID != v1.VersionID || !s.AllowEmbed || s.Title == nil || *s.Title != "one" ||
		s.PublishedBy != ai.User.ID || s.RestoredFrom != nil || s.PublishedAt.IsZero() {
		t.Fatalf("summary of v1 %+v", s)
	}
	full, err := f.svc.GetDashboardVersion(f.ctx, viewer, f.dep, wb, 1)
	if err != nil {
		t.Fatal(err)
	}
	if asJSON(full.Config) != asJSON(v1.Config) || asJSON(full.ReportSnapshots) != asJSON(v1.ReportSnapshots) || len(full.ReportSnapshots) != 1 {
		t.Fatalf("v1 read %s %s, published %s %s", asJSON(full.Config), asJSON(full.ReportSnapshots), asJSON(v1.Config), asJSON(v1.ReportSnapshots))
	}

	_, err = f.svc.RestoreDashboardVersion(f.ctx, viewer, f.dep, wb, 1)
	wantErr(t, err, errs.Forbidden, "")
	w, err := f.svc.RestoreDashboardVersion(f.ctx, ai, f.dep, wb, 1)
	if err != nil {
		t.Fatal(err)
	}
	v4 := w.PublishedDashboard
	if v4.VersionNumber != 4 || v4.PublicID != v1.PublicID || v4.ID != v1.ID || v4.VersionID == v1.VersionID || !v4.AllowEmbed ||
		asJSON(v4.Config) != asJSON(v1.Config) || asJSON(v4.ReportSnapshots) != asJSON(v1.ReportSnapshots) || v4.Status != workspace.StatusPublished {
		t.Fatalf("restored %s\nfrom %s", asJSON(v4), asJSON(v1))
	}
	if w.DashboardDraft == nil || *w.DashboardDraft.Title != "three" || *w.DashboardPublished.Title != "one" {
		t.Fatalf("draft %s published %s: the draft stays, the published config is v1's", asJSON(w.DashboardDraft), asJSON(w.DashboardPublished))
	}
	if got := f.versionNumbers(wb, 50); !reflect.DeepEqual(got, []int64{4, 3, 2, 1}) {
		t.Fatalf("versions %v, want [4 3 2 1]", got)
	}
	pg, _ = f.svc.DashboardVersions(f.ctx, ai, f.dep, wb, 1, "")
	if s := pg.Items[0]; s.RestoredFrom == nil || *s.RestoredFrom != 1 || s.VersionID != v4.VersionID {
		t.Fatalf("v4 summary %+v", s)
	}
	if old, _ := f.svc.GetDashboardVersion(f.ctx, ai, f.dep, wb, 3); old.VersionID != v3.VersionID || asJSON(old.Config) != asJSON(v3.Config) {
		t.Fatalf("v3 changed: %+v", old)
	}
}

// TestOnlyTheNewestVersionsAreKept: past the retention the oldest go, by the publish
// that went over; one no longer kept is 404 to read and to restore.
func TestOnlyTheNewestVersionsAreKept(t *testing.T) {
	f := newFixture(t)
	f.svc = workspace.NewService(workspace.Ports{Store: f.store}, workspace.Options{Limits: workspace.Limits{DashboardVersionsKept: 2}})
	wb := f.item(ai, workspace.TypeWorkbook, "board", 0)
	for _, title := range []string{"a", "b", "c"} {
		f.publishDraft(wb, title, true)
	}
	if got := f.versionNumbers(wb, 10); !reflect.DeepEqual(got, []int64{3, 2}) {
		t.Fatalf("kept %v, want [3 2]", got)
	}
	_, err := f.svc.GetDashboardVersion(f.ctx, ai, f.dep, wb, 1)
	wantErr(t, err, errs.NotFound, "")
	_, err = f.svc.RestoreDashboardVersion(f.ctx, ai, f.dep, wb, 1)
	wantErr(t, err, errs.NotFound, "")
	if _, err := f.svc.RestoreDashboardVersion(f.ctx, ai, f.dep, wb, 2); err != nil {
		t.Fatal(err)
	}
	if got := f.versionNumbers(wb, 10); !reflect.DeepEqual(got, []int64{4, 3}) {
		t.Fatalf("kept %v, want [4 3]", got)
	}
}

// TestVersionsOfAWorkbookGoneOrElsewhereAreNotFound: a deleted workbook's versions, and
// one of another deployment, are 404; a workbook never published has none; a cursor not
// of this list is 400.
func TestVersionsOfAWorkbookGoneOrElsewhereAreNotFound(t *testing.T) {
	f := newFixture(t)
	wb := f.item(ai, workspace.TypeWorkbook, "board", 0)
	never := f.item(ai, workspace.TypeWorkbook, "never", 0)
	f.publishDraft(wb, "a", true)
	if pg, err := f.svc.DashboardVersions(f.ctx, ai, f.dep, never, 10, ""); err != nil || len(pg.Items) != 0 || pg.PageInfo.HasNextPage {
		t.Fatalf("never published: %+v %v", pg, err)
	}
	_, err := f.svc.RestoreDashboardVersion(f.ctx, ai, f.dep, never, 1)
	wantErr(t, err, errs.NotFound, "")
	_, err = f.svc.DashboardVersions(f.ctx, ai, f.dep, wb, 10, "bm90LWEtY3Vyc29y")
	if !errors.Is(err, httpx.ErrBadCursor) {
		t.Fatalf("a foreign cursor: %v", err)
	}
	_, err = f.svc.DashboardVersions(f.ctx, ai, f.dep+1, wb, 10, "")
	wantErr(t, err, errs.NotFound, "")
	_, err = f.svc.RestoreDashboardVersion(f.ctx, ai, f.dep+1, wb, 1)
	wantErr(t, err, errs.NotFound, "")
	if err := f.svc.DeleteItem(f.ctx, ai, f.dep, workspace.TypeWorkbook, wb); err != nil {
		t.Fatal(err)
	}
	_, err = f.svc.DashboardVersions(f.ctx, ai, f.dep, wb, 10, "")
	wantErr(t, err, errs.NotFound, "")
	_, err = f.svc.GetDashboardVersion(f.ctx, ai, f.dep, wb, 1)
	wantErr(t, err, errs.NotFound, "")
	_, err = f.svc.RestoreDashboardVersion(f.ctx, ai, f.dep, wb, 1)
	wantErr(t, err, errs.NotFound, "")
}

// TestAFailedPublishKeepsNoVersion: a publish whose write of the workbook failed leaves
// no version to list; one that stopped between the workbook and its record is listed
// all the same (the listing commits the record the workbook has).
func TestAFailedPublishKeepsNoVersion(t *testing.T) {
	f := newFixture(t)
	wb := f.item(ai, workspace.TypeWorkbook, "board", 0)
	f.publishDraft(wb, "a", true)
	down := errors.New("down")
	f.store.Fault = func(m string) error {
		if m == "UpdateItem" {
			return down
		}
		return nil
	}
	if _, err := f.svc.Publish(f.ctx, ai, f.dep, wb, nil); !errors.Is(err, down) {
		t.Fatalf("publish over a failing store: %v", err)
	}
	f.store.Fault = nil
	if got := f.versionNumbers(wb, 10); !reflect.DeepEqual(got, []int64{1}) {
		t.Fatalf("after a failed publish %v, want [1]", got)
	}
	f.store.Fault = func(m string) error {
		if m == "CommitDashboardVersion" {
			return down
		}
		return nil
	}
	w, err := f.svc.Publish(f.ctx, ai, f.dep, wb, nil)
	if err != nil {
		t.Fatalf("a publish whose record was not committed is done: %v", err)
	}
	f.store.Fault = nil
	if got := f.versionNumbers(wb, 10); !reflect.DeepEqual(got, []int64{2, 1}) {
		t.Fatalf("after a publish that stopped before its record %v, want [2 1]", got)
	}
	if v, err := f.svc.GetDashboardVersion(f.ctx, ai, f.dep, wb, 2); err != nil || v.VersionID != w.PublishedDashboard.VersionID {
		t.Fatalf("v2 %+v %v, want versionId %d", v, err, w.PublishedDashboard.VersionID)
	}
}

// TestRacingPublishesKeepOneVersionPerNumber: publishes and restores at once each get a
// number of their own; the versions kept are exactly the numbers reached, each the
// versionId the workbook had, and no record of a lost race is left behind.
func TestRacingPublishesKeepOneVersionPerNumber(t *testing.T) {
	f := newFixture(t)
	wb := f.item(ai, workspace.TypeWorkbook, "board", 0)
	f.publishDraft(wb, "a", true)
	var wg sync.WaitGroup
	ids := make(chan int64, 16)
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var w workspace.Workbook
			var err error
			if i%4 == 0 {
				w, err = f.svc.RestoreDashboardVersion(f.ctx, ai, f.dep, wb, 1)
			} else {
				w, err = f.svc.Publish(f.ctx, ai, f.dep, wb, nil)
			}
			if err != nil {
				t.Error(err)
				return
			}
			ids <- w.PublishedDashboard.VersionID
		}()
	}
	wg.Wait()
	close(ids)
	want := map[int64]bool{}
	for id := range ids {
		want[id] = true
	}
	pg, err := f.svc.DashboardVersions(f.ctx, ai, f.dep, wb, 50, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(pg.Items) != 17 {
		t.Fatalf("%d versions kept, want 17", len(pg.Items))
	}
	for i, v := range pg.Items {
		if v.VersionNumber != int64(17-i) {
			t.Fatalf("version %d at %d", v.VersionNumber, i)
		}
		if v.VersionNumber > 1 && !want[v.VersionID] {
			t.Fatalf("version %d has versionId %d, which no publish answered", v.VersionNumber, v.VersionID)
		}
		if pending, _ := f.store.PendingDashboardVersion(f.ctx, f.dep, wb, v.VersionNumber); pending {
			t.Fatalf("a record of a lost race numbered %d is left", v.VersionNumber)
		}
	}
}

// TestTheCurrentVersionRestoresBeforeItsRecordIsCommitted: a publish that stopped before
// committing its record still has its version: a restore of it finds it.
func TestTheCurrentVersionRestoresBeforeItsRecordIsCommitted(t *testing.T) {
	f := newFixture(t)
	wb := f.item(ai, workspace.TypeWorkbook, "board", 0)
	f.store.Fault = func(m string) error {
		if m == "CommitDashboardVersion" {
			return errors.New("down")
		}
		return nil
	}
	v1 := f.publishDraft(wb, "a", false)
	f.store.Fault = nil
	w, err := f.svc.RestoreDashboardVersion(f.ctx, ai, f.dep, wb, 1)
	if err != nil {
		t.Fatalf("restore of a version whose record was left pending: %v", err)
	}
	if d := w.PublishedDashboard; d.VersionNumber != 2 || d.AllowEmbed || asJSON(d.Config) != asJSON(v1.Config) {
		t.Fatalf("restored %s", asJSON(d))
	}
	if got := f.versionNumbers(wb, 10); !reflect.DeepEqual(got, []int64{2, 1}) {
		t.Fatalf("versions %v, want [2 1]", got)
	}
}
