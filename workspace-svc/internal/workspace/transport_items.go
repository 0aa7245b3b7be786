package workspace

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"

	kithttp "github.com/go-kit/kit/transport/http"

	"github.com/analyticsco/platform/libs/errs"
	"github.com/analyticsco/platform/libs/httpx"
)

func decodeFavoriteRequest(on bool) kithttp.DecodeRequestFunc {
	return func(_ context.Context, r *http.Request) (any, error) {
		sc, err := scopeOf(r)
		if err != nil {
			return nil, err
		}
		typ := ItemType(strings.ToUpper(r.PathValue("type")))
		if !typ.Valid() {
			return nil, errs.Invalidf("type in the path must be one of FOLDER, WORKBOOK, REPORT, not %q", r.PathValue("type"))
		}
		id, err := pathID(r, "itemId")
		if err != nil {
			return nil, err
		}
		return favoriteRequest{scope: sc, Ref: ItemRef{Type: typ, ID: id}, On: on}, nil
	}
}

func decodePublishRequest(ctx context.Context, r *http.Request) (any, error) {
	ir, err := decodeItemRequest(TypeWorkbook, "workbookId")(ctx, r)
	if err != nil {
		return nil, err
	}
	req := publishRequest{itemRequest: ir.(itemRequest)}
	if r.ContentLength == 0 {
		return req, nil // no body: publish with the previous settings
	}
	var body struct {
		AllowEmbed *bool `json:"allowEmbed"`
	}
	if err := httpx.DecodeJSON(r, &body); err != nil {
		return nil, err
	}
	req.AllowEmbed = body.AllowEmbed
	return req, nil
}

func decodeUpdateItemRequest(t ItemType, param string) kithttp.DecodeRequestFunc {
	return func(ctx context.Context, r *http.Request) (any, error) {
		ir, err := decodeItemRequest(t, param)(ctx, r)
		if err != nil {
			return nil, err
		}
		var body struct {
			Name             *string          `json:"name"`
			Meta             json.RawMessage  `json:"meta"`
			CalculatedFields json.RawMessage  `json:"calculatedFields"`
			DashboardDraft   *DashboardConfig `json:"dashboardDraft"`
			Key              *string          `json:"key"`
			ExpectedVersion  *int64           `json:"expectedVersion"`
		}
		if err := httpx.DecodeJSON(r, &body); err != nil {
			return nil, err
		}
		if err := decodeKeyFields(body.Key, body.ExpectedVersion); err != nil {
			return nil, err
		}
		in := UpdateItemInput{Name: body.Name, DashboardDraft: body.DashboardDraft, Key: body.Key, ExpectedVersion: body.ExpectedVersion}
		if in.Meta, err = jsonObject("meta", body.Meta); err != nil {
			return nil, err
		}
		if in.CalculatedFields, err = jsonObject("calculatedFields", body.CalculatedFields); err != nil {
			return nil, err
		}
		if in.Name == nil && in.Meta == nil && in.CalculatedFields == nil && in.DashboardDraft == nil && in.Key == nil {
			return nil, errs.Invalidf("nothing to update: send name, meta, calculatedFields, dashboardDraft or key")
		}
		if in.DashboardDraft != nil && t != TypeWorkbook {
			return nil, errs.Invalidf("only workbooks have a dashboardDraft")
		}
		if err := body.DashboardDraft.Validate("dashboardDraft"); err != nil {
			return nil, errs.Invalidf("%s", err.Error())
		}
		return updateItemRequest{itemRequest: ir.(itemRequest), In: in}, nil
	}
}

// rawRef is an item reference as sent: fields are pointers so a missing one is named.
type rawRef struct {
	Type *string `json:"type"`
	ID   *int64  `json:"id"`
}

func (rr rawRef) ref(field string) (ItemRef, error) {
	switch {
	case rr.Type == nil:
		return ItemRef{}, errs.Invalidf("%stype is required", field)
	case !ItemType(*rr.Type).Valid():
		return ItemRef{}, errs.Invalidf("%stype must be one of FOLDER, WORKBOOK, REPORT, not %q", field, *rr.Type)
	case rr.ID == nil:
		return ItemRef{}, errs.Invalidf("%sid is required", field)
	case *rr.ID <= 0:
		return ItemRef{}, errs.Invalidf("%sid must be a positive integer", field)
	}
	return ItemRef{Type: ItemType(*rr.Type), ID: *rr.ID}, nil
}

func destination(folderID *int64) (int64, error) {
	if folderID == nil {
		return 0, nil
	}
	if *folderID <= 0 {
		return 0, errs.Invalidf("folderId must be a positive integer, or null for the workspace root")
	}
	return *folderID, nil
}

func decodeMoveRequest(_ context.Context, r *http.Request) (any, error) {
	sc, err := scopeOf(r)
	if err != nil {
		return nil, err
	}
	var body struct {
		rawRef
		FolderID *int64 `json:"folderId"`
	}
	if err := httpx.DecodeJSON(r, &body); err != nil {
		return nil, err
	}
	ref, err := body.rawRef.ref("")
	if err != nil {
		return nil, err
	}
	dest, err := destination(body.FolderID)
	if err != nil {
		return nil, err
	}
	return moveRequest{scope: sc, Ref: ref, Dest: dest}, nil
}

// bulkRefs reads the items of a bulk request: 1 to MaxBulkItems references, each named by
// its index when it is wrong.
func bulkRefs(items *[]rawRef) ([]ItemRef, error) {
	if items == nil {
		return nil, errs.Invalidf("items is required: 1 to %d item references", MaxBulkItems)
	}
	if n := len(*items); n < 1 || n > MaxBulkItems {
		return nil, errs.Invalidf("items must hold 1 to %d item references, not %d", MaxBulkItems, n)
	}
	refs := make([]ItemRef, len(*items))
	for i, rr := range *items {
		var err error
		if refs[i], err = rr.ref("items[" + strconv.Itoa(i) + "]."); err != nil {
			return nil, err
		}
	}
	return refs, nil
}

func decodeBulkMoveRequest(_ context.Context, r *http.Request) (any, error) {
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
	dest, err := destination(body.FolderID)
	if err != nil {
		return nil, err
	}
	return bulkMoveRequest{scope: sc, Refs: refs, Dest: dest}, nil
}

func jsonObject(field string, raw json.RawMessage) (json.RawMessage, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil, nil
	}
	if raw[0] != '{' {
		return nil, errs.Invalidf("%s must be an object", field)
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return nil, errs.Invalidf("%s must be an object", field)
	}
	return buf.Bytes(), nil
}

func decodeCreateItemRequest(t ItemType) kithttp.DecodeRequestFunc {
	return func(_ context.Context, r *http.Request) (any, error) {
		sc, err := scopeOf(r)
		if err != nil {
			return nil, err
		}
		var body struct {
			Name             *string          `json:"name"`
			FolderID         *int64           `json:"folderId"`
			Meta             json.RawMessage  `json:"meta"`
			CalculatedFields json.RawMessage  `json:"calculatedFields"`
			DashboardDraft   *DashboardConfig `json:"dashboardDraft"`
			Key              *string          `json:"key"`
		}
		if err := httpx.DecodeJSON(r, &body); err != nil {
			return nil, err
		}
		if body.Name == nil {
			return nil, errs.Invalidf("name is required")
		}
		if err := decodeKeyFields(body.Key, nil); err != nil {
			return nil, err
		}
		in := CreateItemInput{Name: *body.Name, DashboardDraft: body.DashboardDraft}
		if body.Key != nil {
			in.Key = *body.Key
		}
		if in.FolderID, err = destination(body.FolderID); err != nil {
			return nil, err
		}
		if in.Meta, err = jsonObject("meta", body.Meta); err != nil {
			return nil, err
		}
		if in.CalculatedFields, err = jsonObject("calculatedFields", body.CalculatedFields); err != nil {
			return nil, err
		}
		if err := body.DashboardDraft.Validate("dashboardDraft"); err != nil {
			return nil, errs.Invalidf("%s", err.Error())
		}
		return createItemRequest{scope: sc, Type: t, In: in}, nil
	}
}

func decodeItemRequest(t ItemType, param string) kithttp.DecodeRequestFunc {
	return func(_ context.Context, r *http.Request) (any, error) {
		sc, err := scopeOf(r)
		if err != nil {
			return nil, err
		}
		id, err := pathID(r, param)
		if err != nil {
			return nil, err
		}
		return itemRequest{scope: sc, Type: t, ID: id}, nil
	}
}
