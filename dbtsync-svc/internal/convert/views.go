package convert

import (
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// view is a saved query as a Cube view: the members of its metrics and group-by
// dimensions, each cube reached along the joins from the cube of its first metric.
type view struct {
	Name        string
	Title       string
	Description string
	Cubes       []*viewCube
	Filters     []viewFilter
}

// viewCube is the members a view takes from the cube at the end of a join path.
type viewCube struct {
	JoinPath string
	Includes []viewMember
	cube     *cube
}

// viewMember is a member of a cube in a view, aliased when another cube's member has
// its name.
type viewMember struct {
	Name  string
	Alias string
}

// viewFilter is a view's default filter (Cube's default_filters).
type viewFilter struct {
	Member   string
	Operator string
	Values   []string
}

// applySavedQueries makes a view of each saved query.
func (b *builder) applySavedQueries(qs []SavedQuery) {
	sort.SliceStable(qs, func(i, j int) bool { return qs[i].Name < qs[j].Name })
	for _, q := range qs {
		v, err := b.savedQuery(q)
		if err != nil {
			b.warn("saved_query."+q.Name, "saved query skipped: %v", err)
			continue
		}
		b.views = append(b.views, v)
	}
}

// viewScope collects a view's members, cube by cube.
type viewScope struct {
	b     *builder
	root  *cube
	cubes []*viewCube
	names map[string]string // view member name -> cube.member
}

func (vs *viewScope) include(c *cube, member string) (string, error) {
	var vc *viewCube
	for _, x := range vs.cubes {
		if x.cube == c {
			vc = x
		}
	}
	if vc == nil {
		path := vs.b.joinPath(vs.root, c)
		if path == nil {
			return "", fmt.Errorf("no join leads from cube %q (its first metric's) to cube %q", vs.root.Name, c.Name)
		}
		vc = &viewCube{JoinPath: strings.Join(path, "."), cube: c}
		vs.cubes = append(vs.cubes, vc)
	}
	full := c.Name + "." + member
	for _, m := range vc.Includes {
		if m.Name == member {
			return firstOf(m.Alias, m.Name), nil
		}
	}
	m := viewMember{Name: member}
	if other, taken := vs.names[member]; taken && other != full {
		m.Alias = c.Name + "_" + member
	}
	vs.names[firstOf(m.Alias, m.Name)] = full
	vc.Includes = append(vc.Includes, m)
	return firstOf(m.Alias, m.Name), nil
}

// savedQuery is the view of a saved query, rooted at the cube of its first metric that
// converts. Its where filters become default filters where they are a comparison of
// one dimension with constants; other filters and a limit are warnings.
func (b *builder) savedQuery(q SavedQuery) (*view, error) {
	label := "saved_query." + q.Name
	var first *measureRef
	vs := &viewScope{b: b, names: map[string]string{}}
	for _, name := range q.Metrics {
		r := b.resolved[name]
		if r == nil {
			b.warn(label, "metric %q left out of the view: it is not converted", name)
			continue
		}
		if first == nil {
			first, vs.root = r, r.cube
		}
		if _, err := vs.include(r.cube, r.m.Name); err != nil {
			return nil, err
		}
	}
	if first == nil {
		return nil, errors.New("none of its metrics is converted")
	}
	scope := filterScope{b: b, host: first.cube, sm: first.sm, aggTime: first.m.aggTime}
	groups := scope
	groups.anyGrain = true
	for _, g := range q.GroupBy {
		c, d, err := groups.reference(g)
		if err != nil {
			b.warn(label, "group by %s left out of the view: %v", g, err)
			continue
		}
		if _, err := vs.include(c, d.Name); err != nil {
			return nil, err
		}
	}
	v := &view{Title: q.Label, Description: strings.TrimSpace(q.Description)}
	for _, w := range q.Where {
		f, err := scope.viewFilter(vs, w)
		if err != nil {
			b.warn(label, "where filter %q left out of the view (a view's default filter is one dimension compared with constants): %v", w, err)
			continue
		}
		v.Filters = append(v.Filters, f)
	}
	if q.Limit != nil {
		b.warn(label, "limit %d left out of the view: a view has no row limit", *q.Limit)
	}
	name, renamed := memberName(q.Name)
	v.Name = b.cubeNames.claim(name)
	if (renamed || v.Name != q.Name) && v.Title == "" {
		v.Title = q.Name
	}
	v.Cubes = vs.cubes
	return v, nil
}

var whereOpRE = regexp.MustCompile(`(?is)^\s*\{\{(.*?)\}\}\s*(==|=|!=|<>|>=|<=|>|<|not\s+in\b|in\b|is\s+not\s+null\b|is\s+null\b)\s*(.*?)\s*$`)

// viewFilter reads a saved query's where filter of the form {{ Dimension(…) }} <op>
// <constants> as a default filter of the view (the dimension joins the view).
func (fs filterScope) viewFilter(vs *viewScope, where string) (viewFilter, error) {
	m := whereOpRE.FindStringSubmatch(where)
	if m == nil || strings.Count(where, "{{") > 1 {
		return viewFilter{}, errors.New("it is not of that form")
	}
	c, d, err := fs.reference(m[1])
	if err != nil {
		return viewFilter{}, err
	}
	op := strings.ToLower(strings.Join(strings.Fields(m[2]), " "))
	values, err := constants(m[3], op == "in" || op == "not in")
	if err != nil {
		return viewFilter{}, err
	}
	if (op == "is null" || op == "is not null") != (values == nil) {
		return viewFilter{}, fmt.Errorf("%q does not take %q", op, m[3])
	}
	member, err := vs.include(c, d.Name)
	if err != nil {
		return viewFilter{}, err
	}
	return viewFilter{Member: member, Operator: cubeOperator(op, d.Type == "time"), Values: values}, nil
}

// cubeOperator is the Cube filter operator of a SQL comparison.
func cubeOperator(op string, isTime bool) string {
	timeOps := map[string]string{">": "afterDate", ">=": "afterOrOnDate", "<": "beforeDate", "<=": "beforeOrOnDate"}
	if to, ok := timeOps[op]; ok && isTime {
		return to
	}
	return map[string]string{"=": "equals", "==": "equals", "in": "equals", "!=": "notEquals", "<>": "notEquals", "not in": "notEquals",
		">": "gt", ">=": "gte", "<": "lt", "<=": "lte", "is null": "notSet", "is not null": "set"}[op]
}

var constantRE = regexp.MustCompile(`^\s*(?:'((?:[^']|'')*)'|(-?[0-9]+(?:\.[0-9]+)?)|(?i:(true|false)))\s*$`)

// constants reads a SQL constant, or with list a parenthesized list of them; nil for
// nothing.
func constants(s string, list bool) ([]string, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	items := []string{s}
	if list {
		if !strings.HasPrefix(s, "(") || !strings.HasSuffix(s, ")") {
			return nil, fmt.Errorf("%q is not a list of constants", s)
		}
		items = splitConstants(s[1 : len(s)-1])
	}
	out := make([]string, 0, len(items))
	for _, it := range items {
		m := constantRE.FindStringSubmatch(it)
		if m == nil {
			return nil, fmt.Errorf("%q is not a constant", strings.TrimSpace(it))
		}
		v := strings.ReplaceAll(m[1], "''", "'") + m[2] + strings.ToLower(m[3])
		if strings.ContainsAny(v, "{}\\") || hasControl(v) {
			return nil, fmt.Errorf("constant %s has a brace or a backslash", strconv.Quote(v))
		}
		out = append(out, v)
	}
	return out, nil
}

// splitConstants splits a list of SQL constants at the commas outside quotes.
func splitConstants(s string) []string {
	var out []string
	quoted, start := false, 0
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] == '\'':
			quoted = !quoted
		case s[i] == ',' && !quoted:
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return append(out, s[start:])
}
