package wireproxy

import (
	"bytes"
	"cmp"
	"slices"
	"strconv"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
)

// FerretDB v1 on PostgreSQL pushes a filter's top-level equalities down to PostgreSQL and
// does a field's $in itself, over every document the equalities selected. The services read
// items by {_id: {$in: ids}, dep: d, …} (a folder's ancestors, the items a move or a bulk
// move reads) and subtrees by {dep: d, anc: {$in: folders}, …}, so each such find reads and
// decodes every document (every folder) of the deployment (two items of a deployment of
// 50,000: 50,000 rows, 4.9 s), where MongoDB seeks the index once per value.
// {f: {$in: [v1 … vn]}, rest} selects the union of the {f: vi, rest}, an array field's
// included. So the proxy answers a find whose filter has a top-level _id: {$in: [...]} of 2
// to Options.MaxSplitIDs equalityKinds scalars, or else one such $in of a field that one
// of the collection's indexes names (FerretDB's GIN index on it then serves f: vi,
// devstack/postgres_gin.go), with one find per distinct value, each with the rest of the
// filter and the projection, sent one after another in the original command's turn, and
// gives the one reply MongoDB gives: each document once, by _id (descending when the find
// sorts {_id: -1}; ascending otherwise, an order MongoDB may give a find without sort), at
// most limit of them, in one batch with the cursor closed.
//
// A find whose answer the merge cannot give as MongoDB would is forwarded as it is: one with
// skip, hint, collation, let, min/max, a sort on anything but _id alone, a limit without a
// sort on _id (of an _id's $in: a limit below the ids), a batchSize or a singleBatch's batch
// below the distinct ids, a projection that leaves _id out or computes it, a transaction's
// fields, or any field this file does not know. So is the original find, in the same turn,
// after the parts, when a part fails, leaves a cursor open or fills maxPartDocuments, a
// document's _id is of a type the merge does not order, the merged documents would not fit
// the client's first batch (batchSize, or a singleBatch's), or they would exceed
// maxBatchBytes. The examination (examine.go) sees the client's find, before the split;
// the stats count it once, with the finds it took (stats.go).

// DefaultMaxSplitIDs is Options.MaxSplitIDs's default. A part costs about as much as
// FerretDB's read of 60 documents (at load 20 on 2 cores: 1.4 ms a part; a whole read of
// a deployment of 12,500 items, 2,500 folders, 250-440 ms), so past about 200 values the
// parts cost a small deployment more than the read they replace; past 100 the find goes
// upstream whole.
const DefaultMaxSplitIDs = 100

// maxBatchBytes bounds the documents of a merged batch: MongoDB's largest document
// (16 MiB), which a reply's batch does not exceed.
const maxBatchBytes = 16 << 20

// defaultBatchSize is the first batch of a find without batchSize (MongoDB's and
// FerretDB's), which is all a singleBatch find answers.
const defaultBatchSize = 101

// splitFindFields are the fields of a find the split takes: copied into each part as they
// are (true), or honoured by the merge and left out of the parts (false).
var splitFindFields = map[string]bool{
	"find": true, "projection": true, "$db": true, "lsid": true, "$clusterTime": true,
	"$readPreference": true, "readConcern": true, "comment": true, "allowDiskUse": true,
	"apiVersion": true, "apiStrict": true, "apiDeprecationErrors": true,
	"filter": false, "sort": false, "limit": false, "batchSize": false, "singleBatch": false,
}

// findSplit is a find taken apart into its parts.
type findSplit struct {
	parts [][]byte // one find per distinct value
	desc  bool     // sorted {_id: -1}
	limit int64    // 0: none
	batch int64    // the most documents the client's first batch holds; -1: no bound
	many  bool     // a part may match many documents (a field other than _id)
}

// splitFind is the split of the find m into one find per value of its filter's top-level
// $in of _id, or of a field indexed says an index of the collection names; false when it
// is no such find or one the merge cannot answer as MongoDB would (see above).
func splitFind(m opMessage, maxIDs int, indexed func(db, coll, field string) bool) (findSplit, bool) {
	if maxIDs < 2 || m.name() != "find" || len(m.seqs) > 0 {
		return findSplit{}, false
	}
	elems, err := m.body.Elements()
	if err != nil {
		return findSplit{}, false
	}
	var s findSplit
	var filter, sortDoc bsoncore.Document
	batch, single := int64(-1), false
	for _, e := range elems {
		keep, known := splitFindFields[e.Key()]
		if !known {
			return findSplit{}, false
		}
		if keep {
			continue
		}
		v, ok := e.Value(), true
		switch e.Key() {
		case "filter":
			filter, ok = v.DocumentOK()
		case "sort":
			sortDoc, ok = v.DocumentOK()
		case "limit":
			s.limit, ok = wholeNumber(v)
		case "batchSize":
			batch, ok = wholeNumber(v)
		case "singleBatch":
			single, ok = v.BooleanOK()
		}
		if !ok {
			return findSplit{}, false
		}
	}
	if filter == nil || !keepsID(m.body.Lookup("projection")) {
		return findSplit{}, false
	}
	sorted, desc, ok := sortOnID(sortDoc)
	if !ok {
		return findSplit{}, false
	}
	s.desc = desc
	field := "_id"
	ids, ok := inIDs(filter, 2, maxIDs) // one is the equality already (inone.go)
	if !ok {
		db, _ := m.body.Lookup("$db").StringValueOK()
		coll, _ := m.body.Lookup("find").StringValueOK()
		if field, ids, ok = inField(filter, maxIDs); !ok || indexed == nil || !indexed(db, coll, field) {
			return findSplit{}, false
		}
		s.many = true
	}
	n := int64(len(ids))
	if single && batch < 0 {
		batch = defaultBatchSize
	}
	s.batch = batch
	switch {
	case !s.many && (batch >= 0 && batch < n || s.limit > 0 && s.limit < n && !sorted):
		return findSplit{}, false // more documents than the first batch or the limit would hold
	case s.many && s.limit > 0 && !sorted:
		return findSplit{}, false // which documents a limit keeps is the server's order
	}
	for _, id := range ids {
		part, ok := partFind(m, elems, filter, field, id, s.many)
		if !ok {
			return findSplit{}, false
		}
		s.parts = append(s.parts, part)
	}
	return s, true
}

// maxPartDocuments is the batch of a part that may match many documents: a part that
// fills it may have been cut short, and the find goes upstream whole.
const maxPartDocuments = 10000

// inField is the one top-level field (not _id) of filter whose condition is exactly {$in:
// [...]} of 2 to maxValues equalityKinds scalars, and the distinct values; false when
// there is none or more than one.
func inField(filter bsoncore.Document, maxValues int) (string, []bsoncore.Value, bool) {
	elems, err := filter.Elements()
	if err != nil {
		return "", nil, false
	}
	field := ""
	for _, e := range elems {
		k := e.Key()
		if k == "" || k[0] == '$' || k == "_id" {
			continue
		}
		if cond, ok := e.Value().DocumentOK(); ok {
			if first, err := cond.IndexErr(0); err == nil && first.Key() == "$in" {
				if field != "" {
					return "", nil, false
				}
				field = k
			}
		}
	}
	if field == "" || duplicated(filter, field) {
		return "", nil, false
	}
	// The values as inIDs reads them, of field instead of _id.
	b := bsoncore.NewDocumentBuilder().AppendValue("_id", filter.Lookup(field)).Build()
	vs, ok := inIDs(b, 2, maxValues)
	return field, vs, ok
}

// wholeNumber is v as a count (a non-negative int32, int64 or whole double).
func wholeNumber(v bsoncore.Value) (int64, bool) {
	switch v.Type {
	case bsoncore.TypeInt32, bsoncore.TypeInt64:
		n, ok := v.AsInt64OK()
		return n, ok && n >= 0
	case bsoncore.TypeDouble:
		f := v.Double()
		if f >= 0 && f <= 1<<53 && f == float64(int64(f)) {
			return int64(f), true
		}
	}
	return 0, false
}

// keepsID reports whether a find's projection (absent: none) returns each document's _id
// as it is stored: no _id in it, or _id: true or a number but 0.
func keepsID(p bsoncore.Value) bool {
	if p.Type == 0 {
		return true
	}
	d, ok := p.DocumentOK()
	if !ok {
		return false
	}
	v, err := d.LookupErr("_id")
	if err != nil {
		return true
	}
	if b, ok := v.BooleanOK(); ok {
		return b
	}
	n, ok := v.AsFloat64OK()
	return ok && n != 0
}

// sortOnID reads a find's sort: none (nil or {}), or {_id: 1} or {_id: -1}; false for any
// other.
func sortOnID(d bsoncore.Document) (sorted, desc, ok bool) {
	if d == nil {
		return false, false, true
	}
	elems, err := d.Elements()
	if err != nil || len(elems) > 1 {
		return false, false, false
	}
	if len(elems) == 0 {
		return false, false, true
	}
	if elems[0].Key() != "_id" {
		return false, false, false
	}
	switch dir, ok := elems[0].Value().AsFloat64OK(); {
	case ok && dir == 1:
		return true, false, true
	case ok && dir == -1:
		return true, true, true
	}
	return false, false, false
}

// inIDs are the distinct values of filter's one top-level _id: {$in: [...]} of minIDs to
// maxIDs equalityKinds scalars, in their order (of equal numbers the first); false when the
// filter has none such.
func inIDs(filter bsoncore.Document, minIDs, maxIDs int) ([]bsoncore.Value, bool) {
	elems, err := filter.Elements()
	if err != nil {
		return nil, false
	}
	var in bsoncore.Element
	for _, e := range elems {
		if e.Key() != "_id" {
			continue
		}
		if in != nil {
			return nil, false // _id twice: MongoDB ANDs them
		}
		in = e
	}
	if in == nil {
		return nil, false
	}
	cond, ok := in.Value().DocumentOK()
	if !ok {
		return nil, false
	}
	ce, err := cond.Elements()
	if err != nil || len(ce) != 1 || ce[0].Key() != "$in" {
		return nil, false
	}
	arr, ok := ce[0].Value().ArrayOK()
	if !ok {
		return nil, false
	}
	vs, err := arr.Values()
	if err != nil || len(vs) < minIDs || len(vs) > maxIDs {
		return nil, false
	}
	seen := make(map[string]bool, len(vs))
	var ids []bsoncore.Value
	for _, v := range vs {
		if !equalityKinds[v.Type] {
			return nil, false
		}
		k, _ := idKey(v)
		if !seen[k] {
			seen[k] = true
			ids = append(ids, v)
		}
	}
	return ids, true
}

// partFind is the find m (its body's elements elems) for the one value id of field: its
// filter with id in place of the field's $in, without sort, limit and batchSize, in a
// single batch (of maxPartDocuments when many documents may match).
func partFind(m opMessage, elems []bsoncore.Element, filter bsoncore.Document, field string, id bsoncore.Value, many bool) ([]byte, bool) {
	f, ok := withValue(filter, field, id)
	if !ok {
		return nil, false
	}
	b := bsoncore.NewDocumentBuilder()
	for _, e := range elems {
		switch keep := splitFindFields[e.Key()]; {
		case keep:
			b.AppendValue(e.Key(), e.Value())
		case e.Key() == "filter":
			b.AppendDocument("filter", f)
		}
	}
	if many {
		b.AppendInt32("batchSize", maxPartDocuments)
	}
	b.AppendBoolean("singleBatch", true)
	part := m
	part.body = b.Build()
	part.seqs = nil
	return part.encode(), true
}

// withValue is filter with v in place of its top-level field's condition.
func withValue(filter bsoncore.Document, field string, v bsoncore.Value) (bsoncore.Document, bool) {
	fe, err := filter.Elements()
	if err != nil {
		return nil, false
	}
	f := bsoncore.NewDocumentBuilder()
	for _, e := range fe {
		if e.Key() == field {
			f.AppendValue(field, v)
			continue
		}
		f.AppendValue(e.Key(), e.Value())
	}
	return f.Build(), true
}

// forwardSplit sends s's parts on l one after another (the caller holds the turn) and
// returns the merged reply to msg, or, when a part's answer cannot be merged, the reply to
// msg forwarded whole; sent is how many finds went upstream.
func (p *Proxy) forwardSplit(l *link, msg []byte, s *findSplit) (replies [][]byte, sent int, err error) {
	var docs []bsoncore.Document
	var ns string
	merged := true
	for _, part := range s.parts {
		rs, err := p.exchange(l, part, true)
		sent++
		if err != nil {
			return nil, sent, err
		}
		got, partNS, ok := partDocuments(rs[len(rs)-1])
		if !ok || s.many && len(got) >= maxPartDocuments {
			merged = false
			break
		}
		docs, ns = append(docs, got...), cmp.Or(ns, partNS)
	}
	if merged {
		if reply, ok := mergedReply(msg, docs, ns, s); ok {
			return [][]byte{reply}, sent, nil
		}
	}
	replies, err = p.exchange(l, msg, true)
	return replies, sent + 1, err
}

// partDocuments are the documents and namespace of a part's reply; false when it is an
// error, unreadable, or leaves a cursor open.
func partDocuments(reply []byte) ([]bsoncore.Document, string, bool) {
	rm, ok := parseOpMsg(reply)
	if !ok {
		return nil, "", false
	}
	if okv, _ := rm.body.Lookup("ok").AsFloat64OK(); okv != 1 {
		return nil, "", false
	}
	cursor, ok := rm.body.Lookup("cursor").DocumentOK()
	if !ok {
		return nil, "", false
	}
	if id, ok := cursor.Lookup("id").AsInt64OK(); !ok || id != 0 {
		return nil, "", false
	}
	batch, ok := cursor.Lookup("firstBatch").ArrayOK()
	if !ok {
		return nil, "", false
	}
	vs, err := batch.Values()
	if err != nil {
		return nil, "", false
	}
	docs := make([]bsoncore.Document, 0, len(vs))
	for _, v := range vs {
		d, ok := v.DocumentOK()
		if !ok {
			return nil, "", false
		}
		docs = append(docs, d)
	}
	ns, _ := cursor.Lookup("ns").StringValueOK()
	return docs, ns, true
}

// mergedReply is the one reply to msg of docs: each _id once, by _id, at most s.limit, in
// a first batch with the cursor closed; false when a document's _id is of a type the merge
// does not order or the batch would exceed maxBatchBytes.
func mergedReply(msg []byte, docs []bsoncore.Document, ns string, s *findSplit) ([]byte, bool) {
	type keyed struct {
		id  bsoncore.Value
		doc bsoncore.Document
	}
	seen := make(map[string]bool, len(docs))
	out := make([]keyed, 0, len(docs))
	for _, d := range docs {
		id, err := d.LookupErr("_id")
		if err != nil {
			return nil, false
		}
		k, ok := idKey(id)
		if !ok {
			return nil, false
		}
		if !seen[k] {
			seen[k] = true
			out = append(out, keyed{id, d})
		}
	}
	slices.SortFunc(out, func(a, b keyed) int {
		if s.desc {
			return compareIDs(b.id, a.id)
		}
		return compareIDs(a.id, b.id)
	})
	if s.limit > 0 && int64(len(out)) > s.limit {
		out = out[:s.limit]
	}
	if s.batch >= 0 && int64(len(out)) > s.batch {
		return nil, false // the client's first batch would not hold them all
	}
	batch := bsoncore.NewArrayBuilder()
	size := 0
	for _, k := range out {
		if size += len(k.doc); size > maxBatchBytes {
			return nil, false
		}
		batch.AppendDocument(k.doc)
	}
	cursor := bsoncore.NewDocumentBuilder().AppendArray("firstBatch", batch.Build()).
		AppendInt64("id", 0).AppendString("ns", ns).Build()
	body := bsoncore.NewDocumentBuilder().AppendDocument("cursor", cursor).AppendDouble("ok", 1).Build()
	return replyMessage(0, requestIDOf(msg), body), true
}

// idKey is an _id's identity as MongoDB compares it (an int32 and an int64 of the same
// number are one) and its type's place in MongoDB's order; false for a type the merge does
// not order (anything but equalityKinds).
func idKey(v bsoncore.Value) (string, bool) {
	switch v.Type {
	case bsoncore.TypeInt32, bsoncore.TypeInt64:
		n, _ := v.AsInt64OK()
		return "0" + strconv.FormatInt(n, 10), true
	case bsoncore.TypeString:
		return "1" + v.StringValue(), true
	case bsoncore.TypeObjectID:
		return "2" + string(v.Data), true
	}
	return "", false
}

// compareIDs orders two _ids of idKey's types as MongoDB does: numbers, then strings
// (bytewise, no collation), then ObjectIds (bytewise).
func compareIDs(a, b bsoncore.Value) int {
	ka, _ := idKey(a)
	kb, _ := idKey(b)
	if c := cmp.Compare(ka[0], kb[0]); c != 0 {
		return c
	}
	switch ka[0] {
	case '0':
		na, _ := a.AsInt64OK()
		nb, _ := b.AsInt64OK()
		return cmp.Compare(na, nb)
	case '1':
		return cmp.Compare(a.StringValue(), b.StringValue())
	}
	return bytes.Compare(a.Data, b.Data)
}
