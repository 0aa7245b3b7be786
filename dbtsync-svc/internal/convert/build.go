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

// PathFor is where a model's cube is written, unless another model's cube takes the
// name first (then Prepare gives it a suffix).
func PathFor(m *Model) string {
	name, _ := memberName(m.Name)
	return CubePath(name)
}

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
// joins and measures, every warning) but not yet rendered: File renders them one at a
// time, so a caller can write, count or release each as it goes.
type Conversion struct {
	Warnings []Warning
	cubes    []*cube // sorted by file path
}

// Len is the number of files the conversion generates.
func (c *Conversion) Len() int { return len(c.cubes) }

// File renders the i-th file (in path order) and releases that cube and its model, so a
// conversion rendered file by file holds little more than the files not yet written.
// Each index may be rendered once; different indexes may be rendered concurrently.
func (c *Conversion) File(i int) File {
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
	conv := &Conversion{}
	warn := func(model, format string, args ...any) {
		conv.Warnings = append(conv.Warnings, Warning{Model: model, Message: fmt.Sprintf(format, args...)})
	}
	models := append([]*Model(nil), p.Models...)
	sort.SliceStable(models, func(i, j int) bool {
		if models[i].Name != models[j].Name {
			return models[i].Name < models[j].Name
		}
		return models[i].UniqueID < models[j].UniqueID
	})
	d := dialectOf(p.Adapter)
	cubes := map[string]*cube{} // by model name
	cubeNames := namespace{}
	var order []string
	for _, m := range models {
		label := m.UniqueID
		if label == "" {
			label = m.Name
		}
		switch {
		case m.Err != "":
			warn(label, "model skipped: %s", m.Err)
			continue
		case m.Name == "":
			warn(label, "model skipped: it has no name")
			continue
		case !m.Enabled:
			warn(label, "model skipped: it is disabled")
			continue
		case m.Materialized == "ephemeral":
			warn(label, "model skipped: ephemeral models have no table to query")
			continue
		case cubes[m.Name] != nil:
			warn(label, "model skipped: another model is also named %q (%s)", m.Name, cubes[m.Name].model.UniqueID)
			continue
		}
		c := newCube(m, d, cubeNames, warn)
		if c == nil {
			continue
		}
		cubes[m.Name] = c
		order = append(order, m.Name)
	}
	applyTests(p.Tests, cubes, warn)
	measureCube := applySemanticModels(p.SemanticModels, cubes, warn)
	applyMetrics(p.Metrics, cubes, measureCube, warn)
	pruneJoins(order, cubes, warn)
	sort.Slice(order, func(i, j int) bool { return CubePath(cubes[order[i]].Name) < CubePath(cubes[order[j]].Name) })
	conv.cubes = make([]*cube, len(order))
	for i, name := range order {
		conv.cubes[i] = cubes[name]
	}
	return conv
}
