// Package cubecompiler runs Cube's own schema compiler (npm @cubejs-backend/schema-compiler,
// pinned) over generated data-model files, for tests: the dbt converter's output is
// checked by its real consumer, not by our reading of it. The package is installed once
// with npm into the user's cache directory, outside the repository; tests skip only when
// the npm registry cannot be reached. Test-only, like the rest of devstack.
package cubecompiler

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

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

// Cube is one compiled cube or view, with its SQL rendered ({CUBE} and {other_cube}
// kept).
type Cube struct {
	IsView     bool                 `json:"isView"`
	SQLTable   string               `json:"sqlTable"`
	Title      string               `json:"title"`
	Dimensions map[string]Dimension `json:"dimensions"`
	Measures   map[string]Measure   `json:"measures"`
	Joins      map[string]Join      `json:"joins"`
	// A view's members (each with the path of the cube member it is) and default filters.
	Includes       []Included      `json:"includes"`
	DefaultFilters []DefaultFilter `json:"defaultFilters"`
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
	SQL           string         `json:"sql"`
	Type          string         `json:"type"`
	Title         string         `json:"title"`
	Description   string         `json:"description"`
	Filters       []string       `json:"filters"` // each filter's SQL
	RollingWindow *RollingWindow `json:"rollingWindow"`
	MultiStage    bool           `json:"multiStage"`
	TimeShift     []TimeShift    `json:"timeShift"`
	Public        bool           `json:"public"`
	Meta          map[string]any `json:"meta"`
}

// RollingWindow is a measure's rolling_window.
type RollingWindow struct {
	Trailing    string `json:"trailing"`
	Leading     string `json:"leading"`
	Offset      string `json:"offset"`
	Type        string `json:"type"`
	Granularity string `json:"granularity"`
}

// TimeShift is one time_shift of a multi-stage measure, as the compiler resolved it
// (the time dimension as cube.member).
type TimeShift struct {
	Interval      string `json:"interval"`
	Type          string `json:"type"`
	TimeDimension string `json:"timeDimension"`
}

// Join is a compiled join.
type Join struct {
	SQL          string `json:"sql"`
	Relationship string `json:"relationship"`
}

// Included is a member of a view: its name in the view and the cube member it is.
type Included struct {
	Name       string `json:"name"`
	MemberPath string `json:"memberPath"`
	Type       string `json:"type"`
}

// DefaultFilter is a view's default filter, its member as view.member.
type DefaultFilter struct {
	Member   string   `json:"member"`
	Operator string   `json:"operator"`
	Values   []string `json:"values"`
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
	return devstack.Node(t, 5*time.Minute, []string{"NODE_PATH=" + c.modules}, filepath.Join(c.scripts, script), args...)
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
