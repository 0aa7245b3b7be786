package convert

import (
	"fmt"
	"regexp"
	"strings"
)

// MetricFlow's where filters are SQL with Jinja references to the semantic layer:
// {{ Dimension('entity__name') }}, {{ TimeDimension('metric_time', 'day') }},
// {{ Entity('customer') }}, {{ Metric('revenue', group_by=['customer']) }}.

var (
	templateRE = regexp.MustCompile(`(?s)\{\{(.*?)\}\}`)
	callRE     = regexp.MustCompile(`^\s*(Dimension|TimeDimension|Entity|Metric)\(\s*['"]([^'"]*)['"]\s*(?:,\s*['"]([^'"]*)['"]\s*)?\)\s*(?:\.\s*grain\(\s*['"]([^'"]*)['"]\s*\)\s*)?$`)
)

// filterScope is where a where filter is read: the cube its measure lives on, the
// semantic model its references start from, and what metric_time is there.
type filterScope struct {
	b       *builder
	host    *cube
	sm      *smInfo
	aggTime string // metric_time: the measure's agg_time_dimension, a dimension of host
	// anyGrain takes a time reference at any grain (a view's group by: the query picks
	// the granularity).
	anyGrain bool
}

// translate rewrites a where filter as cube SQL: a reference to a dimension of the
// host cube is that dimension's SQL, one of a joined cube a reference to its member.
func (fs filterScope) translate(where string) (string, error) {
	var out strings.Builder
	last := 0
	for _, loc := range templateRE.FindAllStringSubmatchIndex(where, -1) {
		lit := where[last:loc[0]]
		if !sqlSafe(lit) || strings.Contains(lit, "{%") {
			return "", fmt.Errorf("filter %q has a brace or a template the data model cannot express", where)
		}
		out.WriteString(sqlEscape(lit))
		c, d, err := fs.reference(where[loc[2]:loc[3]])
		if err != nil {
			return "", err
		}
		sql, err := fs.memberSQL(c, d)
		if err != nil {
			return "", err
		}
		out.WriteString(sql)
		last = loc[1]
	}
	if lit := where[last:]; !sqlSafe(lit) {
		return "", fmt.Errorf("filter %q has a brace or a template the data model cannot express", where)
	}
	out.WriteString(sqlEscape(where[last:]))
	return strings.TrimSpace(out.String()), nil
}

// reference resolves the inside of one {{ … }} to the cube dimension it names.
func (fs filterScope) reference(call string) (*cube, *dimension, error) {
	m := callRE.FindStringSubmatch(call)
	if m == nil && strings.HasPrefix(strings.TrimSpace(call), "Metric(") {
		return nil, nil, fmt.Errorf("a filter on a metric's value (%s) has no Cube equivalent inside a measure", strings.TrimSpace(call))
	}
	if m == nil {
		return nil, nil, fmt.Errorf("the reference %s is not one the data model can express", strings.TrimSpace(call))
	}
	kind, ref, grain := m[1], m[2], firstOf(m[4], m[3])
	path := strings.Split(ref, "__")
	name := path[len(path)-1]
	switch {
	case kind == "Metric":
		return nil, nil, fmt.Errorf("a filter on a metric's value (metric %q) has no Cube equivalent inside a measure", ref)
	case kind == "Entity":
		return fs.entity(name)
	case name == "metric_time" && len(path) == 1:
		d := fs.host.member(fs.aggTime)
		if d == nil {
			return nil, nil, fmt.Errorf("metric_time: the measure has no agg_time_dimension")
		}
		return fs.host, d, fs.grain(d, grain)
	}
	info, d, err := fs.dimension(path[:len(path)-1], name)
	if err != nil {
		return nil, nil, err
	}
	return info.cube, d, fs.grain(d, grain)
}

// grain refuses a time reference at another grain than its dimension's own: that takes
// a date truncation the data model does not write.
func (fs filterScope) grain(d *dimension, grain string) error {
	own, _ := d.Meta["time_granularity"].(string)
	if own == "" {
		own = "day"
	}
	if !fs.anyGrain && grain != "" && !strings.EqualFold(grain, own) && d.Type == "time" {
		return fmt.Errorf("time dimension %q at grain %s (its own is %s) needs a date truncation the data model does not write", d.Name, grain, own)
	}
	return nil
}

// dimension finds the semantic model a dimension reference (entity path, name) reads:
// the filter's own when it declares the entity, else where the entity is primary or
// unique.
func (fs filterScope) dimension(entities []string, name string) (*smInfo, *dimension, error) {
	if len(entities) == 0 {
		if fs.sm != nil && fs.sm.dims[name] != nil {
			return fs.sm, fs.sm.dims[name], nil
		}
		return nil, nil, fmt.Errorf("dimension %q names no entity", name)
	}
	entity := entities[len(entities)-1]
	if fs.sm != nil && fs.sm.declares(entity) && fs.sm.dims[name] != nil {
		return fs.sm, fs.sm.dims[name], nil
	}
	home := fs.home(entity, func(info *smInfo) bool { return info.dims[name] != nil })
	if home == nil {
		return nil, nil, fmt.Errorf("dimension %q is not a dimension of entity %q", name, entity)
	}
	return home, home.dims[name], nil
}

// entity is the dimension of an entity: the filter's own semantic model's, else the one
// where it is primary (or unique).
func (fs filterScope) entity(name string) (*cube, *dimension, error) {
	if fs.sm != nil && fs.sm.entities[name] != nil {
		return fs.host, fs.sm.entities[name], nil
	}
	home := fs.home(name, func(info *smInfo) bool { return info.entities[name] != nil })
	if home == nil {
		return nil, nil, fmt.Errorf("entity %q has no dimension in the data model", name)
	}
	return home.cube, home.entities[name], nil
}

// home is the semantic model that has what the filter names and where the entity is
// primary, else the first where it is unique or natural; nil when none has it.
func (fs filterScope) home(entity string, has func(*smInfo) bool) *smInfo {
	var home *smInfo
	for _, se := range fs.b.entities[entity] {
		if se.e.Type != "foreign" && has(se.info) && (home == nil || se.e.Type == "primary") {
			home = se.info
		}
	}
	return home
}

// memberSQL is a dimension's SQL as the host cube's measure reads it.
func (fs filterScope) memberSQL(c *cube, d *dimension) (string, error) {
	if c == fs.host {
		return d.sql(), nil
	}
	if fs.b.joinPath(fs.host, c) == nil {
		return "", fmt.Errorf("dimension %q is in cube %q, which no join from cube %q reaches", d.Name, c.Name, fs.host.Name)
	}
	return "{" + c.Name + "." + d.Name + "}", nil
}

func (info *smInfo) declares(entity string) bool {
	for _, e := range info.sm.Entities {
		if e.Name == entity {
			return true
		}
	}
	return false
}

// member is the cube's dimension of that member name.
func (c *cube) member(name string) *dimension {
	for _, d := range c.Dimensions {
		if d.Name == name {
			return d
		}
	}
	return nil
}

var exprWordRE = regexp.MustCompile(`'(?:[^']|'')*'|\b[A-Za-z_][A-Za-z0-9_]*`)

// sqlKeyword are the words a derived metric's expression may hold besides its inputs
// and function names.
var sqlKeyword = map[string]bool{"case": true, "when": true, "then": true, "else": true, "end": true, "and": true, "or": true,
	"not": true, "null": true, "is": true, "in": true, "between": true, "like": true, "as": true, "true": true, "false": true,
	"double": true, "precision": true, "float": true, "numeric": true, "decimal": true, "integer": true, "int": true, "bigint": true, "real": true}

// derivedSQL rewrites a derived metric's expression over its inputs (named by alias, or
// by name) with the references ref of their measures. A word that is neither an input
// nor SQL (a function, a keyword) makes it a warning: it would dangle.
func derivedSQL(expr string, inputs []MetricInput, ref []string) (string, error) {
	if !sqlSafe(expr) {
		return "", fmt.Errorf("its expression %q has a brace", expr)
	}
	byName := map[string]string{}
	for i, in := range inputs {
		byName[firstOf(in.Alias, in.Name)] = ref[i]
	}
	var out strings.Builder
	last := 0
	for _, loc := range exprWordRE.FindAllStringIndex(expr, -1) {
		w := expr[loc[0]:loc[1]]
		out.WriteString(sqlEscape(expr[last:loc[0]]))
		last = loc[1]
		switch {
		case w[0] == '\'':
			out.WriteString(sqlEscape(w))
		case byName[w] != "":
			out.WriteString(byName[w])
		case sqlKeyword[strings.ToLower(w)] || strings.HasPrefix(strings.TrimLeft(expr[loc[1]:], " \t\n"), "("):
			out.WriteString(w)
		default:
			return "", fmt.Errorf("its expression %q names %q, which is none of its inputs", expr, w)
		}
	}
	out.WriteString(sqlEscape(expr[last:]))
	return strings.TrimSpace(out.String()), nil
}
