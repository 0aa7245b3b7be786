package convert

import (
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"
)

// ReadProject reads a dbt project without running dbt: dbt_project.yml, the schema files
// (models/**/*.yml) and the model .sql file names. The warehouse database and schema come
// from the profile, which is not in the repository: sql_table carries the configured
// schema (`+schema` or the model's config) when there is one, else the alias alone.
func ReadProject(fsys fs.FS, dir string) (*Project, error) {
	if dir == "" {
		dir = "."
	}
	raw, err := fs.ReadFile(fsys, path.Join(dir, "dbt_project.yml"))
	if err != nil {
		return nil, fmt.Errorf("no dbt_project.yml in %q: %w", dir, err)
	}
	var proj struct {
		Name       string                    `yaml:"name"`
		ModelPaths []string                  `yaml:"model-paths"`
		Source     []string                  `yaml:"source-paths"` // dbt < 1.0
		Models     map[string]map[string]any `yaml:"models"`
	}
	if err := yaml.Unmarshal(raw, &proj); err != nil {
		return nil, fmt.Errorf("dbt_project.yml: %w", err)
	}
	paths := proj.ModelPaths
	if len(paths) == 0 {
		paths = proj.Source
	}
	if len(paths) == 0 {
		paths = []string{"models"}
	}
	defaults := proj.Models[proj.Name]
	defMaterialized, _ := firstString(defaults, "+materialized", "materialized")
	defSchema, _ := firstString(defaults, "+schema", "schema")

	models := map[string]*Model{}
	var tests []Test
	var schemaFiles []string
	for _, mp := range paths {
		root := path.Join(dir, mp)
		_ = fs.WalkDir(fsys, root, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return nil
			}
			switch path.Ext(p) {
			case ".sql":
				name := strings.TrimSuffix(path.Base(p), ".sql")
				m := &Model{UniqueID: "model." + proj.Name + "." + name, Name: name, Alias: name, Schema: defSchema, Materialized: defMaterialized, Enabled: true}
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
	for _, p := range schemaFiles {
		raw, err := fs.ReadFile(fsys, p)
		if err != nil {
			continue
		}
		var doc struct {
			Models []yamlModel `yaml:"models"`
		}
		if err := yaml.Unmarshal(raw, &doc); err != nil {
			continue // not every .yml under models/ is a schema file
		}
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
	}
	p := &Project{Tests: tests}
	names := make([]string, 0, len(models))
	for n := range models {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		p.Models = append(p.Models, models[n])
	}
	if len(p.Models) == 0 {
		return nil, fmt.Errorf("%w: the dbt project has no models under %s", ErrNoNodes, strings.Join(paths, ", "))
	}
	return p, nil
}

var configMaterializedRE = regexp.MustCompile(`config\([^)]*materialized\s*=\s*['"]([a-z_]+)['"]`)

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
			return Test{Kind: v, Model: model, Column: column}, true
		}
	case map[string]any:
		if rel, ok := v["relationships"].(map[string]any); ok {
			if args, ok := rel["arguments"].(map[string]any); ok {
				rel = args
			}
			to, _ := rel["to"].(string)
			field, _ := rel["field"].(string)
			return Test{Kind: "relationships", Model: model, Column: column, ToModel: RefName(to), ToColumn: field}, true
		}
		for _, k := range []string{"unique", "not_null"} {
			if _, ok := v[k]; ok {
				return Test{Kind: k, Model: model, Column: column}, true
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
