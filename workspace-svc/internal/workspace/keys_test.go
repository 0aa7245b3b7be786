package workspace_test

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/analyticsco/platform/libs/audit"
	"github.com/analyticsco/platform/libs/errs"
	"github.com/analyticsco/platform/workspace-svc/internal/workspace"
)

// TestKeyGrammar: what a key may be, by example; an invalid key on create is 400
// invalid_key and creates nothing.
func TestKeyGrammar(t *testing.T) {
	for _, c := range []struct {
		key string
		ok  bool
	}{
		{"a", true}, {"0", true}, {"sales.q1-board_2", true}, {strings.Repeat("k", 128), true},
		{"", false}, {strings.Repeat("k", 129), false}, {"-a", false}, {"a.", false}, {"A", false},
		{"a/b", false}, {"a b", false}, {"ä", false}, {"a%2Fb", false},
	} {
		err := workspace.ValidKey(c.key)
		if (err == nil) != c.ok {
			t.Errorf("ValidKey(%q) = %v, want ok %v", c.key, err, c.ok)
		}
		if err != nil {
			wantErr(t, err, errs.Invalid, errs.CodeInvalidKey)
		}
	}
	f := newFixture(t)
	_, err := f.svc.CreateItem(f.ctx, admin, f.dep, workspace.TypeWorkbook, workspace.CreateItemInput{Name: "w", Key: "Bad Key"})
	wantErr(t, err, errs.Invalid, errs.CodeInvalidKey)
	_, err = f.svc.CreateFolder(f.ctx, admin, f.dep, workspace.CreateFolderInput{Name: "f", Key: "bad/key"})
	wantErr(t, err, errs.Invalid, errs.CodeInvalidKey)
	page, err := f.svc.List(f.ctx, admin, f.dep, 0, 10, "")
	if err != nil || len(page.Items) != 0 {
		t.Fatalf("refused creates stored %v (%v)", page.Items, err)
	}
}

// TestConcurrentCreatesWithOneKey: of concurrent creates with one key, exactly one
// succeeds and the others are 409 key_taken; workbooks and folders alike.
func TestConcurrentCreatesWithOneKey(t *testing.T) {
	f := newFixture(t)
	for _, typ := range []workspace.ItemType{workspace.TypeWorkbook, workspace.TypeFolder} {
		const n = 8
		var wg sync.WaitGroup
		errsOf := make([]error, n)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if typ == workspace.TypeFolder {
					_, errsOf[i] = f.svc.CreateFolder(f.ctx, ai, f.dep, workspace.CreateFolderInput{Name: "f", Key: "same"})
				} else {
					_, errsOf[i] = f.svc.CreateItem(f.ctx, ai, f.dep, typ, workspace.CreateItemInput{Name: "w", Key: "same"})
				}
			}()
		}
		wg.Wait()
		won := 0
		for _, err := range errsOf {
			if err == nil {
				won++
				continue
			}
			wantErr(t, err, errs.Conflict, errs.CodeKeyTaken)
		}
		held, err := f.store.ItemsByKey(f.ctx, f.dep, typ, []string{"same"}, 0)
		if won != 1 || err != nil || len(held) != 1 {
			t.Fatalf("%s: %d of %d creates with one key won, %d hold it (%v); want exactly one", typ, won, n, len(held), err)
		}
	}
}

// TestRenameAndMoveKeepTheKey: a key stays through a rename and a move; a PATCH sets a
// key once (its own again is a no-op, another key_immutable, a held one key_taken); a
// deleted item gives its key up.
func TestRenameAndMoveKeepTheKey(t *testing.T) {
	f := newFixture(t)
	dest := f.folder(admin, "dest", 0)
	w, err := f.svc.CreateItem(f.ctx, admin, f.dep, workspace.TypeWorkbook, workspace.CreateItemInput{Name: "w", Key: "board"})
	if err != nil || w.Key == nil || *w.Key != "board" || w.Version != 1 {
		t.Fatalf("create: %+v %v", w, err)
	}
	w, err = f.svc.UpdateItem(f.ctx, admin, f.dep, workspace.TypeWorkbook, w.ID, workspace.UpdateItemInput{Name: ptr("renamed")})
	if err != nil || *w.Key != "board" || w.Version != 2 {
		t.Fatalf("rename: key %v version %d %v", w.Key, w.Version, err)
	}
	moved, err := f.svc.Move(f.ctx, admin, f.dep, ref(workspace.TypeWorkbook, w.ID), dest)
	w = moved.Item
	if err != nil || *w.Key != "board" || w.Version != 3 {
		t.Fatalf("move: key %v version %d %v", w.Key, w.Version, err)
	}
	fo, err := f.svc.CreateFolder(f.ctx, admin, f.dep, workspace.CreateFolderInput{Name: "f", Key: "team"})
	if err != nil || *fo.Key != "team" || fo.Version != 1 {
		t.Fatalf("folder create: %+v %v", fo, err)
	}
	if _, err := f.svc.Move(f.ctx, admin, f.dep, ref(workspace.TypeFolder, fo.ID), dest); err != nil {
		t.Fatal(err)
	}
	if fo, err = f.svc.GetFolder(f.ctx, admin, f.dep, fo.ID); err != nil || *fo.Key != "team" || fo.Version != 2 {
		t.Fatalf("moved folder: key %v version %d %v", fo.Key, fo.Version, err)
	}
	page, err := f.svc.List(f.ctx, admin, f.dep, dest, 10, "")
	if err != nil || len(page.Items) != 2 || page.Items[0].Key == nil || *page.Items[0].Key != "team" || page.Items[0].Version != 2 {
		t.Fatalf("listing: %+v %v", page.Items, err)
	}
	// Set once.
	plain := f.item(admin, workspace.TypeReport, "r", 0)
	r, err := f.svc.UpdateItem(f.ctx, admin, f.dep, workspace.TypeReport, plain, workspace.UpdateItemInput{Key: ptr("rep")})
	if err != nil || *r.Key != "rep" || r.Version != 2 {
		t.Fatalf("set key: %+v %v", r, err)
	}
	if r, err = f.svc.UpdateItem(f.ctx, admin, f.dep, workspace.TypeReport, plain, workspace.UpdateItemInput{Key: ptr("rep")}); err != nil || r.Version != 2 {
		t.Fatalf("its own key again: version %d %v, want a no-op", r.Version, err)
	}
	_, err = f.svc.UpdateItem(f.ctx, admin, f.dep, workspace.TypeReport, plain, workspace.UpdateItemInput{Key: ptr("other")})
	wantErr(t, err, errs.Conflict, errs.CodeKeyImmutable)
	other := f.item(admin, workspace.TypeReport, "r2", 0)
	_, err = f.svc.UpdateItem(f.ctx, admin, f.dep, workspace.TypeReport, other, workspace.UpdateItemInput{Key: ptr("rep")})
	wantErr(t, err, errs.Conflict, errs.CodeKeyTaken)
	_, err = f.svc.UpdateFolder(f.ctx, admin, f.dep, fo.ID, workspace.UpdateFolderInput{Key: ptr("crew")})
	wantErr(t, err, errs.Conflict, errs.CodeKeyImmutable)
	// A delete gives the key up.
	if err := f.svc.DeleteItem(f.ctx, admin, f.dep, workspace.TypeReport, plain); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.UpdateItem(f.ctx, admin, f.dep, workspace.TypeReport, other, workspace.UpdateItemInput{Key: ptr("rep")}); err != nil {
		t.Fatalf("a deleted report's key: %v", err)
	}
}

// TestExpectedVersion: a PATCH or a PUT by key with a stale expectedVersion is 409
// version_conflict and changes nothing; with the current one it applies.
func TestExpectedVersion(t *testing.T) {
	f := newFixture(t)
	w := f.item(admin, workspace.TypeWorkbook, "w", 0)
	_, err := f.svc.UpdateItem(f.ctx, admin, f.dep, workspace.TypeWorkbook, w, workspace.UpdateItemInput{Name: ptr("x"), ExpectedVersion: ptr(int64(2))})
	wantErr(t, err, errs.Conflict, errs.CodeVersionConflict)
	got, err := f.svc.UpdateItem(f.ctx, admin, f.dep, workspace.TypeWorkbook, w, workspace.UpdateItemInput{Name: ptr("x"), ExpectedVersion: ptr(int64(1))})
	if err != nil || got.Version != 2 || got.Name != "x" {
		t.Fatalf("at the version: %+v %v", got, err)
	}
	fo := f.folder(admin, "f", 0)
	_, err = f.svc.UpdateFolder(f.ctx, admin, f.dep, fo, workspace.UpdateFolderInput{Name: ptr("y"), ExpectedVersion: ptr(int64(5))})
	wantErr(t, err, errs.Conflict, errs.CodeVersionConflict)
	if g, _ := f.svc.GetFolder(f.ctx, admin, f.dep, fo); g.Name != "f" || g.Version != 1 {
		t.Fatalf("a refused folder change changed %+v", g)
	}
	_, _, err = f.svc.PutItemByKey(f.ctx, admin, f.dep, workspace.TypeWorkbook, "k", workspace.PutItemInput{Name: "k", ExpectedVersion: ptr(int64(1))})
	wantErr(t, err, errs.Conflict, errs.CodeVersionConflict)
	if _, _, err := f.svc.PutItemByKey(f.ctx, admin, f.dep, workspace.TypeWorkbook, "k", workspace.PutItemInput{Name: "k"}); err != nil {
		t.Fatal(err)
	}
	_, _, err = f.svc.PutItemByKey(f.ctx, admin, f.dep, workspace.TypeWorkbook, "k", workspace.PutItemInput{Name: "k2", ExpectedVersion: ptr(int64(3))})
	wantErr(t, err, errs.Conflict, errs.CodeVersionConflict)
	// Over HTTP: the body's expectedVersion, the code in the answer.
	resp := f.serve(admin, http.MethodPatch, "/api/v1/deployments/7/workbooks/"+strconv.FormatInt(w, 10), `{"name":"z","expectedVersion":1}`)
	if body := decodeJSON(t, resp); resp.Code != http.StatusConflict || body["code"] != errs.CodeVersionConflict {
		t.Fatalf("stale PATCH: %d %v", resp.Code, body)
	}
}

// TestPutByKey: a PUT by key creates (201), replaces (200) and, sent again, changes
// nothing: no new version and no audit event beyond the first. Replace semantics clear
// what the body omits; a folderId elsewhere moves the item.
func TestPutByKey(t *testing.T) {
	f := newFixture(t)
	rec := &audit.Memory{Service: "workspace-svc"}
	f.svc = workspace.AuditingMiddleware(rec)(f.svc)
	dest := f.folder(admin, "dest", 0)
	rec.Reset()
	path := "/api/v1/deployments/7/workbooks/by-key/sales.q1"
	body := `{"name":"Sales","meta":{"a":1},"calculatedFields":{"c":2},"dashboardDraft":{"kind":"CLASSIC"}}`
	put := func(body string, want int) map[string]any {
		t.Helper()
		resp := f.serve(admin, http.MethodPut, path, body)
		m := decodeJSON(t, resp)
		if resp.Code != want {
			t.Fatalf("PUT %s: %d %v, want %d", body, resp.Code, m, want)
		}
		return m
	}
	first := put(body, http.StatusCreated)
	if first["key"] != "sales.q1" || first["version"] != 1.0 || first["name"] != "Sales" {
		t.Fatalf("created: %v", first)
	}
	again := put(body, http.StatusOK)
	if again["version"] != 1.0 || again["id"] != first["id"] || again["updatedAt"] != first["updatedAt"] {
		t.Fatalf("the same body again: %v, want the item unchanged", again)
	}
	if evs := rec.Events(); len(evs) != 1 || evs[0].Action != "workspace.workbook.create" {
		t.Fatalf("events after create and repeat: %v, want one create", evs)
	}
	rec.Reset()
	// Replace: the omitted parts are cleared, the folder moves it.
	moved := put(`{"name":"Sales","folderId":`+strconv.FormatInt(dest, 10)+`}`, http.StatusOK)
	meta, _ := json.Marshal(moved["meta"])
	if moved["folderId"] != float64(dest) || string(meta) != `{}` || moved["dashboardDraft"] != nil || moved["version"] != 3.0 {
		t.Fatalf("replaced: %v (meta %s), want it moved (a version), cleared (another)", moved, meta)
	}
	put(`{"name":"Sales","folderId":`+strconv.FormatInt(dest, 10)+`}`, http.StatusOK)
	if evs := rec.Events(); len(evs) != 1 || evs[0].Action != "workspace.workbook.update" {
		t.Fatalf("events after a replace and its repeat: %v, want one update", evs)
	}
	// Folders and reports by key.
	fpath := "/api/v1/deployments/7/folders/by-key/team-a"
	resp := f.serve(admin, http.MethodPut, fpath, `{"name":"Team A","position":3}`)
	if m := decodeJSON(t, resp); resp.Code != http.StatusCreated || m["key"] != "team-a" {
		t.Fatalf("folder create: %d %v", resp.Code, m)
	}
	resp = f.serve(admin, http.MethodPut, fpath, `{"name":"Team A"}`)
	if m := decodeJSON(t, resp); resp.Code != http.StatusOK || m["version"] != 1.0 || m["position"] != 3.0 {
		t.Fatalf("folder again without a position: %d %v, want unchanged", resp.Code, m)
	}
	resp = f.serve(admin, http.MethodPut, fpath, `{"name":"Team B","parentId":`+strconv.FormatInt(dest, 10)+`}`)
	if m := decodeJSON(t, resp); resp.Code != http.StatusOK || m["name"] != "Team B" || m["parentId"] != float64(dest) {
		t.Fatalf("folder replace: %d %v", resp.Code, m)
	}
	// A key that is a route's segment elsewhere still names a folder.
	resp = f.serve(admin, http.MethodPut, "/api/v1/deployments/7/folders/by-key/permissions", `{"name":"P"}`)
	if m := decodeJSON(t, resp); resp.Code != http.StatusCreated || m["key"] != "permissions" {
		t.Fatalf("folder key permissions: %d %v", resp.Code, m)
	}
	resp = f.serve(admin, http.MethodPut, "/api/v1/deployments/7/reports/by-key/r1", `{"name":"R","dashboardDraft":{}}`)
	if m := decodeJSON(t, resp); resp.Code != http.StatusBadRequest {
		t.Fatalf("a report with a draft: %d %v", resp.Code, m)
	}
	resp = f.serve(admin, http.MethodPut, "/api/v1/deployments/7/reports/by-key/Bad", `{"name":"R"}`)
	if m := decodeJSON(t, resp); resp.Code != http.StatusBadRequest || m["code"] != errs.CodeInvalidKey {
		t.Fatalf("a bad key: %d %v", resp.Code, m)
	}
	// Roles as for create and update.
	resp = f.serve(viewer, http.MethodPut, "/api/v1/deployments/7/reports/by-key/r1", `{"name":"R"}`)
	if resp.Code != http.StatusForbidden {
		t.Fatalf("a viewer's create by key: %d", resp.Code)
	}
	resp = f.serve(viewer, http.MethodPut, path, `{"name":"Sales"}`)
	if resp.Code != http.StatusForbidden {
		t.Fatalf("a viewer's replace by key: %d %s", resp.Code, resp.Body)
	}
}

// TestKeysAreIsolatedByDeployment: a key of deployment A is not found from B: a PUT by
// key in B creates B's own item, and A's stays as it was.
func TestKeysAreIsolatedByDeployment(t *testing.T) {
	f := newFixture(t)
	a, _, err := f.svc.PutItemByKey(f.ctx, admin, f.dep, workspace.TypeWorkbook, "shared", workspace.PutItemInput{Name: "A"})
	if err != nil {
		t.Fatal(err)
	}
	other := principal(1, "admin")
	other.Deployment.ID = 8
	b, outcome, err := f.svc.PutItemByKey(f.ctx, other, 8, workspace.TypeWorkbook, "shared", workspace.PutItemInput{Name: "B"})
	if err != nil || outcome != workspace.PutCreated || b.ID == a.ID {
		t.Fatalf("deployment 8's PUT: %v %+v %v, want its own item created", outcome, b, err)
	}
	if got, err := f.store.ItemsByKey(f.ctx, 8, workspace.TypeWorkbook, []string{"shared"}, 0); err != nil || got["shared"].ID != b.ID {
		t.Fatalf("deployment 8 by key: %v %v", got, err)
	}
	if got, err := f.svc.GetItem(f.ctx, admin, f.dep, workspace.TypeWorkbook, a.ID); err != nil || got.Name != "A" || got.Version != 1 {
		t.Fatalf("deployment 7's item: %+v %v", got, err)
	}
}
