package faults_test

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/analyticsco/platform/devstack/apitest"
	"github.com/analyticsco/platform/systemtest/stacktest"
)

// TestTwoReplicasOfEveryService: with two replicas of each service behind the gateway
// (round robin) and two dbt sync workers, concurrent folder moves keep the tree a tree,
// concurrent mints of one externalId make one user, a revoke through one replica is
// honoured on the very next requests whichever replica they reach, and every sync job
// finishes once. One stack serves the subtests: they use disjoint data.
func TestTwoReplicasOfEveryService(t *testing.T) {
	s := stacktest.Start(t, stacktest.Options{Replicas: 2, Workers: 2, Env: noRateLimits})
	a := newAPI(s)
	acme := s.Seed.Accounts["acme"]
	key, dep := acme.APIKeys["admin"], acme.Deployments[0].ID

	t.Run("concurrent folder moves leave the tree acyclic, within 8 levels and complete", func(t *testing.T) {
		ws := &workspace{api: a, dep: acme.Deployments[1].ID, authz: apitest.Bearer(acme.Users["admin"].Bearer)}
		var folders []item
		for i := range 16 {
			folders = append(folders, item{"FOLDER", idOf(t, ws.createFolder(fmt.Sprintf("replica-%d", i), 0))})
		}
		answers := map[int]int{}
		var mu sync.Mutex
		var wg sync.WaitGroup
		for g := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(uint64(g), 42))
				for range 15 {
					f := folders[rng.IntN(len(folders))]
					var dest int64
					if d := rng.IntN(len(folders) + 1); d < len(folders) {
						dest = folders[d].id
					}
					r := ws.move("FOLDER", f.id, dest)
					mu.Lock()
					answers[r.status]++
					mu.Unlock()
					// 200, or 400 for a move into its own subtree or past level 8: the
					// two replicas validate against the same tree version.
					if r.err != nil || (r.status != 200 && r.status != 400) {
						t.Errorf("move folder %d to %d: want 200 or 400, got %s", f.id, dest, r)
					}
				}
			}()
		}
		wg.Wait()
		t.Logf("moves by answer: %v", answers)
		tree := ws.tree(t) // fails on an item listed twice or a level past 8
		for _, f := range folders {
			if _, ok := tree[f]; !ok {
				t.Errorf("%s is missing from the tree (lost or on a cycle)", f)
			}
		}
		if len(tree) != len(folders) {
			t.Errorf("the tree holds %d items, want the %d folders created", len(tree), len(folders))
		}
		if answers[200] == 0 {
			t.Error("no move succeeded")
		}
	})

	t.Run("concurrent mints of one externalId make one user", func(t *testing.T) {
		const mints = 8
		sessions := make([]reply, mints)
		var wg sync.WaitGroup
		for i := range mints {
			wg.Add(1)
			go func() {
				defer wg.Done()
				sessions[i] = mint(a, key, dep, map[string]any{"externalId": "replica-same-user", "groups": []string{"sales"}})
			}()
		}
		wg.Wait()
		userIDs := map[float64]int{}
		for _, r := range sessions {
			info := sessionInfo(a, tokenOf(t, exchange(a, sessionIDOf(t, r))))
			user, _ := info.body["user"].(map[string]any)
			id, _ := user["id"].(float64)
			if info.status != 200 || user["externalId"] != "replica-same-user" || id == 0 {
				t.Fatalf("session info: %s", info)
			}
			userIDs[id]++
		}
		if len(userIDs) != 1 {
			t.Errorf("sessions of one externalId belong to %d users, want 1: %v", len(userIDs), userIDs)
		}
		if n := countDocs(t, s.Mongo.URI, "embed", "external_users", bsonFilter("externalId", "replica-same-user")); n != 1 {
			t.Errorf("stored external users with externalId replica-same-user: %d, want 1", n)
		}
	})

	t.Run("a revoke through one replica is seen on the very next requests to both", func(t *testing.T) {
		// Several sessions, so the revokes themselves go through both embed replicas.
		for i := range 4 {
			sid := sessionIDOf(t, mint(a, key, dep, map[string]any{"externalId": fmt.Sprintf("replica-revoke-%d", i)}))
			token := tokenOf(t, exchange(a, sid))
			for range 2 {
				if r := sessionInfo(a, token); r.status != 200 {
					t.Fatalf("session info before the revoke: %s", r)
				}
			}
			if r := revoke(a, key, sid); r.status != 204 {
				t.Fatalf("revoke: want 204, got %s", r)
			}
			revokedAt := time.Now()
			// Four requests reach both replicas whatever the round robin's position.
			for n := range 4 {
				r := sessionInfo(a, token)
				if r.status != 401 || !r.errorBody() {
					t.Errorf("session %d, request %d after the revoke (%s later): want 401 with the error body, got %s",
						i, n+1, time.Since(revokedAt).Round(time.Millisecond), r)
				}
			}
			if r := a.call("POST", "/api/v1/embed/session/ai-credentials", apitest.Bearer(token), nil); r.status != 401 {
				t.Errorf("session %d: ai-credentials after the revoke: want 401, got %s", i, r)
			}
		}
	})

	t.Run("sync jobs processed by two workers each finish once", func(t *testing.T) {
		d := &dbtSync{api: a, dep: dep, authz: apitest.Bearer(acme.Users["developer"].Bearer)}
		jobBranch := map[string]string{}
		var ids []string
		for i := range 6 {
			branch := fmt.Sprintf("replica-sync-%d", i)
			r := d.start(branch, "orders", fmt.Sprintf("model_%d", i))
			id, _ := r.body["syncJobId"].(string)
			if r.status != 202 || id == "" {
				t.Fatalf("start sync to %s: want 202, got %s", branch, r)
			}
			jobBranch[id], ids = branch, append(ids, id)
		}
		d.checkOnceEach(t, jobBranch, d.waitFinished(t, ids, 90*time.Second))
	})
}
