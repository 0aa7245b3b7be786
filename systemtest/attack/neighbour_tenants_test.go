package attack_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/analyticsco/platform/devstack"
	"github.com/analyticsco/platform/devstack/apitest"
	"github.com/analyticsco/platform/devstack/neighbour"
	"github.com/analyticsco/platform/systemtest/stacktest"
)

// neighbourManifest is the neighbour's dbt project: jaffle_shop, dbt 1.10 (13 models,
// semantic models and metrics).
const neighbourManifest = "manifest-v12-dbt-1.10.json"

// floodPause paces each of the flood's clients: the local stack's one store serializes
// every command of every tenant, and a flood at full speed on a shared machine makes it
// answer everyone late, which is make bench's question (-only neighbour), not this test's.
const floodPause = 250 * time.Millisecond

// The noisy-neighbour run, function only (its latencies are make bench's
// -only neighbour): while acme floods every share tenants have in common at once (its
// viewer's bulk moves of 100 workbooks of the maximum size, mints with maximal attribute
// sets until its live-session cap, its deployments' dbt queues at their caps with a
// compressed bomb and concurrent uploads at the quota, anonymous failed exchanges), globex
// runs a fixed workload, and none of it is refused, failed or lost: every request
// answered as it is on the quiet platform (no 5xx, no 429), its sync's branch holds the
// same files as the quiet run's, its audit events are all in its trail, and workspace-svc
// read nothing of the items the viewer was refused.
func TestAFloodingAccountTakesNothingFromAnother(t *testing.T) {
	s := stacktest.Start(t, stacktest.Options{Env: append(slices.Clone(neighbour.StackEnv),
		// Low, so the flood is at its live-session cap while globex mints; globex's own
		// mints stay far below it.
		"EMBED_MAX_LIVE_SESSIONS_PER_ACCOUNT=40",
		// Low, so the flood's events are merged past the budget; globex's stay below it.
		"AUDIT_ACCOUNT_MAX_EVENTS=200")})
	manifest, err := os.ReadFile(filepath.Join(devstack.RepoRoot(t), "..", "shared", "fixtures", "dbt", neighbourManifest))
	if err != nil {
		t.Fatalf("the shared dbt fixtures (../shared/fixtures/dbt): %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	run, err := neighbour.Prepare(ctx, neighbour.Options{Gateway: s.Gateway, Seed: s.Seed, Manifest: manifest, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}

	// Quiet: the workload alone, the reference of what it reads and what its sync writes.
	docs0, bytes0 := storeReads(t, s)
	quiet := laps(ctx, run, 2)
	docs1, bytes1 := storeReads(t, s)
	quietSync, quietFiles := run.Sync(ctx, "neighbour/quiet")
	requireAnswered(t, "quiet", append(quiet, quietSync))
	if len(quietFiles) == 0 {
		t.Fatal("the quiet sync wrote no files")
	}

	// Loud: the same workload once the flood has met each of its limits (the mints their
	// live-session cap too), the flood on until it ends.
	flood := run.StartFlood(ctx, floodPause)
	stop := sync.OnceValue(flood.Stop)
	t.Cleanup(func() { stop() })
	if err := flood.WaitAtCaps(ctx, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	apitest.Eventually(t, time.Minute, "the flooder at its live-session cap", func() (bool, string) {
		st := flood.Stats()
		return st.Count(neighbour.StreamMint, "403 live_session_limit") > 0, st.String()
	})
	loud := laps(ctx, run, 2)
	loudSync, loudFiles := run.Sync(ctx, "neighbour/loud")
	stats := stop()
	docs2, bytes2 := storeReads(t, s)
	t.Logf("the flood: %s", stats)
	requireAnswered(t, "under the flood", append(loud, loudSync))
	if fmt.Sprint(loudFiles) != fmt.Sprint(quietFiles) {
		t.Fatalf("the sync under the flood wrote %v, the quiet one %v", loudFiles, quietFiles)
	}

	t.Run("the flood met its limits", func(t *testing.T) { checkFloodAtLimits(ctx, t, run, stats) })
	t.Run("nothing refused was read", func(t *testing.T) {
		// The workload reads the same in every lap, so the flood's window read what the
		// quiet one did plus what the viewer's refused moves read: nothing, as
		// TestBulkMoveOfMaximumItemsReadsOnlyWhatAccessNeeds proves of one such move.
		docs, bytes := (docs2-docs1)-(docs1-docs0), (bytes2-bytes1)-(bytes1-bytes0)
		t.Logf("%d viewer bulk moves of 100 items of ~%d KiB: the store returned %.0f documents and %.0f bytes more than on the quiet platform",
			stats.Total(neighbour.StreamMove), 5*neighbour.ItemCap>>10, docs, bytes)
		// Bytes get a KiB of slack for the replies' own drift (cursor ids, counters); one
		// item of the flood's is ~5 KiB.
		if docs > 0 || bytes > 1024 {
			t.Fatalf("the store returned %.0f documents and %.0f bytes beyond the workload's own while the viewer's moves were refused, want none",
				docs, bytes)
		}
	})
	t.Run("every audit event of the neighbour is in its trail", func(t *testing.T) {
		checkNeighbourTrail(t, s, append(append(quiet, loud...), quietSync, loudSync))
	})
}

// laps runs n laps of the neighbour's workload.
func laps(ctx context.Context, run *neighbour.Run, n int) []neighbour.Sample {
	var out []neighbour.Sample
	for range n {
		out = append(out, run.Lap(ctx)...)
	}
	return out
}

// requireAnswered fails t unless every sample is the answer the workload expects.
func requireAnswered(t *testing.T, phase string, samples []neighbour.Sample) {
	t.Helper()
	for _, s := range samples {
		if s.Err != nil {
			t.Fatalf("%s, the neighbour's %s: %v", phase, s.Op, s.Err)
		}
	}
}

// checkFloodAtLimits: the flood was what it claims to be. Every bulk move of the viewer
// refused all of its items (or met the account's budget), the mints met the live-session cap, the bomb's queue its
// job cap, the uploads the storage quota, and each bomb job failed naming the repository
// limit.
func checkFloodAtLimits(ctx context.Context, t *testing.T, run *neighbour.Run, st neighbour.Stats) {
	// The account's budget may refuse some of them first (429 rate_limited, bulk move
	// costing 10): a limit met too.
	refused := st.Count(neighbour.StreamMove, neighbour.OutcomeRefused)
	if n := refused + st.Count(neighbour.StreamMove, "429 rate_limited"); refused == 0 || n != st.Total(neighbour.StreamMove) {
		t.Errorf("the viewer's bulk moves: %v, want every one 200 with all items refused, or over the account's budget", st[neighbour.StreamMove])
	}
	for _, c := range []struct{ stream, outcome string }{
		{neighbour.StreamMint, "403 live_session_limit"}, {neighbour.StreamBomb, "429 job_limit"}, {neighbour.StreamUpload, "413 storage_quota"},
	} {
		if st.Count(c.stream, c.outcome) == 0 {
			t.Errorf("%s: %v, want some %s", c.stream, st[c.stream], c.outcome)
		}
	}
	drain, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	jobs, err := run.Drain(drain)
	if err != nil {
		t.Fatal(err)
	}
	bombs := 0
	for id, j := range jobs {
		if j.Deployment == run.BombDeployment() {
			bombs++
			if j.Status != "failed" || j.ErrorCode != "repository_limit" {
				t.Errorf("bomb job %s ended %s (%s), want failed repository_limit", id, j.Status, j.ErrorCode)
			}
		}
	}
	if bombs == 0 {
		t.Errorf("no bomb job ended")
	}
}

// checkNeighbourTrail: each of the neighbour's writes (mints, exchanges, bulk moves, sync
// starts) is in its account's trail under its request id, and each sync's end under its
// job.
func checkNeighbourTrail(t *testing.T, s *stacktest.Stack, samples []neighbour.Sample) {
	a := newAPI(s)
	admin := apitest.Bearer(s.Seed.Accounts["globex"].Users["admin"].Bearer)
	want := map[string]string{} // request id or job id -> what it was
	for _, sm := range samples {
		switch sm.Op {
		case neighbour.OpMint, neighbour.OpExchange, neighbour.OpBulkMove, neighbour.OpSync:
			want[sm.RequestID] = sm.Op
		}
		if sm.JobID != "" {
			want["job "+sm.JobID] = "the end of job " + sm.JobID
		}
	}
	apitest.Eventually(t, 90*time.Second, "the neighbour's events in its trail", func() (bool, string) {
		found := map[string]bool{}
		for _, e := range trail(t, a, admin, "") {
			if e.RequestID != nil {
				found[*e.RequestID] = true
			}
			if e.Action == "dbtsync.sync.finish" {
				found["job "+e.Target.ID] = true
			}
		}
		var missing []string
		for id, what := range want {
			if !found[id] {
				missing = append(missing, what+" "+id)
			}
		}
		return len(missing) == 0, fmt.Sprintf("%d of %d missing: %v", len(missing), len(want), missing)
	})
}
