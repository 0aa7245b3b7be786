package wireproxy

import (
	"bytes"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
)

// FerretDB v1 on PostgreSQL pushes a filter's top-level equalities down to PostgreSQL
// and nothing of a $or: a find whose filter is a rooted $or, each branch carrying the
// same equalities ({$or: [{dep: 5, parent: 7, position: {$gt: p}}, {dep: 5, parent: 7,
// position: p, name: {$gt: n}}]}, the keyset of a later page, which MongoDB plans as one
// index scan per branch), reads and decodes every document of the collection, all
// deployments' items. {f: v} holding in every branch means it holds for the whole $or,
// so the proxy adds the equalities every branch shares to the filter's top level, which
// FerretDB pushes down to an index; the branches stay as they were, so the filter selects
// the same documents.

// withOrEqualitiesHoisted is msg with a find's rooted $or's shared scalar equalities
// also at the filter's top level, and m re-parsed; msg and m themselves when there is
// nothing to add.
func withOrEqualitiesHoisted(msg []byte, m opMessage, isMsg bool) ([]byte, opMessage) {
	return withFindFilter(msg, m, isMsg, orEqualitiesHoisted)
}

// orEqualitiesHoisted appends to filter the field: value pairs (equalityKinds scalars)
// that every branch of its one top-level $or has, bytes for bytes, on fields the filter
// does not name at its top level; changed says whether it appended any.
func orEqualitiesHoisted(filter bsoncore.Document) (bsoncore.Document, bool) {
	elems, err := filter.Elements()
	if err != nil {
		return filter, false
	}
	var branches []bsoncore.Document
	top := map[string]bool{}
	ors := 0
	for _, e := range elems {
		top[e.Key()] = true
		if e.Key() != "$or" {
			continue
		}
		ors++
		arr, ok := e.Value().ArrayOK()
		if !ok {
			return filter, false
		}
		vals, err := arr.Values()
		if err != nil {
			return filter, false
		}
		for _, v := range vals {
			d, ok := v.DocumentOK()
			if !ok {
				return filter, false
			}
			branches = append(branches, d)
		}
	}
	if ors != 1 || len(branches) < 2 {
		return filter, false
	}
	first, err := branches[0].Elements()
	if err != nil {
		return filter, false
	}
	var shared []bsoncore.Element
	for _, e := range first {
		k, v := e.Key(), e.Value()
		if k == "" || k[0] == '$' || top[k] || !equalityKinds[v.Type] {
			continue
		}
		inAll := true
		for _, b := range branches[1:] {
			if w, err := b.LookupErr(k); err != nil || w.Type != v.Type || !bytes.Equal(w.Data, v.Data) || duplicated(b, k) {
				inAll = false
				break
			}
		}
		if inAll && !duplicated(branches[0], k) {
			shared = append(shared, e)
			top[k] = true
		}
	}
	if len(shared) == 0 {
		return filter, false
	}
	b := bsoncore.NewDocumentBuilder()
	for _, e := range elems {
		b.AppendValue(e.Key(), e.Value())
	}
	for _, e := range shared {
		b.AppendValue(e.Key(), e.Value())
	}
	return b.Build(), true
}

// duplicated: d names key more than once (MongoDB would AND both; this rewrite leaves
// such a branch alone).
func duplicated(d bsoncore.Document, key string) bool {
	elems, err := d.Elements()
	if err != nil {
		return true
	}
	n := 0
	for _, e := range elems {
		if e.Key() == key {
			n++
		}
	}
	return n > 1
}
