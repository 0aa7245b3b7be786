package wireproxy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/event"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"github.com/analyticsco/platform/devstack/mongoplan"
)

// FerretDB's timings say little about MongoDB's, and neither do the documents a command
// returns: a filter that skips an index's leading field returns one document on both,
// and MongoDB reads the whole collection to find it. While it examines (from the start
// with Options.Examine, or from ExamineCommand's {record: true}; off by default) the
// proxy shows what MongoDB would read. For each find, update and delete statement,
// findAndModify, count, distinct and aggregate (its leading $match) it forwards, it asks
// the planner model (devstack/mongoplan) which index MongoDB would choose under the
// collection's declared indexes and which of its leading fields the filter bounds, then
// counts upstream the documents those bounds admit: a count with the filter's predicates
// on the bounded fields only (summed over a rooted $or's branches), or the whole
// collection when no index bounds the filter (a collection scan). That is an upper bound
// on the index keys MongoDB examines (a limit may stop its scan sooner; the rest of the
// filter, applied to the keys or the documents, does not shrink it). A count of a whole
// collection with no filter is answered from metadata, 0.
//
// The count runs before the command takes its turn, on a connection of the proxy's own
// straight to the upstream: it holds up no other client's command and sees the documents
// the command will read (a delete's included), but it delays the command it examines, so
// a benchmark examines only untimed requests. ExamineCommand reads the totals and turns
// the examination off or on. The indexes of each collection come from listIndexes upstream,
// cached for 10 s, and are listed again after a command that creates or drops indexes or
// collections.

// ExamineCommand is the name of the command the proxy answers with its Examined totals,
// on any database, and never forwards. {wireproxyExamined: 1, record: true} (or false)
// then starts (or stops) the examination of the commands that follow.
const ExamineCommand = "wireproxyExamined"

// Examined are the figures of the statements of one command on one collection.
type Examined struct {
	// Statements examined: one per statement of an update or a delete.
	Statements int64
	// Documents the chosen index's bounds admit, or the collection's for a scan.
	Documents int64
	// Scans are the statements no index bounds: MongoDB reads the whole collection.
	Scans int64
	// Unserved are the statements the planner model does not serve (the scans, in-memory
	// sorts, a rooted $or with a branch no index serves).
	Unserved int64
	// Failed are the statements whose count failed upstream (not in Documents).
	Failed int64
}

// examineTimeout bounds each count and listIndexes the examiner sends.
const examineTimeout = time.Minute

// examiner is the proxy's Examine state.
type examiner struct {
	upstream  func() (string, int)
	logger    *slog.Logger
	recording atomic.Bool
	ctx       context.Context
	cancel    context.CancelFunc

	mu      sync.Mutex
	client  *mongo.Client
	gen     int
	indexes map[string]listed    // by "db.collection"
	totals  map[string]*Examined // by "command db.collection"
}

// newExaminer is a proxy's examiner, examining from the start when recording.
func newExaminer(upstream func() (string, int), logger *slog.Logger, recording bool) *examiner {
	ctx, cancel := context.WithCancel(context.Background())
	e := &examiner{upstream: upstream, logger: logger, ctx: ctx, cancel: cancel,
		indexes: map[string]listed{}, totals: map[string]*Examined{}}
	e.recording.Store(recording)
	return e
}

// close disconnects the examiner's client.
func (e *examiner) close() {
	e.cancel()
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.client != nil {
		_ = e.client.Disconnect(context.Background())
		e.client = nil
	}
}

// Examined are the totals so far by "command db.collection".
func (p *Proxy) Examined() map[string]Examined {
	e := p.examiner
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make(map[string]Examined, len(e.totals))
	for k, v := range e.totals {
		out[k] = *v
	}
	return out
}

// examine answers ExamineCommand (true: reply is the answer) and, while the proxy
// examines, counts what MongoDB would read for the command (false: forward it).
func (p *Proxy) examine(msg []byte, m opMessage, isMsg bool) (reply []byte, answered bool) {
	if !isMsg {
		return nil, false
	}
	if m.name() == ExamineCommand {
		return p.examineReply(msg, m), true
	}
	if p.examiner.recording.Load() {
		p.examiner.observe(m)
	}
	return nil, false
}

// examineReply is {ok: 1, recording, commands: {key: {statements, documents, scans,
// unserved, failed}}}: the totals so far, and whether the proxy examines from now on
// (record, when given, turns it on or off).
func (p *Proxy) examineReply(msg []byte, m opMessage) []byte {
	e := p.examiner
	totals := p.Examined()
	if v, err := m.body.LookupErr("record"); err == nil {
		if on, ok := v.BooleanOK(); ok {
			e.recording.Store(on)
		}
	}
	keys := make([]string, 0, len(totals))
	for k := range totals {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	cmds := bsoncore.NewDocumentBuilder()
	for _, k := range keys {
		t := totals[k]
		cmds.AppendDocument(k, bsoncore.NewDocumentBuilder().AppendInt64("statements", t.Statements).
			AppendInt64("documents", t.Documents).AppendInt64("scans", t.Scans).
			AppendInt64("unserved", t.Unserved).AppendInt64("failed", t.Failed).Build())
	}
	body := bsoncore.NewDocumentBuilder().AppendDouble("ok", 1).AppendBoolean("recording", e.recording.Load()).
		AppendDocument("commands", cmds.Build()).Build()
	return replyMessage(0, requestIDOf(msg), body)
}

// indexCommands change a collection's indexes (or the collection): its cached list is
// dropped.
var indexCommands = map[string]bool{"createIndexes": true, "dropIndexes": true, "drop": true, "create": true,
	"dropDatabase": true, "renameCollection": true}

// observe examines the statements of one command.
func (e *examiner) observe(m opMessage) {
	name := m.name()
	db, _ := m.body.Lookup("$db").StringValueOK()
	if indexCommands[name] {
		e.forget(db, name, m.body)
		return
	}
	cmd, err := fullCommand(m)
	if err != nil {
		return
	}
	stmts := mongoplan.Commands(&event.CommandStartedEvent{Command: cmd, DatabaseName: db, CommandName: name})
	for _, c := range stmts {
		e.examineOne(c)
	}
}

// forget drops the cached indexes a command may change: the collection's, or the
// database's for dropDatabase and renameCollection (an admin command naming both).
func (e *examiner) forget(db, name string, body bsoncore.Document) {
	e.mu.Lock()
	defer e.mu.Unlock()
	coll, _ := body.Lookup(name).StringValueOK()
	if name == "dropDatabase" || name == "renameCollection" {
		for k := range e.indexes {
			if name == "renameCollection" || strings.HasPrefix(k, db+".") {
				delete(e.indexes, k)
			}
		}
		return
	}
	delete(e.indexes, db+"."+coll)
}

// fullCommand is the command's body with its document sequences (an update's updates, a
// delete's deletes) as arrays in it, as a driver's command monitor sees it.
func fullCommand(m opMessage) (bson.Raw, error) {
	if len(m.seqs) == 0 {
		return bson.Raw(m.body), nil
	}
	elems, err := m.body.Elements()
	if err != nil {
		return nil, err
	}
	b := bsoncore.NewDocumentBuilder()
	for _, el := range elems {
		b.AppendValue(el.Key(), el.Value())
	}
	for _, s := range m.seqs {
		arr := bsoncore.NewArrayBuilder()
		for _, d := range s.docs {
			arr.AppendDocument(d)
		}
		b.AppendArray(s.id, arr.Build())
	}
	return bson.Raw(b.Build()), nil
}

// examineOne judges one statement and adds what it would read to the totals.
func (e *examiner) examineOne(c mongoplan.Command) {
	ctx, cancel := context.WithTimeout(e.ctx, examineTimeout)
	defer cancel()
	key := c.Name + " " + c.Database + "." + c.Collection
	db, err := e.database(c.Database)
	var docs int64
	var plan mongoplan.Plan
	var scan bool
	if err == nil {
		var indexes []mongoplan.Index
		if indexes, err = e.indexesOf(ctx, db, c.Collection); err == nil {
			plan = mongoplan.Choose(c, indexes)
			docs, scan, err = admitted(ctx, db, c, plan)
		}
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		e.logger.Debug("examine: count failed", "command", key, "err", err)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	t := e.totals[key]
	if t == nil {
		t = &Examined{}
		e.totals[key] = t
	}
	t.Statements++
	if err != nil {
		t.Failed++
		return
	}
	t.Documents += docs
	if scan {
		t.Scans++
	}
	if !plan.Served {
		t.Unserved++
	}
}

// admitted counts the documents plan's bounds admit for c, and says whether it is a
// collection scan.
func admitted(ctx context.Context, db *mongo.Database, c mongoplan.Command, plan mongoplan.Plan) (int64, bool, error) {
	if plan.Index == collectionCount {
		return 0, false, nil
	}
	if len(plan.Branches) > 0 {
		siblings, branches := splitOr(c.Filter)
		if len(branches) != len(plan.Branches) {
			return 0, false, fmt.Errorf("examine: %d $or branches, the plan has %d", len(branches), len(plan.Branches))
		}
		var sum int64
		for i, bp := range plan.Branches {
			if len(bp.Bounded) == 0 {
				n, err := count(ctx, db, c.Collection, nil)
				return n, true, err
			}
			n, err := count(ctx, db, c.Collection, bounds(bp.Bounded, siblings, branches[i]))
			if err != nil {
				return 0, false, err
			}
			sum += n
		}
		return sum, false, nil
	}
	if len(plan.Bounded) == 0 {
		n, err := count(ctx, db, c.Collection, nil)
		return n, true, err
	}
	n, err := count(ctx, db, c.Collection, bounds(plan.Bounded, c.Filter))
	return n, false, err
}

// collectionCount is the plan mongoplan gives a count of a whole collection.
const collectionCount = "(collection count)"

// count is the documents of coll that match filter (all of them when nil). A filter
// with a top-level _id: {$in: [...]} of 1 to DefaultMaxSplitIDs scalars is counted as the
// sum of one count per distinct _id (each matches at most one document) for the reason
// the proxy splits such a find (split.go): FerretDB would read the whole collection, and
// what a benchmark reads of PostgreSQL's statistics would be the examiner's.
func count(ctx context.Context, db *mongo.Database, coll string, filter bson.D) (int64, error) {
	if filter == nil {
		return countQuery(ctx, db, coll, nil)
	}
	parts, ok := idCounts(filter)
	if !ok {
		return countQuery(ctx, db, coll, filter)
	}
	var sum int64
	for _, q := range parts {
		n, err := countQuery(ctx, db, coll, q)
		if err != nil {
			return 0, err
		}
		sum += n
	}
	return sum, nil
}

// idCounts are the filters of one count per distinct _id of filter's top-level _id: {$in:
// [...]}, with the rest of the filter; false when it has none such.
func idCounts(filter bson.D) ([]bson.Raw, bool) {
	raw, err := bson.Marshal(filter)
	if err != nil {
		return nil, false
	}
	ids, ok := inIDs(raw, 1, DefaultMaxSplitIDs)
	if !ok {
		return nil, false
	}
	parts := make([]bson.Raw, 0, len(ids))
	for _, id := range ids {
		one, ok := withValue(raw, "_id", id)
		if !ok {
			return nil, false
		}
		parts = append(parts, bson.Raw(one))
	}
	return parts, true
}

// countQuery is the count command of coll with query (none when nil).
func countQuery(ctx context.Context, db *mongo.Database, coll string, query any) (int64, error) {
	cmd := bson.D{{Key: "count", Value: coll}}
	if query != nil {
		cmd = append(cmd, bson.E{Key: "query", Value: query})
	}
	var out struct {
		N int64 `bson:"n"`
	}
	if err := db.RunCommand(ctx, cmd).Decode(&out); err != nil {
		return 0, fmt.Errorf("examine: count %s.%s: %w", db.Name(), coll, err)
	}
	return out.N, nil
}

// splitOr is a filter's predicates beside its rooted $or, and the $or's branches.
func splitOr(filter bson.Raw) (bson.Raw, []bson.Raw) {
	elems, err := filter.Elements()
	if err != nil {
		return filter, nil
	}
	siblings := bsoncore.NewDocumentBuilder()
	var branches []bson.Raw
	seen := false
	for _, el := range elems {
		if el.Key() == "$or" && !seen {
			seen = true
			if arr, ok := el.Value().ArrayOK(); ok {
				vals, _ := arr.Values()
				for _, v := range vals {
					if d, ok := v.DocumentOK(); ok {
						branches = append(branches, d)
					}
				}
			}
			continue
		}
		siblings.AppendValue(el.Key(), bsoncore.Value{Type: bsoncore.Type(el.Value().Type), Data: el.Value().Value})
	}
	return bson.Raw(siblings.Build()), branches
}

// bounds is the predicates of filters (their top level and their $and) on the fields
// an index's bounds are made of, each reduced to its bounding operators: the filter
// whose matches are the documents the index scan admits.
func bounds(fields []string, filters ...bson.Raw) bson.D {
	want := map[string]bool{}
	for _, f := range fields {
		want[f] = true
	}
	var preds []bson.E
	var walk func(d bson.Raw)
	walk = func(d bson.Raw) {
		elems, err := d.Elements()
		if err != nil {
			return
		}
		for _, el := range elems {
			k, v := el.Key(), el.Value()
			switch {
			case k == "$and":
				if arr, ok := v.ArrayOK(); ok {
					vals, _ := arr.Values()
					for _, x := range vals {
						if sub, ok := x.DocumentOK(); ok {
							walk(sub)
						}
					}
				}
			case want[k]:
				if cond, ok := bounding(v); ok {
					preds = append(preds, bson.E{Key: k, Value: cond})
				}
			}
		}
	}
	for _, f := range filters {
		walk(f)
	}
	// A predicate named twice (beside the $or and in a branch, the same or another) is
	// kept once at the top level, where FerretDB pushes equalities down; a second,
	// different one on the same field goes into an $and beside it.
	var top bson.D
	var and bson.A
	seen := map[string]any{}
	for _, p := range preds {
		first, ok := seen[p.Key]
		switch {
		case !ok:
			seen[p.Key] = p.Value
			top = append(top, p)
		case !sameValue(first, p.Value):
			and = append(and, bson.D{p})
		}
	}
	if len(and) > 0 {
		top = append(top, bson.E{Key: "$and", Value: and})
	}
	return top
}

// sameValue: a and b marshal to the same BSON value.
func sameValue(a, b any) bool {
	ta, da, errA := bson.MarshalValue(a)
	tb, db, errB := bson.MarshalValue(b)
	return errA == nil && errB == nil && ta == tb && bytes.Equal(da, db)
}

// boundingOps are the operators that bound an index scan.
var boundingOps = map[string]bool{"$eq": true, "$in": true, "$gt": true, "$gte": true, "$lt": true, "$lte": true}

// bounding is a field's predicate reduced to what bounds an index scan: a value (an
// equality) as it is, an operator document with only its bounding operators (an
// anchored, case-sensitive $regex included); false when nothing in it bounds.
func bounding(v bson.RawValue) (any, bool) {
	if pattern, opts, ok := v.RegexOK(); ok {
		return v, anchored(pattern, opts)
	}
	doc, ok := v.DocumentOK()
	if !ok {
		return v, true
	}
	elems, err := doc.Elements()
	if err != nil || len(elems) == 0 || !strings.HasPrefix(elems[0].Key(), "$") {
		return v, true // an equality with a sub-document
	}
	var out bson.D
	opts, _ := doc.Lookup("$options").StringValueOK()
	for _, el := range elems {
		switch k := el.Key(); {
		case boundingOps[k]:
			out = append(out, bson.E{Key: k, Value: el.Value()})
		case k == "$regex":
			if pattern, ok := el.Value().StringValueOK(); ok && anchored(pattern, opts) {
				out = append(out, bson.E{Key: k, Value: pattern})
			}
		}
	}
	return out, len(out) > 0
}

// anchored: a case-sensitive, single-line regex anchored at the start, which an index
// scans as the range of its prefix.
func anchored(pattern, options string) bool {
	return !strings.ContainsAny(options, "imx") && (strings.HasPrefix(pattern, "^") || strings.HasPrefix(pattern, `\A`))
}

// database is db on the examiner's client to the current upstream, connected anew when
// the upstream changed.
func (e *examiner) database(name string) (*mongo.Database, error) {
	addr, gen := e.upstream()
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.client == nil || e.gen != gen {
		if e.client != nil {
			_ = e.client.Disconnect(context.Background())
			e.client = nil
		}
		c, err := mongo.Connect(options.Client().ApplyURI("mongodb://" + addr + "/").SetDirect(true).
			SetServerSelectionTimeout(10 * time.Second))
		if err != nil {
			return nil, fmt.Errorf("examine: connect to %s: %w", addr, err)
		}
		e.client, e.gen = c, gen
		e.indexes = map[string]listed{}
	}
	return e.client.Database(name), nil
}

// listed is a collection's indexes and when they were listed.
type listed struct {
	indexes []mongoplan.Index
	at      time.Time
}

// indexesTTL is how long a listing is used: a listing taken while another connection's
// index build ran is replaced within it.
const indexesTTL = 10 * time.Second

// indexesOf is coll's indexes, listed upstream and cached for indexesTTL; a collection
// that does not exist has none (mongoplan assumes _id's).
func (e *examiner) indexesOf(ctx context.Context, db *mongo.Database, coll string) ([]mongoplan.Index, error) {
	key := db.Name() + "." + coll
	e.mu.Lock()
	l, ok := e.indexes[key]
	e.mu.Unlock()
	if ok && time.Since(l.at) < indexesTTL {
		return l.indexes, nil
	}
	start := time.Now()
	var ix []mongoplan.Index
	cur, err := db.Collection(coll).Indexes().List(ctx)
	var specs []struct {
		Name   string   `bson:"name"`
		Key    bson.Raw `bson:"key"`
		Unique bool     `bson:"unique"`
	}
	if err == nil {
		err = cur.All(ctx, &specs)
	}
	var ce mongo.CommandError
	if errors.As(err, &ce) && ce.Code == 26 { // NamespaceNotFound
		err = nil
	}
	if err != nil {
		return nil, fmt.Errorf("examine: list indexes of %s: %w", key, err)
	}
	for _, s := range specs {
		if keys := mongoplan.Keys(s.Key); len(keys) > 0 {
			ix = append(ix, mongoplan.Index{Name: s.Name, Keys: keys, Unique: s.Unique || s.Name == "_id_"})
		}
	}
	e.mu.Lock()
	e.indexes[key] = listed{indexes: ix, at: start}
	e.mu.Unlock()
	return ix, nil
}

// indexed reports whether an index of db.coll (listed as indexesOf lists them) has field
// among its keys.
func (e *examiner) indexed(db, coll, field string) bool {
	if db == "" || coll == "" {
		return false
	}
	d, err := e.database(db)
	if err != nil {
		return false
	}
	ctx, cancel := context.WithTimeout(e.ctx, examineTimeout)
	defer cancel()
	ix, err := e.indexesOf(ctx, d, coll)
	if err != nil {
		return false
	}
	for _, i := range ix {
		for _, k := range i.Keys {
			if k.Field == field {
				return true
			}
		}
	}
	return false
}
