// Package architecture holds the fitness tests of the repository's layout: which module
// may depend on which. They read go.work, the modules' go.mod files and `go list`.
package architecture_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/mod/modfile"

	"github.com/analyticsco/platform/devstack"
)

const prefix = "github.com/analyticsco/platform/"

// modules reads go.work: every module's directory and its path.
func modules(t *testing.T) map[string]string {
	t.Helper()
	root := devstack.RepoRoot(t)
	raw, err := os.ReadFile(filepath.Join(root, "go.work"))
	if err != nil {
		t.Fatal(err)
	}
	work, err := modfile.ParseWork("go.work", raw, nil)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, u := range work.Use {
		dir := filepath.Join(root, u.Path)
		raw, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err != nil {
			t.Fatal(err)
		}
		out[dir] = modfile.ModulePath(raw)
	}
	return out
}

// TestModuleGraphHasNoCycle: the requirements between the repository's own modules form
// no cycle, so each module can be built, tidied and versioned on its own.
func TestModuleGraphHasNoCycle(t *testing.T) {
	edges := map[string][]string{}
	mods := modules(t)
	if len(mods) < 8 {
		t.Fatalf("go.work lists %d modules, want the eight of the repository: %v", len(mods), mods)
	}
	for dir, path := range mods {
		raw, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err != nil {
			t.Fatal(err)
		}
		mf, err := modfile.Parse("go.mod", raw, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range mf.Require {
			if strings.HasPrefix(r.Mod.Path, prefix) {
				edges[path] = append(edges[path], r.Mod.Path)
			}
		}
	}
	for _, c := range cycles(edges) {
		t.Errorf("module cycle: %s", strings.Join(c, " -> "))
	}
}

// cycles finds the cycles of a directed graph by a depth-first search that keeps the
// path so far: a node met again on the path closes a cycle.
func cycles(edges map[string][]string) [][]string {
	const (
		unseen = iota
		onPath
		done
	)
	state := map[string]int{}
	var path []string
	var found [][]string
	var visit func(m string)
	visit = func(m string) {
		switch state[m] {
		case onPath:
			i := slices.Index(path, m)
			found = append(found, append(slices.Clone(path[i:]), m))
			return
		case done:
			return
		}
		state[m] = onPath
		path = append(path, m)
		for _, n := range edges[m] {
			visit(n)
		}
		path = path[:len(path)-1]
		state[m] = done
	}
	nodes := make([]string, 0, len(edges))
	for m := range edges {
		nodes = append(nodes, m)
	}
	slices.Sort(nodes)
	for _, m := range nodes {
		visit(m)
	}
	return found
}

func TestCyclesAreFound(t *testing.T) {
	if c := cycles(map[string][]string{"svc": {"gateway", "devstack"}, "gateway": {"devstack"}, "devstack": {"libs"}}); len(c) != 0 {
		t.Fatalf("a graph without a cycle: %v", c)
	}
	c := cycles(map[string][]string{"svc": {"devstack"}, "devstack": {"libs", "svc"}})
	if len(c) != 1 || strings.Join(c[0], " ") != "devstack svc devstack" {
		t.Fatalf("devstack <-> svc: got %v", c)
	}
}

// TestWhoImportsWhom: api (the document and its generated client, which customers'
// code may import) imports nothing of the repository, libs is plumbing (no service, no
// harness), devstack is the local stack and its helpers (no service), and no service
// imports the harness outside its tests or another service's internals (Go forbids
// those) — checked on every package, tests included.
func TestWhoImportsWhom(t *testing.T) {
	services := []string{prefix + "gateway", prefix + "workspace-svc", prefix + "embed-svc", prefix + "dbtsync-svc"}
	harness := []string{prefix + "devstack", prefix + "systemtest"}
	rules := map[string][]string{ // module path -> module paths its packages (and tests) may not import
		prefix + "api":      append(append(slices.Clone(services), harness...), prefix+"libs"),
		prefix + "libs":     append(slices.Clone(services), harness...),
		prefix + "devstack": append(slices.Clone(services), prefix+"systemtest"),
	}
	checked := 0
	for dir, mod := range modules(t) {
		forbidden, ok := rules[mod]
		if !ok {
			continue
		}
		checked++
		cmd := exec.Command("go", "list", "-deps", "-test", "-f", "{{.ImportPath}}", "./...")
		cmd.Dir = dir
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go list in %s: %v", dir, err)
		}
		for _, pkg := range strings.Fields(string(out)) {
			for _, f := range forbidden {
				if pkg == f || strings.HasPrefix(pkg, f+"/") {
					t.Errorf("%s depends on %s", mod, pkg)
				}
			}
		}
	}
	if checked != len(rules) {
		t.Fatalf("checked %d of the %d modules with rules: a module of go.work was renamed", checked, len(rules))
	}
}
