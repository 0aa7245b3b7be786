package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/analyticsco/platform/api"
	"github.com/analyticsco/platform/api/client"
	"github.com/analyticsco/platform/devstack"
	"github.com/analyticsco/platform/devstack/apitest"
)

// clientRules drive the platform through api/client, the Go client generated from the
// document, as a customer's Go code would: the README quickstart's calls, and a call of
// every route group (tag) of the document. Its requests go through the suite's client,
// so kin-openapi and Prism judge every exchange as they judge the hand-written calls.
var clientRules = []rule{
	{"readme-quickstart", func(t *testing.T, p *platform) {
		ctx := context.Background()
		admin := p.typedClient(t, bearer(p.acme.Users["admin"]), nil)
		key := p.typedClient(t, apiKey(p.acme.APIKeys["admin"]), nil)
		anonymous := p.typedClient(t, "", nil)

		// Two folders at the root, then a bulk move of one of them and of a workbook that
		// does not exist: each item is checked on its own.
		r1, err := admin.CreateFolderWithResponse(ctx, p.dep1, nil, client.CreateFolderJSONRequestBody{Name: p.unique("Finance")})
		finance := *answered(t, r1, err, 200).JSON200
		r2, err := admin.CreateFolderWithResponse(ctx, p.dep1, nil, client.CreateFolderJSONRequestBody{Name: p.unique("Q3 close")})
		q3 := *answered(t, r2, err, 200).JSON200
		if finance.Type != client.WorkspaceItemTypeFOLDER || finance.ParentId != nil || q3.ParentId != nil {
			t.Errorf("folders %+v and %+v: want two folders at the root", finance, q3)
		}
		r3, err := admin.BulkMoveWorkspaceItemsWithResponse(ctx, p.dep1, nil, client.BulkMoveWorkspaceItemsJSONRequestBody{
			FolderId: &finance.Id,
			Items:    []client.WorkspaceItemRef{{Type: client.WorkspaceItemTypeFOLDER, Id: q3.Id}, {Type: client.WorkspaceItemTypeWORKBOOK, Id: 999_999_999}},
		})
		moved := *answered(t, r3, err, 200).JSON200
		if len(moved.Failed) != 1 || moved.Failed[0].Error.Code != client.ErrorCodeNotFound || moved.Failed[0].Error.Status != 404 {
			t.Errorf("failed %+v: want the missing workbook, 404 not_found", moved.Failed)
		}
		if len(moved.Moved) != 1 || moved.Moved[0].Id != q3.Id || moved.Moved[0].FolderId == nil || *moved.Moved[0].FolderId != finance.Id ||
			moved.Moved[0].FolderPath == nil || !slices.Equal(*moved.Moved[0].FolderPath, []client.FolderPathEntry{{Id: finance.Id, Name: finance.Name}}) {
			t.Errorf("moved %+v: want Q3 close under Finance", moved.Moved)
		}

		// An embed session minted with the account API key, exchanged once by the
		// viewer's browser; the second exchange is refused.
		session := p.mintTyped(t, key, nil)
		r4, err := anonymous.ExchangeEmbedSessionWithResponse(ctx, client.ExchangeEmbedSessionJSONRequestBody{SessionId: session})
		token := *answered(t, r4, err, 200).JSON200
		if strings.Count(token.Token, ".") != 2 || !token.RefreshAt.Add(time.Hour).Equal(token.ExpiresAt) {
			t.Errorf("session token %+v: want a JWT, refreshed an hour before it expires", token)
		}
		r5, err := anonymous.ExchangeEmbedSessionWithResponse(ctx, client.ExchangeEmbedSessionJSONRequestBody{SessionId: session})
		if e := answered(t, r5, err, 401).JSON401; e == nil || e.Code != client.ErrorCodeSessionIdInvalid {
			t.Errorf("second exchange: %s, want 401 session_id_invalid", r5.Body)
		}

		// A dbt manifest (dbt's jaffle shop) turned into a data-model branch: the job is
		// polled until it ends, and the branch lists the files it wrote.
		var manifest map[string]any
		raw, err := os.ReadFile(filepath.Join(devstack.RepoRoot(t), "..", "shared", "fixtures", "dbt", "manifest-v12-dbt-1.10.json"))
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(raw, &manifest); err != nil {
			t.Fatal(err)
		}
		source, branch := client.DbtSyncRequestSourceManifest, "dbt/"+p.unique("quickstart")
		r6, err := admin.StartDbtSyncWithResponse(ctx, p.dep1, nil, client.StartDbtSyncJSONRequestBody{Source: &source, Manifest: &manifest, BranchName: &branch})
		job := *answered(t, r6, err, 202).JSON202
		var done client.SyncJob
		apitest.Eventually(t, time.Minute, "the sync job ends", func() (bool, string) {
			r, err := admin.GetDbtSyncJobWithResponse(ctx, p.dep1, job.SyncJobId)
			done = *answered(t, r, err, 200).JSON200
			return done.Status != client.SyncJobStatusQueued && done.Status != client.SyncJobStatusRunning, string(done.Status)
		})
		if done.Status != client.SyncJobStatusSucceeded || done.BranchName != branch || done.Progress.ModelsTotal == nil || done.Progress.ModelsDone != *done.Progress.ModelsTotal {
			t.Fatalf("job %+v: want it succeeded on %s with every model done", done, branch)
		}
		r7, err := admin.ListBranchFilesWithResponse(ctx, p.dep1, branch, nil)
		files := *answered(t, r7, err, 200).JSON200
		cubes, views := 0, 0
		for _, f := range files.Files {
			switch {
			case strings.HasPrefix(f.Path, "model/cubes/"):
				cubes++
			case strings.HasPrefix(f.Path, "model/views/"):
				views++
			}
		}
		if len(files.Files) != 16 || cubes != 13 || views != 3 {
			t.Errorf("branch %s lists %+v: want the 13 cubes of the jaffle shop and a view of each of its 3 saved queries", branch, files.Files)
		}
	}},
	{"a-call-of-every-route-group", func(t *testing.T, p *platform) {
		ctx := context.Background()
		reached := &reachedOperations{ids: map[string]bool{}}
		admin := p.typedClient(t, bearer(p.acme.Users["admin"]), reached)
		key := p.typedClient(t, apiKey(p.acme.APIKeys["admin"]), reached)
		anonymous := p.typedClient(t, "", reached)

		// Workbooks: the answers hold the nulls the contract allows (no owner's
		// dashboards yet), which a typed client reads as nil.
		r1, err := admin.CreateWorkbookWithResponse(ctx, p.dep1, nil, client.CreateWorkbookJSONRequestBody{Name: p.unique("typed")})
		created := *answered(t, r1, err, 200).JSON200
		r2, err := admin.GetWorkbookWithResponse(ctx, p.dep1, created.Id)
		workbook := *answered(t, r2, err, 200).JSON200
		if workbook.PublishedDashboard != nil || workbook.DashboardPublished != nil || workbook.FolderId != nil {
			t.Errorf("a new workbook at the root: %s; want publishedDashboard, dashboardPublished and folderId null", r2.Body)
		}
		r3, err := admin.CreateReportWithResponse(ctx, p.dep1, nil, client.CreateReportJSONRequestBody{Name: p.unique("typed")})
		answered(t, r3, err, 200)
		r4, err := admin.CreateFolderWithResponse(ctx, p.dep1, nil, client.CreateFolderJSONRequestBody{Name: p.unique("typed")})
		folder := *answered(t, r4, err, 200).JSON200
		r5, err := admin.ListWorkspaceItemsWithResponse(ctx, p.dep1, &client.ListWorkspaceItemsParams{FolderId: &folder.Id})
		if page := answered(t, r5, err, 200).JSON200; len(page.Items) != 0 {
			t.Errorf("a new folder lists %+v", page.Items)
		}
		// Content as code: the folder's bundle, and the plan of importing it at the root.
		r18, err := admin.ExportWorkspaceWithResponse(ctx, p.dep1, &client.ExportWorkspaceParams{FolderId: &folder.Id})
		bundle := *answered(t, r18, err, 200).JSON200
		if len(bundle.Items) != 1 || bundle.Items[0].Name != folder.Name || bundle.Items[0].FolderKey != nil {
			t.Errorf("the bundle of an empty folder: %s; want the folder alone at its top level", r18.Body)
		}
		dryRun := true
		r19, err := admin.ImportWorkspaceWithResponse(ctx, p.dep1, nil, client.ImportWorkspaceJSONRequestBody{Bundle: bundle, DryRun: &dryRun})
		if plan := answered(t, r19, err, 200).JSON200; !plan.DryRun || plan.Counts.Create != 1 || len(plan.Items) != 1 {
			t.Errorf("the plan of importing it: %s; want one create", r19.Body)
		}
		r6, err := admin.ListDbtSyncJobsWithResponse(ctx, p.dep1, nil)
		answered(t, r6, err, 200)
		r7, err := admin.ListBranchesWithResponse(ctx, p.dep1, nil)
		answered(t, r7, err, 200)

		// Embed: a session of a new embed tenant, its token, a data-API token, the
		// tenant's users, the account's catalog.
		tenant := p.unique("typed")
		session := p.mintTyped(t, key, &tenant)
		r8, err := anonymous.ExchangeEmbedSessionWithResponse(ctx, client.ExchangeEmbedSessionJSONRequestBody{SessionId: session})
		token := answered(t, r8, err, 200).JSON200.Token
		embedded := p.typedClient(t, "Bearer "+token, reached)
		r9, err := embedded.CreateDataApiTokenWithResponse(ctx, p.dep1, nil)
		if data := answered(t, r9, err, 200).JSON200; data.TokenId == "" {
			t.Errorf("data-API token %s: want its id", r9.Body)
		}
		r10, err := key.ListEmbedTenantUsersWithResponse(ctx, tenant, nil)
		if users := answered(t, r10, err, 200).JSON200; len(users.Items) != 1 {
			t.Errorf("tenant %s has users %s: want the session's", tenant, r10.Body)
		}
		r11, err := key.ListGroupsWithResponse(ctx, nil)
		answered(t, r11, err, 200)
		r12, err := admin.ListAuditEventsWithResponse(ctx, nil)
		answered(t, r12, err, 200)
		r13, err := anonymous.GetOpenApiDocumentWithResponse(ctx)
		answered(t, r13, err, 200)
		// Embed access: the grants on the deployment's root, and the dashboards the
		// session may open.
		r14, err := admin.GetRootEmbedAccessWithResponse(ctx, p.dep1)
		answered(t, r14, err, 200)
		r15, err := embedded.ListEmbedDashboardsWithResponse(ctx, nil)
		answered(t, r15, err, 200)
		// API keys, served by the gateway itself.
		r16, err := admin.ListApiKeysWithResponse(ctx, nil)
		if keys := answered(t, r16, err, 200).JSON200; len(keys.Items) == 0 {
			t.Errorf("acme's keys %s: want the seed's", r16.Body)
		}
		// Service accounts, served by the gateway itself.
		r17, err := admin.ListServiceAccountsWithResponse(ctx, nil)
		answered(t, r17, err, 200)
		// Webhooks, served by embed-svc beside the audit trail they deliver.
		r20, err := admin.ListWebhooksWithResponse(ctx, nil)
		answered(t, r20, err, 200)

		ops, err := api.Operations()
		if err != nil {
			t.Fatal(err)
		}
		groups, covered := map[string]bool{}, map[string]bool{}
		for _, op := range ops {
			groups[op.Tag] = true
			if reached.has(op.ID) {
				covered[op.Tag] = true
			}
		}
		for g := range groups {
			if !covered[g] {
				t.Errorf("route group %q: no call of the generated client reached it", g)
			}
		}
		t.Logf("the generated client reached %d operations of all %d route groups", reached.count(), len(groups))
	}},
}

// reachedOperations notes the operations a generated client's requests matched.
type reachedOperations struct {
	mu  sync.Mutex
	ids map[string]bool
}

func (r *reachedOperations) has(id string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ids[id]
}

func (r *reachedOperations) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.ids)
}

// checkedDoer sends the generated client's requests through the suite's client, which
// judges each answer against the document, and notes the operation each reached.
type checkedDoer struct {
	t       *testing.T
	p       *platform
	reached *reachedOperations
}

func (d checkedDoer) Do(req *http.Request) (*http.Response, error) {
	r := d.p.api.Send(d.t, req)
	if d.reached != nil {
		if route, err := findRoute(d.p.router, req); err == nil {
			d.reached.mu.Lock()
			d.reached.ids[route.Operation.OperationID] = true
			d.reached.mu.Unlock()
		}
	}
	return &http.Response{StatusCode: r.Status, Status: http.StatusText(r.Status), Header: r.Header,
		Body: io.NopCloser(bytes.NewReader(r.Body)), ContentLength: int64(len(r.Body)), Request: req}, nil
}

// typedClient is api/client sending authz ("" for none) to the gateway.
func (p *platform) typedClient(t *testing.T, authz string, reached *reachedOperations) *client.ClientWithResponses {
	t.Helper()
	c, err := client.NewClientWithResponses(p.s.Gateway,
		client.WithHTTPClient(checkedDoer{t: t, p: p, reached: reached}),
		client.WithRequestEditorFn(func(_ context.Context, r *http.Request) error {
			if authz != "" {
				r.Header.Set("Authorization", authz)
			}
			return nil
		}))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// mintTyped mints a session for a new external user (with the quickstart's attribute)
// through the generated client, in the embed tenant when one is given.
func (p *platform) mintTyped(t *testing.T, key *client.ClientWithResponses, tenant *string) string {
	t.Helper()
	var region client.UserAttributeValue_Value
	if err := region.FromUserAttributeValueValue0("EMEA"); err != nil {
		t.Fatal(err)
	}
	externalID := p.unique("viewer")
	r, err := key.GenerateEmbedSessionWithResponse(context.Background(), nil, client.GenerateEmbedSessionJSONRequestBody{
		DeploymentId: p.dep1, ExternalId: &externalID, EmbedTenantName: tenant,
		UserAttributes: &[]client.UserAttributeValue{{Name: "region", Value: region}},
	})
	minted := answered(t, r, err, 200).JSON200
	if minted.SessionId == nil || *minted.SessionId == "" {
		t.Fatalf("generate-session answered %s: want a sessionId", r.Body)
	}
	return *minted.SessionId
}

// answered checks a call of the generated client: it was sent and answered with status
// (its body then decoded into the matching JSONnnn field). It returns r.
func answered[R interface{ StatusCode() int }](t *testing.T, r R, err error, status int) R {
	t.Helper()
	if err != nil {
		t.Fatalf("generated client: %v", err)
	}
	if got := r.StatusCode(); got != status {
		t.Fatalf("generated client: status %d, want %d; body %s", got, status, reflect.ValueOf(r).Elem().FieldByName("Body").Bytes())
	}
	return r
}
