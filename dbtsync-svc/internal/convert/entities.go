package convert

import (
	"sort"
	"strings"
)

// joinEntities joins the cubes of semantic models on their entities, as MetricFlow joins
// semantic models: from a foreign entity to the semantic model where that entity is
// primary or unique (many_to_one), and from a primary or unique entity to another's
// primary or unique one (one_to_one). A join the cube has already (from a relationships
// test) is kept as it is.
func (b *builder) joinEntities() {
	names := make([]string, 0, len(b.entities))
	for name := range b.entities {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		decls := b.entities[name]
		for _, from := range decls {
			for _, to := range decls {
				if from.info.cube == to.info.cube {
					continue
				}
				if to.e.Type == "natural" && from.e.Type == "foreign" {
					b.warn(from.info.cube.modelID, "join to %q on entity %q left out: a natural entity joins on a validity window (a slowly changing dimension), which a Cube join does not express", to.info.cube.Name, name)
					continue
				}
				if rel := entityRelationship(from.e.Type, to.e.Type); rel != "" {
					b.addEntityJoin(from, to, rel)
				}
			}
		}
	}
}

// entityRelationship is the Cube relationship of a join from an entity of type from to
// one of type to, "" when MetricFlow does not join them that way (it never fans out).
func entityRelationship(from, to string) string {
	if to != "primary" && to != "unique" {
		return ""
	}
	switch from {
	case "foreign":
		return "many_to_one"
	case "primary", "unique":
		return "one_to_one"
	}
	return ""
}

func (b *builder) addEntityJoin(from, to *smEntity, rel string) {
	c, target := from.info.cube, to.info.cube
	left, okL := from.sql("CUBE")
	right, okR := to.sql(target.Name)
	if !okL || !okR {
		b.warn(c.modelID, "join to %q on entity %q skipped: the entity's expression has a brace", target.Name, from.e.Name)
		return
	}
	sql := left + " = " + right
	if dup := c.join(target.Name); dup != nil {
		if dup.SQL != sql {
			b.warn(c.modelID, "join to %q on entity %q skipped: the cube already joins %q", target.Name, from.e.Name, target.Name)
		}
		return
	}
	c.Joins = append(c.Joins, &join{Name: target.Name, SQL: sql, Relationship: rel})
}

// sql is the entity's SQL in a join, as seen from the cube named alias ("CUBE" for the
// cube itself): its column, quoted as the cube's dimension of it is, or a reference to
// the dimension of its expression.
func (se *smEntity) sql(alias string) (string, bool) {
	c := se.info.cube
	col := se.e.Expr
	if col == "" {
		col = se.e.Name
	}
	if isIdent(col) {
		sql := c.columnSQL(col, false)
		if d := c.column(col); d != nil {
			sql = d.sql()
		}
		return "{" + alias + "}" + strings.TrimPrefix(sql, "{CUBE}"), true
	}
	if d := se.info.entities[se.e.Name]; d != nil {
		return "{" + alias + "." + d.Name + "}", true
	}
	return "", false
}

// joinPath is the chain of cube names a query follows from cube from to cube to along
// the joins (from first, to last); nil when no join leads there. Breadth first, in the
// joins' order: the shortest path, the same every time.
func (b *builder) joinPath(from, to *cube) []string {
	if from == to {
		return []string{from.Name}
	}
	prev := map[string]string{from.Name: ""}
	queue := []*cube{from}
	for len(queue) > 0 {
		c := queue[0]
		queue = queue[1:]
		for _, j := range c.Joins {
			if _, seen := prev[j.Name]; seen || b.byName[j.Name] == nil {
				continue
			}
			prev[j.Name] = c.Name
			if j.Name == to.Name {
				var path []string
				for n := to.Name; n != ""; n = prev[n] {
					path = append([]string{n}, path...)
				}
				return path
			}
			queue = append(queue, b.byName[j.Name])
		}
	}
	return nil
}
