package e2e_test

import (
	"context"
	"slices"
	"testing"

	"github.com/analyticsco/platform/api/client"
)

// dashboardVersionRules drive the published versions through the generated client, as
// a customer's CI would: publish, list, read one, restore it, and page.
var dashboardVersionRules = []rule{
	{"publishes-are-kept-and-a-restore-is-a-new-equal-version", func(t *testing.T, p *platform) {
		ctx := context.Background()
		admin := p.typedClient(t, bearer(p.acme.Users["admin"]), nil)
		viewer := p.typedClient(t, bearer(p.acme.Users["viewer"]), nil)
		r1, err := admin.CreateWorkbookWithResponse(ctx, p.dep1, nil, client.CreateWorkbookJSONRequestBody{Name: p.unique("versioned")})
		wb := answered(t, r1, err, 200).JSON200.Id
		var published []client.Dashboard
		for i, title := range []string{"one", "two", "three"} {
			draft := client.DashboardConfig{Title: &title}
			r, err := admin.UpdateWorkbookWithResponse(ctx, p.dep1, wb, client.UpdateWorkbookJSONRequestBody{DashboardDraft: &draft})
			answered(t, r, err, 200)
			embed := i == 0
			pr, err := admin.PublishWorkbookWithResponse(ctx, p.dep1, wb, nil, client.PublishWorkbookJSONRequestBody{AllowEmbed: &embed})
			published = append(published, *answered(t, pr, err, 200).JSON200.PublishedDashboard)
		}
		// Paged two at a time, newest first.
		var numbers []int64
		params := &client.ListDashboardVersionsParams{First: ptr(2)}
		for {
			r, err := viewer.ListDashboardVersionsWithResponse(ctx, p.dep1, wb, params)
			page := answered(t, r, err, 200).JSON200
			for _, v := range page.Items {
				numbers = append(numbers, v.VersionNumber)
			}
			if !page.PageInfo.HasNextPage {
				break
			}
			params.After = page.PageInfo.EndCursor
		}
		if !slices.Equal(numbers, []int64{3, 2, 1}) {
			t.Fatalf("versions %v, want 3 2 1", numbers)
		}
		r2, err := viewer.GetDashboardVersionWithResponse(ctx, p.dep1, wb, 1)
		v1 := answered(t, r2, err, 200).JSON200
		if v1.VersionId != published[0].VersionId || !v1.AllowEmbed || v1.Config.Title == nil || *v1.Config.Title != "one" || v1.RestoredFrom != nil {
			t.Errorf("version 1 %s", r2.Body)
		}
		r3, err := viewer.RestoreDashboardVersionWithResponse(ctx, p.dep1, wb, 1, nil)
		answered(t, r3, err, 403)
		r4, err := admin.RestoreDashboardVersionWithResponse(ctx, p.dep1, wb, 1, nil)
		v4 := answered(t, r4, err, 200).JSON200.PublishedDashboard
		if v4 == nil || v4.VersionNumber != 4 || v4.PublicId != published[0].PublicId || !v4.AllowEmbed || v4.Config.Title == nil || *v4.Config.Title != "one" {
			t.Errorf("restored %s: want version 4 equal to 1 under its public id", r4.Body)
		}
		r5, err := admin.ListDashboardVersionsWithResponse(ctx, p.dep1, wb, nil)
		page := answered(t, r5, err, 200).JSON200
		if len(page.Items) != 4 || page.Items[0].VersionNumber != 4 || page.Items[0].RestoredFrom == nil || *page.Items[0].RestoredFrom != 1 {
			t.Errorf("after the restore %s", r5.Body)
		}
		r6, err := admin.GetDashboardVersionWithResponse(ctx, p.dep1, wb, 99)
		if e := answered(t, r6, err, 404).JSON404; e == nil || e.Code != client.ErrorCodeNotFound {
			t.Errorf("a version never published: %s", r6.Body)
		}
	}},
}

func ptr[T any](v T) *T { return &v }
