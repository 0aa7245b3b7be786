package e2e_test

import (
	"context"
	"strings"
	"testing"

	"github.com/analyticsco/platform/api/client"
)

// The create-or-replace by key operations through the generated client.
func init() {
	clientRules = append(clientRules, rule{"items-by-key", func(t *testing.T, p *platform) {
		ctx := context.Background()
		admin := p.typedClient(t, bearer(p.acme.Users["admin"]), nil)
		key := func(prefix string) string { return strings.ToLower(p.unique(prefix)) }

		fk := key("team")
		r1, err := admin.PutFolderByKeyWithResponse(ctx, p.dep1, fk, client.PutFolderByKeyJSONRequestBody{Name: "Team"})
		folder := *answered(t, r1, err, 201).JSON201
		if folder.Key == nil || *folder.Key != fk || folder.Version != 1 {
			t.Fatalf("folder by key: %s", r1.Body)
		}
		wk := key("board")
		body := client.PutWorkbookByKeyJSONRequestBody{Name: "Board", FolderId: &folder.Id}
		r2, err := admin.PutWorkbookByKeyWithResponse(ctx, p.dep1, wk, body)
		wb := *answered(t, r2, err, 201).JSON201
		r3, err := admin.PutWorkbookByKeyWithResponse(ctx, p.dep1, wk, body)
		again := *answered(t, r3, err, 200).JSON200
		if again.Id != wb.Id || again.Version != 1 || again.Key == nil || *again.Key != wk {
			t.Errorf("the same body again: %s, want workbook %d unchanged at version 1", r3.Body, wb.Id)
		}
		stale := int64(7)
		body.ExpectedVersion = &stale
		r4, err := admin.PutWorkbookByKeyWithResponse(ctx, p.dep1, wk, body)
		if e := answered(t, r4, err, 409).JSON409; e == nil || e.Code != client.ErrorCodeVersionConflict {
			t.Errorf("a stale expectedVersion: %s, want version_conflict", r4.Body)
		}
		name := "Renamed"
		r5, err := admin.UpdateWorkbookWithResponse(ctx, p.dep1, wb.Id, client.UpdateWorkbookJSONRequestBody{Name: &name, ExpectedVersion: &stale})
		if e := answered(t, r5, err, 409).JSON409; e == nil || e.Code != client.ErrorCodeVersionConflict {
			t.Errorf("a stale PATCH: %s, want version_conflict", r5.Body)
		}
		rk := key("report")
		r6, err := admin.PutReportByKeyWithResponse(ctx, p.dep1, rk, client.PutReportByKeyJSONRequestBody{Name: "Report", FolderId: &folder.Id})
		if rep := answered(t, r6, err, 201).JSON201; rep.Key == nil || *rep.Key != rk {
			t.Errorf("report by key: %s", r6.Body)
		}
		// A key is per deployment: the same key in deployment 2 is another workbook.
		r7, err := admin.PutWorkbookByKeyWithResponse(ctx, p.dep2, wk, client.PutWorkbookByKeyJSONRequestBody{Name: "Board"})
		if other := answered(t, r7, err, 201).JSON201; other.Id == wb.Id {
			t.Errorf("deployment 2's workbook by key %s is deployment 1's", wk)
		}
	}})
}
