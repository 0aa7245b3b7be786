package workspace

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/go-kit/kit/endpoint"
	kithttp "github.com/go-kit/kit/transport/http"

	"github.com/analyticsco/platform/libs/errs"
	"github.com/analyticsco/platform/libs/httpx"
)

// KeyEndpoints are the create-or-replace by key endpoints.
type KeyEndpoints struct {
	PutItemByKey, PutFolderByKey endpoint.Endpoint
}

type (
	putItemByKeyRequest struct {
		scope
		Type ItemType
		Key  string
		In   PutItemInput
	}
	putFolderByKeyRequest struct {
		scope
		Key string
		In  PutFolderInput
	}
	// createdAnswer is answered 201 with Body (encodeResponse).
	createdAnswer struct{ Body any }
)

func makeKeyEndpoints(s Service) KeyEndpoints {
	return KeyEndpoints{
		PutItemByKey: func(ctx context.Context, req any) (any, error) {
			r := req.(putItemByKeyRequest)
			w, outcome, err := s.PutItemByKey(ctx, r.P, r.DeploymentID, r.Type, r.Key, r.In)
			if err != nil {
				return nil, err
			}
			if outcome == PutCreated {
				return createdAnswer{Body: w}, nil
			}
			return w, nil
		},
		PutFolderByKey: func(ctx context.Context, req any) (any, error) {
			r := req.(putFolderByKeyRequest)
			f, outcome, err := s.PutFolderByKey(ctx, r.P, r.DeploymentID, r.Key, r.In)
			if err != nil {
				return nil, err
			}
			if outcome == PutCreated {
				return createdAnswer{Body: f}, nil
			}
			return f, nil
		},
	}
}

// registerKeys adds the PUT by key routes.
func registerKeys(r *httpx.Router, e KeyEndpoints, o httpx.HandleOptions) {
	o = o.WithFirst() // by-key is a literal where other routes have {folderId}, {workbookId}
	httpx.Handle(r, "PUT", base+"/folders/by-key/{key}", e.PutFolderByKey, decodePutFolderByKeyRequest, o)
	httpx.Handle(r, "PUT", base+"/workbooks/by-key/{key}", e.PutItemByKey, decodePutItemByKeyRequest(TypeWorkbook), o)
	httpx.Handle(r, "PUT", base+"/reports/by-key/{key}", e.PutItemByKey, decodePutItemByKeyRequest(TypeReport), o)
}

// decodeKeyFields checks a body's key (when sent) against the grammar and its
// expectedVersion (when sent) for a version an item can be at.
func decodeKeyFields(key *string, expectedVersion *int64) error {
	if key != nil {
		if err := ValidKey(*key); err != nil {
			return err
		}
	}
	if expectedVersion != nil && *expectedVersion < 0 {
		return errs.Invalidf("expectedVersion must be 0 or more, got %d", *expectedVersion)
	}
	return nil
}

// pathKey is the {key} of a by-key route, checked against the grammar.
func pathKey(r *http.Request) (string, error) {
	k := r.PathValue("key")
	if err := ValidKey(k); err != nil {
		return "", err
	}
	return k, nil
}

func decodePutItemByKeyRequest(t ItemType) kithttp.DecodeRequestFunc {
	return func(_ context.Context, r *http.Request) (any, error) {
		sc, err := scopeOf(r)
		if err != nil {
			return nil, err
		}
		key, err := pathKey(r)
		if err != nil {
			return nil, err
		}
		var body struct {
			Name             *string          `json:"name"`
			FolderID         *int64           `json:"folderId"`
			Meta             json.RawMessage  `json:"meta"`
			CalculatedFields json.RawMessage  `json:"calculatedFields"`
			DashboardDraft   *DashboardConfig `json:"dashboardDraft"`
			ExpectedVersion  *int64           `json:"expectedVersion"`
		}
		if err := httpx.DecodeJSON(r, &body); err != nil {
			return nil, err
		}
		if body.Name == nil {
			return nil, errs.Invalidf("name is required")
		}
		if err := decodeKeyFields(nil, body.ExpectedVersion); err != nil {
			return nil, err
		}
		in := PutItemInput{Name: *body.Name, DashboardDraft: body.DashboardDraft, ExpectedVersion: body.ExpectedVersion}
		if in.FolderID, err = destination(body.FolderID); err != nil {
			return nil, err
		}
		if in.Meta, err = jsonObject("meta", body.Meta); err != nil {
			return nil, err
		}
		if in.CalculatedFields, err = jsonObject("calculatedFields", body.CalculatedFields); err != nil {
			return nil, err
		}
		if in.DashboardDraft != nil && t != TypeWorkbook {
			return nil, errs.Invalidf("only workbooks have a dashboardDraft")
		}
		if err := body.DashboardDraft.Validate("dashboardDraft"); err != nil {
			return nil, errs.Invalidf("%s", err.Error())
		}
		return putItemByKeyRequest{scope: sc, Type: t, Key: key, In: in}, nil
	}
}

func decodePutFolderByKeyRequest(_ context.Context, r *http.Request) (any, error) {
	sc, err := scopeOf(r)
	if err != nil {
		return nil, err
	}
	key, err := pathKey(r)
	if err != nil {
		return nil, err
	}
	var body struct {
		Name            *string  `json:"name"`
		ParentID        *int64   `json:"parentId"`
		Position        *float64 `json:"position"`
		ExpectedVersion *int64   `json:"expectedVersion"`
	}
	if err := httpx.DecodeJSON(r, &body); err != nil {
		return nil, err
	}
	if body.Name == nil {
		return nil, errs.Invalidf("name is required")
	}
	if err := decodeKeyFields(nil, body.ExpectedVersion); err != nil {
		return nil, err
	}
	in := PutFolderInput{Name: *body.Name, Position: body.Position, ExpectedVersion: body.ExpectedVersion}
	if body.ParentID != nil {
		if *body.ParentID <= 0 {
			return nil, errs.Invalidf("parentId must be a positive integer; omit it or send null for the workspace root")
		}
		in.ParentID = *body.ParentID
	}
	return putFolderByKeyRequest{scope: sc, Key: key, In: in}, nil
}
