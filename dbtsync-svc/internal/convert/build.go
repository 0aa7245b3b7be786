package convert

import (
	"fmt"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
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
	// Selection is what a model selector kept and dropped of the project's models (nil:
	// no selector).
	Selection *Selection
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

// File renders the i-th file (in path order) and releases that cube, so a conversion
// rendered file by file holds little more than the files not yet written. Each index
// may be rendered once; different indexes may be rendered concurrently.
func (c *Conversion) File(i int) File {
	path, content := c.AppendFile(i, nil)
	return File{Path: path, Content: string(content)}
}

// AppendFile is File appending the content to dst (a caller writing files reuses one
// buffer instead of a string per file).
func (c *Conversion) AppendFile(i int, dst []byte) (path string, content []byte) {
	if i >= len(c.cubes) {
		v := c.views[i-len(c.cubes)]
		c.views[i-len(c.cubes)] = nil
		return ViewPath(v.Name), v.appendYAML(dst)
	}
	cb := c.cubes[i]
	c.cubes[i] = nil
	return CubePath(cb.Name), cb.appendYAML(dst)
}

// MayConvert reports whether m can become a file on its own merits; whether it does also
// depends on the other models (two models of one name make one file).
func MayConvert(m *Model) bool {
	return m.Err == "" && m.Name != "" && m.Enabled && m.Materialized != "ephemeral"
}

// Prepare decides the whole data model of a project; see Build.
func Prepare(p *Project) *Conversion { return prepare(p, false) }

// PrepareOwned is Prepare for a caller that hands the project over: each model's
// columns are released once its cube holds what it needs of them, so that a large
// project is not held twice over. p is not usable afterwards.
func PrepareOwned(p *Project) *Conversion { return prepare(p, true) }

func prepare(p *Project, owned bool) *Conversion {
	b := newBuilder(p)
	b.owned = owned
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
	owned    bool                   // PrepareOwned: the models' columns go once used
}

func newBuilder(p *Project) *builder {
	b := &builder{conv: &Conversion{}, dialect: dialectOf(p.Adapter), cubes: map[string]*cube{}, byName: map[string]*cube{},
		semantic: map[string]*smInfo{}, entities: map[string][]*smEntity{},
		measures: map[string]*measureRef{}, skipped: map[string]string{}, metrics: map[string]*Metric{},
		resolved: map[string]*measureRef{}, visiting: map[string]bool{}, why: map[string]string{}}
	b.warn = func(model, format string, args ...any) {
		b.conv.Warnings = append(b.conv.Warnings, Warning{Model: model, Message: fmt.Sprintf(format, args...)})
	}
	return b
}

// addModels makes the cube of every model that converts, in name order: which models
// convert and their cube names are decided one by one, the cubes are built in parallel
// (each needs only its model), and their warnings come in model order.
func (b *builder) addModels(all []*Model) {
	models := sortModels(all)
	b.index = newModelIndex(models)
	type slot struct {
		key, name, table string
		warnings         []Warning
		cube             *cube
	}
	slots := make([]slot, len(models))
	first := map[string]*Model{} // model key -> the model whose cube has it
	for i, m := range models {
		sl := &slots[i]
		skip := func(format string, args ...any) {
			label := m.UniqueID
			if label == "" {
				label = m.Name
			}
			sl.warnings = []Warning{{Model: label, Message: fmt.Sprintf(format, args...)}}
		}
		key := b.index.byID[m.UniqueID]
		if key == "" {
			key = b.index.key(Ref{Name: m.Name, Version: m.Version})
		}
		table, ok := relation(m, b.dialect)
		switch {
		case m.Err != "":
			skip("model skipped: %s", m.Err)
		case m.Name == "":
			skip("model skipped: it has no name")
		case !m.Enabled:
			skip("model skipped: it is disabled")
		case m.Materialized == "ephemeral":
			skip("model skipped: ephemeral models have no table to query")
		case first[key] != nil && key == m.Name:
			skip("model skipped: another model is also named %q (%s)", m.Name, first[key].UniqueID)
		case first[key] != nil:
			skip("model skipped: another model is also %q (%s)", key, first[key].UniqueID)
		case !ok:
			sl.warnings = []Warning{{Model: m.UniqueID, Message: fmt.Sprintf("model skipped: its relation %q has a brace or control character, which Cube's SQL cannot hold", table)}}
		default:
			first[key] = m
			name, _ := memberName(key)
			sl.key, sl.name, sl.table = key, b.cubeNames.claim(name), table
		}
	}
	types := make([]typeCache, runtime.GOMAXPROCS(0))
	parallel(len(models), func(worker, i int) {
		sl := &slots[i]
		if sl.name == "" {
			return
		}
		if types[worker] == nil {
			types[worker] = typeCache{}
		}
		sl.cube = newCube(models[i], sl.key, sl.name, sl.table, b.dialect, types[worker], func(model, format string, args ...any) {
			sl.warnings = append(sl.warnings, Warning{Model: model, Message: fmt.Sprintf(format, args...)})
		})
		if b.owned {
			models[i].Columns = nil
		}
	})
	for i := range slots {
		sl := &slots[i]
		b.conv.Warnings = append(b.conv.Warnings, sl.warnings...)
		if c := sl.cube; c != nil {
			b.cubes[sl.key] = c
			b.byName[c.Name] = c
			b.order = append(b.order, sl.key)
		}
	}
}

// parallel calls fn(worker, i) for every i below n from one goroutine per CPU (fewer
// for a few), worker numbering the goroutine (below GOMAXPROCS).
func parallel(n int, fn func(worker, i int)) {
	workers := min(runtime.GOMAXPROCS(0), n/64+1)
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				fn(w, i)
			}
		}()
	}
	wg.Wait()
}
