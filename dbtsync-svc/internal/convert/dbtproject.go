package convert

import (
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"sort"
	"strings"

	yaml "go.yaml.in/yaml/v3"
)

// ReadProject reads a dbt project without running dbt: dbt_project.yml, the schema files
// (models/**/*.yml) and the model .sql file names. The warehouse database and schema come
// from the profile, which is not in the repository: sql_table carries the configured
// schema (`+schema` or the model's config) when there is one, else the alias alone.
func ReadProject(fsys fs.FS, dir string) (*Project, error) {
	if dir == "" {
		dir = "."
	}
	proj, err := readProjectFile(fsys, dir)
	if err != nil {
		return nil, err
	}
	models, schemaFiles := findModels(fsys, dir, proj)
	p := &Project{}
	for _, f := range schemaFiles {
		p.Tests = append(p.Tests, applySchemaFile(fsys, f, models)...)
	}
	names := make([]string, 0, len(models))
	for n := range models {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		p.Models = append(p.Models, models[n])
	}
	if len(p.Models) == 0 {
		return nil, fmt.Errorf("%w: the dbt project has no models under %s", ErrNoNodes, strings.Join(proj.paths, ", "))
	}
	return p, nil
}

// dbtProject is what dbt_project.yml says of the models.
type dbtProject struct {
	name                 string
	paths                []string // the model directories
	materialized, schema string   // the project's defaults
}

func readProjectFile(fsys fs.FS, dir string) (dbtProject, error) {
	raw, err := fs.ReadFile(fsys, path.Join(dir, "dbt_project.yml"))
	if err != nil {
		return dbtProject{}, fmt.Errorf("no dbt_project.yml in %q: %w", dir, err)
	}
	var y struct {
		Name       string                    `yaml:"name"`
		ModelPaths []string                  `yaml:"model-paths"`
		Source     []string                  `yaml:"source-paths"` // dbt < 1.0
		Models     map[string]map[string]any `yaml:"models"`
	}
	if err := yaml.Unmarshal(raw, &y); err != nil {
		return dbtProject{}, fmt.Errorf("dbt_project.yml: %w", err)
	}
	proj := dbtProject{name: y.Name, paths: y.ModelPaths}
	if len(proj.paths) == 0 {
		proj.paths = y.Source
	}
	if len(proj.paths) == 0 {
		proj.paths = []string{"models"}
	}
	defaults := y.Models[y.Name]
	proj.materialized, _ = firstString(defaults, "+materialized", "materialized")
	proj.schema, _ = firstString(defaults, "+schema", "schema")
	return proj, nil
}

// findModels walks the model directories: each .sql file is a model (its materialization
// read from a config() call), each .yml or .yaml file may be a schema file (in path
// order).
func findModels(fsys fs.FS, dir string, proj dbtProject) (map[string]*Model, []string) {
	models := map[string]*Model{}
	var schemaFiles []string
	for _, mp := range proj.paths {
		_ = fs.WalkDir(fsys, path.Join(dir, mp), func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return nil
			}
			switch path.Ext(p) {
			case ".sql":
				name := strings.TrimSuffix(path.Base(p), ".sql")
				m := &Model{UniqueID: "model." + proj.name + "." + name, Name: name, Alias: name, Schema: proj.schema, Materialized: proj.materialized, Enabled: true}
				if body, err := fs.ReadFile(fsys, p); err == nil {
					if mm := configMaterializedRE.FindSubmatch(body); mm != nil {
						m.Materialized = string(mm[1])
					}
				}
				models[name] = m
			case ".yml", ".yaml":
				schemaFiles = append(schemaFiles, p)
			}
			return nil
		})
	}
	sort.Strings(schemaFiles)
	return models, schemaFiles
}

// applySchemaFile applies what the schema file at p documents to the models (their
// descriptions, meta, config and columns) and returns the tests it declares.
func applySchemaFile(fsys fs.FS, p string, models map[string]*Model) []Test {
	raw, err := fs.ReadFile(fsys, p)
	if err != nil {
		return nil
	}
	var doc struct {
		Models []yamlModel `yaml:"models"`
	}
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		return nil // not every .yml under models/ is a schema file
	}
	var tests []Test
	for _, ym := range doc.Models {
		m := models[ym.Name]
		if m == nil {
			continue // documented but no .sql: dbt would not build it either
		}
		m.Description = ym.Description
		m.Meta = mergeMeta(ym.Meta, ym.Config.Meta)
		if ym.Config.Materialized != "" {
			m.Materialized = ym.Config.Materialized
		}
		if ym.Config.Schema != "" {
			m.Schema = ym.Config.Schema
		}
		if ym.Config.Enabled != nil {
			m.Enabled = *ym.Config.Enabled
		}
		for _, c := range ym.Columns {
			m.Columns = append(m.Columns, Column{Name: c.Name, Description: c.Description, DataType: c.DataType, Meta: mergeMeta(c.Meta, c.Config.Meta)})
			for _, t := range append(c.Tests, c.DataTests...) {
				if tt, ok := yamlTest(t, ym.Name, c.Name); ok {
					tests = append(tests, tt)
				}
			}
		}
	}
	return tests
}

var configMaterializedRE = regexp.MustCompile(`config\([^)]*materialized\s*=\s*['"]([a-z_]+)['"]`)

// yamlModel is a model of a schema file.
type yamlModel struct {
	Name        string         `yaml:"name"`
	Description string         `yaml:"description"`
	Meta        map[string]any `yaml:"meta"`
	Config      struct {
		Meta         map[string]any `yaml:"meta"`
		Materialized string         `yaml:"materialized"`
		Schema       string         `yaml:"schema"`
		Enabled      *bool          `yaml:"enabled"`
	} `yaml:"config"`
	Columns []struct {
		Name        string         `yaml:"name"`
		Description string         `yaml:"description"`
		DataType    string         `yaml:"data_type"`
		Meta        map[string]any `yaml:"meta"`
		Config      struct {
			Meta map[string]any `yaml:"meta"`
		} `yaml:"config"`
		Tests     []any `yaml:"tests"`
		DataTests []any `yaml:"data_tests"`
	} `yaml:"columns"`
}

// yamlTest reads `unique`, `not_null` and `relationships: {to, field}` (also under
// `arguments:` as dbt 1.10 writes them).
func yamlTest(t any, model, column string) (Test, bool) {
	switch v := t.(type) {
	case string:
		if v == "unique" || v == "not_null" {
			return Test{Kind: v, Model: Ref{Name: model}, Column: column}, true
		}
	case map[string]any:
		if rel, ok := v["relationships"].(map[string]any); ok {
			if args, ok := rel["arguments"].(map[string]any); ok {
				rel = args
			}
			to, _ := rel["to"].(string)
			field, _ := rel["field"].(string)
			return Test{Kind: "relationships", Model: Ref{Name: model}, Column: column, ToModel: ParseRef(to), ToColumn: field}, true
		}
		for _, k := range []string{"unique", "not_null"} {
			if _, ok := v[k]; ok {
				return Test{Kind: k, Model: Ref{Name: model}, Column: column}, true
			}
		}
	}
	return Test{}, false
}

func firstString(m map[string]any, keys ...string) (string, bool) {
	for _, k := range keys {
		if s, ok := m[k].(string); ok {
			return s, true
		}
	}
	return "", false
}
