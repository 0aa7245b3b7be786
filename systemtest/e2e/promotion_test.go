package e2e_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/analyticsco/platform/api/client"
)

// promotionRules: promotion between the account's deployments and duplicates, through
// the generated client (every operation of both).
var promotionRules = []rule{
	{"a-promotion-is-previewed-applied-once-and-keeps-the-targets-public-id", func(t *testing.T, p *platform) {
		ctx := context.Background()
		admin := p.typedClient(t, bearer(p.acme.Users["admin"]), nil)
		authz := bearer(p.acme.Users["admin"])
		var rep, wb struct{ ID int64 }
		p.call(t, "POST", p.ws(p.dep1, "/reports"), authz, map[string]any{"name": p.unique("promoted report"), "meta": map[string]any{"sql": "select 1"}}).want(t, 200).decode(t, &rep)
		p.call(t, "POST", p.ws(p.dep1, "/workbooks"), authz, map[string]any{"name": p.unique("promoted board"), "dashboardDraft": map[string]any{
			"widgets": []any{map[string]any{"id": "w1", "type": "CHART", "position": map[string]any{"x": 0, "y": 0, "w": 6, "h": 4}, "config": map[string]any{"reportId": rep.ID}}}}}).
			want(t, 200).decode(t, &wb)
		p.call(t, "POST", p.ws(p.dep1, fmt.Sprintf("/workbooks/%d/publish", wb.ID)), authz, nil).want(t, 200)

		r1, err := admin.PreviewWorkbookPromotionWithResponse(ctx, p.dep1, wb.ID, nil, client.PreviewWorkbookPromotionJSONRequestBody{TargetDeploymentId: p.dep2})
		pv := *answered(t, r1, err, 200).JSON200
		if pv.TargetHash != nil || pv.Workbook.Action != client.PromotionChangeActionCreate || len(pv.Reports) != 1 || !pv.Publish {
			t.Fatalf("first preview %s", r1.Body)
		}
		key := client.IdempotencyKey(p.unique("promote"))
		body := client.PromoteWorkbookJSONRequestBody{TargetDeploymentId: p.dep2, SourceHash: pv.SourceHash}
		r2, err := admin.PromoteWorkbookWithResponse(ctx, p.dep1, wb.ID, &client.PromoteWorkbookParams{IdempotencyKey: &key}, body)
		first := *answered(t, r2, err, 200).JSON200
		r3, err := admin.PromoteWorkbookWithResponse(ctx, p.dep1, wb.ID, &client.PromoteWorkbookParams{IdempotencyKey: &key}, body)
		if answered(t, r3, err, 200).HTTPResponse.Header.Get("Idempotent-Replayed") != "true" {
			t.Errorf("a retried promotion was not replayed: %v", r3.HTTPResponse.Header)
		}
		r4, err := admin.ListWorkbookPromotionsWithResponse(ctx, p.dep1, wb.ID, nil)
		if hist := answered(t, r4, err, 200).JSON200; len(hist.Items) != 1 || hist.Items[0].Id != first.Promotion.Id {
			t.Fatalf("history after a retried promotion %s: want the one promotion", r4.Body)
		}
		target := first.Workbook
		if target.DeploymentId != p.dep2 || target.PublishedDashboard == nil {
			t.Fatalf("target %s", r2.Body)
		}

		// Changed after its preview: 409 source_changed; previewed again, a second
		// promotion keeps the target's id, slug and publicId.
		r5, err := admin.PreviewWorkbookPromotionWithResponse(ctx, p.dep1, wb.ID, nil, client.PreviewWorkbookPromotionJSONRequestBody{TargetDeploymentId: p.dep2})
		pv = *answered(t, r5, err, 200).JSON200
		if pv.TargetHash == nil || *pv.TargetHash != pv.SourceHash || pv.Workbook.Action != client.PromotionChangeActionUnchanged {
			t.Errorf("preview right after the promotion %s: want the target hashing as the source", r5.Body)
		}
		p.call(t, "PATCH", p.ws(p.dep1, fmt.Sprintf("/reports/%d", rep.ID)), authz, map[string]any{"meta": map[string]any{"sql": "select 2"}}).want(t, 200)
		p.call(t, "POST", p.ws(p.dep1, fmt.Sprintf("/workbooks/%d/promotions", wb.ID)), authz, map[string]any{"targetDeploymentId": p.dep2, "sourceHash": pv.SourceHash}).
			want(t, 409).wantCode(t, "source_changed")
		p.call(t, "POST", p.ws(p.dep1, fmt.Sprintf("/workbooks/%d/publish", wb.ID)), authz, nil).want(t, 200)
		r6, err := admin.PreviewWorkbookPromotionWithResponse(ctx, p.dep1, wb.ID, nil, client.PreviewWorkbookPromotionJSONRequestBody{TargetDeploymentId: p.dep2})
		pv = *answered(t, r6, err, 200).JSON200
		r7, err := admin.PromoteWorkbookWithResponse(ctx, p.dep1, wb.ID, nil, client.PromoteWorkbookJSONRequestBody{TargetDeploymentId: p.dep2, SourceHash: pv.SourceHash})
		second := answered(t, r7, err, 200).JSON200.Workbook
		if second.Id != target.Id || *second.Slug != *target.Slug || second.PublishedDashboard.PublicId != target.PublishedDashboard.PublicId {
			t.Errorf("second promotion %s: want workbook %d, slug %s and publicId %s kept", r7.Body, target.Id, *target.Slug, target.PublishedDashboard.PublicId)
		}
	}},
	{"a-promotion-target-of-another-account-is-404-and-outside-a-tokens-scope-403", func(t *testing.T, p *platform) {
		authz := bearer(p.acme.Users["admin"])
		var wb struct{ ID int64 }
		p.call(t, "POST", p.ws(p.dep1, "/workbooks"), authz, map[string]any{"name": p.unique("scoped board")}).want(t, 200).decode(t, &wb)
		path := p.ws(p.dep1, fmt.Sprintf("/workbooks/%d/promotion-previews", wb.ID))
		other := p.call(t, "POST", path, authz, map[string]any{"targetDeploymentId": p.globex.Deployments[0].ID}).want(t, 404)
		unknown := p.call(t, "POST", path, authz, map[string]any{"targetDeploymentId": 987654321}).want(t, 404)
		if other.obj(t)["code"] != unknown.obj(t)["code"] {
			t.Errorf("another account's deployment %s and an unknown one %s answer differently", other.body, unknown.body)
		}
		scoped := p.serviceAccountToken(t, "developer", fmt.Sprint(p.dep1))
		p.call(t, "POST", path, scoped, map[string]any{"targetDeploymentId": p.dep2}).want(t, 403).wantCode(t, "key_out_of_scope")
	}},
	{"duplicates-copy-a-workbook-deep-and-a-folder-subtree", func(t *testing.T, p *platform) {
		ctx := context.Background()
		admin := p.typedClient(t, bearer(p.acme.Users["admin"]), nil)
		authz := bearer(p.acme.Users["admin"])
		var folder, rep, wb struct{ ID int64 }
		p.call(t, "POST", p.ws(p.dep1, "/folders"), authz, map[string]any{"name": p.unique("dup src")}).want(t, 200).decode(t, &folder)
		p.call(t, "POST", p.ws(p.dep1, "/reports"), authz, map[string]any{"name": "R", "folderId": folder.ID}).want(t, 200).decode(t, &rep)
		p.call(t, "POST", p.ws(p.dep1, "/workbooks"), authz, map[string]any{"name": "W", "folderId": folder.ID, "dashboardDraft": map[string]any{
			"widgets": []any{map[string]any{"id": "w1", "type": "CHART", "position": map[string]any{"x": 0, "y": 0, "w": 6, "h": 4}, "config": map[string]any{"reportId": rep.ID}}}}}).
			want(t, 200).decode(t, &wb)
		deep := true
		r1, err := admin.DuplicateWorkbookWithResponse(ctx, p.dep1, wb.ID, nil, client.DuplicateWorkbookJSONRequestBody{Deep: &deep})
		d := *answered(t, r1, err, 200).JSON200
		var cfg map[string]any
		if d.Workbook.DashboardDraft != nil && d.Workbook.DashboardDraft.Widgets != nil && len(*d.Workbook.DashboardDraft.Widgets) == 1 {
			if c := (*d.Workbook.DashboardDraft.Widgets)[0].Config; c != nil {
				cfg = *c
			}
		}
		if len(d.Reports) != 1 || cfg["reportId"] != float64(d.Reports[0].Id) {
			t.Errorf("deep duplicate %s: want the copy's widget naming the report's copy", r1.Body)
		}
		r2, err := admin.DuplicateFolderWithResponse(ctx, p.dep1, folder.ID, nil, client.DuplicateFolderJSONRequestBody{})
		if f := answered(t, r2, err, 200).JSON200; f.Created.Folders != 1 || f.Created.Workbooks != 2 || f.Created.Reports != 2 {
			t.Errorf("folder duplicate %s: want 1 folder, 2 workbooks and 2 reports", r2.Body)
		}
	}},
}
