// Package storetest is the contract of dbtsync's store ports (dbtsync.BranchStore,
// dbtsync.IntegrationStore and dbtsync.PushLog): one suite that every adapter runs
// (mongostore on FerretDB, memstore in memory), so the service's unit tests on the fake
// test what production does. Every case runs in parallel with a store of its own.
package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/analyticsco/platform/dbtsync-svc/internal/convert"
	"github.com/analyticsco/platform/dbtsync-svc/internal/dbtsync"
)

// Store is what every adapter implements.
type Store interface {
	dbtsync.BranchStore
	dbtsync.IntegrationStore
	dbtsync.PushLog
}

// Run runs every case of the contract against a store newStore returns (one per case).
func Run(t *testing.T, newStore func(t *testing.T) Store) {
	t.Run("branch-store", func(t *testing.T) {
		t.Parallel()
		run(t, branchCases, func(t *testing.T) dbtsync.BranchStore { return newStore(t) })
	})
	t.Run("push-log", func(t *testing.T) {
		t.Parallel()
		run(t, pushCases, func(t *testing.T) dbtsync.PushLog { return newStore(t) })
	})
	t.Run("integration-store", func(t *testing.T) {
		t.Parallel()
		run(t, integrationCases, func(t *testing.T) dbtsync.IntegrationStore { return newStore(t) })
	})
}

// run runs every case, in parallel, each on a store of its own.
func run[T any](t *testing.T, cases []struct {
	name string
	test func(t *testing.T, s T)
}, open func(t *testing.T) T) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.test(t, open(t))
		})
	}
}

func files(names ...string) []convert.File {
	out := make([]convert.File, len(names))
	for i, n := range names {
		out[i] = convert.File{Path: "model/cubes/" + n + ".yml", Content: "cube: " + n + "\n"}
	}
	return out
}

// at is a time as the stores keep it: in UTC, to the millisecond.
func at(sec int) time.Time { return time.Unix(1_800_000_000+int64(sec), 123_000_000).UTC() }

const dep = 7

var branchCases = []struct {
	name string
	test func(t *testing.T, s dbtsync.BranchStore)
}{
	{"a-branch-nobody-wrote-is-not-found", func(t *testing.T, s dbtsync.BranchStore) {
		ctx := context.Background()
		if _, err := s.Branch(ctx, dep, "nope"); !errors.Is(err, dbtsync.ErrNotFound) {
			t.Errorf("Branch: %v", err)
		}
		if _, _, err := s.Files(ctx, dep, "nope", 0, "", false); !errors.Is(err, dbtsync.ErrNotFound) {
			t.Errorf("Files: %v", err)
		}
		if _, err := s.SetLease(ctx, dep, "nope", at(60), at(0)); !errors.Is(err, dbtsync.ErrNotFound) {
			t.Errorf("SetLease: %v", err)
		}
		if _, err := s.SetStaging(ctx, dep, "nope", true, at(0)); !errors.Is(err, dbtsync.ErrNotFound) {
			t.Errorf("SetStaging: %v", err)
		}
		if bs, err := s.Branches(ctx, dep, "", "", 10); err != nil || len(bs) != 0 {
			t.Errorf("Branches: %v %v", bs, err)
		}
	}},
	{"the-first-version-creates-the-branch", func(t *testing.T, s dbtsync.BranchStore) {
		ctx := context.Background()
		v, changed, err := s.WriteVersion(ctx, dep, "dbt/main", "sj1", files("orders", "customers"), at(0))
		if err != nil || v != 1 || !changed {
			t.Fatalf("WriteVersion = %d %v %v", v, changed, err)
		}
		b, err := s.Branch(ctx, dep, "dbt/main")
		if err != nil {
			t.Fatal(err)
		}
		if b.Name != "dbt/main" || b.LatestVersion != 1 || b.StagingEnabled || b.LeaseExpiresAt != nil || !b.UpdatedAt.Equal(at(0)) ||
			len(b.Versions) != 1 || b.Versions[0].Version != 1 || b.Versions[0].SyncJobID != "sj1" || b.Versions[0].FileCount != 2 ||
			!b.Versions[0].CreatedAt.Equal(at(0)) {
			t.Errorf("branch %+v", b)
		}
	}},
	{"files-are-read-by-version-and-path", func(t *testing.T, s dbtsync.BranchStore) {
		ctx := context.Background()
		want := files("orders", "customers")
		if _, _, err := s.WriteVersion(ctx, dep, "b", "sj1", want, at(0)); err != nil {
			t.Fatal(err)
		}
		v, got, err := s.Files(ctx, dep, "b", 0, "", false)
		if err != nil || v != 1 || len(got) != 2 || got[0].Path != want[1].Path || got[1].Path != want[0].Path {
			t.Fatalf("Files(latest) = %d %+v %v, want both by path", v, got, err)
		}
		if f := got[0]; f.Content != "" || f.Size != int64(len(want[1].Content)) || f.SHA256 != dbtsync.ContentSHA256(want[1].Content) {
			t.Errorf("entry without content %+v", f)
		}
		_, one, err := s.Files(ctx, dep, "b", 1, want[0].Path, true)
		if err != nil || len(one) != 1 || one[0].Content != want[0].Content {
			t.Errorf("Files(path, content) = %+v %v", one, err)
		}
		if _, none, err := s.Files(ctx, dep, "b", 1, "model/cubes/none.yml", true); err != nil || len(none) != 0 {
			t.Errorf("a path the version lacks: %+v %v, want no file", none, err)
		}
		if _, _, err := s.Files(ctx, dep, "b", 2, "", false); !errors.Is(err, dbtsync.ErrNotFound) {
			t.Errorf("a version the branch does not have: %v", err)
		}
	}},
	{"a-job-writes-at-most-one-version", func(t *testing.T, s dbtsync.BranchStore) {
		ctx := context.Background()
		for i, fs := range [][]convert.File{files("a"), files("a", "b")} {
			v, changed, err := s.WriteVersion(ctx, dep, "b", "sj1", fs, at(i))
			if err != nil || v != 1 || !changed {
				t.Fatalf("write %d of the job = %d %v %v", i+1, v, changed, err)
			}
		}
		if b, _ := s.Branch(ctx, dep, "b"); len(b.Versions) != 1 || b.LatestVersion != 1 {
			t.Errorf("branch %+v, want one version", b)
		}
	}},
	{"identical-output-writes-no-version", func(t *testing.T, s dbtsync.BranchStore) {
		ctx := context.Background()
		if _, _, err := s.WriteVersion(ctx, dep, "b", "sj1", files("a", "b"), at(0)); err != nil {
			t.Fatal(err)
		}
		same := files("b", "a") // the same set in another order
		if v, changed, err := s.WriteVersion(ctx, dep, "b", "sj2", same, at(1)); err != nil || v != 1 || changed {
			t.Fatalf("identical = %d %v %v, want 1 unchanged", v, changed, err)
		}
		if v, changed, err := s.WriteVersion(ctx, dep, "b", "sj3", files("a", "c"), at(2)); err != nil || v != 2 || !changed {
			t.Fatalf("different = %d %v %v, want 2 changed", v, changed, err)
		}
	}},
	{"only-the-last-kept-versions-stay", func(t *testing.T, s dbtsync.BranchStore) {
		ctx := context.Background()
		n := dbtsync.KeptVersions + 2
		for i := 1; i <= n; i++ {
			if _, _, err := s.WriteVersion(ctx, dep, "b", fmt.Sprintf("sj%02d", i), files(fmt.Sprint("m", i)), at(i)); err != nil {
				t.Fatal(err)
			}
		}
		b, _ := s.Branch(ctx, dep, "b")
		if len(b.Versions) != dbtsync.KeptVersions || b.Versions[0].Version != 3 || b.LatestVersion != int64(n) {
			t.Fatalf("versions %d from %d, latest %d", len(b.Versions), b.Versions[0].Version, b.LatestVersion)
		}
		if _, _, err := s.Files(ctx, dep, "b", 2, "", false); !errors.Is(err, dbtsync.ErrNotFound) {
			t.Errorf("a dropped version: %v", err)
		}
		if _, fs, err := s.Files(ctx, dep, "b", 3, "", true); err != nil || len(fs) != 1 || fs[0].Path != "model/cubes/m3.yml" {
			t.Errorf("the oldest kept version: %+v %v", fs, err)
		}
	}},
	{"concurrent-writers-each-get-a-version", func(t *testing.T, s dbtsync.BranchStore) {
		ctx := context.Background()
		const writers = 6
		var wg sync.WaitGroup
		got := make([]int64, writers)
		for i := range writers {
			wg.Go(func() {
				v, _, err := s.WriteVersion(ctx, dep, "b", fmt.Sprint("sj", i), files(fmt.Sprint("m", i)), at(i))
				if err != nil {
					t.Error(err)
				}
				got[i] = v
			})
		}
		wg.Wait()
		slices.Sort(got)
		if fmt.Sprint(got) != "[1 2 3 4 5 6]" {
			t.Errorf("versions %v, want 1 to %d once each", got, writers)
		}
	}},
	{"lease-and-staging-are-kept", func(t *testing.T, s dbtsync.BranchStore) {
		ctx := context.Background()
		if _, _, err := s.WriteVersion(ctx, dep, "b", "sj1", files("a"), at(0)); err != nil {
			t.Fatal(err)
		}
		b, err := s.SetLease(ctx, dep, "b", at(600), at(1))
		if err != nil || b.LeaseExpiresAt == nil || !b.LeaseExpiresAt.Equal(at(600)) || !b.UpdatedAt.Equal(at(1)) {
			t.Fatalf("SetLease = %+v %v", b, err)
		}
		b, err = s.SetStaging(ctx, dep, "b", true, at(2))
		if err != nil || !b.StagingEnabled || !b.LeaseExpiresAt.Equal(at(600)) || !b.UpdatedAt.Equal(at(2)) {
			t.Fatalf("SetStaging = %+v %v", b, err)
		}
		if b, _ := s.Branch(ctx, dep, "b"); !b.StagingEnabled || b.LatestVersion != 1 {
			t.Errorf("read back %+v", b)
		}
	}},
	{"branches-are-the-deployments-own", func(t *testing.T, s dbtsync.BranchStore) {
		ctx := context.Background()
		for _, w := range []struct {
			deploymentID int64
			name         string
		}{{dep, "a"}, {dep, "b"}, {dep + 1, "a"}} {
			if _, _, err := s.WriteVersion(ctx, w.deploymentID, w.name, "sj-"+w.name, files(w.name), at(0)); err != nil {
				t.Fatal(err)
			}
		}
		bs, err := s.Branches(ctx, dep, "", "", 10)
		names := []string{}
		for _, b := range bs {
			names = append(names, b.Name)
		}
		if err != nil || fmt.Sprint(names) != "[a b]" {
			t.Errorf("Branches = %v %v", names, err)
		}
	}},
	{"branches-are-read-a-page-at-a-time-by-name", func(t *testing.T, s dbtsync.BranchStore) {
		ctx := context.Background()
		for _, name := range []string{"d", "main", "b", "e", "a", "c"} {
			if _, _, err := s.WriteVersion(ctx, dep, name, "sj-"+name, files(name), at(0)); err != nil {
				t.Fatal(err)
			}
		}
		var got []string
		for after := ""; ; {
			bs, err := s.Branches(ctx, dep, after, "main", 2)
			if err != nil || len(bs) > 2 {
				t.Fatalf("page after %q: %v %v", after, bs, err)
			}
			if len(bs) == 0 {
				break
			}
			for _, b := range bs {
				got = append(got, b.Name)
			}
			after = bs[len(bs)-1].Name
		}
		if fmt.Sprint(got) != "[a b c d e]" {
			t.Errorf("pages %v, want the branches but main by name", got)
		}
	}},
}

var integrationCases = []struct {
	name string
	test func(t *testing.T, s dbtsync.IntegrationStore)
}{
	{"none-saved-is-not-found", func(t *testing.T, s dbtsync.IntegrationStore) {
		if _, err := s.Integration(context.Background(), dep); !errors.Is(err, dbtsync.ErrNotFound) {
			t.Errorf("Integration: %v", err)
		}
	}},
	{"saved-reads-back-and-is-replaced-whole", func(t *testing.T, s dbtsync.IntegrationStore) {
		ctx := context.Background()
		first := dbtsync.Integration{DeploymentID: dep, RepoURL: "https://example.test/a.git", Branch: "main", ProjectPath: "analytics",
			ManifestPath: "target/manifest.json", Credentials: []byte{1, 2, 3}, WebhookSecret: []byte{4, 5}, UpdatedAt: at(0)}
		if err := s.SaveIntegration(ctx, first); err != nil {
			t.Fatal(err)
		}
		got, err := s.Integration(ctx, dep)
		if err != nil || got.RepoURL != first.RepoURL || got.Branch != first.Branch || got.ProjectPath != first.ProjectPath ||
			got.ManifestPath != first.ManifestPath || string(got.Credentials) != string(first.Credentials) || !got.UpdatedAt.Equal(at(0)) ||
			string(got.WebhookSecret) != string(first.WebhookSecret) {
			t.Fatalf("read back %+v %v", got, err)
		}
		second := dbtsync.Integration{DeploymentID: dep, RepoURL: "https://example.test/b.git", Branch: "dev", UpdatedAt: at(1)}
		if err := s.SaveIntegration(ctx, second); err != nil {
			t.Fatal(err)
		}
		got, err = s.Integration(ctx, dep)
		if err != nil || got.RepoURL != second.RepoURL || got.ManifestPath != "" || len(got.Credentials) != 0 || got.ProjectPath != "" || len(got.WebhookSecret) != 0 {
			t.Errorf("after a replace %+v %v", got, err)
		}
		if _, err := s.Integration(ctx, dep+1); !errors.Is(err, dbtsync.ErrNotFound) {
			t.Errorf("another deployment's: %v", err)
		}
	}},
	{"model-selector-reads-back-and-a-replace-without-it-clears-it", func(t *testing.T, s dbtsync.IntegrationStore) {
		ctx := context.Background()
		in := dbtsync.Integration{DeploymentID: dep, RepoURL: "https://example.test/a.git", Branch: "main", Select: "+customers tag:daily", Exclude: "staging", UpdatedAt: at(0)}
		if err := s.SaveIntegration(ctx, in); err != nil {
			t.Fatal(err)
		}
		if got, err := s.Integration(ctx, dep); err != nil || got.Select != in.Select || got.Exclude != in.Exclude {
			t.Fatalf("read back %+v %v", got, err)
		}
		in.Select, in.Exclude = "", "" // the service decides what a PUT keeps; the store replaces
		if err := s.SaveIntegration(ctx, in); err != nil {
			t.Fatal(err)
		}
		if got, err := s.Integration(ctx, dep); err != nil || got.Select != "" || got.Exclude != "" {
			t.Fatalf("after a replace without a selector %+v %v", got, err)
		}
	}},
}

var pushCases = []struct {
	name string
	test func(t *testing.T, s dbtsync.PushLog)
}{
	{"a-key-is-claimed-once-per-deployment", func(t *testing.T, s dbtsync.PushLog) {
		ctx := context.Background()
		if owner, err := s.ClaimPush(ctx, dep, "commit:abc", "job-1", at(0), time.Hour); err != nil || owner != "job-1" {
			t.Fatalf("first claim: %q %v", owner, err)
		}
		if owner, err := s.ClaimPush(ctx, dep, "commit:abc", "job-2", at(10), time.Hour); err != nil || owner != "job-1" {
			t.Fatalf("second claim: %q %v", owner, err)
		}
		if owner, err := s.ClaimPush(ctx, dep+1, "commit:abc", "job-3", at(10), time.Hour); err != nil || owner != "job-3" {
			t.Fatalf("another deployment's claim: %q %v", owner, err)
		}
	}},
	{"a-claim-past-its-retention-is-taken-over", func(t *testing.T, s dbtsync.PushLog) {
		ctx := context.Background()
		if _, err := s.ClaimPush(ctx, dep, "delivery:github:d-1", "job-1", at(0), time.Hour); err != nil {
			t.Fatal(err)
		}
		if owner, err := s.ClaimPush(ctx, dep, "delivery:github:d-1", "job-2", at(3601), time.Hour); err != nil || owner != "job-2" {
			t.Fatalf("after the retention: %q %v", owner, err)
		}
	}},
	{"release-frees-only-its-own-claim", func(t *testing.T, s dbtsync.PushLog) {
		ctx := context.Background()
		if _, err := s.ClaimPush(ctx, dep, "commit:abc", "job-1", at(0), time.Hour); err != nil {
			t.Fatal(err)
		}
		if err := s.ReleasePush(ctx, dep, "commit:abc", "job-2"); err != nil {
			t.Fatal(err)
		}
		if owner, _ := s.ClaimPush(ctx, dep, "commit:abc", "job-3", at(1), time.Hour); owner != "job-1" {
			t.Fatalf("another job's release freed the claim: %q", owner)
		}
		if err := s.ReleasePush(ctx, dep, "commit:abc", "job-1"); err != nil {
			t.Fatal(err)
		}
		if owner, _ := s.ClaimPush(ctx, dep, "commit:abc", "job-3", at(2), time.Hour); owner != "job-3" {
			t.Fatalf("after the release: %q", owner)
		}
	}},
	{"concurrent-claims-have-one-winner", func(t *testing.T, s dbtsync.PushLog) {
		var wg sync.WaitGroup
		owners := make([]string, 8)
		for i := range owners {
			wg.Add(1)
			go func() {
				defer wg.Done()
				owners[i], _ = s.ClaimPush(context.Background(), dep, "commit:race", fmt.Sprintf("job-%d", i), at(0), time.Hour)
			}()
		}
		wg.Wait()
		for _, o := range owners {
			if o == "" || o != owners[0] {
				t.Fatalf("owners %v", owners)
			}
		}
	}},
}
