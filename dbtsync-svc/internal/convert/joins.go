package convert

import (
	"sort"
	"strings"
)

// pruneJoins drops the joins Cube refuses: it needs a primary key on both sides of a join
// (several primary_key dimensions are one composite key) to aggregate without fan-out.
func pruneJoins(order []string, cubes map[string]*cube, warn warnFunc) {
	byName := map[string]*cube{}
	for _, key := range order {
		byName[cubes[key].Name] = cubes[key]
	}
	for _, name := range order {
		c := cubes[name]
		kept := c.Joins[:0]
		for _, j := range c.Joins {
			switch {
			case !c.hasKey():
				warn(c.modelID, "join to %q left out: cube %q has no primary key (a primary_key constraint, tag or meta, or unique and not_null tests)", j.Name, c.Name)
			case byName[j.Name] != nil && !byName[j.Name].hasKey():
				warn(c.modelID, "join to %q left out: that cube has no primary key", j.Name)
			default:
				kept = append(kept, j)
			}
		}
		c.Joins = kept
	}
}

func (c *cube) hasKey() bool {
	for _, d := range c.Dimensions {
		if d.PrimaryKey {
			return true
		}
	}
	return false
}

// applyTests marks keys (a column both unique and not_null) and adds a many_to_one join
// for each relationships test between two cubes.
func (b *builder) applyTests(tests []Test) {
	type key struct{ model, column string }
	kinds := map[key]map[string]bool{}
	type rel struct {
		Test
		from, to string // model keys
	}
	var rels []rel
	for _, t := range tests {
		k := key{b.index.resolve(t.ModelID, t.Model), t.Column}
		if kinds[k] == nil {
			kinds[k] = map[string]bool{}
		}
		kinds[k][t.Kind] = true
		if t.Kind == "relationships" {
			to := ""
			if t.ToModel.Name != "" {
				to = b.index.key(t.ToModel)
			}
			rels = append(rels, rel{t, k.model, to})
		}
	}
	for k, set := range kinds {
		if set["unique"] && set["not_null"] {
			if c := b.cubes[k.model]; c != nil {
				if d := c.dimension(k.column); d != nil {
					d.PrimaryKey = true
				}
			}
		}
	}
	sort.Slice(rels, func(i, j int) bool {
		a, b := rels[i], rels[j]
		if a.from != b.from {
			return a.from < b.from
		}
		if a.to != b.to {
			return a.to < b.to
		}
		if a.Column != b.Column {
			return a.Column < b.Column
		}
		return a.ToColumn < b.ToColumn
	})
	for _, t := range rels {
		c := b.cubes[t.from]
		if c == nil {
			continue
		}
		if t.to == "" || !sqlSafe(t.ToColumn) || !sqlSafe(t.Column) || t.ToColumn == "" || t.Column == "" {
			continue // a relationship to a source or of an unusual shape: no cube to join
		}
		to := b.cubes[t.to]
		if to == nil {
			b.warn(c.modelID, "join to %q skipped: that model is not part of the data model", t.to)
			continue
		}
		sql := joinSQL(c, to, t.Column, t.ToColumn)
		if dup := c.join(to.Name); dup != nil {
			if dup.SQL != sql {
				b.warn(c.modelID, "join to %q on %s skipped: the cube already joins %q", t.to, t.Column, t.to)
			}
			continue
		}
		c.Joins = append(c.Joins, &join{Name: to.Name, SQL: sql, Relationship: "many_to_one"})
	}
}

// joinSQL joins column col of c to column toCol of to, each quoted for the warehouse as
// that cube's dimension of the column is.
func joinSQL(c, to *cube, col, toCol string) string {
	from := c.columnSQL(col, false)
	if d := c.column(col); d != nil {
		from = d.sql()
	}
	target := to.columnSQL(toCol, false)
	if d := to.column(toCol); d != nil {
		target = d.sql()
	}
	return from + " = {" + to.Name + "}" + strings.TrimPrefix(target, "{CUBE}")
}

func (c *cube) join(name string) *join {
	for _, j := range c.Joins {
		if j.Name == name {
			return j
		}
	}
	return nil
}
