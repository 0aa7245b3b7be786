package wireproxy

import (
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
)

// FerretDB v1 on PostgreSQL sends only a filter's equalities to PostgreSQL; a field's
// $in is done in FerretDB over every document the equalities selected. The services
// look items up by {_id: {$in: ids}, dep: d}, most often with one id (a move, a folder's
// ancestors), so FerretDB reads the whole deployment to return one document: 13.5 ms a
// lookup on the soak's deployment, the soak's costliest command. {f: {$in: [v]}} and
// {f: v} select the same documents in MongoDB when v is a scalar (a document v could
// be read as operators, a regex matches either way but is left alone), so the proxy
// turns a find's top-level $in of one scalar into the equality, which FerretDB pushes
// down to an index.

// equalityKinds are the scalar types an $in of one is rewritten for.
var equalityKinds = map[bsoncore.Type]bool{
	bsoncore.TypeInt32: true, bsoncore.TypeInt64: true, bsoncore.TypeString: true, bsoncore.TypeObjectID: true,
}

// withInOneAsEquality is msg with a find's top-level {f: {$in: [v]}} written {f: v}, and
// m re-parsed; msg and m themselves when there is nothing to rewrite.
func withInOneAsEquality(msg []byte, m opMessage, isMsg bool) ([]byte, opMessage) {
	return withFindFilter(msg, m, isMsg, inOneAsEquality)
}

// withFindFilter is msg with a find's filter as rewrite makes it, and m re-parsed; msg
// and m themselves when it is no find or rewrite changes nothing.
func withFindFilter(msg []byte, m opMessage, isMsg bool, rewrite func(bsoncore.Document) (bsoncore.Document, bool)) ([]byte, opMessage) {
	if !isMsg || m.name() != "find" {
		return msg, m
	}
	filter, ok := m.body.Lookup("filter").DocumentOK()
	if !ok {
		return msg, m
	}
	newFilter, changed := rewrite(filter)
	if !changed {
		return msg, m
	}
	v := bsoncore.Value{Type: bsoncore.TypeEmbeddedDocument, Data: newFilter}
	body, ok := withField(m.body, "filter", &v)
	if !ok {
		return msg, m
	}
	return rebuilt(msg, m, body)
}

// inOneAsEquality rewrites the filter's top-level fields whose condition is exactly
// {$in: [scalar]}; changed says whether any was.
func inOneAsEquality(filter bsoncore.Document) (bsoncore.Document, bool) {
	elems, err := filter.Elements()
	if err != nil {
		return filter, false
	}
	b := bsoncore.NewDocumentBuilder()
	changed := false
	for _, e := range elems {
		if v, ok := soleInValue(e); ok {
			b.AppendValue(e.Key(), v)
			changed = true
			continue
		}
		b.AppendValue(e.Key(), e.Value())
	}
	if !changed {
		return filter, false
	}
	return b.Build(), true
}

// soleInValue is v when e is f: {$in: [v]} with v an equalityKinds scalar and f a field
// (not an operator such as $and).
func soleInValue(e bsoncore.Element) (bsoncore.Value, bool) {
	if k := e.Key(); k == "" || k[0] == '$' {
		return bsoncore.Value{}, false
	}
	cond, ok := e.Value().DocumentOK()
	if !ok {
		return bsoncore.Value{}, false
	}
	ce, err := cond.Elements()
	if err != nil || len(ce) != 1 || ce[0].Key() != "$in" {
		return bsoncore.Value{}, false
	}
	arr, ok := ce[0].Value().ArrayOK()
	if !ok {
		return bsoncore.Value{}, false
	}
	vs, err := arr.Values()
	if err != nil || len(vs) != 1 || !equalityKinds[vs[0].Type] {
		return bsoncore.Value{}, false
	}
	return vs[0], true
}
