package consumers_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/analyticsco/platform/api"
	"github.com/analyticsco/platform/devstack"
)

// TestOgenGeneratesAClientForEveryOperation runs ogen (pinned in tools/go.mod) on the
// document without any ignore list, builds what it generates, and finds one client
// method per operation: ogen refuses what it cannot implement, and a generator that
// skipped an operation would fail here.
func TestOgenGeneratesAClientForEveryOperation(t *testing.T) {
	root := devstack.RepoRoot(t)
	bin := buildTool(t, root, "github.com/ogen-go/ogen/cmd/ogen")
	mod := t.TempDir()
	gen := exec.Command(bin, "-target", filepath.Join(mod, "platformapi"), "-package", "platformapi", "-clean",
		filepath.Join(root, "api", "openapi.yaml"))
	out, err := gen.CombinedOutput()
	if err != nil {
		t.Fatalf("ogen refuses api/openapi.yaml: %v\n%s", err, out)
	}
	if m := regexp.MustCompile(`(?m)^.*(ERROR|not implemented|[Ss]kip).*$`).FindString(string(out)); m != "" {
		t.Errorf("ogen reports: %s", m)
	}

	// The generated package builds against ogen's runtime at the version tools/go.mod
	// pins (its go.sum is the tools module's; the runtime's own dependencies are
	// resolved from the module proxy).
	goMod, err := os.ReadFile(filepath.Join(root, "tools", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	goMod = regexp.MustCompile(`(?m)^module .*$`).ReplaceAll(goMod, []byte("module example.com/ogencheck"))
	goSum, err := os.ReadFile(filepath.Join(root, "tools", "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{"go.mod": goMod, "go.sum": goSum} {
		if err := os.WriteFile(filepath.Join(mod, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	build := exec.Command("go", "build", "./...")
	build.Dir = mod
	build.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("ogen's client of api/openapi.yaml does not build: %v\n%s", err, out)
	}

	methods := interfaceMethods(t, filepath.Join(mod, "platformapi", "oas_client_gen.go"), "Invoker")
	checkCoverage(t, "ogen", methods, func(op api.Operation) string { return strings.ToUpper(op.ID[:1]) + op.ID[1:] })
}

// interfaceMethods lists the methods of the named interface type declared in file.
func interfaceMethods(t *testing.T, file, name string) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), file, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var methods []string
	ast.Inspect(f, func(n ast.Node) bool {
		spec, ok := n.(*ast.TypeSpec)
		if !ok || spec.Name.Name != name {
			return true
		}
		if it, ok := spec.Type.(*ast.InterfaceType); ok {
			for _, m := range it.Methods.List {
				for _, id := range m.Names {
					methods = append(methods, id.Name)
				}
			}
		}
		return false
	})
	return methods
}

// checkCoverage compares a generated client's methods (or operation names) with the
// document's operations, named from each operationId by nameOf.
func checkCoverage(t *testing.T, generator string, got []string, nameOf func(api.Operation) string) {
	t.Helper()
	ops, err := api.Operations()
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, m := range got {
		have[m] = true
	}
	covered := 0
	for _, op := range ops {
		if have[nameOf(op)] {
			covered++
			delete(have, nameOf(op))
		} else {
			t.Errorf("%s: no %s for %s %s (%s)", generator, nameOf(op), op.Method, op.Path, op.ID)
		}
	}
	for m := range have {
		t.Errorf("%s: %s is no operation of the document", generator, m)
	}
	if covered != len(ops) || len(ops) == 0 {
		t.Fatalf("%s covers %d of the document's %d operations", generator, covered, len(ops))
	}
	t.Logf("%s: %d of %d operations", generator, covered, len(ops))
}

// buildTool builds a Go tool pinned in tools/go.mod (outside go.work) into a temporary
// directory and returns its path.
func buildTool(t *testing.T, root, pkg string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), filepath.Base(pkg))
	cmd := exec.Command("go", "build", "-o", bin, pkg)
	cmd.Dir = filepath.Join(root, "tools")
	cmd.Env = append(os.Environ(), "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building %s from tools/go.mod: %v\n%s", pkg, err, out)
	}
	return bin
}
