package storetest

import (
	"reflect"
	"testing"
	"time"

	"github.com/analyticsco/platform/workspace-svc/internal/workspace"
)

// testPromotionLinks: a link is made once (a second first promotion gets the first one's
// workbook), and its workbook and each report's target change only from what the
// caller saw (compare-and-set); links are per source workbook and target deployment.
func testPromotionLinks(t *testing.T, f *fixture) {
	wb, target := f.id(), f.other
	l, err := f.s.PromotionLink(f.ctx, f.deploymentID, wb, target)
	f.check(err)
	if l != nil {
		t.Fatalf("a link before any promotion: %+v", l)
	}
	l, err = f.s.LinkPromotionWorkbook(f.ctx, f.deploymentID, wb, target, 0, 100)
	f.check(err)
	if l == nil || l.Workbook != 100 || len(l.Reports) != 0 {
		t.Fatalf("first link: %+v, want workbook 100 and no reports", l)
	}
	if l, err = f.s.LinkPromotionWorkbook(f.ctx, f.deploymentID, wb, target, 0, 101); err != nil || l.Workbook != 100 {
		t.Fatalf("a second first link: %+v %v, want the first one's workbook 100", l, err)
	}
	if l, err = f.s.LinkPromotionWorkbook(f.ctx, f.deploymentID, wb, target, 99, 102); err != nil || l.Workbook != 100 {
		t.Fatalf("a change from a stale workbook: %+v %v, want 100 kept", l, err)
	}
	if l, err = f.s.LinkPromotionWorkbook(f.ctx, f.deploymentID, wb, target, 100, 103); err != nil || l.Workbook != 103 {
		t.Fatalf("a change from the current workbook: %+v %v, want 103", l, err)
	}
	for _, c := range []struct {
		report, was, id, want int64
	}{{7, 0, 200, 200}, {7, 0, 201, 200}, {7, 5, 202, 200}, {7, 200, 203, 203}, {8, 0, 300, 300}} {
		l, err = f.s.LinkPromotionReport(f.ctx, f.deploymentID, wb, target, c.report, c.was, c.id)
		f.check(err)
		if got := l.Reports[c.report]; got != c.want {
			t.Fatalf("report %d from %d to %d: links %d, want %d", c.report, c.was, c.id, got, c.want)
		}
	}
	l, err = f.s.PromotionLink(f.ctx, f.deploymentID, wb, target)
	f.check(err)
	if want := (&workspace.PromotionLink{Workbook: 103, Reports: map[int64]int64{7: 203, 8: 300}}); !reflect.DeepEqual(l, want) {
		t.Fatalf("link read back: %+v, want %+v", l, want)
	}
	for _, other := range []struct{ deploymentID, wb, target int64 }{{f.other, wb, target}, {f.deploymentID, wb + 1, target}, {f.deploymentID, wb, f.deploymentID}} {
		if l, err := f.s.PromotionLink(f.ctx, other.deploymentID, other.wb, other.target); err != nil || l != nil {
			t.Fatalf("link of %+v: %+v %v, want none", other, l, err)
		}
	}
}

// testPromotionHistory: a workbook's promotions list newest first (by time, then id) in
// pages, only that workbook's of that deployment, each as recorded.
func testPromotionHistory(t *testing.T, f *fixture) {
	wb := f.id()
	add := func(deploymentID, wb, id int64, at time.Time) *workspace.Promotion {
		pr := &workspace.Promotion{ID: id, DeploymentID: deploymentID, WorkbookID: wb, TargetDeploymentID: f.other, TargetFolderID: 4, TargetWorkbookID: 9,
			By: 7, At: at, SourceHash: "s", TargetHash: "t", Result: workspace.PromotionUpdated, Published: true,
			Reports: []workspace.PromotedReport{{SourceID: 1, TargetID: 2, Action: workspace.ActionCreate}}}
		f.check(f.s.AddPromotion(f.ctx, pr))
		return pr
	}
	a := add(f.deploymentID, wb, f.id(), at)
	b := add(f.deploymentID, wb, f.id(), at.Add(time.Second))
	c1 := add(f.deploymentID, wb, f.id(), at.Add(2*time.Second))
	c2 := add(f.deploymentID, wb, f.id(), at.Add(2*time.Second)) // at the same time, a later id
	add(f.deploymentID, wb+1, f.id(), at.Add(3*time.Second))
	add(f.other, wb, f.id(), at.Add(3*time.Second))
	var got []*workspace.Promotion
	var after *workspace.PromotionKey
	for range 5 {
		page, err := f.s.Promotions(f.ctx, f.deploymentID, wb, after, 2)
		f.check(err)
		got = append(got, page...)
		if len(page) < 2 {
			break
		}
		last := page[len(page)-1]
		after = &workspace.PromotionKey{At: last.At, ID: last.ID}
	}
	want := []*workspace.Promotion{c2, c1, b, a}
	if len(got) != len(want) {
		t.Fatalf("%d promotions listed, want %d", len(got), len(want))
	}
	for i := range want {
		g := *got[i]
		g.At = g.At.UTC()
		if !reflect.DeepEqual(&g, want[i]) {
			t.Fatalf("promotion %d: %+v, want %+v", i, g, *want[i])
		}
	}
}
