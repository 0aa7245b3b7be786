package wireproxy

import (
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
)

// FerretDB v1 gives a find or an aggregate that carries maxTimeMS a context of its own
// and cancels it before it closes the command's PostgreSQL rows (msg_find.go: the
// cancel is the first closer of the cursor). When that connection's background reader
// is running (pgx starts it when a write to PostgreSQL takes more than 15 ms: a loaded
// machine, the race detector), the cancellation's deadline is read as an error and kept
// on the connection, which goes back to the pool: the next statement on it, often
// another client's write, fails at once with "i/o timeout". With one command at a time
// that next statement is rarely anybody's; with commands running side by side it is.
// The Go driver sends maxTimeMS with every command whose context has a deadline. So
// the proxy takes maxTimeMS out of the commands that meet it: the client's own deadline
// still bounds its wait, and the proxy's command deadline bounds FerretDB's.

// cancellingCommands are the commands whose maxTimeMS FerretDB cancels before it closes
// their rows.
var cancellingCommands = map[string]bool{"find": true, "aggregate": true}

// withoutMaxTime is msg without the maxTimeMS of a cancellingCommands body, and m
// re-parsed; msg and m themselves when there is none.
func withoutMaxTime(msg []byte, m opMessage, isMsg bool) ([]byte, opMessage) {
	if !isMsg || !cancellingCommands[m.name()] {
		return msg, m
	}
	if _, err := m.body.LookupErr("maxTimeMS"); err != nil {
		return msg, m
	}
	body, ok := withField(m.body, "maxTimeMS", nil)
	if !ok {
		return msg, m
	}
	return rebuilt(msg, m, body)
}

// withField is doc with key's value replaced by v, or key left out when v is nil; false
// when doc cannot be read.
func withField(doc bsoncore.Document, key string, v *bsoncore.Value) (bsoncore.Document, bool) {
	elems, err := doc.Elements()
	if err != nil {
		return doc, false
	}
	b := bsoncore.NewDocumentBuilder()
	for _, e := range elems {
		switch {
		case e.Key() != key:
			b.AppendValue(e.Key(), e.Value())
		case v != nil:
			b.AppendValue(key, *v)
		}
	}
	return b.Build(), true
}

// rebuilt is msg with m's body replaced by body, and its parse; msg and m when the new
// message does not parse.
func rebuilt(msg []byte, m opMessage, body bsoncore.Document) ([]byte, opMessage) {
	m.body = body
	out := m.encode()
	nm, ok := parseOpMsg(out)
	if !ok {
		return msg, m
	}
	return out, nm
}
