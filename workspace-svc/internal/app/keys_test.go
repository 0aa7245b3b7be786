package app_test

import (
	"sync"
	"testing"
)

// TestConcurrentPutsByKeyCreateOnce: on FerretDB, concurrent PUTs of one new key create
// exactly one item (one 201, the others 200 with the same id), for a workbook and for a
// folder (whose creation goes through the tree protocol: a creation that finds the key
// taken when applied is void, and its PUT replaces the winner instead).
func TestConcurrentPutsByKeyCreateOnce(t *testing.T) {
	e := newEnv(t, 1)
	dep := e.dep("acme", 0)
	admin := e.bearer("acme", "admin")
	for _, kind := range []string{"workbooks", "folders"} {
		const n = 6
		var wg sync.WaitGroup
		statuses, ids := make([]int, n), make([]float64, n)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := e.api.Call(t, "PUT", depPath(dep, "/"+kind+"/by-key/same-key"), authz(admin), map[string]any{"name": "Same"})
				statuses[i] = r.Status
				if r.Status == 200 || r.Status == 201 {
					ids[i], _ = r.Object(t)["id"].(float64)
				}
			}()
		}
		wg.Wait()
		created := 0
		for i, s := range statuses {
			switch {
			case s == 201:
				created++
			case s != 200:
				t.Fatalf("%s: PUT %d answered %d, want 200 or 201", kind, i, s)
			}
			if ids[i] != ids[0] {
				t.Fatalf("%s: PUTs answered items %v, want one", kind, ids)
			}
		}
		if created != 1 {
			t.Fatalf("%s: %d of %d concurrent PUTs of one key created (%v), want exactly one", kind, created, n, statuses)
		}
	}
}
