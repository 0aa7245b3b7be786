package gitsource

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/analyticsco/platform/dbtsync-svc/internal/convert"
	"github.com/analyticsco/platform/dbtsync-svc/internal/dbtsync"
	"github.com/analyticsco/platform/devstack/gitrepo"
)

// Repositories are hostile: what a clone brings is bounded while it is inflated, and the
// conversion reads the fetched tree, never a checkout. Each case serves a repository
// written by devstack/gitrepo over file:// (go-git's in-process server, as in the local
// stack) and loads it as the worker does.

const project = "name: shop\nmodel-paths: [models]\n"

// repo commits root to a new repository on main; build writes its objects.
func repo(t *testing.T, build func(r *gitrepo.Repo) (gitrepo.Hash, error)) string {
	t.Helper()
	dir := t.TempDir()
	r, err := gitrepo.Init(dir)
	if err != nil {
		t.Fatal(err)
	}
	root, err := build(r)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Commit(root, "main"); err != nil {
		t.Fatal(err)
	}
	return "file://" + dir
}

func cloner(t *testing.T, l Limits) *Source {
	t.Helper()
	l.Policy.AllowFile = true
	s, err := NewCloner(nil, t.TempDir(), l)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func load(s *Source, url, manifestPath string) (*convert.Project, error) {
	return s.Load(context.Background(), dbtsync.Integration{DeploymentID: 1, RepoURL: url, Branch: "main", ManifestPath: manifestPath}, "main", "")
}

// zeroModelRepo is a dbt project whose one model file is size zero bytes: a few hundred
// KB once compressed.
func zeroModelRepo(t *testing.T, size int64) string {
	return repo(t, func(r *gitrepo.Repo) (gitrepo.Hash, error) { return r.ZeroModel(size) })
}

// Not parallel: it samples the process's heap while the clone runs.
func TestCompressedBlobOverTheLimitFailsBeforeItIsInflated(t *testing.T) {
	const blob, limit = 16 << 20, 1 << 20
	url := zeroModelRepo(t, blob)
	s := cloner(t, Limits{MaxRepoBytes: limit})
	runtime.GC()
	var base runtime.MemStats
	runtime.ReadMemStats(&base)
	peak := sampleHeap()
	_, err := load(s, url, "")
	high := peak()
	if err == nil || !dbtsync.IsPermanent(err) || !strings.Contains(err.Error(), "over the size limit of") || strings.Contains(err.Error(), "DBT_SYNC_") {
		t.Fatalf("Load = %v, want a permanent failure naming the size limit", err)
	}
	// The server streams the blob and the client refuses it from its header: the heap
	// never holds it (inflating it in memory took the heap past the blob, twice over).
	if grew := int64(high) - int64(base.HeapAlloc); grew > blob/4 {
		t.Errorf("the heap grew by %d bytes for a %d-byte blob refused at %d", grew, blob, limit)
	}
	if left, _ := os.ReadDir(s.root); len(left) > 1 { // the lock file
		t.Errorf("the clone left %d entries behind", len(left)-1)
	}
}

// sampleHeap samples the heap every few milliseconds until the returned function is
// called, which returns the highest HeapAlloc seen.
func sampleHeap() (stop func() uint64) {
	done := make(chan struct{})
	high := make(chan uint64)
	go func() {
		var most uint64
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for {
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			most = max(most, m.HeapAlloc)
			select {
			case <-done:
				high <- most
				return
			case <-tick.C:
			}
		}
	}()
	return func() uint64 { close(done); return <-high }
}

func TestCloneLimits(t *testing.T) {
	t.Parallel()
	files := func(n int) func(r *gitrepo.Repo) (gitrepo.Hash, error) {
		return func(r *gitrepo.Repo) (gitrepo.Hash, error) {
			fs := map[string][]byte{"dbt_project.yml": []byte(project)}
			for i := range n {
				fs[fmt.Sprintf("models/m%d.sql", i)] = fmt.Appendf(nil, "select %d as id\n", i)
			}
			return r.Files(fs)
		}
	}
	// Six levels of 20 entries that all name the next level's tree: 64 million paths
	// from seven small objects.
	treeBomb := func(r *gitrepo.Repo) (gitrepo.Hash, error) {
		h, err := r.Blob([]byte("select 1\n"))
		mode := gitrepo.ModeFile
		for range 6 {
			var entries []gitrepo.TreeEntry
			for i := range 20 {
				entries = append(entries, gitrepo.TreeEntry{Name: fmt.Sprintf("e%d", i), Mode: mode, Hash: h})
			}
			if h, err = r.Tree(entries); err != nil {
				return "", err
			}
			mode = gitrepo.ModeDir
		}
		return h, err
	}
	cases := []struct {
		name   string
		build  func(r *gitrepo.Repo) (gitrepo.Hash, error)
		limits Limits
		want   string
	}{
		{"more-files-than-allowed", files(30), Limits{MaxFiles: 20}, "more than 20 files, the most a sync reads"},
		{"more-objects-in-the-pack-than-files-allow", files(30), Limits{MaxFiles: 5}, "more than 26 files and directories (the limit is 5 files"},
		{"a-tree-that-names-one-subtree-many-times", treeBomb, Limits{MaxFiles: 1000}, "more than 1000 "},
		{"files-over-the-byte-limit-together", files(50), Limits{MaxRepoBytes: 600}, "over the size limit of 600 bytes"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			_, err := load(cloner(t, c.limits), repo(t, c.build), "")
			if err == nil || !dbtsync.IsPermanent(err) || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "DBT_SYNC_") {
				t.Fatalf("Load = %v, want a permanent failure with %q (and no setting's name)", err, c.want)
			}
		})
	}
}

// similar returns n model files that differ by a line, so the server deltifies them
// against each other.
func similar(n int) map[string][]byte {
	body := strings.Repeat("-- a long comment that the delta copies from its base\n", 200)
	out := map[string][]byte{}
	for i := range n {
		out[fmt.Sprintf("models/m%02d.sql", i)] = fmt.Appendf(nil, "{{ config(materialized='view') }}\n%sselect %d as id\n", body, i)
	}
	return out
}

func TestProjectIsReadFromTheFetchedTree(t *testing.T) {
	t.Parallel()
	files := similar(12)
	files["dbt_project.yml"] = []byte(project)
	files["models/schema.yml"] = []byte("version: 2\nmodels:\n  - name: m00\n    description: the first\n")
	url := repo(t, func(r *gitrepo.Repo) (gitrepo.Hash, error) {
		// A link inside the repository reads as its target, as it did in a checkout.
		link, _ := r.Blob([]byte("../models/m03.sql"))
		return withEntry(r, files, gitrepo.TreeEntry{Name: "alias.sql", Mode: gitrepo.ModeSymlink, Hash: link})
	})
	p, err := load(cloner(t, Limits{}), url, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Models) != 13 || p.Models[0].Name != "alias" || p.Models[0].Materialized != "view" || p.Models[1].Name != "m00" || p.Models[1].Description != "the first" {
		t.Fatalf("models %d: %+v %+v", len(p.Models), p.Models[0], p.Models[1])
	}
}

// The manifest at manifestPath is read within the manifest limits of the Limits, as the
// API's upload check and the worker's read of an upload are: a lowered limit fails the
// job with work_limit naming the value set; the defaults read it.
func TestTheRepositorysManifestIsReadWithinTheManifestLimits(t *testing.T) {
	t.Parallel()
	manifest := `{"metadata":{"dbt_schema_version":"https://schemas.getdbt.com/dbt/manifest/v12.json"},"nodes":{` +
		`"model.p.orders":{"resource_type":"model","name":"orders","alias":"orders","database":"db","schema":"s","description":"` + strings.Repeat("d", 2000) + `"}}}`
	url := repo(t, func(r *gitrepo.Repo) (gitrepo.Hash, error) {
		return r.Files(map[string][]byte{"dbt_project.yml": []byte(project), "target/manifest.json": []byte(manifest)})
	})
	for _, c := range []struct {
		name   string
		limits Limits
		want   string // the failure's message; "" reads it
	}{
		{"defaults", Limits{}, ""},
		{"member-bytes", Limits{MaxManifestMemberBytes: 1000},
			`nodes["model.p.orders"].description: the manifest read is over its limit of 1000 bytes of the members of one node the conversion reads`},
		{"names", Limits{MaxManifestNames: 6},
			`nodes["model.p.orders"]: the manifest read is over its limit of 6 member names of the objects open at once`},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, err := load(cloner(t, c.limits), url, "target/manifest.json")
			if c.want == "" {
				if err != nil || len(p.Models) != 1 || p.Models[0].Name != "orders" {
					t.Fatalf("Load = %+v, %v; want the manifest's one model", p, err)
				}
				return
			}
			code, msg, own := dbtsync.PublicFailure(err)
			if !own || code != dbtsync.CodeWorkLimit || msg != c.want || !dbtsync.IsPermanent(err) {
				t.Fatalf("Load = %v: code %q, message %q; want work_limit %q", err, code, msg, c.want)
			}
		})
	}
}

// withEntry writes dbt_project.yml and the models of files, with one more entry in
// models/.
func withEntry(r *gitrepo.Repo, files map[string][]byte, extra gitrepo.TreeEntry) (gitrepo.Hash, error) {
	models := map[string][]byte{}
	for p, c := range files {
		if rest, ok := strings.CutPrefix(p, "models/"); ok {
			models[rest] = c
		}
	}
	var entries []gitrepo.TreeEntry
	for name, c := range models {
		h, err := r.Blob(c)
		if err != nil {
			return "", err
		}
		entries = append(entries, gitrepo.TreeEntry{Name: name, Mode: gitrepo.ModeFile, Hash: h})
	}
	mt, err := r.Tree(append(entries, extra))
	if err != nil {
		return "", err
	}
	proj, _ := r.Blob(files["dbt_project.yml"])
	return r.Tree([]gitrepo.TreeEntry{{Name: "dbt_project.yml", Mode: gitrepo.ModeFile, Hash: proj}, {Name: "models", Mode: gitrepo.ModeDir, Hash: mt}})
}

func TestLinksLeavingTheRepositoryFailNamingTheFile(t *testing.T) {
	t.Parallel()
	for _, target := range []string{"/etc/passwd", "../../outside", "../models/../../y", "./../.."} {
		t.Run(target, func(t *testing.T) {
			t.Parallel()
			url := repo(t, func(r *gitrepo.Repo) (gitrepo.Hash, error) {
				proj, _ := r.Blob([]byte(project))
				link, _ := r.Blob([]byte(target))
				models, _ := r.Tree([]gitrepo.TreeEntry{{Name: "schema.yml", Mode: gitrepo.ModeSymlink, Hash: link}})
				return r.Tree([]gitrepo.TreeEntry{{Name: "dbt_project.yml", Mode: gitrepo.ModeFile, Hash: proj}, {Name: "models", Mode: gitrepo.ModeDir, Hash: models}})
			})
			_, err := load(cloner(t, Limits{}), url, "")
			if err == nil || !strings.Contains(err.Error(), "models/schema.yml is a symbolic link that leads outside the repository") {
				t.Fatalf("Load = %v", err)
			}
		})
	}
}

func TestFetchedTreeIsAFileSystem(t *testing.T) {
	t.Parallel()
	files := similar(5)
	files["dbt_project.yml"] = []byte(project)
	files["a/b/c/deep.yml"] = []byte("x: 1\n")
	s := cloner(t, Limits{})
	dir, err := os.MkdirTemp(s.root, "job-")
	if err != nil {
		t.Fatal(err)
	}
	tree, err := s.clone(context.Background(), dbtsync.Integration{RepoURL: repo(t, func(r *gitrepo.Repo) (gitrepo.Hash, error) { return r.Files(files) })}, "main", "", dir)
	if err != nil {
		t.Fatal(err)
	}
	defer tree.store.Close()
	var want []string
	for p := range files {
		want = append(want, p)
	}
	if err := fstest.TestFS(tree, want...); err != nil {
		t.Fatal(err)
	}
	for p, content := range files {
		if got, err := tree.Open(p); err != nil {
			t.Fatal(err)
		} else if b, _ := io.ReadAll(got); string(b) != string(content) {
			t.Errorf("%s reads %q", p, b)
		}
	}
}

// A push's job names its commit: the clone syncs it when it is still the branch's head,
// and fails commit_superseded (the newer push syncs the branch) when it is not.
func TestAPushsCommitMustStillBeTheHead(t *testing.T) {
	t.Parallel()
	files := similar(2)
	files["dbt_project.yml"] = []byte(project)
	dir := t.TempDir()
	r, err := gitrepo.Init(dir)
	if err != nil {
		t.Fatal(err)
	}
	extra, _ := r.Blob([]byte("select 1"))
	root, err := withEntry(r, files, gitrepo.TreeEntry{Name: "extra.sql", Mode: gitrepo.ModeFile, Hash: extra})
	if err != nil {
		t.Fatal(err)
	}
	head, err := r.Commit(root, "main")
	if err != nil {
		t.Fatal(err)
	}
	s := cloner(t, Limits{})
	in := dbtsync.Integration{DeploymentID: 1, RepoURL: "file://" + dir, Branch: "main"}
	if p, err := s.Load(context.Background(), in, "main", fmt.Sprint(head)); err != nil || len(p.Models) != 3 {
		t.Fatalf("the head's commit: %v", err)
	}
	_, err = s.Load(context.Background(), in, "main", "1111111111111111111111111111111111111111")
	var f *dbtsync.JobFailure
	if !errors.As(err, &f) || f.Code != dbtsync.CodeCommitSuperseded || !dbtsync.IsPermanent(err) {
		t.Fatalf("another commit: %v", err)
	}
}
