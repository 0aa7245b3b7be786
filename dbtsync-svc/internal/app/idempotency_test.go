package app_test

import (
	"encoding/json"
	"testing"

	"github.com/analyticsco/platform/devstack/apitest"
	"github.com/analyticsco/platform/libs/idempotency"
)

// TestManifestUploadRetriedWithItsKeyQueuesOneJob: through the gateway, a manifest upload
// sent again with its Idempotency-Key answers the first job (hashed as it streams into
// dbtsync-svc), and another manifest under the key is 422.
func TestManifestUploadRetriedWithItsKeyQueuesOneJob(t *testing.T) {
	h := newHarness(t)
	post := func(key string, body any) apitest.Response {
		t.Helper()
		req, err := h.api.Request("POST", h.syncPath(), apitest.Bearer(h.dev), body)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set(idempotency.Header, key)
		return h.api.Send(t, req)
	}
	body := map[string]any{"source": "manifest", "manifest": smallManifest("v12", "a", "b"), "branchName": "idem"}
	first := post("sync-1", body)
	again := post("sync-1", body)
	if first.Status != 202 || again.Status != 202 || string(first.Body) != string(again.Body) || again.Header.Get(idempotency.ReplayedHeader) != "true" {
		t.Fatalf("first %d %s; retry %d %s (replayed %q)", first.Status, first.Body, again.Status, again.Body, again.Header.Get(idempotency.ReplayedHeader))
	}
	code, list := h.do("GET", h.syncPath(), h.dev, nil)
	raw, _ := json.Marshal(list)
	var jobs struct {
		Items []json.RawMessage `json:"items"`
	}
	_ = json.Unmarshal(raw, &jobs)
	if code != 200 || len(jobs.Items) != 1 {
		t.Fatalf("jobs: %d %s, want one job", code, raw)
	}
	other := post("sync-1", map[string]any{"source": "manifest", "manifest": smallManifest("v12", "c"), "branchName": "idem"})
	if other.Status != 422 || other.Error(t).Code != "idempotency_key_reused" {
		t.Fatalf("another manifest: %d %s", other.Status, other.Body)
	}
}
