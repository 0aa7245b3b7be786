package convert

import (
	"context"
	"errors"
	"fmt"
	"io"
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
// schema (`+schema` or the model's config) when there is one, else the alias alone. It
// reads within DefaultReadLimits and cannot be stopped: ReadProjectContext is the same
// read, with a context and limits of the caller's.
func ReadProject(fsys fs.FS, dir string) (*Project, error) {
	return ReadProjectContext(context.Background(), fsys, dir, ReadLimits{})
}

// ReadLimits bound the total work of one project read (a repository is hostile, and
// dbt_project.yml may name its model directories any number of times); a field zero or
// less takes its DefaultReadLimits value. Over a limit the read stops with a *LimitError.
type ReadLimits struct {
	MaxPaths   int   // distinct model directories dbt_project.yml names (model-paths)
	MaxEntries int   // directory entries the walks of those directories visit, all together
	MaxFiles   int   // files read: dbt_project.yml, the schema files and the .sql files
	MaxBytes   int64 // bytes of the files read, all together
}

// DefaultReadLimits apply where ReadLimits leaves a field zero.
var DefaultReadLimits = ReadLimits{MaxPaths: 64, MaxEntries: 100_000, MaxFiles: 50_000, MaxBytes: 512 << 20}

// maxModelPathBytes bounds one model path as dbt_project.yml writes it (PATH_MAX).
const maxModelPathBytes = 4096

// WithDefaults is l with every limit not set (zero or less) at its DefaultReadLimits
// value.
func (l ReadLimits) WithDefaults() ReadLimits {
	d := DefaultReadLimits
	if l.MaxPaths <= 0 {
		l.MaxPaths = d.MaxPaths
	}
	if l.MaxEntries <= 0 {
		l.MaxEntries = d.MaxEntries
	}
	if l.MaxFiles <= 0 {
		l.MaxFiles = d.MaxFiles
	}
	if l.MaxBytes <= 0 {
		l.MaxBytes = d.MaxBytes
	}
	return l
}

// LimitError is a project read that passed one of its ReadLimits: its message names the
// limit and its value.
type LimitError struct {
	Limit string // what is counted, as the message says it ("distinct model paths")
	Value int64  // the limit
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("the dbt project read is over its limit of %d %s", e.Value, e.Limit)
}

// ReadProjectContext is ReadProject within limits, stopping when ctx ends (its error is
// then ctx.Err()). Every file it reads counts against the limits; a model directory is
// walked once however often, and however spelled, dbt_project.yml names it.
func ReadProjectContext(ctx context.Context, fsys fs.FS, dir string, limits ReadLimits) (*Project, error) {
	if dir == "" {
		dir = "."
	}
	r := &projectReader{ctx: ctx, fsys: fsys, limits: limits.WithDefaults(), dir: dir}
	proj, err := r.readProjectFile(dir)
	if err != nil {
		return nil, err
	}
	models, schemaFiles, err := r.findModels(dir, proj)
	if err != nil {
		return nil, err
	}
	p := &Project{ProjectName: proj.name}
	for _, f := range schemaFiles {
		tests, err := r.applySchemaFile(f, models)
		if err != nil {
			return nil, err
		}
		p.Tests = append(p.Tests, tests...)
	}
	names := make([]string, 0, len(models))
	for n := range models {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		m := models[n]
		m.Node.Tags = mergeTags(m.Node.Tags)
		p.Models = append(p.Models, m)
	}
	if len(p.Models) == 0 {
		return nil, fmt.Errorf("%w: the dbt project has no models under %s", ErrNoNodes, listPaths(proj.paths))
	}
	return p, nil
}

// projectReader is one project read: what it has read so far, against its limits.
type projectReader struct {
	ctx            context.Context
	fsys           fs.FS
	limits         ReadLimits
	dir            string // the project's directory
	entries, files int
	bytes          int64
}

// dbtProject is what dbt_project.yml says of the models.
type dbtProject struct {
	name                 string
	paths                []string // the model directories to walk: distinct, none inside another
	materialized, schema string   // the project's defaults
	// models is dbt_project.yml's models: config of the project, read for the tags
	// each directory gives its models (+tags, at any level).
	models map[string]any
}

func (r *projectReader) readProjectFile(dir string) (dbtProject, error) {
	name := path.Join(dir, "dbt_project.yml")
	raw, err := r.readFile(name)
	if err != nil {
		if stopped(err) {
			return dbtProject{}, err
		}
		return dbtProject{}, fmt.Errorf("no dbt_project.yml in %q: %w", dir, err)
	}
	var y struct {
		Name       string                    `yaml:"name"`
		ModelPaths []string                  `yaml:"model-paths"`
		Source     []string                  `yaml:"source-paths"` // dbt < 1.0
		Models     map[string]map[string]any `yaml:"models"`
	}
	if err := decodeYAML(name, raw, &y); err != nil {
		var pe *parserPanic
		if errors.As(err, &pe) {
			return dbtProject{}, err
		}
		return dbtProject{}, fmt.Errorf("%s cannot be read: %w", name, err)
	}
	paths := y.ModelPaths
	if len(paths) == 0 {
		paths = y.Source
	}
	if len(paths) == 0 {
		paths = []string{"models"}
	}
	proj := dbtProject{name: y.Name}
	if proj.paths, err = r.walkRoots(dir, paths); err != nil {
		return dbtProject{}, err
	}
	if tree, ok := y.Models[y.Name]; ok {
		proj.models = tree
	}
	defaults := y.Models[y.Name]
	proj.materialized, _ = firstString(defaults, "+materialized", "materialized")
	proj.schema, _ = firstString(defaults, "+schema", "schema")
	return proj, nil
}

// walkRoots are the directories the model paths name under dir, each once: cleaned
// (models, ./models and models/ are one), at most MaxPaths distinct ones, and without
// those inside another (models/staging is walked with models), in the order named.
func (r *projectReader) walkRoots(dir string, paths []string) ([]string, error) {
	seen := map[string]bool{}
	var distinct []string
	for _, mp := range paths {
		if len(mp) > maxModelPathBytes {
			return nil, &LimitError{Limit: "bytes of a model path", Value: maxModelPathBytes}
		}
		p := path.Join(dir, mp)
		if seen[p] {
			continue
		}
		if len(distinct) == r.limits.MaxPaths {
			return nil, &LimitError{Limit: "distinct model paths", Value: int64(r.limits.MaxPaths)}
		}
		seen[p] = true
		distinct = append(distinct, p)
	}
	roots := distinct[:0:0]
	for _, p := range distinct {
		inside := false
		for _, q := range distinct {
			if q != p && within(p, q) {
				inside = true
				break
			}
		}
		if !inside {
			roots = append(roots, p)
		}
	}
	return roots, nil
}

// within reports whether the cleaned path p is dir or lies under it.
func within(p, dir string) bool {
	switch {
	case p == dir || strings.HasPrefix(p, dir+"/"):
		return true
	case dir == ".":
		return p != ".." && !strings.HasPrefix(p, "../")
	}
	return false
}

// listPaths names the walked directories in a message, at most about 512 bytes of them.
func listPaths(paths []string) string {
	s := strings.Join(paths, ", ")
	if len(s) > 512 {
		s = strings.ToValidUTF8(s[:512], "") + "…"
	}
	return s
}

// findModels walks the model directories: each .sql file is a model (its materialization
// read from a config() call), each .yml or .yaml file may be a schema file (in path
// order).
func (r *projectReader) findModels(dir string, proj dbtProject) (map[string]*Model, []string, error) {
	models := map[string]*Model{}
	var schemaFiles []string
	for _, root := range proj.paths {
		if err := r.ctx.Err(); err != nil {
			return nil, nil, err
		}
		err := fs.WalkDir(r.fsys, root, func(p string, d fs.DirEntry, err error) error {
			if cerr := r.ctx.Err(); cerr != nil {
				return cerr
			}
			if r.entries >= r.limits.MaxEntries {
				return &LimitError{Limit: "directory entries walked", Value: int64(r.limits.MaxEntries)}
			}
			r.entries++
			if err != nil || d.IsDir() {
				return nil
			}
			switch path.Ext(p) {
			case ".sql":
				name := strings.TrimSuffix(path.Base(p), ".sql")
				m := &Model{UniqueID: "model." + proj.name + "." + name, Name: name, Alias: name, Schema: proj.schema, Materialized: proj.materialized, Enabled: true}
				m.Node = projectNodeInfo(proj, dir, root, p, name)
				body, err := r.readFile(p)
				switch {
				case stopped(err):
					return err
				case err == nil:
					if mm := configMaterializedRE.FindSubmatch(body); mm != nil {
						m.Materialized = string(mm[1])
					}
					m.Node.Tags = append(m.Node.Tags, configTags(body)...)
				}
				models[name] = m
			case ".yml", ".yaml":
				if p != path.Join(dir, "dbt_project.yml") { // a walk of the project directory itself
					schemaFiles = append(schemaFiles, p)
				}
			}
			return nil
		})
		if stopped(err) {
			return nil, nil, err
		}
	}
	sort.Strings(schemaFiles)
	return models, schemaFiles, nil
}

// readFile reads the file name, counting it and its bytes against the read's limits.
func (r *projectReader) readFile(name string) ([]byte, error) {
	if err := r.ctx.Err(); err != nil {
		return nil, err
	}
	if r.files >= r.limits.MaxFiles {
		return nil, &LimitError{Limit: "files read", Value: int64(r.limits.MaxFiles)}
	}
	r.files++
	f, err := r.fsys.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	left := r.limits.MaxBytes - r.bytes
	overBytes := &LimitError{Limit: "bytes of files read", Value: r.limits.MaxBytes}
	if st, err := f.Stat(); err == nil && st.Size() > left {
		return nil, overBytes
	}
	raw, err := io.ReadAll(io.LimitReader(ctxReader{r.ctx, f}, left+1))
	r.bytes += int64(len(raw))
	switch {
	case r.ctx.Err() != nil:
		return nil, r.ctx.Err()
	case int64(len(raw)) > left:
		return nil, overBytes
	case err != nil:
		return nil, err
	}
	return raw, nil
}

// stopped reports whether err ends the whole read (a limit passed, the context ended, a
// parser's panic) rather than only the one file's reading.
func stopped(err error) bool {
	var le *LimitError
	var pe *parserPanic
	return errors.As(err, &le) || errors.As(err, &pe) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// ctxReader stops reading once its context ends.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// unmarshalYAML parses YAML: yaml.Unmarshal, a variable so that a test can stand in a
// parser that panics.
var unmarshalYAML = yaml.Unmarshal

// decodeYAML decodes the content of the file name into v. A panic of the parser (crafted
// input has panicked YAML parsers before) is recovered into a *parserPanic naming the
// file, which fails the read.
func decodeYAML(name string, raw []byte, v any) (err error) {
	defer func() {
		if rec := recover(); rec != nil {
			err = &parserPanic{file: name, value: rec}
		}
	}()
	return unmarshalYAML(raw, v)
}

// parserPanic is a YAML parser's panic on the file's content, recovered.
type parserPanic struct {
	file  string
	value any
}

func (e *parserPanic) Error() string {
	v := fmt.Sprint(e.value)
	if len(v) > 200 {
		v = strings.ToValidUTF8(v[:200], "") + "…"
	}
	return fmt.Sprintf("%s cannot be read: the YAML parser failed on it (%s)", e.file, v)
}

// applySchemaFile applies what the schema file at p documents to the models (their
// descriptions, meta, config and columns) and returns the tests it declares.
// A file that cannot be read or parsed is skipped (not every .yml under models/ is a
// schema file), unless the read must stop (stopped).
func (r *projectReader) applySchemaFile(p string, models map[string]*Model) ([]Test, error) {
	raw, err := r.readFile(p)
	if err != nil {
		if stopped(err) {
			return nil, err
		}
		return nil, nil
	}
	var doc struct {
		Models []yamlModel `yaml:"models"`
	}
	if err := decodeYAML(p, raw, &doc); err != nil {
		if stopped(err) {
			return nil, err
		}
		return nil, nil
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
		m.Node.Tags = append(m.Node.Tags, stringList(ym.Tags)...)
		m.Node.Tags = append(m.Node.Tags, stringList(ym.Config.Tags)...)
		if m.Node.PatchPath == "" {
			m.Node.PatchPath = relToProject(r.dir, p)
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
	return tests, nil
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
		Tags         any            `yaml:"tags"`
	} `yaml:"config"`
	Tags    any `yaml:"tags"`
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

// projectNodeInfo is what model selection reads of the model at p (a .sql file under the
// model directory root of the project at dir), as dbt names it: its path relative to
// the project, and its fqn (the project, the directories under the model path, the
// name). Its tags start with those dbt_project.yml gives its directories.
func projectNodeInfo(proj dbtProject, dir, root, p, name string) NodeInfo {
	info := NodeInfo{Package: proj.name, Path: relToProject(dir, p)}
	rel := strings.TrimPrefix(p, root+"/")
	if root == "." {
		rel = p
	}
	dirs := strings.Split(rel, "/")
	dirs = dirs[:len(dirs)-1]
	info.FQN = append(append([]string{proj.name}, dirs...), name)
	// models: <project>: {+tags, <dir>: {+tags, <dir>: …}}: each level's tags apply below it.
	level := proj.models
	for i := 0; level != nil; i++ {
		for _, k := range []string{"+tags", "tags"} {
			info.Tags = append(info.Tags, stringList(level[k])...)
		}
		if i >= len(dirs) {
			break
		}
		next, _ := level[dirs[i]].(map[string]any)
		level = next
	}
	return info
}

// relToProject is the path p relative to the project directory dir.
func relToProject(dir, p string) string {
	if dir == "." || dir == "" {
		return p
	}
	return strings.TrimPrefix(p, dir+"/")
}

// stringList reads a tags value: a string or a list of strings.
func stringList(v any) []string {
	switch t := v.(type) {
	case string:
		return []string{t}
	case []any:
		var out []string
		for _, e := range t {
			if s, ok := e.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

var (
	configTagsRE = regexp.MustCompile(`config\([^)]*\btags\s*=\s*(\[[^\]]*\]|'[^']*'|"[^"]*")`)
	quotedRE     = regexp.MustCompile(`'([^']*)'|"([^"]*)"`)
)

// configTags reads the tags of a model's {{ config(tags=…) }} call: a string or a list
// of strings.
func configTags(body []byte) []string {
	mm := configTagsRE.FindSubmatch(body)
	if mm == nil {
		return nil
	}
	var out []string
	for _, q := range quotedRE.FindAllSubmatch(mm[1], 64) {
		out = append(out, string(q[1])+string(q[2]))
	}
	return out
}
