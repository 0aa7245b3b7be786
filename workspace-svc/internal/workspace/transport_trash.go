package workspace

import (
	"context"
	"net/http"

	"github.com/go-kit/kit/endpoint"

	"github.com/analyticsco/platform/libs/errs"
	"github.com/analyticsco/platform/libs/fairshare"
	"github.com/analyticsco/platform/libs/httpx"
)

// ClassTrash is the route class of the trash's bulk routes (bulk delete, restore, purge),
// bounded per account like bulk moves (WORKSPACE_MAX_INFLIGHT_PER_ACCOUNT).
const ClassTrash = "trash"

type (
	trashListRequest struct {
		scope
		First int
		After string
	}
	trashItemsRequest struct {
		scope
		Refs   []ItemRef
		Folder *int64
	}
	// trashResultBody is a bulk trash answer: the items done under their verb
	// ("deleted", "restored", "purged") and the failed ones as a bulk move's.
	trashResultBody map[string]any
)

// TrashEndpoints are the endpoints of the trash (TrashService).
type TrashEndpoints struct {
	ListTrash, RestoreTrash, PurgeTrash, BulkDelete, DeleteFolderTree endpoint.Endpoint
}

func makeTrashEndpoints(s Service) TrashEndpoints {
	return TrashEndpoints{
		ListTrash: func(ctx context.Context, req any) (any, error) {
			r := req.(trashListRequest)
			return s.ListTrash(ctx, r.P, r.DeploymentID, r.First, r.After)
		},
		RestoreTrash: func(ctx context.Context, req any) (any, error) {
			r := req.(trashItemsRequest)
			res, err := s.RestoreTrash(ctx, r.P, r.DeploymentID, r.Refs, r.Folder)
			return trashBody("restored", res), err
		},
		PurgeTrash: func(ctx context.Context, req any) (any, error) {
			r := req.(trashItemsRequest)
			res, err := s.PurgeTrash(ctx, r.P, r.DeploymentID, r.Refs)
			return trashBody("purged", res), err
		},
		BulkDelete: func(ctx context.Context, req any) (any, error) {
			r := req.(trashItemsRequest)
			res, err := s.BulkDelete(ctx, r.P, r.DeploymentID, r.Refs)
			return trashBody("deleted", res), err
		},
		DeleteFolderTree: func(ctx context.Context, req any) (any, error) {
			r := req.(folderRequest)
			return httpx.NoContent{}, s.DeleteFolderTree(ctx, r.P, r.DeploymentID, r.ID)
		},
	}
}

// trashBody answers each failed item with the status, code and message its single
// operation would have been answered with, as a bulk move does.
func trashBody(verb string, res TrashResult) trashResultBody {
	failed := make([]bulkFailureBody, len(res.Failed))
	for i, f := range res.Failed {
		failed[i] = bulkFailureBody{Type: f.Ref.Type, ID: f.Ref.ID, Error: errs.BodyOf(f.Err)}
	}
	done := res.Done
	if done == nil {
		done = []ItemRef{}
	}
	return trashResultBody{verb: done, "failed": failed}
}

// registerTrash routes the trash and bulk delete (DELETE of a folder with
// recursive=true is deleteFolder's).
func registerTrash(r *httpx.Router, e Endpoints, o httpx.HandleOptions, fair *fairshare.Limiter) {
	bulk := o.WithAdmit(fair.Guard(ClassTrash))
	httpx.Handle(r, "GET", base+"/workspace/trash", e.ListTrash, decodeTrashListRequest, o)
	httpx.Handle(r, "POST", base+"/workspace/trash/restore", e.RestoreTrash, decodeTrashItemsRequest(true), bulk)
	httpx.Handle(r, "POST", base+"/workspace/trash/purge", e.PurgeTrash, decodeTrashItemsRequest(false), bulk)
	httpx.Handle(r, "POST", base+"/workspace/bulk-delete", e.BulkDelete, decodeTrashItemsRequest(false), bulk)
}

// deleteFolder sends DELETE of a folder to the recursive delete when the request asked
// for it (recursive=true), else to the delete of an empty folder.
func deleteFolder(e Endpoints) endpoint.Endpoint {
	return func(ctx context.Context, req any) (any, error) {
		if r, ok := req.(folderTreeRequest); ok {
			return e.DeleteFolderTree(ctx, r.folderRequest)
		}
		return e.DeleteFolder(ctx, req)
	}
}

type folderTreeRequest struct{ folderRequest }

func decodeDeleteFolderRequest(ctx context.Context, r *http.Request) (any, error) {
	fr, err := decodeFolderRequest(ctx, r)
	if err != nil {
		return nil, err
	}
	switch raw := r.URL.Query().Get("recursive"); raw {
	case "", "false":
		return fr, nil
	case "true":
		return folderTreeRequest{fr.(folderRequest)}, nil
	default:
		return nil, errs.Invalidf("recursive must be true or false, not %q", raw)
	}
}

func decodeTrashListRequest(_ context.Context, r *http.Request) (any, error) {
	sc, err := scopeOf(r)
	if err != nil {
		return nil, err
	}
	pg, err := httpx.ParsePage(r)
	if err != nil {
		return nil, err
	}
	return trashListRequest{scope: sc, First: pg.First, After: pg.After}, nil
}

// decodeTrashItemsRequest reads {"items": [1..100 refs]} and, for a restore, the
// optional folderId.
func decodeTrashItemsRequest(restore bool) func(context.Context, *http.Request) (any, error) {
	return func(_ context.Context, r *http.Request) (any, error) {
		sc, err := scopeOf(r)
		if err != nil {
			return nil, err
		}
		var body struct {
			Items    *[]rawRef `json:"items"`
			FolderID *int64    `json:"folderId"`
		}
		if err := httpx.DecodeJSON(r, &body); err != nil {
			return nil, err
		}
		refs, err := bulkRefs(body.Items)
		if err != nil {
			return nil, err
		}
		req := trashItemsRequest{scope: sc, Refs: refs}
		if body.FolderID != nil {
			if !restore {
				return nil, errs.Invalidf("folderId is only for a restore")
			}
			if *body.FolderID <= 0 {
				return nil, errs.Invalidf("folderId must be a positive integer; omit it to restore only to the original places")
			}
			req.Folder = body.FolderID
		}
		return req, nil
	}
}
