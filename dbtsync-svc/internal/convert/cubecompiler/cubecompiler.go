// Package cubecompiler runs Cube's own schema compiler (npm @cubejs-backend/schema-compiler,
// pinned) over generated data-model files, for tests: the converter's output is checked by
// its real consumer, not by our reading of it. The package is installed once with npm into
// the user's cache directory, outside the repository; tests skip only when the npm
// registry cannot be reached.
package cubecompiler

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/analyticsco/platform/devstack"
)

// Version is the pinned compiler version.
const Version = "1.7.43"

//go:embed compile.js
var compileJS []byte

//go:embed reserved.js
var reservedJS []byte

// Result is what the compiler made of a directory of files.
type Result struct {
	Errors []string        `json:"errors"`
	Cubes  map[string]Cube `json:"cubes"`
}

// Cube is one compiled cube, with its SQL rendered ({CUBE} and {other_cube} kept).
type Cube struct {
	SQLTable   string               `json:"sqlTable"`
	Title      string               `json:"title"`
	Dimensions map[string]Dimension `json:"dimensions"`
	Measures   map[string]Measure   `json:"measures"`
	Joins      map[string]string    `json:"joins"`
}

// Dimension is a compiled dimension.
type Dimension struct {
	SQL         string         `json:"sql"`
	Type        string         `json:"type"`
	PrimaryKey  bool           `json:"primaryKey"`
	Title       string         `json:"title"`
	Description string         `json:"description"`
	Meta        map[string]any `json:"meta"`
}

// Measure is a compiled measure.
type Measure struct {
	SQL  string `json:"sql"`
	Type string `json:"type"`
}

// Compiler is an installed compiler.
type Compiler struct {
	modules string // node_modules
	scripts string // compile.js and reserved.js
}

// Ensure installs the compiler (once per machine; concurrent test processes wait for one
// another) and returns it. It skips t when the npm registry cannot be reached, and fails
// it when node or npm is missing (CI installs Debian's nodejs and npm).
func Ensure(t testing.TB) *Compiler {
	t.Helper()
	modules := devstack.NpmPackage(t, "@cubejs-backend/schema-compiler", Version, "Cube's schema compiler")
	scripts := t.TempDir()
	for name, src := range map[string][]byte{"compile.js": compileJS, "reserved.js": reservedJS} {
		if err := os.WriteFile(filepath.Join(scripts, name), src, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return &Compiler{modules: modules, scripts: scripts}
}

func (c *Compiler) node(t testing.TB, script string, args ...string) []byte {
	t.Helper()
	cmd := exec.Command("node", append([]string{filepath.Join(c.scripts, script)}, args...)...)
	cmd.Env = append(os.Environ(), "NODE_PATH="+c.modules)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node %s: %v", script, err)
	}
	return out
}

// Compile compiles every .yml file under dir.
func (c *Compiler) Compile(t testing.TB, dir string) Result {
	t.Helper()
	var r Result
	if err := json.Unmarshal(c.node(t, "compile.js", dir), &r); err != nil {
		t.Fatalf("compile.js answered no result: %v", err)
	}
	return r
}

// CompileFiles writes files (path -> content) into a fresh directory and compiles them.
func (c *Compiler) CompileFiles(t testing.TB, files map[string]string) Result {
	t.Helper()
	dir := t.TempDir()
	for p, content := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return c.Compile(t, dir)
}

// ReservedNames is the list of names Cube reserves for member properties, read from the
// installed compiler's schema.
func (c *Compiler) ReservedNames(t testing.TB) []string {
	t.Helper()
	return strings.Fields(string(c.node(t, "reserved.js")))
}

// String summarises a result's errors.
func (r Result) String() string {
	return fmt.Sprintf("%d errors: %s", len(r.Errors), strings.Join(r.Errors, "\n"))
}
