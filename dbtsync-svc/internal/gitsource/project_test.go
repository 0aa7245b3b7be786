package gitsource

import (
	"fmt"
	"strings"
	"testing"

	"github.com/analyticsco/platform/dbtsync-svc/internal/dbtsync"
	"github.com/analyticsco/platform/devstack/gitrepo"
)

// The project read of a fetched repository: a dbt_project.yml crafted against the YAML
// parser fails the job naming the file, and a project that makes the read walk its files
// again and again fails on the read's budget.

func TestACraftedProjectFileFailsTheJobNamingIt(t *testing.T) {
	t.Parallel()
	// The six bytes that panicked gopkg.in/yaml.v3 v3.0.1 (go-yaml/yaml#378).
	url := repo(t, func(r *gitrepo.Repo) (gitrepo.Hash, error) {
		return r.Files(map[string][]byte{"dbt_project.yml": []byte("<<:\n? -"), "models/orders.sql": []byte("select 1\n")})
	})
	_, err := load(cloner(t, Limits{}), url, "")
	code, msg, own := dbtsync.PublicFailure(err)
	if !dbtsync.IsPermanent(err) || !own || code != dbtsync.CodeInvalidProject || !strings.HasPrefix(msg, "dbt_project.yml cannot be read: ") {
		t.Fatalf("Load = %v (%s: %q), want invalid_project naming dbt_project.yml", err, code, msg)
	}
}

func TestAProjectReadThroughLinksOverItsBudgetFailsOnTheWorkLimit(t *testing.T) {
	t.Parallel()
	// 20 model paths, each a link to models/: every walk reads models/ again.
	var paths []string
	url := repo(t, func(r *gitrepo.Repo) (gitrepo.Hash, error) {
		files := map[string][]byte{"a.sql": []byte("select 1\n"), "b.sql": []byte("select 2\n"), "schema.yml": []byte("version: 2\n")}
		var models []gitrepo.TreeEntry
		for name, c := range files {
			h, err := r.Blob(c)
			if err != nil {
				return "", err
			}
			models = append(models, gitrepo.TreeEntry{Name: name, Mode: gitrepo.ModeFile, Hash: h})
		}
		mt, err := r.Tree(models)
		if err != nil {
			return "", err
		}
		link, err := r.Blob([]byte("models"))
		if err != nil {
			return "", err
		}
		root := []gitrepo.TreeEntry{{Name: "models", Mode: gitrepo.ModeDir, Hash: mt}}
		for i := range 20 {
			name := fmt.Sprintf("l%02d", i)
			paths = append(paths, name)
			root = append(root, gitrepo.TreeEntry{Name: name, Mode: gitrepo.ModeSymlink, Hash: link})
		}
		proj, err := r.Blob([]byte("name: shop\nmodel-paths: [" + strings.Join(paths, ", ") + "]\n"))
		if err != nil {
			return "", err
		}
		return r.Tree(append(root, gitrepo.TreeEntry{Name: "dbt_project.yml", Mode: gitrepo.ModeFile, Hash: proj}))
	})
	// The tree holds 24 files (20 of them links); the read would open 61.
	_, err := load(cloner(t, Limits{MaxFiles: 30}), url, "")
	code, msg, _ := dbtsync.PublicFailure(err)
	if !dbtsync.IsPermanent(err) || code != dbtsync.CodeWorkLimit || msg != "the dbt project read is over its limit of 30 files read" {
		t.Fatalf("Load = %v (%s: %q), want work_limit naming 30 files read", err, code, msg)
	}
	// Within the limit, the same project reads its two models.
	p, err := load(cloner(t, Limits{MaxFiles: 100}), url, "")
	if err != nil || len(p.Models) != 2 {
		t.Fatalf("Load = %+v, %v", p, err)
	}
}

func TestModelPathsOverTheLimitFailOnTheWorkLimit(t *testing.T) {
	t.Parallel()
	url := repo(t, func(r *gitrepo.Repo) (gitrepo.Hash, error) {
		return r.Files(map[string][]byte{
			"dbt_project.yml": []byte("name: shop\nmodel-paths: [models/a, ./models/a/, models/b, models/c]\n"),
			"models/a/x.sql":  []byte("select 1\n"), "models/b/y.sql": []byte("select 2\n"), "models/c/z.sql": []byte("select 3\n"),
		})
	})
	_, err := load(cloner(t, Limits{MaxModelPaths: 2}), url, "")
	code, msg, _ := dbtsync.PublicFailure(err)
	if !dbtsync.IsPermanent(err) || code != dbtsync.CodeWorkLimit || msg != "the dbt project read is over its limit of 2 distinct model paths" {
		t.Fatalf("Load = %v (%s: %q), want work_limit naming 2 distinct model paths", err, code, msg)
	}
	// Three distinct paths (two spell models/a) are within a limit of 3.
	p, err := load(cloner(t, Limits{MaxModelPaths: 3}), url, "")
	if err != nil || len(p.Models) != 3 {
		t.Fatalf("Load = %+v, %v", p, err)
	}
}
