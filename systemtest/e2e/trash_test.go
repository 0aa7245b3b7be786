package e2e_test

import (
	"context"
	"testing"

	"github.com/analyticsco/platform/api/client"
)

func init() {
	clientRules = append(clientRules, rule{"the-trash-through-the-generated-client", func(t *testing.T, p *platform) {
		ctx := context.Background()
		admin := p.typedClient(t, bearer(p.acme.Users["admin"]), nil)
		folder := func(name string, parent *int64) client.Folder {
			r, err := admin.CreateFolderWithResponse(ctx, p.dep1, nil, client.CreateFolderJSONRequestBody{Name: p.unique(name), ParentId: parent})
			return *answered(t, r, err, 200).JSON200
		}
		a := folder("trash A", nil)
		b := folder("trash B", &a.Id)
		rw, err := admin.CreateWorkbookWithResponse(ctx, p.dep1, nil, client.CreateWorkbookJSONRequestBody{Name: p.unique("trashed"), FolderId: &b.Id})
		wb := *answered(t, rw, err, 200).JSON200

		// A recursive delete sends the subtree to the trash, which lists the folder alone.
		recursive := true
		rd, err := admin.DeleteFolderWithResponse(ctx, p.dep1, a.Id, &client.DeleteFolderParams{Recursive: &recursive})
		answered(t, rd, err, 204)
		rl, err := admin.ListWorkspaceTrashWithResponse(ctx, p.dep1, nil)
		found := false
		for _, e := range answered(t, rl, err, 200).JSON200.Items {
			if e.Id == b.Id || e.Id == wb.Id {
				t.Errorf("trash lists %+v, trashed with folder %d", e, a.Id)
			}
			if e.Id == a.Id {
				found = e.TrashedWith != nil && *e.TrashedWith == 2 && e.FolderId == nil
			}
		}
		if !found {
			t.Errorf("trash %s: want folder %d with 2 items trashed with it", rl.Body, a.Id)
		}

		// Restored: the same workbook in the same folder.
		rr, err := admin.RestoreWorkspaceTrashWithResponse(ctx, p.dep1, nil, client.RestoreWorkspaceTrashJSONRequestBody{
			Items: []client.WorkspaceItemRef{{Type: client.WorkspaceItemTypeFOLDER, Id: a.Id}}})
		if res := answered(t, rr, err, 200).JSON200; len(res.Restored) != 1 || len(res.Failed) != 0 {
			t.Errorf("restore %s", rr.Body)
		}
		rg, err := admin.GetWorkbookWithResponse(ctx, p.dep1, wb.Id)
		if got := answered(t, rg, err, 200).JSON200; got.FolderId == nil || *got.FolderId != b.Id {
			t.Errorf("restored workbook %s: want it in folder %d", rg.Body, b.Id)
		}

		// Bulk delete, then purge: gone for good, a restore finds nothing.
		ref := []client.WorkspaceItemRef{{Type: client.WorkspaceItemTypeWORKBOOK, Id: wb.Id}}
		rb, err := admin.BulkDeleteWorkspaceItemsWithResponse(ctx, p.dep1, nil, client.BulkDeleteWorkspaceItemsJSONRequestBody{Items: ref})
		if res := answered(t, rb, err, 200).JSON200; len(res.Deleted) != 1 || len(res.Failed) != 0 {
			t.Errorf("bulk delete %s", rb.Body)
		}
		rp, err := admin.PurgeWorkspaceTrashWithResponse(ctx, p.dep1, nil, client.PurgeWorkspaceTrashJSONRequestBody{Items: ref})
		if res := answered(t, rp, err, 200).JSON200; len(res.Purged) != 1 || len(res.Failed) != 0 {
			t.Errorf("purge %s", rp.Body)
		}
		rr, err = admin.RestoreWorkspaceTrashWithResponse(ctx, p.dep1, nil, client.RestoreWorkspaceTrashJSONRequestBody{Items: ref})
		if res := answered(t, rr, err, 200).JSON200; len(res.Failed) != 1 || res.Failed[0].Error.Code != client.ErrorCodeNotFound {
			t.Errorf("restore after the purge %s: want 404 not_found", rr.Body)
		}
	}})
}
