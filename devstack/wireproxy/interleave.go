package wireproxy

import (
	"errors"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync/atomic"
	"time"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
)

// Interleave mode: what MongoDB lets other clients see of a write of many documents.
// MongoDB is atomic per document only: an update with multi: true, or a delete with
// limit: 0, changes its matches one after another, re-checking the statement's filter on
// each as it writes it, and other clients' reads and writes run between the documents and
// between the statements of one command. FerretDB's update reads every match first and
// then writes them, unlocked, so the proxy cannot let FerretDB run two writes to a
// collection at once (Collections mode); instead, in Interleave mode, it does itself what
// MongoDB does:
//
//   - an update or delete command of several statements, or with a statement that
//     matches many documents, runs statement by statement, each in its own turn, in the
//     client's order (ordered: true stops at the first write error, as MongoDB does);
//   - a statement that matches many documents (update with multi: true and no upsert,
//     delete with limit: 0) is a find of the _ids its filter matches, then one command per
//     id, each in its own turn, whose filter is the statement's and the id's:
//     {_id: id, $and: [filter]} (the same predicate as {$and: [filter, {_id: id}]}, with an
//     equality FerretDB serves from its index); a document that no longer matches when its
//     turn comes is left alone and not counted;
//   - between the documents the proxy yields, with a random pause of up to
//     interleavePause, so commands of other clients waiting for the collection go first;
//   - the client gets the one reply MongoDB gives: n and nModified summed over the
//     documents, write errors numbered by the client's statements.
//
// Upserts stay whole (one command, as FerretDB runs it), and so do inserts and every other
// command, which run as in Collections mode: each command alone at FerretDB, reads beside
// the writes.

// Interleave runs writes as Collections does, but splits an update or delete of many
// documents or statements into commands of one document each, with other clients'
// commands between them, as MongoDB runs them (interleave.go).
const Interleave Mode = Collections + 1

// interleavePause bounds the random pause between the documents of a split statement.
const interleavePause = 500 * time.Microsecond

// beforeDocument, when set (tests only), is called before the proxy forwards the update
// or delete of the k-th matching document of the statement at index stmt, outside any turn.
var beforeDocument atomic.Pointer[func(coll string, stmt, k int)]

// interleave runs msg as Interleave mode splits it; handled is false for a command it does
// not split, which handle then forwards as Collections mode does.
func (p *Proxy) interleave(l *link, msg []byte, m opMessage) (replies [][]byte, handled bool, err error) {
	name := m.name()
	if name != "update" && name != "delete" {
		return nil, false, nil
	}
	w, ok := asWriteCommand(msg, m, map[string]int{name: 1})
	if !ok {
		return nil, false, nil
	}
	split := make([]bool, len(w.stmts))
	splits := len(w.stmts) > 1
	for i, st := range w.stmts {
		split[i] = matchesMany(name, st)
		splits = splits || split[i]
	}
	if !splits {
		return nil, false, nil
	}
	coll, _ := m.body.Lookup(name).StringValueOK()
	g := merger{w: &w}
	sent := false // whether any part of the command went upstream with an answer
	// fail ends the command on an upstream error at statement i.
	fail := func(i int, err error) ([][]byte, bool, error) {
		if !errors.Is(err, errNoReply) {
			return nil, true, err
		}
		if !sent {
			return [][]byte{errorReply(msg, codeMaxTimeMSExpired, "MaxTimeMSExpired", p.timeoutMessage())}, true, err
		}
		g.fail(i, codeMaxTimeMSExpired, p.timeoutMessage())
		return [][]byte{g.reply()}, true, err
	}
	for i, st := range w.stmts {
		failed := false
		if !split[i] {
			reply, err := p.inTurn(l, w.command(i, i+1))
			if err != nil {
				return fail(i, err)
			}
			failed = g.addPart(reply, i, !sent)
			sent = true
		} else {
			ids, errBody, err := p.matchingIDs(l, w.msg, coll, st)
			switch {
			case err != nil:
				return fail(i, err)
			case errBody != nil && !sent:
				code, _ := errBody.Lookup("code").AsInt32OK()
				codeName, _ := errBody.Lookup("codeName").StringValueOK()
				errmsg, _ := errBody.Lookup("errmsg").StringValueOK()
				return [][]byte{errorReply(msg, code, codeName, errmsg)}, true, nil
			case errBody != nil:
				code, _ := errBody.Lookup("code").AsInt32OK()
				errmsg, _ := errBody.Lookup("errmsg").StringValueOK()
				g.fail(i, code, errmsg)
				failed = true
			}
			for k, id := range ids {
				pause()
				if f := beforeDocument.Load(); f != nil {
					(*f)(coll, i, k)
				}
				reply, err := p.inTurn(l, w.statementCommand(oneDocument(name, st, id)))
				if err != nil {
					return fail(i, err)
				}
				failed = g.addPart(reply, i, !sent)
				sent = true
				if failed {
					break // MongoDB ends a statement at its first write error
				}
			}
		}
		if g.verbatim != nil || failed && w.ordered {
			break
		}
	}
	return [][]byte{g.reply()}, true, nil
}

// pause yields, then sleeps a random moment below interleavePause.
func pause() {
	runtime.Gosched()
	time.Sleep(rand.N(interleavePause))
}

// matchesMany reports whether the statement st of the command name may change many
// documents: an update with multi: true and no upsert, a delete with limit: 0.
func matchesMany(name string, st bsoncore.Document) bool {
	if name == "delete" {
		limit, ok := st.Lookup("limit").AsInt64OK()
		return ok && limit == 0
	}
	multi, _ := st.Lookup("multi").BooleanOK()
	upsert, _ := st.Lookup("upsert").BooleanOK()
	return multi && !upsert
}

// oneDocument is the statement st of the command name narrowed to the document id: its
// filter {_id: id, $and: [q]}, and at most one document changed.
func oneDocument(name string, st bsoncore.Document, id bsoncore.Value) bsoncore.Document {
	elems, _ := st.Elements() // validated by parseOpMsg or framed by the client's sequence
	b := bsoncore.NewDocumentBuilder()
	for _, e := range elems {
		switch e.Key() {
		case "q":
			b.AppendDocument("q", bsoncore.NewDocumentBuilder().AppendValue("_id", id).
				AppendArray("$and", bsoncore.NewArrayBuilder().AppendValue(e.Value()).Build()).Build())
		case "multi":
			b.AppendBoolean("multi", false)
		case "limit":
			b.AppendInt32("limit", 1)
		default:
			b.AppendValue(e.Key(), e.Value())
		}
	}
	return b.Build()
}

// statementCommand is w's command with the one statement st in place of its statements.
func (w writeCommand) statementCommand(st bsoncore.Document) []byte {
	c := w
	c.stmts = []bsoncore.Document{st}
	c.raw = nil
	if c.seq >= 0 {
		m := c.msg
		m.seqs = append([]docSequence(nil), m.seqs...)
		m.seqs[c.seq].docs = c.stmts
		return m.encode()
	}
	// In the body: command(0, 1) of a command of one statement is its raw message,
	// so build it with the statement repeated and take the first.
	c.stmts = []bsoncore.Document{st, st}
	return c.command(0, 1)
}

// matchingIDs reads the _ids of the documents the statement st's filter matches now, with
// a find (and its getMores) on l in no turn, as any read; errBody is the find's error
// when the database refused it.
func (p *Proxy) matchingIDs(l *link, cmd opMessage, coll string, st bsoncore.Document) (ids []bsoncore.Value, errBody bsoncore.Document, err error) {
	db := cmd.body.Lookup("$db")
	q, ok := st.Lookup("q").DocumentOK()
	if !ok {
		q = bsoncore.NewDocumentBuilder().Build() // the statement's own command says what is wrong
	}
	find := bsoncore.NewDocumentBuilder().AppendString("find", coll).AppendDocument("filter", q).
		AppendDocument("projection", bsoncore.NewDocumentBuilder().AppendInt32("_id", 1).Build()).
		AppendInt32("batchSize", 10000)
	if c := st.Lookup("collation"); c.Type != 0 {
		find.AppendValue("collation", c)
	}
	if v := cmd.body.Lookup("let"); v.Type != 0 {
		find.AppendValue("let", v)
	}
	body := find.AppendValue("$db", db).Build()
	for batch := "firstBatch"; ; batch = "nextBatch" {
		reply, err := p.inTurn(l, opMessage{header: cmd.header, body: body}.encode())
		if err != nil {
			return nil, nil, err
		}
		rm, ok := parseOpMsg(reply)
		if !ok {
			return nil, bsoncore.NewDocumentBuilder().AppendInt32("code", codeInternalError).
				AppendString("errmsg", "wireproxy: unreadable reply from the database").Build(), nil
		}
		if okv, _ := rm.body.Lookup("ok").AsFloat64OK(); okv != 1 {
			return nil, rm.body, nil
		}
		cursor, _ := rm.body.Lookup("cursor").DocumentOK()
		docs, _ := cursor.Lookup(batch).ArrayOK()
		values, _ := docs.Values()
		for _, v := range values {
			if d, ok := v.DocumentOK(); ok {
				if id := d.Lookup("_id"); id.Type != 0 {
					ids = append(ids, id)
				}
			}
		}
		cid, _ := cursor.Lookup("id").AsInt64OK()
		if cid == 0 {
			return ids, nil, nil
		}
		body = bsoncore.NewDocumentBuilder().AppendInt64("getMore", cid).AppendString("collection", coll).
			AppendInt32("batchSize", 10000).AppendValue("$db", db).Build()
	}
}

// inTurn forwards one command (with a reply) in the turn its scope gives it, as handle
// does, and returns its last reply.
func (p *Proxy) inTurn(l *link, cmd []byte) ([]byte, error) {
	m, isMsg := parseOpMsg(cmd)
	p.forwarded.Add(1)
	sc := scopeOf(p.mode, cmd, m, isMsg)
	if sc.all || sc.stripe >= 0 {
		p.serialised.Add(1)
	}
	arrived := time.Now()
	release, ok := p.turns.acquire(sc)
	if !ok {
		return nil, errClosed
	}
	turn := time.Now()
	replies, err := p.exchange(l, cmd, true)
	release()
	p.stats.record(statsKey(cmd, m, isMsg), turn.Sub(arrived), time.Since(turn), 0)
	if err != nil {
		return nil, err
	}
	return replies[len(replies)-1], nil
}

// addPart folds in the reply to a part of the statement at index (the statement, or one of
// its documents) and reports whether it failed; first: nothing of the command ran before,
// so a command error is the command's, passed on as it is.
func (g *merger) addPart(reply []byte, index int, first bool) (failed bool) {
	errs := len(g.writeErrors)
	if first && index == 0 {
		g.add(reply, index, false)
		return g.verbatim != nil || len(g.writeErrors) > errs
	}
	m, ok := parseOpMsg(reply)
	if !ok {
		g.fail(index, codeInternalError, "wireproxy: unreadable reply from the database")
		return true
	}
	if okv, _ := m.body.Lookup("ok").AsFloat64OK(); okv != 1 {
		code, _ := m.body.Lookup("code").AsInt32OK()
		errmsg, _ := m.body.Lookup("errmsg").StringValueOK()
		if !(g.w.name == "update" && code == codeInternalError && strings.Contains(errmsg, "(SQLSTATE 23505)")) {
			g.fail(index, code, errmsg)
			return true
		}
	}
	g.add(reply, index, false)
	return len(g.writeErrors) > errs
}
