package convert

import (
	"fmt"
	"sort"
)

// File is one generated data-model file.
type File struct {
	Path    string `json:"path"`
	Content string `json:"content"`
}

// Warning is something skipped or coerced during a conversion, and why.
type Warning struct {
	Model   string `json:"model,omitempty"`
	Message string `json:"message"`
}

// CubePath is where the cube of that name is written.
func CubePath(cube string) string { return "model/cubes/" + cube + ".yml" }

// ViewPath is where the view of that name is written.
func ViewPath(view string) string { return "model/views/" + view + ".yml" }

// warnFunc records a warning about a model (its unique id, or a semantic model's or a
// metric's label).
type warnFunc func(model, format string, args ...any)

// Result is the outcome of a conversion.
type Result struct {
	Files    []File // sorted by path
	Warnings []Warning
}

// Build turns a project into data-model files. It is deterministic: the same project
// always gives byte-identical files in the same order, and a model's file depends only on
// that model, its tests and the semantic models and metrics that name it.
func Build(p *Project) Result {
	c := Prepare(p)
	res := Result{Files: make([]File, c.Len()), Warnings: c.Warnings}
	for i := range res.Files {
		res.Files[i] = c.File(i)
	}
	return res
}

// Conversion is a project whose cubes are decided (which models convert, their keys,
// joins and measures, the views of saved queries, every warning) but not yet rendered:
// File renders them one at a time, so a caller can write, count or release each as it
// goes.
type Conversion struct {
	Warnings []Warning
	cubes    []*cube // sorted by file path
	views    []*view // sorted by file path, after the cubes (model/views/ sorts after model/cubes/)
}

// Dirs are the directories the files go into (model/cubes, and model/views when a
// saved query became a view).
func (c *Conversion) Dirs() []string {
	if len(c.views) > 0 {
		return []string{"model/cubes", "model/views"}
	}
	return []string{"model/cubes"}
}

// Len is the number of files the conversion generates.
func (c *Conversion) Len() int { return len(c.cubes) + len(c.views) }

// File renders the i-th file (in path order) and releases that cube and its model, so a
// conversion rendered file by file holds little more than the files not yet written.
// Each index may be rendered once; different indexes may be rendered concurrently.
func (c *Conversion) File(i int) File {
	if i >= len(c.cubes) {
		v := c.views[i-len(c.cubes)]
		c.views[i-len(c.cubes)] = nil
		return File{Path: ViewPath(v.Name), Content: v.render()}
	}
	cb := c.cubes[i]
	c.cubes[i] = nil
	return File{Path: CubePath(cb.Name), Content: cb.render()}
}

// MayConvert reports whether m can become a file on its own merits; whether it does also
// depends on the other models (two models of one name make one file).
func MayConvert(m *Model) bool {
	return m.Err == "" && m.Name != "" && m.Enabled && m.Materialized != "ephemeral"
}

// Prepare decides the whole data model of a project; see Build.
func Prepare(p *Project) *Conversion {
	b := newBuilder(p)
	b.addModels(p.Models)
	b.applyTests(p.Tests)
	b.applySemanticModels(p.SemanticModels)
	b.joinEntities()
	pruneJoins(b.order, b.cubes, b.warn)
	b.applyLegacyMetrics(p.LegacyMetrics)
	b.applyMetrics(p.Metrics)
	b.applySavedQueries(p.SavedQueries)
	sort.Slice(b.order, func(i, j int) bool { return CubePath(b.cubes[b.order[i]].Name) < CubePath(b.cubes[b.order[j]].Name) })
	b.conv.cubes = make([]*cube, len(b.order))
	for i, key := range b.order {
		b.conv.cubes[i] = b.cubes[key]
	}
	sort.Slice(b.views, func(i, j int) bool { return b.views[i].Name < b.views[j].Name })
	b.conv.views = b.views
	return b.conv
}

// builder is the state of one Prepare.
type builder struct {
	conv      *Conversion
	warn      warnFunc
	index     modelIndex
	dialect   dialect
	cubes     map[string]*cube // by model key
	byName    map[string]*cube // by cube name
	order     []string         // model keys, in the order their cubes were made
	cubeNames namespace        // cube and view names (one namespace in Cube)
	views     []*view

	// The semantic layer, as the semantic models place it on the cubes.
	semantic map[string]*smInfo     // by semantic model name
	entities map[string][]*smEntity // by entity name: every semantic model declaring it
	measures map[string]*measureRef // MetricFlow measures, by name
	skipped  map[string]string      // MetricFlow measures not converted, by name: why
	metrics  map[string]*Metric     // MetricFlow metrics, by name
	resolved map[string]*measureRef // metrics converted, by name (nil: not convertible)
	visiting map[string]bool        // metrics being resolved (a cycle is a warning)
	why      map[string]string      // metrics not converted, by name: why
}

func newBuilder(p *Project) *builder {
	b := &builder{conv: &Conversion{}, dialect: dialectOf(p.Adapter), cubes: map[string]*cube{}, byName: map[string]*cube{},
		cubeNames: namespace{}, semantic: map[string]*smInfo{}, entities: map[string][]*smEntity{},
		measures: map[string]*measureRef{}, skipped: map[string]string{}, metrics: map[string]*Metric{},
		resolved: map[string]*measureRef{}, visiting: map[string]bool{}, why: map[string]string{}}
	b.warn = func(model, format string, args ...any) {
		b.conv.Warnings = append(b.conv.Warnings, Warning{Model: model, Message: fmt.Sprintf(format, args...)})
	}
	return b
}

// addModels makes the cube of every model that converts, in name order.
func (b *builder) addModels(all []*Model) {
	models := sortModels(all)
	b.index = newModelIndex(models)
	for _, m := range models {
		label := m.UniqueID
		if label == "" {
			label = m.Name
		}
		key := b.index.byID[m.UniqueID]
		if key == "" {
			key = b.index.key(Ref{Name: m.Name, Version: m.Version})
		}
		switch {
		case m.Err != "":
			b.warn(label, "model skipped: %s", m.Err)
			continue
		case m.Name == "":
			b.warn(label, "model skipped: it has no name")
			continue
		case !m.Enabled:
			b.warn(label, "model skipped: it is disabled")
			continue
		case m.Materialized == "ephemeral":
			b.warn(label, "model skipped: ephemeral models have no table to query")
			continue
		case b.cubes[key] != nil && key == m.Name:
			b.warn(label, "model skipped: another model is also named %q (%s)", m.Name, b.cubes[key].model.UniqueID)
			continue
		case b.cubes[key] != nil:
			b.warn(label, "model skipped: another model is also %q (%s)", key, b.cubes[key].model.UniqueID)
			continue
		}
		c := newCube(m, key, b.dialect, b.cubeNames, b.warn)
		if c == nil {
			continue
		}
		b.cubes[key] = c
		b.byName[c.Name] = c
		b.order = append(b.order, key)
	}
}
