package workspace_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/analyticsco/platform/libs/errs"
	"github.com/analyticsco/platform/workspace-svc/internal/workspace"
)

// TestInstrumentingMiddlewareCountsFromResults: the domain counters come from what the
// service answered, and the tree conflicts from inside its commit loop.
func TestInstrumentingMiddlewareCountsFromResults(t *testing.T) {
	f := newFixture(t)
	m := workspace.NewMetrics(prometheus.NewRegistry())
	f.svc = workspace.InstrumentingMiddleware(m)(workspace.NewService(workspace.Ports{Store: f.store}, workspace.Options{TreeConflicts: m.TreeConflicts}))
	dest := f.folder(ai, "dest", 0)
	wb := f.item(ai, workspace.TypeWorkbook, "wb", 0)
	private := f.folder(admin, "private", 0)
	theirs := f.item(admin, workspace.TypeReport, "theirs", private)
	if _, err := f.svc.CreateFolder(f.ctx, viewer, f.dep, workspace.CreateFolderInput{Name: "no"}); err == nil {
		t.Fatal("a viewer created a folder")
	}
	res, err := f.svc.BulkMove(f.ctx, ai, f.dep, []workspace.ItemRef{ref(workspace.TypeWorkbook, wb), ref(workspace.TypeReport, theirs),
		ref(workspace.TypeFolder, 999), ref(workspace.TypeFolder, dest)}, dest)
	if err != nil || len(res.Moved) != 1 || len(res.Failed) != 3 {
		t.Fatalf("bulk move: %+v %v", res, err)
	}
	if _, err := f.svc.Move(f.ctx, ai, f.dep, ref(workspace.TypeFolder, dest), 0); err != nil {
		t.Fatal(err)
	}
	for range 2 { // created, then unchanged: one folder created
		if _, _, err := f.svc.PutFolderByKey(f.ctx, ai, f.dep, "by-key", workspace.PutFolderInput{Name: "by key"}); err != nil {
			t.Fatal(err)
		}
	}
	draft := &workspace.DashboardConfig{}
	if _, err := f.svc.UpdateItem(f.ctx, ai, f.dep, workspace.TypeWorkbook, wb, workspace.UpdateItemInput{DashboardDraft: draft}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.Publish(f.ctx, ai, f.dep, wb, nil); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		c    prometheus.Collector
		want float64
	}{
		{"folders created (the viewer's refused, one by key)", m.FoldersCreated, 3},
		{"dashboards published", m.DashboardsPublished, 1},
		{"workbooks moved", m.ItemsMoved.WithLabelValues("WORKBOOK", "moved"), 1},
		{"folders moved (the single move)", m.ItemsMoved.WithLabelValues("FOLDER", "moved"), 1},
		{"reports forbidden", m.ItemsMoved.WithLabelValues("REPORT", "forbidden"), 1},
		{"folders not found", m.ItemsMoved.WithLabelValues("FOLDER", "not_found"), 1},
		{"folders invalid (into itself)", m.ItemsMoved.WithLabelValues("FOLDER", "invalid"), 1},
		{"tree conflicts (no concurrent change)", m.TreeConflicts, 0},
	} {
		if got := testutil.ToFloat64(c.c); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

// TestLoggingMiddlewareLogsChangesDone: one line per change of state that was done, with
// its ids and without the user's data; refused calls and reads log nothing.
func TestLoggingMiddlewareLogsChangesDone(t *testing.T) {
	f := newFixture(t)
	var buf bytes.Buffer
	f.svc = workspace.LoggingMiddleware(slog.New(slog.NewJSONHandler(&buf, nil)))(f.svc)
	id := f.folder(ai, "Secret plans", 0)
	if _, err := f.svc.CreateFolder(f.ctx, viewer, f.dep, workspace.CreateFolderInput{Name: "no"}); err == nil {
		t.Fatal("a viewer created a folder")
	}
	if _, err := f.svc.GetFolder(f.ctx, ai, f.dep, id); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.BulkMove(f.ctx, ai, f.dep, []workspace.ItemRef{ref(workspace.TypeWorkbook, 999)}, id); err != nil {
		t.Fatal(err)
	}
	var lines []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		lines = append(lines, m)
	}
	if len(lines) != 2 || lines[0]["msg"] != "folder created" || lines[0]["folderId"] != float64(id) ||
		lines[1]["msg"] != "items moved" || lines[1]["moved"] != float64(0) || lines[1]["failed"] != float64(1) {
		t.Fatalf("log lines %v", lines)
	}
	if strings.Contains(buf.String(), "Secret plans") {
		t.Fatalf("a folder's name was logged: %s", buf.String())
	}
}

// TestTreeConflictsAreCountedInsideTheCommitLoop: a structural change that loses the
// compare-and-set to another one is validated again and counted.
func TestTreeConflictsAreCountedInsideTheCommitLoop(t *testing.T) {
	f := newFixture(t)
	conflicts := prometheus.NewCounter(prometheus.CounterOpts{Name: "c"})
	f.svc = workspace.NewService(workspace.Ports{Store: f.store}, workspace.Options{TreeConflicts: conflicts})
	other := workspace.NewService(workspace.Ports{Store: f.store}, workspace.Options{}) // another replica
	a := f.folder(admin, "a", 0)
	// The first compare-and-set of the next change meets a change the other replica
	// commits just before it.
	once := false
	f.store.Fault = func(method string) error {
		if method == "CommitTreeOp" && !once {
			once = true
			if _, err := other.CreateFolder(f.ctx, admin, f.dep, workspace.CreateFolderInput{Name: "b"}); err != nil {
				return errors.Join(errs.ErrUnavailable, err)
			}
		}
		return nil
	}
	if _, err := f.svc.CreateFolder(f.ctx, admin, f.dep, workspace.CreateFolderInput{Name: "c", ParentID: a}); err != nil {
		t.Fatal(err)
	}
	if got := testutil.ToFloat64(conflicts); got != 1 {
		t.Fatalf("tree conflicts %v, want 1", got)
	}
}
