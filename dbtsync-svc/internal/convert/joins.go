package convert

import (
	"sort"
	"strings"
)

// pruneJoins drops the joins Cube refuses: it needs a primary key on both sides of a join
// (several primary_key dimensions are one composite key) to aggregate without fan-out.
func pruneJoins(order []string, cubes map[string]*cube, warn warnFunc) {
	byName := map[string]*cube{}
	for _, name := range order {
		byName[cubes[name].Name] = cubes[name]
	}
	for _, name := range order {
		c := cubes[name]
		kept := c.Joins[:0]
		for _, j := range c.Joins {
			switch {
			case !c.hasKey():
				warn(c.model.UniqueID, "join to %q left out: cube %q has no primary key (a primary_key constraint, tag or meta, or unique and not_null tests)", j.Name, c.Name)
			case byName[j.Name] != nil && !byName[j.Name].hasKey():
				warn(c.model.UniqueID, "join to %q left out: that cube has no primary key", j.Name)
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

func applyTests(tests []Test, cubes map[string]*cube, warn warnFunc) {
	type key struct{ model, column string }
	kinds := map[key]map[string]bool{}
	var rels []Test
	for _, t := range tests {
		k := key{t.Model, t.Column}
		if kinds[k] == nil {
			kinds[k] = map[string]bool{}
		}
		kinds[k][t.Kind] = true
		if t.Kind == "relationships" {
			rels = append(rels, t)
		}
	}
	for k, set := range kinds {
		if set["unique"] && set["not_null"] {
			if c := cubes[k.model]; c != nil {
				if d := c.dimension(k.column); d != nil {
					d.PrimaryKey = true
				}
			}
		}
	}
	sort.Slice(rels, func(i, j int) bool {
		a, b := rels[i], rels[j]
		if a.Model != b.Model {
			return a.Model < b.Model
		}
		if a.ToModel != b.ToModel {
			return a.ToModel < b.ToModel
		}
		if a.Column != b.Column {
			return a.Column < b.Column
		}
		return a.ToColumn < b.ToColumn
	})
	for _, t := range rels {
		c := cubes[t.Model]
		if c == nil {
			continue
		}
		if t.ToModel == "" || !sqlSafe(t.ToColumn) || !sqlSafe(t.Column) || t.ToColumn == "" || t.Column == "" {
			continue // a relationship to a source or of an unusual shape: no cube to join
		}
		to := cubes[t.ToModel]
		if to == nil {
			warn(c.model.UniqueID, "join to %q skipped: that model is not part of the data model", t.ToModel)
			continue
		}
		sql := joinSQL(c, to, t)
		if dup := c.join(to.Name); dup != nil {
			if dup.SQL != sql {
				warn(c.model.UniqueID, "join to %q on %s skipped: the cube already joins %q", t.ToModel, t.Column, t.ToModel)
			}
			continue
		}
		c.Joins = append(c.Joins, &join{Name: to.Name, SQL: sql, Relationship: "many_to_one"})
	}
}

// joinSQL joins the tested column of c to the referenced column of to, each quoted for
// the warehouse as that cube's dimension of the column is.
func joinSQL(c, to *cube, t Test) string {
	from := c.columnSQL(t.Column, false)
	if d := c.column(t.Column); d != nil {
		from = d.SQL
	}
	target := to.columnSQL(t.ToColumn, false)
	if d := to.column(t.ToColumn); d != nil {
		target = d.SQL
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
