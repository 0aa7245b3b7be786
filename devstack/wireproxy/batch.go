package wireproxy

import (
	"bytes"
	"encoding/binary"
	"errors"
	"strings"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
)

// FerretDB v1 on PostgreSQL runs an update command's statements one after another, each
// keeping the backend connection of its read until the whole command ends (msg_update.go
// defers every statement's iterator Close to the end of the command): with its pool of 50
// connections, an update of 50 statements waits forever, and so does every command queued
// behind it in the proxy. Its update also ignores ordered: false, answers a failing
// statement with index 0 and no counts, numbers upserted documents among the upserts
// rather than the statements, and answers a duplicate key that a $set makes with an
// InternalError. An ordered insert of more than its internal batch (100 documents) goes
// on with the next batch after a duplicate key.
//
// So the proxy forwards the statements of the write commands of Options.Batches in
// consecutive commands of at most that many statements, one after another within the
// command's turn, and answers the client the one reply MongoDB gives to the whole command:
// n and nModified summed, upserted and writeErrors with the indexes of the statements in
// the client's command, the last writeConcernError, and for ordered commands nothing
// forwarded after the first batch with a write error.

// DefaultBatches are the statements per forwarded command: an update's one at a time (it
// holds no connection then, and FerretDB's answer to one statement is exact), inserts in
// FerretDB's own batches of 100. FerretDB's delete closes each statement's read before it
// writes and numbers its write errors right, so deletes go through whole.
var DefaultBatches = map[string]int{"update": 1, "insert": 100}

// statementFields is where each write command keeps its statements, in its body as an
// array or in an OP_MSG document sequence of that name.
var statementFields = map[string]string{"insert": "documents", "update": "updates", "delete": "deletes"}

// MongoDB's error codes the proxy answers with.
const (
	codeInternalError    = 1
	codeMaxTimeMSExpired = 50
	codeDuplicateKey     = 11000
)

// opMessage is an OP_MSG taken apart.
type opMessage struct {
	header []byte // the 16 bytes of the message header
	flags  uint32
	body   bsoncore.Document
	seqs   []docSequence
}

// docSequence is a kind-1 section: documents under an identifier.
type docSequence struct {
	id   string
	docs []bsoncore.Document
}

// parseOpMsg takes an OP_MSG apart: after the flags, sections, each a kind byte then, for
// kind 0, one BSON document (the body, exactly one) and, for kind 1, an int32 size that
// covers the section less its kind byte, a NUL-terminated identifier and documents. A
// trailing CRC-32C (checksumPresent) is not part of the sections. The body is validated;
// the documents of sequences only framed.
func parseOpMsg(msg []byte) (opMessage, bool) {
	if len(msg) < headerLen+4 || opCode(msg) != opMsg {
		return opMessage{}, false
	}
	m := opMessage{header: msg[:headerLen], flags: msgFlags(msg)}
	end := len(msg)
	if m.flags&flagChecksumPresent != 0 {
		end -= 4
	}
	for i := headerLen + 4; i < end; {
		kind := msg[i]
		i++
		if i+4 > end {
			return opMessage{}, false
		}
		size := int(int32(binary.LittleEndian.Uint32(msg[i:])))
		if size < 5 || i+size > end {
			return opMessage{}, false
		}
		switch {
		case kind == 0 && m.body == nil:
			m.body = bsoncore.Document(msg[i : i+size])
			if m.body.Validate() != nil {
				return opMessage{}, false
			}
		case kind == 1:
			seq, ok := parseSequence(msg[i+4 : i+size])
			if !ok {
				return opMessage{}, false
			}
			m.seqs = append(m.seqs, seq)
		default:
			return opMessage{}, false
		}
		i += size
	}
	return m, m.body != nil
}

func parseSequence(sec []byte) (docSequence, bool) {
	id := bytes.IndexByte(sec, 0)
	if id < 0 {
		return docSequence{}, false
	}
	seq := docSequence{id: string(sec[:id])}
	for rest := sec[id+1:]; len(rest) > 0; {
		doc, r, ok := bsoncore.ReadDocument(rest)
		if !ok || len(doc) < 5 {
			return docSequence{}, false
		}
		seq.docs, rest = append(seq.docs, doc), r
	}
	return seq, true
}

// name is the command's name, the body's first key.
func (m opMessage) name() string {
	e, err := m.body.IndexErr(0)
	if err != nil {
		return ""
	}
	return e.Key()
}

// encode is the message with its length mended, without checksum (the proxy computes
// none) or exhaustAllowed (see prepareRequest).
func (m opMessage) encode() []byte {
	out := append([]byte(nil), m.header...)
	out = binary.LittleEndian.AppendUint32(out, m.flags&^(flagChecksumPresent|flagExhaustAllowed))
	out = append(append(out, 0), m.body...)
	for _, s := range m.seqs {
		start := len(out) + 1
		out = append(out, 1, 0, 0, 0, 0)
		out = append(append(out, s.id...), 0)
		for _, d := range s.docs {
			out = append(out, d...)
		}
		binary.LittleEndian.PutUint32(out[start:], uint32(len(out)-start))
	}
	binary.LittleEndian.PutUint32(out, uint32(len(out)))
	return out
}

// forwardWrite forwards w's statements in commands of at most w.batch statements, one
// after another (the caller holds the turn), and returns the one reply to w.
func (p *Proxy) forwardWrite(l *link, w *writeCommand, expectReply bool) ([][]byte, error) {
	g := merger{w: w}
	for from := 0; from < len(w.stmts); from += w.batch {
		to := min(from+w.batch, len(w.stmts))
		replies, err := p.exchange(l, w.command(from, to), expectReply)
		switch {
		case err != nil && (from == 0 || !expectReply || !errors.Is(err, errNoReply)):
			return nil, err
		case err != nil:
			// The statements before ran: answer them, and this batch's deadline as its
			// first statement's write error.
			g.fail(from, codeMaxTimeMSExpired, p.timeoutMessage())
			return [][]byte{g.reply()}, err
		case !expectReply:
			continue
		}
		if g.add(replies[len(replies)-1], from, from == 0 && to == len(w.stmts)) {
			break
		}
	}
	if !expectReply {
		return nil, nil
	}
	return [][]byte{g.reply()}, nil
}

// writeCommand is a write command of Options.Batches, which the proxy forwards in batches.
type writeCommand struct {
	raw     []byte // as the client sent it
	msg     opMessage
	name    string
	field   string
	seq     int // the index of the statements' sequence in msg.seqs; -1: in the body
	stmts   []bsoncore.Document
	ordered bool
	batch   int
}

// asWriteCommand is m as a writeCommand when its command is to be forwarded in batches.
func asWriteCommand(raw []byte, m opMessage, batches map[string]int) (writeCommand, bool) {
	name := m.name()
	w := writeCommand{raw: raw, msg: m, name: name, field: statementFields[name], seq: -1, ordered: true, batch: batches[name]}
	if w.field == "" || w.batch < 1 {
		return writeCommand{}, false
	}
	if b, ok := m.body.Lookup("ordered").BooleanOK(); ok {
		w.ordered = b
	}
	for i, s := range m.seqs {
		if s.id == w.field {
			w.seq, w.stmts = i, s.docs
		}
	}
	if w.seq < 0 {
		arr, ok := m.body.Lookup(w.field).ArrayOK()
		if !ok {
			return writeCommand{}, false
		}
		values, err := arr.Values()
		if err != nil {
			return writeCommand{}, false
		}
		for _, v := range values {
			doc, ok := v.DocumentOK()
			if !ok {
				return writeCommand{}, false // the server says what is wrong with it
			}
			w.stmts = append(w.stmts, doc)
		}
	}
	return w, len(w.stmts) > 0
}

// command is the command of statements [from, to): the client's own when that is all of
// them, else its body and sections with only those statements, where the client put them.
func (w writeCommand) command(from, to int) []byte {
	if from == 0 && to == len(w.stmts) {
		return w.raw
	}
	m := w.msg
	if w.seq >= 0 {
		m.seqs = append([]docSequence(nil), m.seqs...)
		m.seqs[w.seq].docs = w.stmts[from:to]
		return m.encode()
	}
	elems, _ := m.body.Elements() // validated by parseOpMsg
	b := bsoncore.NewDocumentBuilder()
	for _, e := range elems {
		if e.Key() != w.field {
			b.AppendValue(e.Key(), e.Value())
			continue
		}
		arr := bsoncore.NewArrayBuilder()
		for _, d := range w.stmts[from:to] {
			arr.AppendDocument(d)
		}
		b.AppendArray(w.field, arr.Build())
	}
	m.body = b.Build()
	return m.encode()
}

// merger folds the replies to a write command's batches into the reply to the command.
type merger struct {
	w           *writeCommand
	n, modified int32
	upserted    []bsoncore.Document
	writeErrors []bsoncore.Document
	wce         bsoncore.Value
	extra       []bsoncore.Element // the last reply's other fields
	requestID   uint32             // the last reply's
	verbatim    []byte             // the reply to pass on as it is, when there is one
}

// mergedFields are the fields of a write reply that merger sums or renumbers.
var mergedFields = map[string]bool{"n": true, "nModified": true, "upserted": true, "writeErrors": true, "writeConcernError": true, "ok": true}

// add folds in the reply to the batch of statements from `from` on and reports whether to
// stop: after a write error when ordered, and after a command error in the first batch
// (then passed on as it is: nothing ran, as for the whole command).
func (g *merger) add(reply []byte, from int, only bool) (stop bool) {
	m, ok := parseOpMsg(reply)
	if !ok {
		if from == 0 {
			g.verbatim = reply
			return true
		}
		g.fail(from, codeInternalError, "wireproxy: unreadable reply from the database")
		return true
	}
	g.requestID = requestIDOf(reply)
	if ok, _ := m.body.Lookup("ok").AsFloat64OK(); ok != 1 {
		code, _ := m.body.Lookup("code").AsInt32OK()
		errmsg, _ := m.body.Lookup("errmsg").StringValueOK()
		switch {
		case g.w.name == "update" && code == codeInternalError && strings.Contains(errmsg, "(SQLSTATE 23505)"):
			// A unique index refused the statement's document (FerretDB maps this to a
			// duplicate key only on insert).
			db, _ := g.w.msg.body.Lookup("$db").StringValueOK()
			coll, _ := g.w.msg.body.Lookup(g.w.name).StringValueOK()
			g.fail(from, codeDuplicateKey, "E11000 duplicate key error collection: "+db+"."+coll)
		case from == 0:
			g.verbatim = reply
			return true
		default:
			// Statements before ran: the failure is this batch's, a write error of its first.
			g.fail(from, code, errmsg)
		}
		return g.w.ordered
	}
	if only {
		g.verbatim = reply
		return true
	}
	n, _ := m.body.Lookup("n").AsInt32OK()
	modified, _ := m.body.Lookup("nModified").AsInt32OK()
	g.n, g.modified = g.n+n, g.modified+modified
	g.upserted = appendRenumbered(g.upserted, m.body.Lookup("upserted"), from)
	errs := len(g.writeErrors)
	g.writeErrors = appendRenumbered(g.writeErrors, m.body.Lookup("writeErrors"), from)
	if v := m.body.Lookup("writeConcernError"); v.Type != 0 {
		g.wce = v
	}
	g.extra = g.extra[:0]
	elems, _ := m.body.Elements()
	for _, e := range elems {
		if !mergedFields[e.Key()] {
			g.extra = append(g.extra, e)
		}
	}
	return g.w.ordered && len(g.writeErrors) > errs
}

// fail records a write error of the statement at index.
func (g *merger) fail(index int, code int32, errmsg string) {
	g.writeErrors = append(g.writeErrors, bsoncore.NewDocumentBuilder().
		AppendInt32("index", int32(index)).AppendInt32("code", code).AppendString("errmsg", errmsg).Build())
}

// appendRenumbered appends the documents of the array v (upserted or writeErrors entries)
// with from added to their index.
func appendRenumbered(dst []bsoncore.Document, v bsoncore.Value, from int) []bsoncore.Document {
	arr, ok := v.ArrayOK()
	if !ok {
		return dst
	}
	values, _ := arr.Values()
	for _, v := range values {
		doc, ok := v.DocumentOK()
		if !ok {
			continue
		}
		elems, _ := doc.Elements()
		b := bsoncore.NewDocumentBuilder()
		for _, e := range elems {
			if i, ok := e.Value().AsInt32OK(); ok && e.Key() == "index" {
				b.AppendInt32("index", i+int32(from))
			} else {
				b.AppendValue(e.Key(), e.Value())
			}
		}
		dst = append(dst, b.Build())
	}
	return dst
}

// reply is the reply to the client's command.
func (g *merger) reply() []byte {
	if g.verbatim != nil {
		return g.verbatim
	}
	b := bsoncore.NewDocumentBuilder().AppendInt32("n", g.n)
	if g.w.name == "update" {
		b.AppendInt32("nModified", g.modified)
	}
	for _, f := range []struct {
		key  string
		docs []bsoncore.Document
	}{{"upserted", g.upserted}, {"writeErrors", g.writeErrors}} {
		if len(f.docs) == 0 {
			continue
		}
		arr := bsoncore.NewArrayBuilder()
		for _, d := range f.docs {
			arr.AppendDocument(d)
		}
		b.AppendArray(f.key, arr.Build())
	}
	if g.wce.Type != 0 {
		b.AppendValue("writeConcernError", g.wce)
	}
	for _, e := range g.extra {
		b.AppendValue(e.Key(), e.Value())
	}
	b.AppendDouble("ok", 1)
	return replyMessage(g.requestID, requestIDOf(g.w.raw), b.Build())
}

// replyMessage is an OP_MSG reply of one body.
func replyMessage(id, responseTo uint32, body bsoncore.Document) []byte {
	out := make([]byte, headerLen, headerLen+5+len(body))
	binary.LittleEndian.PutUint32(out[4:], id)
	binary.LittleEndian.PutUint32(out[8:], responseTo)
	binary.LittleEndian.PutUint32(out[12:], opMsg)
	out = binary.LittleEndian.AppendUint32(out, 0)
	out = append(append(out, 0), body...)
	binary.LittleEndian.PutUint32(out, uint32(len(out)))
	return out
}

// errorReply is the reply of a command error to the request msg.
func errorReply(msg []byte, code int32, codeName, errmsg string) []byte {
	body := bsoncore.NewDocumentBuilder().AppendDouble("ok", 0).AppendString("errmsg", errmsg).
		AppendInt32("code", code).AppendString("codeName", codeName).Build()
	return replyMessage(0, requestIDOf(msg), body)
}

func requestIDOf(msg []byte) uint32 { return binary.LittleEndian.Uint32(msg[4:8]) }
