package wireproxy

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
)

// A ReplicaSet makes a proxy present its upstream as a one-node replica set, so that
// drivers use sessions and retryable writes as they do against MongoDB in production,
// and lets a test step the primary down.
//
// The proxy answers every hello (OP_MSG hello, and the legacy OP_QUERY isMaster of the
// first handshake) itself, without a turn: FerretDB's fields (wire versions, sizes,
// logicalSessionTimeoutMinutes, …) from the one hello it forwarded, plus setName,
// setVersion, hosts and me (the proxy's address), electionId and topologyVersion. An
// awaitable hello (one carrying the current topologyVersion and maxAwaitTimeMS) is held
// until the topology changes or maxAwaitTimeMS passes, so the driver's monitor waits
// instead of spinning.
//
// During a stepdown (Stepdown) hello answers as a secondary with no primary; write
// commands answer NotWritablePrimary labelled RetryableWriteError, reads
// NotPrimaryNoSecondaryOk, and only the commands of stepdownPassing go through. The
// refusal is made before anything is forwarded, so a refused write never applied. When
// the window ends the node is primary again with a higher electionId, and every change
// bumps topologyVersion's counter.
//
// FerretDB ignores txnNumber, so the proxy keeps MongoDB's promise for retryable writes
// itself: the reply to a write command that carries lsid and txnNumber (outside a
// transaction) is recorded under (lsid.id, txnNumber), and a retry with the same pair is
// answered from the record without being forwarded; a retry that arrives while the first
// attempt is still upstream waits for its reply. The most recent RetryRecords writes are
// kept. LoseWriteReplies injects the failure retryable writes are for: the write applies
// upstream, its reply is recorded and the client's connection is closed instead of
// answered, so the driver retries and gets the recorded reply.
//
// A ReplicaSet outlives the proxy it serves: a restarted proxy given the same one keeps
// the retry records and elects itself with a higher electionId (and a new
// topologyVersion processId), as a restarted mongod does.
type ReplicaSet struct {
	name string

	mu        sync.Mutex
	me        string // the serving proxy's address
	processID [12]byte
	counter   int64
	term      int64
	primary   bool
	changed   chan struct{} // closed and replaced on every change of the topology
	window    *time.Timer   // ends the current stepdown
	hello     bsoncore.Document
	lose      int

	records map[retryKey]*retryRecord
	ring    []retryKey // insertion order, for the bound
	next    int

	counts ReplicaSetCounts
}

// RetryRecords is how many retryable writes' replies a ReplicaSet keeps (a few MiB at
// most for the writes of the tests).
const RetryRecords = 4096

// ReplicaSetCounts are what a ReplicaSet did so far.
type ReplicaSetCounts struct {
	Stepdowns      int64 // windows started
	Refused        int64 // commands answered NotWritablePrimary or NotPrimaryNoSecondaryOk
	Retries        int64 // retryable writes answered from their record
	LostReplies    int64 // replies withheld by LoseWriteReplies
	HelloAnswered  int64 // hellos answered by the proxy
	HelloHeld      int64 // awaitable hellos held until a change or their maxAwaitTimeMS
	HelloForwarded int64 // hellos forwarded for FerretDB's own fields
}

// MongoDB's error codes of a replica set the proxy answers with.
const (
	codeNotWritablePrimary      = 10107
	codeNotPrimaryNoSecondaryOk = 13435
)

// stepdownPassing are the commands a stepped-down node still runs: the handshake's and
// authentication's, and those on state a client already holds (cursors, sessions).
var stepdownPassing = map[string]bool{
	"ping": true, "buildInfo": true, "buildinfo": true, "getParameter": true, "whatsmyuri": true,
	"connectionStatus": true, "hostInfo": true, "endSessions": true, "killCursors": true, "getMore": true,
	"saslStart": true, "saslContinue": true, "authenticate": true, "getnonce": true, "logout": true,
}

// retryableWrites are the commands a driver sends with a txnNumber to retry them.
var retryableWrites = map[string]bool{"insert": true, "update": true, "delete": true, "findAndModify": true}

// errLostReply: the write applied and its reply was withheld; the client connection is
// to be closed.
var errLostReply = errors.New("wireproxy: reply withheld after the write applied (LoseWriteReplies)")

// NewReplicaSet is a one-node replica set named name, primary.
func NewReplicaSet(name string) *ReplicaSet {
	return &ReplicaSet{name: name, primary: true, changed: make(chan struct{}), records: map[retryKey]*retryRecord{},
		ring: make([]retryKey, RetryRecords)}
}

// Name is the set's name, as drivers' replicaSet= names it.
func (rs *ReplicaSet) Name() string { return rs.name }

// attach makes rs the set of a proxy listening on me: a new process, elected.
func (rs *ReplicaSet) attach(me string) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	rs.me = me
	_, _ = rand.Read(rs.processID[:])
	rs.counter, rs.primary = 0, true
	rs.term++
	if rs.window != nil {
		rs.window.Stop()
		rs.window = nil
	}
	rs.signalLocked()
}

func (rs *ReplicaSet) signalLocked() {
	close(rs.changed)
	rs.changed = make(chan struct{})
}

// Stepdown makes the primary step down now and be elected again after d: for that
// window the set has no primary. Awaitable hellos already held are answered when their
// maxAwaitTimeMS ends or the window does, not at once, so clients' commands meet the
// refusals before their monitor tells them, as when a primary fails. It fails when a
// window is open already.
func (rs *ReplicaSet) Stepdown(d time.Duration) error {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if !rs.primary {
		return errors.New("wireproxy: the replica set has no primary already")
	}
	rs.primary = false
	rs.counter++
	rs.counts.Stepdowns++
	// Held hellos are not woken: as when a primary fails, a client learns of it from a
	// command's error, a new connection's hello or its monitor's next one.
	var t *time.Timer
	t = time.AfterFunc(d, func() {
		rs.mu.Lock()
		defer rs.mu.Unlock()
		if rs.window != t {
			return
		}
		rs.window, rs.primary = nil, true
		rs.term++
		rs.counter++
		rs.signalLocked()
	})
	rs.window = t
	return nil
}

// Primary reports whether the set has a primary (no stepdown window is open).
func (rs *ReplicaSet) Primary() bool {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return rs.primary
}

// LoseWriteReplies makes the next n retryable writes apply upstream and lose their
// reply: the proxy records it and closes the client connection instead of answering.
func (rs *ReplicaSet) LoseWriteReplies(n int) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	rs.lose = n
}

// Counts are what the set did so far.
func (rs *ReplicaSet) Counts() ReplicaSetCounts {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return rs.counts
}

// handle is Proxy.handle for a proxy presenting rs.
func (rs *ReplicaSet) handle(p *Proxy, l *link, msg []byte) ([][]byte, error) {
	m, isMsg := parseOpMsg(msg)
	if isMsg && isHelloName(m.name()) {
		return rs.answerHello(p, l, msg, m.body, m.name(), opMsg)
	}
	if !isMsg && opCode(msg) == opQuery {
		if q, ok := parseOpQuery(msg); ok && isHelloName(q.name()) {
			return rs.answerHello(p, l, msg, q.query, q.name(), opQuery)
		}
	}
	if !isMsg {
		return p.forward(l, msg)
	}
	name := m.name()
	rs.mu.Lock()
	primary := rs.primary
	if !primary && !stepdownPassing[name] {
		rs.counts.Refused++
	}
	rs.mu.Unlock()
	if !primary && !stepdownPassing[name] {
		return [][]byte{rs.notPrimaryReply(msg, m)}, nil
	}
	key, ok := retryKeyOf(m)
	if !ok {
		return p.forward(l, msg)
	}
	return rs.retryableWrite(p, l, msg, key)
}

// retryKey names a retryable write: its session's id and its txnNumber.
type retryKey struct {
	lsid string
	txn  int64
}

// retryRecord is a retryable write's outcome; done is closed once replies is set (nil:
// it got no reply, so a retry is forwarded).
type retryRecord struct {
	done    chan struct{}
	replies [][]byte
}

// retryKeyOf is the key of a retryable write: insert, update, delete or findAndModify
// with lsid.id and txnNumber, not part of a transaction (autocommit).
func retryKeyOf(m opMessage) (retryKey, bool) {
	if !retryableWrites[m.name()] {
		return retryKey{}, false
	}
	txn, ok := m.body.Lookup("txnNumber").AsInt64OK()
	if !ok {
		return retryKey{}, false
	}
	if _, err := m.body.LookupErr("autocommit"); err == nil {
		return retryKey{}, false
	}
	lsid, ok := m.body.Lookup("lsid").DocumentOK()
	if !ok {
		return retryKey{}, false
	}
	_, id, ok := lsid.Lookup("id").BinaryOK()
	if !ok {
		return retryKey{}, false
	}
	return retryKey{lsid: string(id), txn: txn}, true
}

// retryableWrite forwards a retryable write once: a retry of a recorded one is answered
// from the record.
func (rs *ReplicaSet) retryableWrite(p *Proxy, l *link, msg []byte, key retryKey) ([][]byte, error) {
	var rec *retryRecord
	for {
		rs.mu.Lock()
		r, seen := rs.records[key]
		if !seen {
			rec = &retryRecord{done: make(chan struct{})}
			rs.recordLocked(key, rec)
		}
		rs.mu.Unlock()
		if !seen {
			break
		}
		rec = r
		select {
		case <-rec.done:
		case <-p.done:
			return nil, errClosed
		}
		if rec.replies != nil {
			rs.mu.Lock()
			rs.counts.Retries++
			rs.mu.Unlock()
			return replayed(rec.replies, msg), nil
		}
		// The first attempt got no reply: this one runs, unless another retry came first.
		rs.mu.Lock()
		if rs.records[key] == rec {
			delete(rs.records, key)
		}
		rs.mu.Unlock()
	}
	replies, err := p.forward(l, msg)
	if err == nil && len(replies) > 0 {
		rec.replies = replies
	}
	close(rec.done)
	if rec.replies == nil {
		return replies, err
	}
	rs.mu.Lock()
	lose := rs.lose > 0
	if lose {
		rs.lose--
		rs.counts.LostReplies++
	}
	rs.mu.Unlock()
	if lose {
		return nil, errLostReply
	}
	return replies, err
}

// recordLocked keeps rec under key, forgetting the oldest record beyond RetryRecords.
func (rs *ReplicaSet) recordLocked(key retryKey, rec *retryRecord) {
	if old := rs.ring[rs.next]; old != (retryKey{}) {
		delete(rs.records, old)
	}
	rs.ring[rs.next] = key
	rs.next = (rs.next + 1) % len(rs.ring)
	rs.records[key] = rec
}

// replayed is recorded replies as the answer to the request msg.
func replayed(recorded [][]byte, msg []byte) [][]byte {
	out := make([][]byte, len(recorded))
	for i, r := range recorded {
		c := bytes.Clone(r)
		binary.LittleEndian.PutUint32(c[8:], requestIDOf(msg))
		out[i] = c
	}
	return out
}

// notPrimaryReply is a stepped-down node's answer to m: NotWritablePrimary labelled
// RetryableWriteError for a command that may write, NotPrimaryNoSecondaryOk for a read.
func (rs *ReplicaSet) notPrimaryReply(msg []byte, m opMessage) []byte {
	code, codeName, errmsg := int32(codeNotWritablePrimary), "NotWritablePrimary", "not primary"
	read := isRead(msg, m, true)
	if read {
		code, codeName, errmsg = codeNotPrimaryNoSecondaryOk, "NotPrimaryNoSecondaryOk", "not primary and secondaryOk=false"
	}
	b := bsoncore.NewDocumentBuilder().AppendDouble("ok", 0).
		AppendString("errmsg", errmsg+" (wireproxy: the replica set "+rs.name+" is stepped down)").
		AppendInt32("code", code).AppendString("codeName", codeName)
	if !read {
		b.AppendArray("errorLabels", bsoncore.NewArrayBuilder().AppendString("RetryableWriteError").Build())
	}
	rs.mu.Lock()
	b.AppendDocument("topologyVersion", rs.topologyVersionLocked())
	rs.mu.Unlock()
	return replyMessage(0, requestIDOf(msg), b.Build())
}

func isHelloName(name string) bool {
	return name == "hello" || name == "isMaster" || name == "ismaster"
}

// helloPassing are the fields of a hello request that make the proxy forward it (and
// rewrite the reply) rather than answer from its copy of FerretDB's fields: the answer
// depends on them.
var helloPassing = []string{"saslSupportedMechs", "speculativeAuthenticate"}

// answerHello answers a hello (body, its command name) that came as an OP_MSG or an
// OP_QUERY (op): at once, or, when it is awaitable and names the current topology,
// after the next change or its maxAwaitTimeMS.
func (rs *ReplicaSet) answerHello(p *Proxy, l *link, msg []byte, body bsoncore.Document, name string, op int32) ([][]byte, error) {
	base, err := rs.helloBase(p, l, msg, body, op)
	if err != nil {
		return nil, err
	}
	if tv, ok := body.Lookup("topologyVersion").DocumentOK(); ok {
		wait, _ := body.Lookup("maxAwaitTimeMS").AsInt64OK()
		rs.mu.Lock()
		current := rs.sameTopologyLocked(tv)
		changed := rs.changed
		rs.mu.Unlock()
		if current && wait > 0 {
			rs.mu.Lock()
			rs.counts.HelloHeld++
			rs.mu.Unlock()
			t := time.NewTimer(time.Duration(wait) * time.Millisecond)
			select {
			case <-changed:
			case <-t.C:
			case <-p.done:
				t.Stop()
				return nil, errClosed
			}
			t.Stop()
		}
	}
	_, helloOk := body.Lookup("helloOk").BooleanOK()
	reply := rs.helloReply(base, name, helloOk)
	rs.mu.Lock()
	rs.counts.HelloAnswered++
	rs.mu.Unlock()
	if op == opQuery {
		return [][]byte{opReplyMessage(requestIDOf(msg), reply)}, nil
	}
	return [][]byte{replyMessage(0, requestIDOf(msg), reply)}, nil
}

// helloBase is FerretDB's reply to a hello: the one it gave to the first hello the proxy
// forwarded, or its reply to this one when the request asks what only FerretDB knows.
func (rs *ReplicaSet) helloBase(p *Proxy, l *link, msg []byte, body bsoncore.Document, op int32) (bsoncore.Document, error) {
	passing := false
	for _, f := range helloPassing {
		if _, err := body.LookupErr(f); err == nil {
			passing = true
		}
	}
	rs.mu.Lock()
	base := rs.hello
	rs.mu.Unlock()
	if base != nil && !passing {
		return base, nil
	}
	out := msg
	if op == opMsg {
		// Forward the plain request: FerretDB knows no topologyVersion.
		m, _ := parseOpMsg(msg)
		nb, ok := withField(m.body, "topologyVersion", nil)
		if ok {
			nb, ok = withField(nb, "maxAwaitTimeMS", nil)
		}
		if ok {
			out, _ = rebuilt(msg, m, nb)
		}
		prepareRequest(out)
	}
	replies, err := p.exchange(l, out, true)
	if err != nil {
		return nil, fmt.Errorf("wireproxy: forward hello: %w", err)
	}
	reply := replies[len(replies)-1]
	var doc bsoncore.Document
	if op == opMsg {
		rm, ok := parseOpMsg(reply)
		if !ok {
			return nil, errors.New("wireproxy: unreadable reply to hello")
		}
		doc = rm.body
	} else {
		d, ok := opReplyDocument(reply)
		if !ok {
			return nil, errors.New("wireproxy: unreadable reply to isMaster")
		}
		doc = d
	}
	if ok, _ := doc.Lookup("ok").AsFloat64OK(); ok != 1 {
		return nil, fmt.Errorf("wireproxy: hello failed upstream: %s", doc)
	}
	rs.mu.Lock()
	rs.counts.HelloForwarded++
	if rs.hello == nil && !passing {
		rs.hello = bytes.Clone(doc)
	}
	rs.mu.Unlock()
	return doc, nil
}

// helloOwnFields are the fields of FerretDB's hello the proxy sets itself.
var helloOwnFields = map[string]bool{
	"isWritablePrimary": true, "ismaster": true, "helloOk": true, "secondary": true, "setName": true, "setVersion": true,
	"hosts": true, "primary": true, "me": true, "electionId": true, "topologyVersion": true, "localTime": true, "ok": true,
}

// helloReply is the set's answer to a hello named name, from FerretDB's fields in base.
func (rs *ReplicaSet) helloReply(base bsoncore.Document, name string, helloOk bool) bsoncore.Document {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	b := bsoncore.NewDocumentBuilder()
	if name == "hello" {
		b.AppendBoolean("isWritablePrimary", rs.primary)
	} else {
		if helloOk {
			b.AppendBoolean("helloOk", true)
		}
		b.AppendBoolean("ismaster", rs.primary)
	}
	b.AppendBoolean("secondary", !rs.primary).
		AppendString("setName", rs.name).
		AppendInt32("setVersion", 1).
		AppendArray("hosts", bsoncore.NewArrayBuilder().AppendString(rs.me).Build()).
		AppendString("me", rs.me)
	if rs.primary {
		b.AppendString("primary", rs.me)
		var election [12]byte
		binary.BigEndian.PutUint32(election[:4], 0x7fffffff)
		binary.BigEndian.PutUint64(election[4:], uint64(rs.term))
		b.AppendObjectID("electionId", election)
	}
	b.AppendDocument("topologyVersion", rs.topologyVersionLocked())
	b.AppendDateTime("localTime", time.Now().UnixMilli())
	elems, _ := base.Elements()
	for _, e := range elems {
		if !helloOwnFields[e.Key()] {
			b.AppendValue(e.Key(), e.Value())
		}
	}
	return b.AppendDouble("ok", 1).Build()
}

func (rs *ReplicaSet) topologyVersionLocked() bsoncore.Document {
	return bsoncore.NewDocumentBuilder().AppendObjectID("processId", rs.processID).AppendInt64("counter", rs.counter).Build()
}

// sameTopologyLocked reports whether tv is the set's current topologyVersion.
func (rs *ReplicaSet) sameTopologyLocked(tv bsoncore.Document) bool {
	pid, ok := tv.Lookup("processId").ObjectIDOK()
	counter, ok2 := tv.Lookup("counter").AsInt64OK()
	return ok && ok2 && pid == rs.processID && counter == rs.counter
}

// opQueryMessage is a legacy OP_QUERY taken apart: the namespace and the query, a
// {$query: …} wrapper removed.
type opQueryMessage struct {
	collection string
	query      bsoncore.Document
}

func (q opQueryMessage) name() string {
	if !strings.HasSuffix(q.collection, ".$cmd") {
		return ""
	}
	e, err := q.query.IndexErr(0)
	if err != nil {
		return ""
	}
	return e.Key()
}

// parseOpQuery reads an OP_QUERY: flags, a NUL-terminated collection name, numberToSkip,
// numberToReturn, the query document (then an optional field selector).
func parseOpQuery(msg []byte) (opQueryMessage, bool) {
	if len(msg) < headerLen+4 || opCode(msg) != opQuery {
		return opQueryMessage{}, false
	}
	rest := msg[headerLen+4:]
	nul := bytes.IndexByte(rest, 0)
	if nul < 0 || len(rest) < nul+1+8 {
		return opQueryMessage{}, false
	}
	q := opQueryMessage{collection: string(rest[:nul])}
	doc, _, ok := bsoncore.ReadDocument(rest[nul+1+8:])
	if !ok || doc.Validate() != nil {
		return opQueryMessage{}, false
	}
	if inner, ok := doc.Lookup("$query").DocumentOK(); ok {
		doc = inner
	}
	q.query = doc
	return q, true
}

// opReplyMessage is an OP_REPLY of one document answering the request requestID.
func opReplyMessage(responseTo uint32, doc bsoncore.Document) []byte {
	const opReply = 1
	out := make([]byte, headerLen, headerLen+20+len(doc))
	binary.LittleEndian.PutUint32(out[8:], responseTo)
	binary.LittleEndian.PutUint32(out[12:], opReply)
	out = binary.LittleEndian.AppendUint32(out, 0) // responseFlags
	out = binary.LittleEndian.AppendUint64(out, 0) // cursorID
	out = binary.LittleEndian.AppendUint32(out, 0) // startingFrom
	out = binary.LittleEndian.AppendUint32(out, 1) // numberReturned
	out = append(out, doc...)
	binary.LittleEndian.PutUint32(out, uint32(len(out)))
	return out
}

// opReplyDocument is the first document of an OP_REPLY.
func opReplyDocument(reply []byte) (bsoncore.Document, bool) {
	if len(reply) < headerLen+20 || opCode(reply) != 1 {
		return nil, false
	}
	doc, _, ok := bsoncore.ReadDocument(reply[headerLen+20:])
	return doc, ok && doc.Validate() == nil
}
