package dbtsync_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/analyticsco/platform/dbtsync-svc/internal/dbtsync"
	"github.com/analyticsco/platform/libs/errs"
	"github.com/analyticsco/platform/libs/identity"
)

const pushSecret = "a-webhook-secret-of-some-length"

// pusher is the gateway's anonymous principal for the deployment of the path.
var pusher = &identity.Principal{Credential: identity.CredentialNone, Account: identity.Account{ID: 1},
	Deployment: &identity.Deployment{ID: dep, ProductionBranch: prod}}

// pushFixture is a fixture whose integration (branch main) has pushSecret.
func pushFixture(t *testing.T) *fixture {
	t.Helper()
	f := newFixture(t)
	if _, err := f.svc.PutIntegration(context.Background(), admin, dep, dbtsync.IntegrationInput{RepoURL: "https://example.test/acme/dbt.git",
		Branch: "main", ProjectPath: new(string), WebhookSecret: secretField(pushSecret)}); err != nil {
		t.Fatal(err)
	}
	return f
}

func secretField(s string) dbtsync.SelectorField { return dbtsync.SelectorField{Set: true, Value: &s} }

func githubPayload(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("testdata/github-push.json")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func githubSign(secret, body string) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(body))
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

// push sends a push webhook through the HTTP transport as the gateway forwards it.
func (f *fixture) push(t *testing.T, p *identity.Principal, headers map[string]string, body string) (int, map[string]any) {
	t.Helper()
	h := f.handler(p, 1<<20)
	r := httptest.NewRequest("POST", "/api/v1/deployments/11/dbt-git-integration/webhook", strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	for k, v := range headers {
		r.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	var out map[string]any
	_ = json.Unmarshal(w.Body.Bytes(), &out)
	return w.Code, out
}

func github(event, delivery, sig string) map[string]string {
	return map[string]string{"X-GitHub-Event": event, "X-GitHub-Delivery": delivery, "X-Hub-Signature-256": sig}
}

func TestGitHubPushStartsOneSyncOfTheCommit(t *testing.T) {
	f := pushFixture(t)
	body := githubPayload(t)
	code, out := f.push(t, pusher, github("push", "d-1", githubSign(pushSecret, body)), body)
	if code != http.StatusAccepted || out["started"] != true || out["commit"] != "0d1a26e67d8f5eaf1f6ba5c57fc3c7d91ac0fd1c" {
		t.Fatalf("push: %d %v", code, out)
	}
	id := out["syncJobId"].(string)
	job, err := f.svc.GetJob(context.Background(), developer, dep, id)
	if err != nil {
		t.Fatal(err)
	}
	if job.Trigger != dbtsync.TriggerPush || job.Commit == nil || *job.Commit != "0d1a26e67d8f5eaf1f6ba5c57fc3c7d91ac0fd1c" ||
		job.Ref == nil || *job.Ref != "main" || job.BranchName != "dbt/main" || job.Source != "git" {
		t.Fatalf("job %+v", job)
	}
	// The same delivery again, and the same commit in another delivery: no second job.
	code, out = f.push(t, pusher, github("push", "d-1", githubSign(pushSecret, body)), body)
	if code != http.StatusOK || out["started"] != false || out["reason"] != "duplicate_delivery" || out["syncJobId"] != id {
		t.Fatalf("replay: %d %v", code, out)
	}
	code, out = f.push(t, pusher, github("push", "d-2", githubSign(pushSecret, body)), body)
	if code != http.StatusOK || out["reason"] != "duplicate_commit" || out["syncJobId"] != id {
		t.Fatalf("same commit: %d %v", code, out)
	}
	if n, _ := f.queue.QueuedJobs(context.Background(), dbtsync.QueueKey{Account: 1, Deployment: dep}); n != 1 {
		t.Fatalf("%d jobs queued, want 1", n)
	}
}

func TestPushUnverifiedIsOne401(t *testing.T) {
	f := pushFixture(t)
	body := githubPayload(t)
	cases := map[string]struct {
		p       *identity.Principal
		headers map[string]string
	}{
		"bad signature":      {pusher, github("push", "d-1", githubSign("another-secret-of-some-length", body))},
		"no signature":       {pusher, github("push", "d-1", "")},
		"not hex":            {pusher, github("push", "d-1", "sha256=zz")},
		"no provider header": {pusher, map[string]string{}},
		"gitlab wrong token": {pusher, map[string]string{"X-Gitlab-Event": "Push Hook", "X-Gitlab-Token": "nope"}},
		"no deployment":      {&identity.Principal{Credential: identity.CredentialNone}, github("push", "d-1", githubSign(pushSecret, body))},
	}
	var first map[string]any
	for name, c := range cases {
		code, out := f.push(t, c.p, c.headers, body)
		if code != http.StatusUnauthorized || out["code"] != "unauthenticated" {
			t.Fatalf("%s: %d %v", name, code, out)
		}
		if first == nil {
			first = out
		} else if out["message"] != first["message"] {
			t.Fatalf("%s answers %q, another case %q", name, out["message"], first["message"])
		}
	}
	// No secret, no integration: the same 401.
	g := newFixture(t)
	if code, out := g.push(t, pusher, github("push", "d-1", githubSign(pushSecret, body)), body); code != 401 || out["message"] != first["message"] {
		t.Fatalf("no integration: %d %v", code, out)
	}
	g.integration(t, "main")
	if code, out := g.push(t, pusher, github("push", "d-1", githubSign(pushSecret, body)), body); code != 401 || out["message"] != first["message"] {
		t.Fatalf("no secret: %d %v", code, out)
	}
	if first["message"] != errs.PushUnverified {
		t.Fatalf("message %q", first["message"])
	}
	if n, _ := f.queue.QueuedJobs(context.Background(), dbtsync.QueueKey{Account: 1, Deployment: dep}); n != 0 {
		t.Fatalf("%d jobs queued by unverified pushes", n)
	}
}

func TestPushStartsNothingForOtherEvents(t *testing.T) {
	f := pushFixture(t)
	body := githubPayload(t)
	for name, c := range map[string]struct {
		event, body, reason string
	}{
		"ping":          {"ping", `{"zen":"Design for failure.","hook_id":1}`, "ping"},
		"issues":        {"issues", `{"action":"opened"}`, "not_a_push_event"},
		"tag":           {"push", strings.Replace(body, "refs/heads/main", "refs/tags/v1.0.0", 1), "tag_push"},
		"other branch":  {"push", strings.Replace(body, "refs/heads/main", "refs/heads/feature", 1), "other_branch"},
		"deleted":       {"push", strings.Replace(strings.Replace(body, `"deleted": false`, `"deleted": true`, 1), "0d1a26e67d8f5eaf1f6ba5c57fc3c7d91ac0fd1c", "0000000000000000000000000000000000000000", 1), "branch_deleted"},
		"prefix branch": {"push", strings.Replace(body, "refs/heads/main", "refs/heads/main2", 1), "other_branch"},
	} {
		code, out := f.push(t, pusher, github(c.event, "d-"+name, githubSign(pushSecret, c.body)), c.body)
		if code != http.StatusOK || out["started"] != false || out["reason"] != c.reason {
			t.Fatalf("%s: %d %v", name, code, out)
		}
	}
	// A verified body that is no push payload is 400 and starts nothing.
	bad := `{"ref": 7}`
	if code, out := f.push(t, pusher, github("push", "d-bad", githubSign(pushSecret, bad)), bad); code != 400 {
		t.Fatalf("bad payload: %d %v", code, out)
	}
	if n, _ := f.queue.QueuedJobs(context.Background(), dbtsync.QueueKey{Account: 1, Deployment: dep}); n != 0 {
		t.Fatalf("%d jobs queued", n)
	}
}

func TestGitLabPushWithItsToken(t *testing.T) {
	f := pushFixture(t)
	body := `{"object_kind":"push","event_name":"push","before":"95790bf891e76fee5e1747ab589903a6a1f80f22","after":"da1560886d4f094c3e6c9ef40349f7d38b5d27d7",` +
		`"ref":"refs/heads/main","checkout_sha":"da1560886d4f094c3e6c9ef40349f7d38b5d27d7","user_username":"ada","project_id":15,` +
		`"project":{"id":15,"name":"analytics-dbt","path_with_namespace":"acme/analytics-dbt","default_branch":"main"},"commits":[],"total_commits_count":1}`
	h := map[string]string{"X-Gitlab-Event": "Push Hook", "X-Gitlab-Token": pushSecret, "X-Gitlab-Event-UUID": "13792a34-cac6-4fda-95a8-c58e00a3954e"}
	code, out := f.push(t, pusher, h, body)
	if code != http.StatusAccepted || out["commit"] != "da1560886d4f094c3e6c9ef40349f7d38b5d27d7" {
		t.Fatalf("gitlab push: %d %v", code, out)
	}
	if code, out := f.push(t, pusher, h, body); code != 200 || out["reason"] != "duplicate_delivery" {
		t.Fatalf("gitlab replay: %d %v", code, out)
	}
}

func TestPushFullQueueIs429AndForgetsTheDelivery(t *testing.T) {
	f := newFixtureWith(t, dbtsync.Options{MaxQueuedJobs: 1})
	if _, err := f.svc.PutIntegration(context.Background(), admin, dep, dbtsync.IntegrationInput{RepoURL: "https://example.test/acme/dbt.git",
		Branch: "main", ProjectPath: new(string), WebhookSecret: secretField(pushSecret)}); err != nil {
		t.Fatal(err)
	}
	body := githubPayload(t)
	first := strings.ReplaceAll(body, "0d1a26e67d8f5eaf1f6ba5c57fc3c7d91ac0fd1c", "1111111111111111111111111111111111111111")
	code, out := f.push(t, pusher, github("push", "d-0", githubSign(pushSecret, first)), first)
	if code != http.StatusAccepted {
		t.Fatalf("first push: %d %v", code, out)
	}
	code, out = f.push(t, pusher, github("push", "d-1", githubSign(pushSecret, body)), body)
	if code != http.StatusTooManyRequests || out["code"] != "job_limit" {
		t.Fatalf("full queue: %d %v", code, out)
	}
	// The refused push holds no claim: the provider's retry of the delivery, once there
	// is room, may start the sync.
	for _, key := range []string{"delivery:github:d-1", "commit:0d1a26e67d8f5eaf1f6ba5c57fc3c7d91ac0fd1c"} {
		if owner, err := f.store.ClaimPush(context.Background(), dep, key, "probe", f.clock.Now(), time.Hour); err != nil || owner != "probe" {
			t.Fatalf("%s still claimed by %q (%v)", key, owner, err)
		}
	}
}

func TestPushBodyLimitIs413(t *testing.T) {
	f := pushFixture(t)
	body := `{"ref":"refs/heads/main","pad":"` + strings.Repeat("x", dbtsync.DefaultMaxPushBodyBytes) + `"}`
	if code, out := f.push(t, pusher, github("push", "d-1", githubSign(pushSecret, body)), body); code != http.StatusRequestEntityTooLarge {
		t.Fatalf("oversized: %d %v", code, out)
	}
}

// The integration's PUT: an omitted webhookSecret keeps it (changing the branch keeps
// the trigger), null clears it, a short one is 400; it is never answered.
func TestPutIntegrationKeepsOrClearsTheWebhookSecret(t *testing.T) {
	f := pushFixture(t)
	ctx := context.Background()
	got, err := f.svc.PutIntegration(ctx, admin, dep, dbtsync.IntegrationInput{RepoURL: "https://example.test/acme/dbt.git", Branch: "develop", ProjectPath: new(string)})
	if err != nil || !got.WebhookSecretSet {
		t.Fatalf("branch change: %+v %v", got, err)
	}
	body := strings.Replace(githubPayload(t), "refs/heads/main", "refs/heads/develop", 1)
	if code, out := f.push(t, pusher, github("push", "d-1", githubSign(pushSecret, body)), body); code != http.StatusAccepted {
		t.Fatalf("push after the branch change: %d %v", code, out)
	}
	if _, err := f.svc.PutIntegration(ctx, admin, dep, dbtsync.IntegrationInput{RepoURL: "https://example.test/acme/dbt.git", Branch: "develop",
		ProjectPath: new(string), WebhookSecret: secretField("short")}); err == nil || !strings.Contains(err.Error(), "16 to 256") {
		t.Fatalf("short secret: %v", err)
	}
	got, err = f.svc.PutIntegration(ctx, admin, dep, dbtsync.IntegrationInput{RepoURL: "https://example.test/acme/dbt.git", Branch: "develop",
		ProjectPath: new(string), WebhookSecret: dbtsync.SelectorField{Set: true}})
	if err != nil || got.WebhookSecretSet {
		t.Fatalf("cleared: %+v %v", got, err)
	}
	if code, _ := f.push(t, pusher, github("push", "d-2", githubSign(pushSecret, body)), body); code != 401 {
		t.Fatalf("push after the secret was cleared: %d", code)
	}
	stored, _ := f.store.Integration(ctx, dep)
	if strings.Contains(string(stored.WebhookSecret), pushSecret) {
		t.Fatal("the secret is stored in the clear")
	}
}

// FuzzPushWebhook: any signed body and provider headers are answered 200, 202 or a 4xx;
// never a panic or a 5xx, and a started sync names a commit of 40 or 64 hex digits.
func FuzzPushWebhook(f *testing.F) {
	for _, s := range []string{`{}`, `{"ref":"refs/heads/main","after":"0d1a26e67d8f5eaf1f6ba5c57fc3c7d91ac0fd1c"}`,
		`{"ref":"refs/tags/v1","after":"0d1a26e67d8f5eaf1f6ba5c57fc3c7d91ac0fd1c"}`, `{"ref":"refs/heads/main","after":"zz"}`,
		`{"ref":"refs/heads/main","deleted":true,"after":"0000000000000000000000000000000000000000"}`, `[`, `{"ref":1}`, "\"\xff\""} {
		f.Add(s, "push", "d-1")
		f.Add(s, "Push Hook", "")
	}
	f.Fuzz(func(t *testing.T, body, event, delivery string) {
		fx := pushFixture(t)
		headers := github(event, delivery, githubSign(pushSecret, body))
		if strings.HasSuffix(event, "Hook") {
			headers = map[string]string{"X-Gitlab-Event": event, "X-Gitlab-Token": pushSecret, "X-Gitlab-Event-UUID": delivery}
		}
		code, out := fx.push(t, pusher, headers, body)
		switch {
		case code >= 500 || code < 200 || (code >= 300 && code < 400):
			t.Fatalf("%d %v", code, out)
		case code == http.StatusAccepted:
			if c, _ := out["commit"].(string); !(len(c) == 40 || len(c) == 64) {
				t.Fatalf("started with commit %q", c)
			}
		}
	})
}
