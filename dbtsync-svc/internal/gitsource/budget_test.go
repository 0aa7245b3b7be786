package gitsource

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/analyticsco/platform/dbtsync-svc/internal/convert"
	"github.com/analyticsco/platform/dbtsync-svc/internal/dbtsync"
	"github.com/analyticsco/platform/devstack/gitrepo"
)

// A clone's tree is read on a budget of work: whatever a few small objects name, the
// walk, its link resolution and the conversion's lookups stop at the budget with a
// work_limit failure naming it, or when the job's context ends.

// loadWithin loads url as the worker does and fails the test, rather than hanging, when
// the load takes longer than d.
func loadWithin(t *testing.T, ctx context.Context, s *Source, url string, d time.Duration) (*convert.Project, time.Duration, error) {
	t.Helper()
	type result struct {
		p   *convert.Project
		err error
	}
	done := make(chan result, 1)
	start := time.Now()
	go func() {
		p, err := s.Load(ctx, dbtsync.Integration{DeploymentID: 1, RepoURL: url, Branch: "main"}, "main", "")
		done <- result{p, err}
	}()
	select {
	case r := <-done:
		return r.p, time.Since(start), r.err
	case <-time.After(d):
		t.Fatalf("Load still running after %s", d)
		return nil, 0, nil
	}
}

// wantWorkLimit fails unless err is a permanent work_limit failure whose message holds
// every one of want.
func wantWorkLimit(t *testing.T, err error, want ...string) {
	t.Helper()
	code, msg, ok := dbtsync.PublicFailure(err)
	if !ok || code != dbtsync.CodeWorkLimit || !dbtsync.IsPermanent(err) {
		t.Fatalf("Load = %v, want a permanent work_limit failure", err)
	}
	for _, w := range want {
		if !strings.Contains(msg, w) {
			t.Errorf("the failure %q does not name %q", msg, w)
		}
	}
	if strings.Contains(msg, "DBT_SYNC_") {
		t.Errorf("the failure %q names an environment variable", msg)
	}
}

// withProject is the root tree of entries beside a dbt_project.yml.
func withProject(r *gitrepo.Repo, entries ...gitrepo.TreeEntry) (gitrepo.Hash, error) {
	proj, err := r.Blob([]byte(project))
	if err != nil {
		return "", err
	}
	return r.Tree(append(entries, gitrepo.TreeEntry{Name: "dbt_project.yml", Mode: gitrepo.ModeFile, Hash: proj}))
}

// A link bomb: a0 is ".", and each of a1..a5 names the previous one 1,300
// times. Counting nesting, a3 alone is 1300^3 link follows; counted per lookup, as the
// kernel does, a1 passes the 40 links a path may follow at its 41st.
func TestALinkBombFailsOnTheLinksAPathMayFollow(t *testing.T) {
	t.Parallel()
	url := repo(t, func(r *gitrepo.Repo) (gitrepo.Hash, error) {
		var entries []gitrepo.TreeEntry
		for i := range 6 {
			target := "."
			if i > 0 {
				target = strings.Repeat(fmt.Sprintf("a%d/", i-1), 1300)
			}
			h, err := r.Blob([]byte(target))
			if err != nil {
				return "", err
			}
			entries = append(entries, gitrepo.TreeEntry{Name: fmt.Sprintf("a%d", i), Mode: gitrepo.ModeSymlink, Hash: h})
		}
		return withProject(r, entries...)
	})
	_, took, err := loadWithin(t, context.Background(), cloner(t, Limits{}), url, 20*time.Second)
	wantWorkLimit(t, err, "symbolic links", "limit of 40 links per path")
	if took > time.Second {
		t.Errorf("the link bomb took %s to fail", took)
	}
}

// Forty links in a row resolve (the kernel's limit is 40); the links of one path count
// together however they nest.
func TestLinksUpToFortyPerPathResolve(t *testing.T) {
	t.Parallel()
	chain := func(n int) func(r *gitrepo.Repo) (gitrepo.Hash, error) {
		return func(r *gitrepo.Repo) (gitrepo.Hash, error) {
			model, _ := r.Blob([]byte("select 1\n"))
			entries := []gitrepo.TreeEntry{{Name: "m.sql", Mode: gitrepo.ModeFile, Hash: model}}
			// l1 -> m.sql, l2 -> l1, ... ln -> l(n-1); models/x.sql -> ../ln
			for i := 1; i <= n; i++ {
				target := "m.sql"
				if i > 1 {
					target = fmt.Sprintf("l%d", i-1)
				}
				h, _ := r.Blob([]byte(target))
				entries = append(entries, gitrepo.TreeEntry{Name: fmt.Sprintf("l%d", i), Mode: gitrepo.ModeSymlink, Hash: h})
			}
			inner, _ := r.Tree(entries)
			return withProject(r, gitrepo.TreeEntry{Name: "models", Mode: gitrepo.ModeDir, Hash: inner})
		}
	}
	if _, _, err := loadWithin(t, context.Background(), cloner(t, Limits{}), repo(t, chain(40)), 20*time.Second); err != nil {
		t.Fatalf("40 links: %v", err)
	}
	_, _, err := loadWithin(t, context.Background(), cloner(t, Limits{}), repo(t, chain(41)), 20*time.Second)
	wantWorkLimit(t, err, "models/l41", "limit of 40 links per path")
}

// Variant (b): one subtree of entries a checkout skips (duplicates, ".", "..", ".git",
// submodules), named from many directories. Each read of it counts, its skipped entries
// too.
func TestASubtreeOfSkippedEntriesNamedFromManyDirectoriesFailsOnTheEntryBudget(t *testing.T) {
	t.Parallel()
	url := repo(t, func(r *gitrepo.Repo) (gitrepo.Hash, error) {
		blob, _ := r.Blob([]byte("x"))
		entries := []gitrepo.TreeEntry{{Name: ".", Mode: gitrepo.ModeFile, Hash: blob}, {Name: "..", Mode: gitrepo.ModeFile, Hash: blob},
			{Name: ".git", Mode: gitrepo.ModeFile, Hash: blob}, {Name: "sub", Mode: "160000", Hash: blob}}
		for range 3000 {
			entries = append(entries, gitrepo.TreeEntry{Name: "x", Mode: gitrepo.ModeFile, Hash: blob})
		}
		shared, err := r.Tree(entries)
		if err != nil {
			return "", err
		}
		var dirs []gitrepo.TreeEntry
		for i := range 100 {
			dirs = append(dirs, gitrepo.TreeEntry{Name: fmt.Sprintf("d%03d", i), Mode: gitrepo.ModeDir, Hash: shared})
		}
		return withProject(r, dirs...)
	})
	// 300,400 entries read for 100 directories and 100 files.
	_, _, err := loadWithin(t, context.Background(), cloner(t, Limits{}), url, 20*time.Second)
	wantWorkLimit(t, err, "limit of 200000 tree entries")
}

// Variant (c): directories nested past PATH_MAX.
func TestAPathOverFourKilobytesFailsOnThePathLimit(t *testing.T) {
	t.Parallel()
	url := repo(t, func(r *gitrepo.Repo) (gitrepo.Hash, error) {
		h, err := r.Tree(nil)
		if err != nil {
			return "", err
		}
		for i := range 25 {
			if h, err = r.Tree([]gitrepo.TreeEntry{{Name: fmt.Sprintf("%03d%s", i, strings.Repeat("d", 197)), Mode: gitrepo.ModeDir, Hash: h}}); err != nil {
				return "", err
			}
		}
		return withProject(r, gitrepo.TreeEntry{Name: "deep", Mode: gitrepo.ModeDir, Hash: h})
	})
	_, _, err := loadWithin(t, context.Background(), cloner(t, Limits{}), url, 20*time.Second)
	wantWorkLimit(t, err, "deep/024ddd", "over the limit of 4096 bytes for one path")
}

func TestThePathsOfATreeAreBoundedTogether(t *testing.T) {
	t.Parallel()
	files := map[string][]byte{"dbt_project.yml": []byte(project)}
	for i := range 30 {
		files[fmt.Sprintf("models/a_rather_long_directory_name/m%d.sql", i)] = []byte("select 1\n")
	}
	url := repo(t, func(r *gitrepo.Repo) (gitrepo.Hash, error) { return r.Files(files) })
	_, _, err := loadWithin(t, context.Background(), cloner(t, Limits{MaxPathBytes: 1000}), url, 20*time.Second)
	wantWorkLimit(t, err, "over the limit of 1000 bytes together")
}

// slowLinks is a tree of n links, each to a directory by a target of 4 KB that walks in
// and out of it: within every per-object limit, n x 1,638 components to walk.
func slowLinks(n int) func(r *gitrepo.Repo) (gitrepo.Hash, error) {
	return func(r *gitrepo.Repo) (gitrepo.Hash, error) {
		target, err := r.Blob([]byte(strings.Repeat("d/../", 818) + "d"))
		if err != nil {
			return "", err
		}
		model, _ := r.Blob([]byte("select 1\n"))
		d, _ := r.Tree([]gitrepo.TreeEntry{{Name: "m.sql", Mode: gitrepo.ModeFile, Hash: model}})
		entries := []gitrepo.TreeEntry{{Name: "d", Mode: gitrepo.ModeDir, Hash: d}}
		for i := range n {
			entries = append(entries, gitrepo.TreeEntry{Name: fmt.Sprintf("l%05d", i), Mode: gitrepo.ModeSymlink, Hash: target})
		}
		links, err := r.Tree(entries)
		if err != nil {
			return "", err
		}
		return withProject(r, gitrepo.TreeEntry{Name: "models", Mode: gitrepo.ModeDir, Hash: links})
	}
}

// Links that each stay under 40 follows but walk long targets fail on the clone's total
// of lookup steps.
func TestManyLinksWithLongTargetsFailOnTheLookupBudget(t *testing.T) {
	t.Parallel()
	// 1,000 links of 1,638 components each: over the budget at the 611th.
	_, _, err := loadWithin(t, context.Background(), cloner(t, Limits{MaxLookupSteps: 1_000_000}), repo(t, slowLinks(1_000)), 60*time.Second)
	wantWorkLimit(t, err, "limit of 1000000 path components per clone")
}

// A canceled job's walk stops within milliseconds, whatever its budgets allow.
func TestAWalkStopsWhenItsJobIsCanceled(t *testing.T) {
	t.Parallel()
	url := repo(t, slowLinks(40_000))
	s := cloner(t, Limits{MaxLookupSteps: 1 << 50})
	ctx, cancel := context.WithCancel(context.Background())
	var canceledAt time.Time
	go func() {
		// Long enough for the clone to be walking its links (an uncanceled walk of this
		// tree takes seconds).
		time.Sleep(400 * time.Millisecond)
		canceledAt = time.Now()
		cancel()
	}()
	_, took, err := loadWithin(t, ctx, s, url, 60*time.Second)
	if err == nil {
		t.Fatalf("Load of a canceled job succeeded after %s", took)
	}
	if canceledAt.IsZero() {
		t.Fatalf("the load ended (%v) after %s, before the cancel: the tree is too small to test it", err, took)
	}
	// Without a cancel the walk runs for seconds more; with one it stops at its next
	// check, within milliseconds (the bound leaves room for a loaded machine and -race).
	if late := time.Since(canceledAt); late > time.Second {
		t.Errorf("the walk ran on for %s after its job was canceled (%v)", late, err)
	}
}

// The tree served to the conversion reads within the job's context: once it ends, every
// lookup and read returns its error.
func TestTheTreeReadsNothingOnceItsJobEnds(t *testing.T) {
	t.Parallel()
	files := similar(3)
	files["dbt_project.yml"] = []byte(project)
	s := cloner(t, Limits{})
	dir, err := os.MkdirTemp(s.root, "job-")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	tree, err := s.clone(ctx, dbtsync.Integration{RepoURL: repo(t, func(r *gitrepo.Repo) (gitrepo.Hash, error) { return r.Files(files) })}, "main", "", dir)
	if err != nil {
		t.Fatal(err)
	}
	defer tree.store.Close()
	f, err := tree.Open("models/m00.sql")
	if err != nil {
		t.Fatal(err)
	}
	d, err := tree.Open("models")
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	if _, err := f.Read(make([]byte, 10)); !errors.Is(err, context.Canceled) {
		t.Errorf("Read after cancel = %v", err)
	}
	if _, err := d.(fs.ReadDirFile).ReadDir(-1); !errors.Is(err, context.Canceled) {
		t.Errorf("ReadDir of an open directory after cancel = %v", err)
	}
	if _, err := tree.Open("dbt_project.yml"); !errors.Is(err, context.Canceled) {
		t.Errorf("Open after cancel = %v", err)
	}
	if _, err := fs.ReadDir(tree, "models"); !errors.Is(err, context.Canceled) {
		t.Errorf("ReadDir after cancel = %v", err)
	}
	if _, err := fs.ReadFile(tree, "."); !errors.Is(err, context.Canceled) {
		t.Errorf("Open of the root after cancel = %v", err)
	}
	if _, err := s.readProject(tree, ""); !errors.Is(err, context.Canceled) {
		t.Errorf("readProject after cancel = %v, want the context's error", err)
	}
	_, _ = io.Copy(io.Discard, f)
}
