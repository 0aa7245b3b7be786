package gateway

import "testing"

// TestTrashBulkRoutesCostABulkMove: bulk delete, restore and purge of the trash apply up
// to a page of items each, as a bulk move does, and cost what it costs; the trash listing
// is a read.
func TestTrashBulkRoutesCostABulkMove(t *testing.T) {
	for _, p := range []string{"/api/v1/deployments/7/workspace/bulk-delete", "/api/v1/deployments/7/workspace/trash/restore",
		"/api/v1/deployments/7/workspace/trash/purge"} {
		r, ok := match(p)
		if !ok || r.svc != svcWorkspace || r.costOf("POST") != costBulkMove {
			t.Errorf("%s: matched %v, cost %d, want workspace-svc at %d", p, ok, r.costOf("POST"), costBulkMove)
		}
	}
	if r, ok := match("/api/v1/deployments/7/workspace/trash"); !ok || r.costOf("GET") != 1 {
		t.Errorf("the trash listing: matched %v, cost %d", ok, r.costOf("GET"))
	}
}
