package worker_test

import (
	"context"
	"io"
	"reflect"
	"testing"
	"time"

	"github.com/analyticsco/platform/dbtsync-svc/internal/dbtsync"
	"github.com/analyticsco/platform/dbtsync-svc/internal/worker"
)

// selectSync is a manifest sync into branch with a model selector.
func selectSync(branch, manifest, sel string) dbtsync.SyncRequestBody {
	return func(w io.Writer) (dbtsync.StartSyncInput, error) {
		_, err := io.WriteString(w, manifest)
		return dbtsync.StartSyncInput{Source: dbtsync.SourceManifest, Output: dbtsync.OutputBranch, BranchName: &branch, HasManifest: true, SchemaVersion: 12,
			Select: dbtsync.SelectorField{Set: true, Value: &sel}}, err
	}
}

// A job converts only the models its selector keeps, in the worker and in the child
// alike, and its view reports what was kept and dropped; a selector that keeps nothing
// fails the job (nothing_selected) and writes no version.
func TestAJobConvertsOnlyTheSelectedModels(t *testing.T) {
	for _, isolatedRun := range []bool{false, true} {
		name := "in-process"
		opts := worker.Options{}
		if isolatedRun {
			name, opts.Isolate = "isolated", isolated(time.Minute, 1<<30)
		}
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, git{})
			f.start(t, opts)
			ctx := context.Background()
			res, err := f.svc.StartSync(ctx, developer, dep, selectSync("dbt/x", manifest("orders", "customers", "stg_orders"), "*orders"))
			if err != nil {
				t.Fatal(err)
			}
			j := f.wait(t, res.Accepted.SyncJobID)
			if j.Status != dbtsync.StatusSucceeded || j.Selection == nil || deref(j.Select) != "*orders" {
				t.Fatalf("job %+v", j)
			}
			if s := j.Selection; s.ModelsTotal != 3 || s.ModelsKept != 2 || s.ModelsDropped != 1 ||
				!reflect.DeepEqual(s.Kept, []string{"model.p.orders", "model.p.stg_orders"}) || !reflect.DeepEqual(s.Dropped, []string{"model.p.customers"}) {
				t.Fatalf("selection %+v", *s)
			}
			files, err := f.svc.ListFiles(ctx, developer, dep, "dbt/x", 0)
			if err != nil || len(files.Files) != 2 || files.Files[0].Path != "model/cubes/orders.yml" || files.Files[1].Path != "model/cubes/stg_orders.yml" {
				t.Fatalf("files %+v %v", files, err)
			}
			res, err = f.svc.StartSync(ctx, developer, dep, selectSync("dbt/x", manifest("orders"), "tag:none"))
			if err != nil {
				t.Fatal(err)
			}
			j = f.wait(t, res.Accepted.SyncJobID)
			if j.Status != dbtsync.StatusFailed || deref(j.ErrorCode) != dbtsync.CodeNothingSelected || j.Attempts != 1 {
				t.Fatalf("a selection of nothing: %+v (%s)", j, deref(j.Error))
			}
			if b, _ := f.store.Branch(ctx, dep, "dbt/x"); b.LatestVersion != 1 {
				t.Errorf("a failed selection wrote version %d", b.LatestVersion)
			}
		})
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
