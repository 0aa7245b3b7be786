package convert

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
)

// A dbt project comes from a tenant's repository and is read as hostile input: its YAML
// may be crafted against the parser, and dbt_project.yml may name its model directories
// any number of times. These tests read projects from memory (fstest.MapFS); gitsource's
// tests read them from a fetched repository.

// craftedYAML are inputs that panicked gopkg.in/yaml.v3 v3.0.1 inside (*decoder).merge
// ("hash of unhashable type []interface {}", go-yaml/yaml#378 and #1050): a merge key
// whose value is a mapping with a sequence as its key.
var craftedYAML = []string{
	"<<:\n? -",
	"<<:\n? -\n",
	"<<: \n? - \n",
	"name: shop\n<<:\n? -\n",
}

// craftedSchemaYAML are the same inside what a schema file decodes.
var craftedSchemaYAML = []string{
	"models:\n- <<:\n  ? -\n",
	"models:\n- name: orders\n  meta:\n    <<:\n    ? -\n",
	"models:\n- name: orders\n  columns:\n  - <<:\n    ? -\n",
}

func file(s string) *fstest.MapFile { return &fstest.MapFile{Data: []byte(s)} }

// shop is a small project: two models, one of them under models/staging, and a schema
// file that documents one and tests it.
func shop(projectFile string) fstest.MapFS {
	return fstest.MapFS{
		"dbt_project.yml":           file(projectFile),
		"models/orders.sql":         file("{{ config(materialized='table') }}\nselect 1 as id\n"),
		"models/staging/stg_a.sql":  file("select 1 as id\n"),
		"models/schema.yml":         file("version: 2\nmodels:\n  - name: orders\n    description: the orders\n    columns:\n      - name: id\n        tests: [unique, not_null]\n"),
		"models/staging/readme.txt": file("not a model\n"),
	}
}

// countingFS counts the opens of each path and the bytes read, and may run a hook on each
// open.
type countingFS struct {
	fs.FS
	mu     sync.Mutex
	opens  map[string]int
	bytes  int64
	onOpen func(name string)
}

func counting(fsys fs.FS) *countingFS { return &countingFS{FS: fsys, opens: map[string]int{}} }

func (c *countingFS) Open(name string) (fs.File, error) {
	c.mu.Lock()
	c.opens[name]++
	hook := c.onOpen
	c.mu.Unlock()
	if hook != nil {
		hook(name)
	}
	f, err := c.FS.Open(name)
	if err != nil {
		return nil, err
	}
	return &countedFile{File: f, c: c}, nil
}

func (c *countingFS) ReadDir(name string) ([]fs.DirEntry, error) { return fs.ReadDir(c.FS, name) }

type countedFile struct {
	fs.File
	c *countingFS
}

func (f *countedFile) Read(p []byte) (int, error) {
	n, err := f.File.Read(p)
	f.c.mu.Lock()
	f.c.bytes += int64(n)
	f.c.mu.Unlock()
	return n, err
}

func (f *countedFile) ReadDir(n int) ([]fs.DirEntry, error) {
	if d, ok := f.File.(fs.ReadDirFile); ok {
		return d.ReadDir(n)
	}
	return nil, errors.New("not a directory")
}

func TestAProjectFileThatPanicsTheYAMLParserFailsTheJobNamingIt(t *testing.T) {
	t.Run("crafted dbt_project.yml", func(t *testing.T) {
		for _, in := range craftedYAML {
			_, err := ReadProject(shop(in), "")
			if err == nil || !strings.HasPrefix(err.Error(), "dbt_project.yml cannot be read: ") {
				t.Errorf("%q: ReadProject = %v, want dbt_project.yml cannot be read: ...", in, err)
			}
		}
	})
	t.Run("crafted dbt_project.yml in a project directory", func(t *testing.T) {
		fsys := fstest.MapFS{"analytics/dbt_project.yml": file(craftedYAML[0]), "analytics/models/a.sql": file("select 1\n")}
		_, err := ReadProject(fsys, "analytics")
		if err == nil || !strings.HasPrefix(err.Error(), "analytics/dbt_project.yml cannot be read: ") {
			t.Fatalf("ReadProject = %v", err)
		}
	})
	t.Run("crafted schema files are not schema files", func(t *testing.T) {
		for _, in := range craftedSchemaYAML {
			fsys := shop("name: shop\n")
			fsys["models/schema.yml"] = file(in)
			p, err := ReadProject(fsys, "")
			if err != nil || len(p.Models) != 2 || p.Models[0].Description != "" || len(p.Tests) != 0 {
				t.Errorf("%q: ReadProject = %+v, %v; want the two models, undocumented", in, p, err)
			}
		}
	})
	// Whatever the parser, its panic is recovered: one that panics on every file, then
	// on the schema file alone.
	for _, tc := range []struct{ panicsOn, want string }{
		{"name: shop", "dbt_project.yml cannot be read: the YAML parser failed on it (runtime error: hash of unhashable type []interface {})"},
		{"version: 2", "models/schema.yml cannot be read: the YAML parser failed on it (runtime error: hash of unhashable type []interface {})"},
	} {
		t.Run("a parser that panics on "+tc.panicsOn, func(t *testing.T) {
			withParser(t, func(in []byte, v any) error {
				if strings.HasPrefix(string(in), tc.panicsOn) {
					m := map[any]bool{}
					var k any = []any{}
					m[k] = true // the runtime's own panic: hash of unhashable type
				}
				return realUnmarshal(in, v)
			})
			_, err := ReadProject(shop("name: shop\n"), ".")
			var pe *parserPanic
			if !errors.As(err, &pe) || err.Error() != tc.want {
				t.Fatalf("ReadProject = %v, want %s", err, tc.want)
			}
		})
	}
	t.Run("a long panic value is cut", func(t *testing.T) {
		withParser(t, func([]byte, any) error { panic(strings.Repeat("é", 1000)) })
		_, err := ReadProject(shop("name: shop\n"), "")
		if err == nil || !strings.HasPrefix(err.Error(), "dbt_project.yml cannot be read: ") || len(err.Error()) > 300 || !strings.HasSuffix(err.Error(), "…)") {
			t.Fatalf("ReadProject = %v", err)
		}
	})
}

var realUnmarshal = unmarshalYAML

// withParser stands parse in for the YAML parser until the test ends (tests using it are
// not parallel).
func withParser(t *testing.T, parse func([]byte, any) error) {
	unmarshalYAML = parse
	t.Cleanup(func() { unmarshalYAML = realUnmarshal })
}

func TestRepeatedModelPathsAreWalkedOnce(t *testing.T) {
	t.Parallel()
	spellings := []string{"models", "./models", "models/", "models//", "models/staging", "./models/staging/", "models/../models", "models/staging/.."}
	for _, tc := range []struct {
		name, dir string
		paths     []string
	}{
		{"each spelling", "", spellings},
		{"ten thousand times", "", repeat(spellings, 10_000/len(spellings))},
		{"the project directory itself", ".", append([]string{".", "", "models"}, spellings...)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			fsys := counting(shop("name: shop\nmodel-paths: " + yamlList(tc.paths) + "\n"))
			p, err := ReadProjectContext(context.Background(), fsys, tc.dir, ReadLimits{})
			if err != nil {
				t.Fatal(err)
			}
			if len(p.Models) != 2 || p.Models[0].Name != "orders" || p.Models[0].Materialized != "table" || p.Models[1].Name != "stg_a" {
				t.Fatalf("models %+v", p.Models)
			}
			if len(p.Tests) != 2 {
				t.Fatalf("tests %+v: want unique and not_null once each", p.Tests)
			}
			for _, f := range []string{"dbt_project.yml", "models/orders.sql", "models/staging/stg_a.sql", "models/schema.yml"} {
				if fsys.opens[f] != 1 {
					t.Errorf("%s opened %d times, want once", f, fsys.opens[f])
				}
			}
		})
	}
	t.Run("distinct paths over the limit", func(t *testing.T) {
		t.Parallel()
		var paths []string
		for i := range 65 {
			paths = append(paths, fmt.Sprintf("models/m%d", i))
		}
		_, err := ReadProject(shop("name: shop\nmodel-paths: ["+strings.Join(paths, ", ")+"]\n"), "")
		var le *LimitError
		if !errors.As(err, &le) || err.Error() != "the dbt project read is over its limit of 64 distinct model paths" {
			t.Fatalf("ReadProject = %v", err)
		}
		if _, err := ReadProject(shop("name: shop\nmodel-paths: ["+strings.Join(paths[:63], ", ")+", models]\n"), ""); err != nil {
			t.Fatalf("64 distinct paths, one holding the rest: %v", err)
		}
	})
	t.Run("a path over PATH_MAX", func(t *testing.T) {
		t.Parallel()
		_, err := ReadProject(shop("name: shop\nmodel-paths: [models/"+strings.Repeat("a", 4096)+"]\n"), "")
		if err == nil || err.Error() != "the dbt project read is over its limit of 4096 bytes of a model path" {
			t.Fatalf("ReadProject = %v", err)
		}
	})
}

// yamlList is paths as a YAML flow sequence of double-quoted strings.
func yamlList(paths []string) string {
	q := make([]string, len(paths))
	for i, p := range paths {
		q[i] = fmt.Sprintf("%q", p)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

func repeat(s []string, n int) []string {
	var out []string
	for range n {
		out = append(out, s...)
	}
	return out
}

func TestAProjectReadOverItsBudgetStops(t *testing.T) {
	t.Parallel()
	// links names 50 links to models/: distinct paths, one directory, so that only the
	// budgets bound what the walks read again.
	links := shop("")
	var paths []string
	for i := range 50 {
		name := fmt.Sprintf("l%02d", i)
		links[name] = &fstest.MapFile{Data: []byte("models"), Mode: fs.ModeSymlink}
		paths = append(paths, name)
	}
	links["dbt_project.yml"] = file("name: shop\nmodel-paths: [" + strings.Join(paths, ", ") + "]\n")
	big := shop("name: shop\n")
	big["models/big.sql"] = file("select 1\n" + strings.Repeat("-- padding\n", 10_000))
	for _, tc := range []struct {
		name   string
		fsys   fstest.MapFS
		limits ReadLimits
		want   string
	}{
		{"bytes", big, ReadLimits{MaxBytes: 64 << 10}, "the dbt project read is over its limit of 65536 bytes of files read"},
		{"files", shop("name: shop\n"), ReadLimits{MaxFiles: 3}, "the dbt project read is over its limit of 3 files read"},
		{"entries", shop("name: shop\n"), ReadLimits{MaxEntries: 4}, "the dbt project read is over its limit of 4 directory entries walked"},
		{"links walked again: files", links, ReadLimits{}.WithDefaults(), ""},
		{"links walked again: bytes", links, ReadLimits{MaxBytes: 4 << 10}, "the dbt project read is over its limit of 4096 bytes of files read"},
		{"links walked again: entries", links, ReadLimits{MaxEntries: 100}, "the dbt project read is over its limit of 100 directory entries walked"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			fsys := counting(tc.fsys)
			p, err := ReadProjectContext(context.Background(), fsys, "", tc.limits)
			if tc.want == "" {
				if err != nil || len(p.Models) != 2 {
					t.Fatalf("ReadProjectContext = %+v, %v", p, err)
				}
				return
			}
			var le *LimitError
			if !errors.As(err, &le) || err.Error() != tc.want {
				t.Fatalf("ReadProjectContext = %v, want %s", err, tc.want)
			}
			l := tc.limits.WithDefaults()
			opened := 0
			for _, n := range fsys.opens {
				opened += n
			}
			// Directories are opened to be walked; files read are at most MaxFiles.
			if fsys.bytes > l.MaxBytes || opened > l.MaxFiles+l.MaxEntries {
				t.Fatalf("read %d bytes in %d opens, over %+v", fsys.bytes, opened, l)
			}
		})
	}
	t.Run("a canceled read stops at its next file", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		fsys := counting(links)
		opens := 0
		fsys.onOpen = func(string) {
			if opens++; opens == 5 {
				cancel()
			}
		}
		_, err := ReadProjectContext(ctx, fsys, "", ReadLimits{})
		if !errors.Is(err, context.Canceled) || opens > 5 {
			t.Fatalf("ReadProjectContext = %v after %d opens, want context.Canceled at the 5th", err, opens)
		}
	})
	t.Run("a canceled read stops mid-file", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		fsys := fstest.MapFS{"dbt_project.yml": file("name: shop\n")}
		_, err := ReadProjectContext(ctx, cancelingFS{fsys, cancel}, "", ReadLimits{})
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("ReadProjectContext = %v, want context.Canceled", err)
		}
	})
}

// cancelingFS cancels its read's context at the first Read of a file.
type cancelingFS struct {
	fs.FS
	cancel context.CancelFunc
}

func (c cancelingFS) Open(name string) (fs.File, error) {
	f, err := c.FS.Open(name)
	if err != nil {
		return nil, err
	}
	return cancelingFile{f, c.cancel}, nil
}

type cancelingFile struct {
	fs.File
	cancel context.CancelFunc
}

func (f cancelingFile) Read(p []byte) (int, error) {
	f.cancel()
	return f.File.Read(p[:min(len(p), 1)])
}
