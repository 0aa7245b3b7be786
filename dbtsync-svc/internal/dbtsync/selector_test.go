package dbtsync_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/analyticsco/platform/dbtsync-svc/internal/convert"
	"github.com/analyticsco/platform/dbtsync-svc/internal/dbtsync"
	"github.com/analyticsco/platform/libs/audit"
	"github.com/analyticsco/platform/libs/errs"
)

// wantCode fails unless err is answered with status, code and a message holding msg.
func wantCode(t *testing.T, err error, status int, code, msg string) {
	t.Helper()
	wantErr(t, err, status, msg)
	if _, got, _, _ := errs.Answer(err); got != code {
		t.Fatalf("error %v has code %q, want %q", err, got, code)
	}
}

// decodeIntegration reads a PUT body as the transport does.
func decodeIntegration(t *testing.T, body string) dbtsync.IntegrationInput {
	t.Helper()
	in, err := dbtsync.DecodeIntegrationRequest(strings.NewReader(body))
	if err != nil {
		t.Fatalf("decode %s: %v", body, err)
	}
	return in
}

// The integration's PUT keeps a stored select or exclude when the body leaves it out
// (so changing the branch keeps the selector), clears it with null, and refuses a
// selector it cannot read, one over a limit, and graph operators without manifestPath.
func TestPutIntegrationSelector(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	const base = `"repoUrl":"https://example.test/acme/dbt.git","projectPath":"."`
	put := func(body string) (dbtsync.DbtGitIntegration, error) {
		return f.svc.PutIntegration(ctx, admin, dep, decodeIntegration(t, "{"+base+","+body+"}"))
	}
	v, err := put(`"branch":"main","manifestPath":"target/manifest.json","select":"+customers tag:daily","exclude":"staging"`)
	if err != nil || deref(v.Select) != "+customers tag:daily" || deref(v.Exclude) != "staging" {
		t.Fatalf("put = %+v %v", v, err)
	}
	v, err = put(`"branch":"dev","manifestPath":"target/manifest.json"`)
	if err != nil || deref(v.Select) != "+customers tag:daily" || deref(v.Exclude) != "staging" || v.Branch != "dev" {
		t.Fatalf("a PUT without select and exclude: %+v %v, want both kept", v, err)
	}
	v, err = put(`"branch":"dev","manifestPath":"target/manifest.json","exclude":null`)
	if err != nil || deref(v.Select) != "+customers tag:daily" || v.Exclude != nil {
		t.Fatalf("exclude null: %+v %v, want select kept and exclude cleared", v, err)
	}
	stored, _ := f.store.Integration(ctx, dep)
	if stored.Select != "+customers tag:daily" || stored.Exclude != "" {
		t.Fatalf("stored %+v", stored)
	}
	for _, c := range []struct{ name, body, code, msg string }{
		{"integration-400-selector-graph-without-manifest", `"branch":"dev"`, errs.CodeSelectorNeedsManifest, "need a dbt manifest"},
		{"integration-400-selector-bad-method", `"branch":"dev","select":"config.materialized:table"`, errs.CodeInvalidSelector, `method "config" is not supported`},
		{"integration-400-selector-empty", `"branch":"dev","select":" "`, errs.CodeInvalidSelector, `field "select" is empty`},
		{"integration-400-selector-too-long", `"branch":"dev","select":"` + strings.Repeat("a", 4097) + `"`, errs.CodeInvalidSelector, "over the limit of 4096 bytes"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := put(c.body)
			wantCode(t, err, 400, c.code, c.msg)
			if now, _ := f.store.Integration(ctx, dep); now.Branch != "dev" || now.Select != stored.Select {
				t.Errorf("a refused PUT changed the integration: %+v", now)
			}
		})
	}
	if _, err := dbtsync.DecodeIntegrationRequest(strings.NewReader(`{` + base + `,"branch":"dev","select":3}`)); err == nil || !strings.Contains(err.Error(), "select") {
		t.Errorf("a select that is no string: %v", err)
	}
	// Cleared with null, a selector with graph operators no longer blocks dropping manifestPath.
	if v, err := put(`"branch":"dev","select":null`); err != nil || v.Select != nil || v.ManifestPath != nil {
		t.Fatalf("select null without manifestPath: %+v %v", v, err)
	}
}

// A sync's select and exclude replace the integration's for that sync (null: none), one
// it leaves out keeps the integration's; a manifest sync uses its own alone. The job
// keeps the selector, and a retry applies it again. Graph operators need the upload or
// manifestPath (400 selector_needs_manifest), and nothing is queued for a refusal.
func TestStartSyncSelector(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	if err := f.store.SaveIntegration(ctx, dbtsync.Integration{DeploymentID: dep, RepoURL: "https://example.test/acme/dbt.git", Branch: "main",
		Select: "tag:daily", Exclude: "staging"}); err != nil {
		t.Fatal(err)
	}
	sync := func(body string) (dbtsync.Job, error) {
		res, err := f.svc.StartSync(ctx, developer, dep, dbtsync.BodyOf(body))
		if err != nil {
			return dbtsync.Job{}, err
		}
		return f.queue.Job(ctx, dep, res.Accepted.SyncJobID)
	}
	for _, c := range []struct{ name, body, sel, excl string }{
		{"git-keeps-the-integration's", `{"branchName":"a"}`, "tag:daily", "staging"},
		{"git-select-replaces", `{"branchName":"b","select":"customers"}`, "customers", "staging"},
		{"git-null-clears-for-this-sync", `{"branchName":"c","exclude":null}`, "tag:daily", "<nil>"},
		{"manifest-uses-its-own", `{"source":"manifest","branchName":"d","manifest":` + manifest + `,"select":"+orders"}`, "+orders", "<nil>"},
		{"manifest-none", `{"source":"manifest","branchName":"e","manifest":` + manifest + `}`, "<nil>", "<nil>"},
	} {
		t.Run(c.name, func(t *testing.T) {
			j, err := sync(c.body)
			if err != nil || deref(j.Select) != c.sel || deref(j.Exclude) != c.excl {
				t.Fatalf("job select %s exclude %s (%v), want %s and %s", deref(j.Select), deref(j.Exclude), err, c.sel, c.excl)
			}
		})
	}
	before := len(f.jobs(t))
	for _, c := range []struct{ name, body, code, msg string }{
		{"sync-400-selector-graph-without-manifest", `{"branchName":"x","select":"customers+"}`, errs.CodeSelectorNeedsManifest, "manifestPath"},
		{"sync-400-selector-graph-in-exclude", `{"branchName":"x","exclude":"@customers"}`, errs.CodeSelectorNeedsManifest, "need a dbt manifest"},
		{"sync-400-selector-unreadable", `{"branchName":"x","select":"@a+"}`, errs.CodeInvalidSelector, `"@" prefix and the "+" suffix`},
		{"sync-400-selector-too-many-terms", `{"branchName":"x","select":"` + strings.Repeat("a ", 65) + `"}`, errs.CodeInvalidSelector, "more than 64 criteria"},
		{"sync-400-selector-manifest-unreadable", `{"source":"manifest","manifest":` + manifest + `,"select":"bogus:x"}`, errs.CodeInvalidSelector, `"bogus" is not a valid method name`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := sync(c.body)
			wantCode(t, err, 400, c.code, c.msg)
		})
	}
	if _, err := f.svc.StartSync(ctx, developer, dep, dbtsync.BodyOf(`{"select":[]}`)); err == nil || !strings.Contains(err.Error(), `field "select" must be a string or null`) {
		t.Errorf("a select that is no string: %v", err)
	}
	if n := len(f.jobs(t)); n != before {
		t.Errorf("refused syncs queued %d jobs", n-before)
	}
	// With manifestPath, graph operators are accepted for git.
	if err := f.store.SaveIntegration(ctx, dbtsync.Integration{DeploymentID: dep, RepoURL: "https://example.test/acme/dbt.git", Branch: "main", ManifestPath: "target/manifest.json"}); err != nil {
		t.Fatal(err)
	}
	j, err := sync(`{"branchName":"g","select":"2+customers+"}`)
	if err != nil || deref(j.Select) != "2+customers+" {
		t.Fatalf("graph operators with manifestPath: %+v %v", j, err)
	}
	f.set(t, j.SyncJobID, func(j *dbtsync.Job) { j.Status = dbtsync.StatusFailed })
	r, err := f.svc.RetryJob(ctx, developer, dep, j.SyncJobID)
	if err != nil {
		t.Fatal(err)
	}
	if rj, _ := f.queue.Job(ctx, dep, r.SyncJobID); deref(rj.Select) != "2+customers+" || rj.Exclude != nil {
		t.Fatalf("retry select %s exclude %s", deref(rj.Select), deref(rj.Exclude))
	}
}

// ApplySelector fails a job for what only its input shows: graph operators on a project
// read from its files, a selection of no model, graph walks over their limit; and the
// job's view reports what was kept and dropped.
func TestApplySelector(t *testing.T) {
	project := func(fromManifest bool) *convert.Project {
		return &convert.Project{FromManifest: fromManifest, Models: []*convert.Model{
			{UniqueID: "model.p.a", Name: "a", Node: convert.NodeInfo{FQN: []string{"p", "a"}}},
			{UniqueID: "model.p.b", Name: "b", Node: convert.NodeInfo{FQN: []string{"p", "b"}, DependsOn: []string{"model.p.a"}}},
		}}
	}
	code := func(err error) string {
		var f *dbtsync.JobFailure
		if errors.As(err, &f) {
			return f.Code
		}
		return ""
	}
	if _, err := dbtsync.ApplySelector(project(false), ptr("+b"), nil, convert.SelectorLimits{}); code(err) != dbtsync.CodeSelectorNeedsManifest || !strings.Contains(err.Error(), "manifestPath") {
		t.Errorf("+b on project files: %v", err)
	}
	if _, err := dbtsync.ApplySelector(project(true), ptr("c"), nil, convert.SelectorLimits{}); code(err) != dbtsync.CodeNothingSelected || !strings.Contains(err.Error(), `select "c"`) {
		t.Errorf("a selection of nothing: %v", err)
	}
	if _, err := dbtsync.ApplySelector(project(true), ptr("+b"), nil, convert.SelectorLimits{MaxSteps: 1}); err != nil {
		t.Errorf("+b within one step: %v", err)
	}
	if _, err := dbtsync.ApplySelector(project(true), ptr("+b a+"), nil, convert.SelectorLimits{MaxSteps: 1}); code(err) != dbtsync.CodeWorkLimit {
		t.Errorf("over the step budget: %v", err)
	}
	p := project(true)
	sel, err := dbtsync.ApplySelector(p, ptr("+b"), ptr("a"), convert.SelectorLimits{})
	if err != nil || sel.ModelsKept != 1 || sel.ModelsDropped != 1 || sel.Kept[0] != "model.p.b" || sel.Dropped[0] != "model.p.a" || len(p.Models) != 1 {
		t.Fatalf("selection %+v %v", sel, err)
	}
	if sel, err := dbtsync.ApplySelector(project(false), nil, nil, convert.SelectorLimits{}); sel != nil || err != nil {
		t.Errorf("no selector: %+v %v", sel, err)
	}
}

// The audit trail names the selector a request sent (null as null), cut to a bound.
func TestSelectorIsAudited(t *testing.T) {
	f := newFixture(t)
	rec := &audit.Memory{}
	svc := dbtsync.AuditingMiddleware(rec)(f.svc)
	in := decodeIntegration(t, `{"repoUrl":"https://example.test/acme/dbt.git","branch":"main","projectPath":".","select":"tag:daily","exclude":null}`)
	if _, err := svc.PutIntegration(context.Background(), admin, dep, in); err != nil {
		t.Fatal(err)
	}
	_, err := svc.StartSync(context.Background(), developer, dep, dbtsync.BodyOf(`{"select":"`+strings.Repeat("a", 5000)+`"}`))
	wantCode(t, err, 400, errs.CodeInvalidSelector, "over the limit")
	evs := rec.Events()
	if len(evs) != 2 || evs[0].Details["select"] != "tag:daily" || evs[0].Details["exclude"] != nil {
		t.Fatalf("events %+v", evs)
	}
	if _, has := evs[0].Details["exclude"]; !has {
		t.Error("exclude null is not recorded")
	}
	if s, _ := evs[1].Details["select"].(string); len(s) > 520 || !strings.HasPrefix(s, "aaa") {
		t.Errorf("the refused sync's select recorded as %d bytes", len(s))
	}
}
