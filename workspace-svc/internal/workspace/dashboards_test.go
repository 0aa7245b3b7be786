package workspace_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/analyticsco/platform/libs/errs"
	"github.com/analyticsco/platform/workspace-svc/internal/workspace"
)

// draftNaming is a dashboard draft with one chart widget per report.
func draftNaming(reports ...int64) *workspace.DashboardConfig {
	cfg := &workspace.DashboardConfig{}
	for i, id := range reports {
		wid, typ, zero := fmt.Sprint("w", i), "CHART", int64(0)
		cfg.Widgets = append(cfg.Widgets, workspace.DashboardWidget{ID: &wid, Type: &typ,
			Position: &workspace.WidgetPosition{X: &zero, Y: &zero, W: &zero, H: &zero}, Config: map[string]any{"reportId": float64(id)}})
	}
	return cfg
}

// TestPublishedDashboardIsBounded: every snapshot copies its report's meta, so a small
// draft naming many large reports would make an unbounded stored document (MongoDB
// refuses one over 16 MiB: a 500). Past PublishedBytes the publish is a 413 that stores
// nothing, and the dashboard published before stays as it was.
func TestPublishedDashboardIsBounded(t *testing.T) {
	f := newFixture(t)
	f.svc = workspace.NewService(workspace.Ports{Store: f.store}, workspace.Options{Limits: workspace.Limits{PublishedBytes: 4096}})
	meta := json.RawMessage(`{"sql":"` + strings.Repeat("x", 1500) + `"}`)
	var reports []int64
	for i := range 3 {
		r, err := f.svc.CreateItem(f.ctx, ai, f.dep, workspace.TypeReport, workspace.CreateItemInput{Name: fmt.Sprint("r", i), Meta: meta})
		if err != nil {
			t.Fatal(err)
		}
		reports = append(reports, r.ID)
	}
	wb := f.item(ai, workspace.TypeWorkbook, "board", 0)
	setDraft := func(cfg *workspace.DashboardConfig) {
		t.Helper()
		if _, err := f.svc.UpdateItem(f.ctx, ai, f.dep, workspace.TypeWorkbook, wb, workspace.UpdateItemInput{DashboardDraft: cfg}); err != nil {
			t.Fatal(err)
		}
	}

	setDraft(draftNaming(reports[0]))
	w, err := f.svc.Publish(f.ctx, ai, f.dep, wb, nil)
	if err != nil {
		t.Fatalf("one report's snapshot fits: %v", err)
	}
	if d := w.PublishedDashboard; d.VersionNumber != 1 || len(d.ReportSnapshots) != 1 || string(d.ReportSnapshots[0].Meta) != string(meta) {
		t.Fatalf("published %+v", d)
	}

	setDraft(draftNaming(reports...))
	_, err = f.svc.Publish(f.ctx, ai, f.dep, wb, nil)
	if e := wantErr(t, err, errs.TooLarge, ""); !strings.Contains(e.Message, "over the limit of 4096 bytes") {
		t.Fatalf("message %q", e.Message)
	}
	got, err := f.svc.GetItem(f.ctx, ai, f.dep, workspace.TypeWorkbook, wb)
	if err != nil {
		t.Fatal(err)
	}
	if d := got.PublishedDashboard; d == nil || d.VersionNumber != 1 || len(d.ReportSnapshots) != 1 {
		t.Fatalf("a refused publish changed the published dashboard: %+v", d)
	}
}
