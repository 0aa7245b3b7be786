// Package mongoplan holds the commands a store sends against the indexes it declares, the
// way MongoDB's query planner would choose them (dev/test only). FerretDB on PostgreSQL
// plans differently (devstack's GIN trigger indexes every field of every index on its
// own), so a filter MongoDB can serve only by a collection scan runs fast on the test
// stack; this model, run over every command a test sends (Recorder), is what catches it.
//
// The model is conservative: an index serves a filter when its first key field has a
// bounding predicate (an equality, $eq, $in, a range, an anchored prefix regex); the
// bounded prefix continues while each next key field has an equality or $in, and a range
// ends it. $ne, $nin, $exists, $not, an unanchored or case-insensitive $regex bound
// nothing. A rooted $or is served only when every branch, merged with the predicates
// beside the $or, is served (and, with a sort, gives the sort itself, as MERGE_SORT needs).
// A sort no serving index gives is an in-memory sort, which fails too unless the result
// is bounded by an equality on a unique index (_id included). A hint is judged alone.
// An empty filter is a collection scan, except that an index which gives the sort walked
// up to a limit (the oldest N of a queue) reads N keys.
package mongoplan

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// Key is one key of an index: a field, ascending unless Desc.
type Key struct {
	Field string
	Desc  bool
}

// Index is one index of a collection, as listIndexes reports it.
type Index struct {
	Name   string
	Keys   []Key
	Unique bool
}

// Command is one statement's query as a client sent it: a find, one statement of an
// update or a delete, a findAndModify, an aggregate's leading $match (and the $sort right
// after it), a count, a distinct.
type Command struct {
	Name       string // the command: find, update, delete, findAndModify, aggregate, count, distinct
	Database   string
	Collection string
	Filter     bson.Raw // the query ({} when the command has none)
	Sort       bson.Raw // nil when unsorted
	Hint       bson.Raw // a hinted key pattern; a hint by name is in HintName
	HintName   string
	Projection bson.Raw
	Key        string // distinct's field
	Limit      int64  // the most documents it returns (0: no limit; a findAndModify's is 1)
	Stack      string // the code that sent it, outside the driver (Recorder fills it)
}

// Plan is how MongoDB's planner would answer a command, in this model.
type Plan struct {
	Served      bool     // an index bounds the scan (and gives the sort, or the result is bounded)
	Index       string   // the index chosen (for a rooted $or, the branches' indexes joined by "+")
	Bounded     []string // the leading fields of Index the filter bounds
	SortCovered bool     // the index gives the sort (true when there is no sort)
	Reason      string   // why it is not served, in words
	Branches    []Plan   // one per branch of a rooted $or
}

// kind is how a predicate bounds an index scan on its field.
type kind int

const (
	unbounded kind = iota // $ne, $nin, $exists, $not, an unanchored regex: filters only
	rangeOf               // $gt, $gte, $lt, $lte, an anchored prefix regex: ends a prefix
	points                // $in of several values: continues a prefix, gives no sort
	equal                 // an equality ($eq, a plain value, $in of one value)
)

// preds are a filter's predicates by field (the tightest per field) and its rooted $or.
type preds struct {
	fields map[string]kind
	or     []bson.Raw
	hasOr  bool
}

func parse(filter bson.Raw) preds {
	p := preds{fields: map[string]kind{}}
	p.add(filter)
	return p
}

func (p *preds) add(filter bson.Raw) {
	elems, err := filter.Elements()
	if err != nil {
		return
	}
	for _, e := range elems {
		key, v := e.Key(), e.Value()
		switch {
		case key == "$and":
			for _, d := range arrayDocs(v) {
				p.add(d)
			}
		case key == "$or":
			if p.hasOr { // a second $or only filters
				continue
			}
			p.hasOr, p.or = true, arrayDocs(v)
		case strings.HasPrefix(key, "$"): // $nor, $expr, $where, $comment, $text: no bounds here
		default:
			if k := classify(v); k > p.fields[key] {
				p.fields[key] = k
			} else if _, ok := p.fields[key]; !ok {
				p.fields[key] = k
			}
		}
	}
}

func (p preds) merged(branch bson.Raw) preds {
	q := preds{fields: map[string]kind{}}
	for f, k := range p.fields {
		q.fields[f] = k
	}
	q.add(branch)
	q.or, q.hasOr = nil, false // a nested $or only filters
	return q
}

func arrayDocs(v bson.RawValue) []bson.Raw {
	arr, ok := v.ArrayOK()
	if !ok {
		return nil
	}
	vals, _ := arr.Values()
	var out []bson.Raw
	for _, x := range vals {
		if d, ok := x.DocumentOK(); ok {
			out = append(out, d)
		}
	}
	return out
}

// classify says how the predicate v on one field bounds a scan.
func classify(v bson.RawValue) kind {
	if pattern, options, ok := v.RegexOK(); ok {
		return regexKind(pattern, options)
	}
	doc, ok := v.DocumentOK()
	if !ok {
		return equal
	}
	elems, err := doc.Elements()
	if err != nil || len(elems) == 0 || !strings.HasPrefix(elems[0].Key(), "$") {
		return equal // an equality with a sub-document
	}
	best := unbounded
	for _, e := range elems {
		k := unbounded
		switch e.Key() {
		case "$eq":
			k = equal
		case "$in":
			k = inKind(e.Value())
		case "$gt", "$gte", "$lt", "$lte":
			k = rangeOf
		case "$regex":
			pattern, options := "", ""
			if pv, ok := e.Value().StringValueOK(); ok {
				pattern = pv
			} else if rp, ro, ok := e.Value().RegexOK(); ok {
				pattern, options = rp, ro
			}
			if o, err := doc.LookupErr("$options"); err == nil {
				options += o.StringValue()
			}
			k = regexKind(pattern, options)
		}
		best = max(best, k)
	}
	return best
}

func inKind(v bson.RawValue) kind {
	arr, ok := v.ArrayOK()
	if !ok {
		return unbounded
	}
	vals, _ := arr.Values()
	for _, x := range vals {
		if _, _, ok := x.RegexOK(); ok {
			return rangeOf
		}
	}
	if len(vals) <= 1 {
		return equal
	}
	return points
}

// regexKind: a case-sensitive, single-line regex anchored at the start with a literal
// first character is a range of the index (the prefix); any other regex scans it all.
func regexKind(pattern, options string) kind {
	if strings.ContainsAny(options, "imx") {
		return unbounded
	}
	rest, ok := strings.CutPrefix(pattern, "^")
	if !ok {
		rest, ok = strings.CutPrefix(pattern, `\A`)
	}
	if !ok || rest == "" || strings.ContainsRune(`.*+?()[]{}|\$^`, rune(rest[0])) {
		return unbounded
	}
	return rangeOf
}

// Keys reads a key pattern or a sort document ({f: 1, g: -1}).
func Keys(d bson.Raw) []Key {
	elems, err := d.Elements()
	if err != nil {
		return nil
	}
	var out []Key
	for _, e := range elems {
		desc := false
		if n, ok := e.Value().AsFloat64OK(); ok {
			desc = n < 0
		}
		out = append(out, Key{Field: e.Key(), Desc: desc})
	}
	return out
}

var idIndex = Index{Name: "_id_", Keys: []Key{{Field: "_id"}}, Unique: true}

// Choose is the plan MongoDB's planner would take for c over indexes (the collection's
// _id index is assumed when the list lacks it).
func Choose(c Command, indexes []Index) Plan {
	if !slices.ContainsFunc(indexes, func(ix Index) bool { return ix.Name == idIndex.Name }) {
		indexes = append(slices.Clip(indexes), idIndex)
	}
	if c.HintName != "" || len(c.Hint) > 0 {
		hinted, ok := hintedIndex(c, indexes)
		if !ok {
			return Plan{Reason: fmt.Sprintf("the hint %s names no index of %s", hintText(c), c.Collection)}
		}
		indexes = []Index{hinted}
	}
	p := parse(c.Filter)
	sortKeys := Keys(c.Sort)
	if len(p.fields) == 0 && !p.hasOr {
		switch {
		case c.Name == "count" && len(c.Hint) == 0 && c.HintName == "":
			return Plan{Served: true, SortCovered: true, Index: "(collection count)"}
		case c.Name == "distinct" && c.Key != "":
			for _, ix := range indexes {
				if ix.Keys[0].Field == c.Key {
					return Plan{Served: true, SortCovered: true, Index: ix.Name, Bounded: []string{c.Key}}
				}
			}
		case len(sortKeys) > 0 && c.Limit > 0:
			// Nothing to bound, so the planner walks an index that gives the sort and stops
			// at the limit: it reads Limit keys.
			for _, ix := range indexes {
				if sortCovered(ix, p.fields, sortKeys) {
					return Plan{Served: true, SortCovered: true, Index: ix.Name}
				}
			}
		}
		return Plan{Reason: "an empty filter: a collection scan"}
	}
	if !p.hasOr {
		return choose(p, sortKeys, indexes)
	}
	if len(p.or) == 0 {
		return Plan{Reason: "an empty $or matches nothing but scans everything"}
	}
	out := Plan{Served: true, SortCovered: true}
	var names []string
	for i, b := range p.or {
		bp := choose(p.merged(b), sortKeys, indexes)
		out.Branches = append(out.Branches, bp)
		if !bp.Served {
			out.Served = false
			if out.Reason == "" {
				out.Reason = fmt.Sprintf("$or branch %d: %s", i, bp.Reason)
			}
		}
		out.SortCovered = out.SortCovered && bp.SortCovered
		if !slices.Contains(names, bp.Index) {
			names = append(names, bp.Index)
		}
	}
	if out.Served {
		out.Index = strings.Join(names, "+")
	}
	return out
}

func hintedIndex(c Command, indexes []Index) (Index, bool) {
	for _, ix := range indexes {
		if c.HintName != "" && ix.Name == c.HintName {
			return ix, true
		}
		if len(c.Hint) > 0 && slices.Equal(ix.Keys, Keys(c.Hint)) {
			return ix, true
		}
	}
	return Index{}, false
}

func hintText(c Command) string {
	if c.HintName != "" {
		return fmt.Sprintf("%q", c.HintName)
	}
	return c.Hint.String()
}

// choose is the plan of a filter without a rooted $or.
func choose(p preds, sortKeys []Key, indexes []Index) Plan {
	var best *Plan
	var bestIx Index
	for _, ix := range indexes {
		bounded := prefix(ix, p.fields)
		if len(bounded) == 0 {
			continue
		}
		cand := Plan{Served: true, Index: ix.Name, Bounded: bounded, SortCovered: sortCovered(ix, p.fields, sortKeys)}
		if best == nil || better(cand, ix, *best, bestIx, p.fields) {
			best, bestIx = &cand, ix
		}
	}
	if best == nil {
		return Plan{Reason: fmt.Sprintf("no index leads with a field the filter bounds (it bounds %s; the indexes lead with %s)",
			list(boundedFields(p.fields)), list(leading(indexes)))}
	}
	if !best.SortCovered && !uniqueBound(p.fields, indexes) {
		best.Served = false
		best.Reason = fmt.Sprintf("an in-memory sort: no index that serves the filter gives the sort %s after the fields it fixes", keysText(sortKeys))
	}
	return *best
}

// better prefers a unique index every key of which the filter fixes (a point lookup: it
// reads at most one document per value, which MongoDB's trial of plans finds first), then
// an index that gives the sort, then the longer bounded prefix, then a unique one, then the
// shorter.
func better(a Plan, ai Index, b Plan, bi Index, fields map[string]kind) bool {
	if pa, pb := pointLookup(ai, fields), pointLookup(bi, fields); pa != pb {
		return pa
	}
	if a.SortCovered != b.SortCovered {
		return a.SortCovered
	}
	if len(a.Bounded) != len(b.Bounded) {
		return len(a.Bounded) > len(b.Bounded)
	}
	if ai.Unique != bi.Unique {
		return ai.Unique
	}
	return len(ai.Keys) < len(bi.Keys)
}

// pointLookup: ix is unique and the filter fixes every one of its keys by an equality or
// an $in.
func pointLookup(ix Index, fields map[string]kind) bool {
	if !ix.Unique {
		return false
	}
	for _, k := range ix.Keys {
		if f := fields[k.Field]; f != equal && f != points {
			return false
		}
	}
	return true
}

// prefix is the leading fields of ix that the predicates bound: equalities and $in
// continue it, a range ends it.
func prefix(ix Index, fields map[string]kind) []string {
	var out []string
	for _, k := range ix.Keys {
		switch fields[k.Field] {
		case equal, points:
			out = append(out, k.Field)
			continue
		case rangeOf:
			out = append(out, k.Field)
		}
		break
	}
	return out
}

// sortCovered: the index's keys, stepping over fields fixed by an equality, are the sort
// fields in order, all in the index's direction or all reversed. Sort fields fixed by an
// equality do not need the index.
func sortCovered(ix Index, fields map[string]kind, sortKeys []Key) bool {
	var want []Key
	for _, k := range sortKeys {
		if fields[k.Field] != equal {
			want = append(want, k)
		}
	}
	j, dir := 0, 0
	for _, k := range ix.Keys {
		if j == len(want) {
			break
		}
		if k.Field == want[j].Field {
			d := 1
			if k.Desc != want[j].Desc {
				d = -1
			}
			if dir != 0 && dir != d {
				return false
			}
			dir = d
			j++
			continue
		}
		if fields[k.Field] == equal {
			continue
		}
		return false
	}
	return j == len(want)
}

// uniqueBound: every key of some unique index is fixed by an equality or $in, so the
// result is at most a few documents and sorting them in memory is cheap.
func uniqueBound(fields map[string]kind, indexes []Index) bool {
	for _, ix := range indexes {
		if !ix.Unique {
			continue
		}
		all := true
		for _, k := range ix.Keys {
			if f := fields[k.Field]; f != equal && f != points {
				all = false
				break
			}
		}
		if all {
			return true
		}
	}
	return false
}

func boundedFields(fields map[string]kind) []string {
	var out []string
	for f, k := range fields {
		if k != unbounded {
			out = append(out, f)
		}
	}
	sort.Strings(out)
	return out
}

func leading(indexes []Index) []string {
	var out []string
	for _, ix := range indexes {
		if len(ix.Keys) > 0 && !slices.Contains(out, ix.Keys[0].Field) {
			out = append(out, ix.Keys[0].Field)
		}
	}
	sort.Strings(out)
	return out
}

func list(fs []string) string {
	if len(fs) == 0 {
		return "nothing"
	}
	return strings.Join(fs, ", ")
}

func keysText(ks []Key) string {
	var parts []string
	for _, k := range ks {
		d := 1
		if k.Desc {
			d = -1
		}
		parts = append(parts, fmt.Sprintf("%s: %d", k.Field, d))
	}
	return "{" + strings.Join(parts, ", ") + "}"
}
