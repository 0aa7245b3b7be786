package wireproxy_test

import (
	"bufio"
	"encoding/binary"
	"hash/crc32"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/analyticsco/platform/devstack/wireproxy"
)

const checksumPresent = 1 << 0

// writeMsg is an OP_MSG of body and, unless seq is "", a document sequence seq of docs.
func writeMsg(t *testing.T, requestID int32, flags uint32, body bson.D, seq string, docs ...bson.D) []byte {
	t.Helper()
	var b []byte
	raw, err := bson.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	b = append(append(b, 0), raw...)
	if seq != "" {
		sec := append([]byte(seq), 0)
		for _, d := range docs {
			raw, err := bson.Marshal(d)
			if err != nil {
				t.Fatal(err)
			}
			sec = append(sec, raw...)
		}
		b = append(b, 1)
		b = binary.LittleEndian.AppendUint32(b, uint32(len(sec)+4))
		b = append(b, sec...)
	}
	m := msg(requestID, 0, opMsg, flags, string(b))
	if flags&checksumPresent != 0 {
		m = binary.LittleEndian.AppendUint32(m, 0)
		binary.LittleEndian.PutUint32(m, uint32(len(m)))
		binary.LittleEndian.PutUint32(m[len(m)-4:], crc32.Checksum(m[:len(m)-4], crc32.MakeTable(crc32.Castagnoli)))
	}
	return m
}

// parsed is an OP_MSG as the fake upstream saw it.
type parsed struct {
	flags uint32
	body  bson.Raw
	seqs  map[string][]bson.Raw
}

func parseMsg(t *testing.T, m []byte) parsed {
	t.Helper()
	p := parsed{flags: flagsOf(m), seqs: map[string][]bson.Raw{}}
	end := len(m)
	if p.flags&checksumPresent != 0 {
		end -= 4
	}
	for i := 20; i < end; {
		kind := m[i]
		size := int(binary.LittleEndian.Uint32(m[i+1:]))
		switch kind {
		case 0:
			p.body = bson.Raw(m[i+1 : i+1+size])
		case 1:
			sec := m[i+5 : i+1+size]
			id := string(sec[:slices.Index(sec, 0)])
			for rest := sec[len(id)+1:]; len(rest) > 0; {
				n := int(binary.LittleEndian.Uint32(rest))
				p.seqs[id] = append(p.seqs[id], bson.Raw(rest[:n]))
				rest = rest[n:]
			}
		}
		i += 1 + size
	}
	if err := p.body.Validate(); err != nil || int(binary.LittleEndian.Uint32(m)) != len(m) {
		t.Errorf("malformed message upstream: %v, length field %d of %d", err, binary.LittleEndian.Uint32(m), len(m))
	}
	return p
}

// statements are the statements of a write command, wherever they are.
func (p parsed) statements(field string) []bson.Raw {
	if s, ok := p.seqs[field]; ok {
		return s
	}
	var out []bson.Raw
	if arr, ok := p.body.Lookup(field).ArrayOK(); ok {
		vals, _ := arr.Values()
		for _, v := range vals {
			out = append(out, v.Document())
		}
	}
	return out
}

func reply(t *testing.T, to []byte, doc bson.D) []byte {
	t.Helper()
	raw, err := bson.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return msg(77, int32(binary.LittleEndian.Uint32(to[4:8])), opMsg, 0, "\x00"+string(raw))
}

// replyBody is the body of a reply built by reply or by the proxy.
func replyBody(t *testing.T, m []byte) bson.D {
	t.Helper()
	var d bson.D
	if err := bson.Unmarshal(m[21:], &d); err != nil {
		t.Fatalf("reply body: %v", err)
	}
	return d
}

// scriptedUpdate answers an update as FerretDB does to one statement, as the statement's
// field "do" says: "match" (n 1, nModified 1), "upsert" (n 1, upserted at index 0 with the
// statement's "id"), "dup" (a write error), "internal" (FerretDB's InternalError for a
// unique index), "fail" (a command error).
func scriptedUpdate(t *testing.T, req []byte) [][]byte {
	p := parseMsg(t, req)
	var n, modified int32
	var upserted bson.A
	for i, s := range p.statements("updates") {
		switch s.Lookup("do").StringValue() {
		case "match":
			n, modified = n+1, modified+1
		case "upsert":
			n++
			upserted = append(upserted, bson.D{{Key: "index", Value: int32(i)}, {Key: "_id", Value: s.Lookup("id").StringValue()}})
		case "dup":
			return [][]byte{reply(t, req, bson.D{{Key: "ok", Value: 1.0}, {Key: "writeErrors", Value: bson.A{
				bson.D{{Key: "index", Value: int32(0)}, {Key: "code", Value: int32(11000)}, {Key: "errmsg", Value: "E11000 duplicate key error collection: db.c"}}}}})}
		case "internal":
			return [][]byte{reply(t, req, bson.D{{Key: "ok", Value: 0.0}, {Key: "errmsg", Value: `ERROR: duplicate key value violates unique constraint "c_k_idx" (SQLSTATE 23505)`}, {Key: "code", Value: int32(1)}, {Key: "codeName", Value: "InternalError"}})}
		case "fail":
			return [][]byte{reply(t, req, bson.D{{Key: "ok", Value: 0.0}, {Key: "errmsg", Value: "bad statement"}, {Key: "code", Value: int32(9)}, {Key: "codeName", Value: "FailedToParse"}})}
		}
	}
	out := bson.D{{Key: "n", Value: n}}
	if len(upserted) > 0 {
		out = append(out, bson.E{Key: "upserted", Value: upserted})
	}
	out = append(out, bson.E{Key: "nModified", Value: modified})
	if p.body.Lookup("wce").Type != 0 {
		out = append(out, bson.E{Key: "writeConcernError", Value: bson.D{{Key: "code", Value: int32(64)}, {Key: "errmsg", Value: "waiting for replication timed out"}}})
	}
	return [][]byte{reply(t, req, append(out, bson.E{Key: "operationTime", Value: bson.Timestamp{T: 7}}, bson.E{Key: "ok", Value: 1.0}))}
}

// stmt is an update statement for scriptedUpdate.
func stmt(do string, id string) bson.D {
	return bson.D{{Key: "q", Value: bson.D{{Key: "_id", Value: id}}}, {Key: "u", Value: bson.D{{Key: "$set", Value: bson.D{{Key: "v", Value: 1}}}}}, {Key: "do", Value: do}, {Key: "id", Value: id}}
}

func startBatchingProxy(t *testing.T, upstream string, o wireproxy.Options) *wireproxy.Proxy {
	t.Helper()
	p, err := wireproxy.ListenWith("127.0.0.1:0", upstream, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func roundTrip(t *testing.T, c net.Conn, r *bufio.Reader, m []byte) bson.D {
	t.Helper()
	if _, err := c.Write(m); err != nil {
		t.Fatal(err)
	}
	got, err := wireproxy.ReadMessage(r)
	if err != nil {
		t.Fatalf("reply: %v", err)
	}
	if to := binary.LittleEndian.Uint32(got[8:12]); to != binary.LittleEndian.Uint32(m[4:8]) {
		t.Errorf("reply's responseTo %d, want the request's id %d", to, binary.LittleEndian.Uint32(m[4:8]))
	}
	return replyBody(t, got)
}

func TestProxyForwardsWriteStatementsInBatches(t *testing.T) {
	body := func(ordered bool, extra ...bson.E) bson.D {
		return append(bson.D{{Key: "update", Value: "c"}, {Key: "ordered", Value: ordered}, {Key: "$db", Value: "db"},
			{Key: "lsid", Value: bson.D{{Key: "id", Value: "s1"}}}}, extra...)
	}
	inBody := func(ordered bool, stmts ...bson.D) bson.D {
		arr := bson.A{}
		for _, s := range stmts {
			arr = append(arr, s)
		}
		return body(ordered, bson.E{Key: "updates", Value: arr})
	}
	cases := []struct {
		name      string
		msg       func(t *testing.T) []byte
		batch     int   // the proxy's batch of updates; 0 is 2
		batches   []int // statements per command upstream
		want      bson.D
		unchanged bool // the client's message went upstream as it was
	}{{
		name: "counts summed and upserted renumbered, statements in a document sequence",
		msg: func(t *testing.T) []byte {
			return writeMsg(t, 5, 0, body(true), "updates", stmt("match", "a"), stmt("upsert", "b"), stmt("match", "c"), stmt("upsert", "d"), stmt("upsert", "e"))
		},
		batches: []int{2, 2, 1},
		want: bson.D{{Key: "n", Value: int32(5)}, {Key: "nModified", Value: int32(2)}, {Key: "upserted", Value: bson.A{
			bson.D{{Key: "index", Value: int32(1)}, {Key: "_id", Value: "b"}}, bson.D{{Key: "index", Value: int32(3)}, {Key: "_id", Value: "d"}},
			bson.D{{Key: "index", Value: int32(4)}, {Key: "_id", Value: "e"}}}}, {Key: "operationTime", Value: bson.Timestamp{T: 7}}, {Key: "ok", Value: 1.0}},
	}, {
		name: "statements in the body array stay there",
		msg: func(t *testing.T) []byte {
			return writeMsg(t, 5, 0, inBody(true, stmt("match", "a"), stmt("match", "b"), stmt("upsert", "c")), "")
		},
		batches: []int{2, 1},
		want: bson.D{{Key: "n", Value: int32(3)}, {Key: "nModified", Value: int32(2)}, {Key: "upserted", Value: bson.A{
			bson.D{{Key: "index", Value: int32(2)}, {Key: "_id", Value: "c"}}}}, {Key: "operationTime", Value: bson.Timestamp{T: 7}}, {Key: "ok", Value: 1.0}},
	}, {
		name: "ordered stops after the batch with a write error, at its index",
		msg: func(t *testing.T) []byte {
			return writeMsg(t, 5, 0, body(true), "updates", stmt("match", "a"), stmt("match", "b"), stmt("dup", "c"), stmt("match", "d"))
		},
		batch:   1,
		batches: []int{1, 1, 1},
		want: bson.D{{Key: "n", Value: int32(2)}, {Key: "nModified", Value: int32(2)}, {Key: "writeErrors", Value: bson.A{
			bson.D{{Key: "index", Value: int32(2)}, {Key: "code", Value: int32(11000)}, {Key: "errmsg", Value: "E11000 duplicate key error collection: db.c"}}}},
			{Key: "ok", Value: 1.0}},
	}, {
		name: "unordered goes on after a write error",
		msg: func(t *testing.T) []byte {
			return writeMsg(t, 5, 0, body(false), "updates", stmt("match", "a"), stmt("match", "b"), stmt("dup", "c"), stmt("match", "d"))
		},
		batch:   1,
		batches: []int{1, 1, 1, 1},
		want: bson.D{{Key: "n", Value: int32(3)}, {Key: "nModified", Value: int32(3)}, {Key: "writeErrors", Value: bson.A{
			bson.D{{Key: "index", Value: int32(2)}, {Key: "code", Value: int32(11000)}, {Key: "errmsg", Value: "E11000 duplicate key error collection: db.c"}}}},
			{Key: "operationTime", Value: bson.Timestamp{T: 7}}, {Key: "ok", Value: 1.0}},
	}, {
		name: "FerretDB's InternalError for a unique index is a duplicate key write error",
		msg: func(t *testing.T) []byte {
			return writeMsg(t, 5, 0, body(true), "updates", stmt("match", "a"), stmt("match", "b"), stmt("internal", "c"), stmt("match", "d"))
		},
		batch:   1,
		batches: []int{1, 1, 1},
		want: bson.D{{Key: "n", Value: int32(2)}, {Key: "nModified", Value: int32(2)}, {Key: "writeErrors", Value: bson.A{
			bson.D{{Key: "index", Value: int32(2)}, {Key: "code", Value: int32(11000)}, {Key: "errmsg", Value: "E11000 duplicate key error collection: db.c"}}}},
			{Key: "operationTime", Value: bson.Timestamp{T: 7}}, {Key: "ok", Value: 1.0}},
	}, {
		name: "a command error in the first batch is the reply, and nothing else is forwarded",
		msg: func(t *testing.T) []byte {
			return writeMsg(t, 5, 0, body(false), "updates", stmt("fail", "a"), stmt("match", "b"), stmt("match", "c"))
		},
		batches: []int{2},
		want:    bson.D{{Key: "ok", Value: 0.0}, {Key: "errmsg", Value: "bad statement"}, {Key: "code", Value: int32(9)}, {Key: "codeName", Value: "FailedToParse"}},
	}, {
		name: "a command error in a later batch is a write error of its first statement",
		msg: func(t *testing.T) []byte {
			return writeMsg(t, 5, 0, body(true), "updates", stmt("match", "a"), stmt("match", "b"), stmt("fail", "c"), stmt("match", "d"))
		},
		batches: []int{2, 2},
		want: bson.D{{Key: "n", Value: int32(2)}, {Key: "nModified", Value: int32(2)}, {Key: "writeErrors", Value: bson.A{
			bson.D{{Key: "index", Value: int32(2)}, {Key: "code", Value: int32(9)}, {Key: "errmsg", Value: "bad statement"}}}},
			{Key: "operationTime", Value: bson.Timestamp{T: 7}}, {Key: "ok", Value: 1.0}},
	}, {
		name: "the last writeConcernError is kept",
		msg: func(t *testing.T) []byte {
			return writeMsg(t, 5, 0, body(true, bson.E{Key: "wce", Value: true}), "updates", stmt("match", "a"), stmt("match", "b"), stmt("match", "c"))
		},
		batches: []int{2, 1},
		want: bson.D{{Key: "n", Value: int32(3)}, {Key: "nModified", Value: int32(3)},
			{Key: "writeConcernError", Value: bson.D{{Key: "code", Value: int32(64)}, {Key: "errmsg", Value: "waiting for replication timed out"}}},
			{Key: "operationTime", Value: bson.Timestamp{T: 7}}, {Key: "ok", Value: 1.0}},
	}, {
		name: "a checksummed message is forwarded in batches without its checksum",
		msg: func(t *testing.T) []byte {
			return writeMsg(t, 5, checksumPresent, body(true), "updates", stmt("match", "a"), stmt("match", "b"), stmt("match", "c"))
		},
		batches: []int{2, 1},
		want: bson.D{{Key: "n", Value: int32(3)}, {Key: "nModified", Value: int32(3)},
			{Key: "operationTime", Value: bson.Timestamp{T: 7}}, {Key: "ok", Value: 1.0}},
	}, {
		name: "a command of one batch goes upstream as it came, checksum and all",
		msg: func(t *testing.T) []byte {
			return writeMsg(t, 5, checksumPresent, body(true), "updates", stmt("match", "a"), stmt("upsert", "b"))
		},
		batches:   []int{2},
		unchanged: true,
		want: bson.D{{Key: "n", Value: int32(2)}, {Key: "upserted", Value: bson.A{bson.D{{Key: "index", Value: int32(1)}, {Key: "_id", Value: "b"}}}},
			{Key: "nModified", Value: int32(1)}, {Key: "operationTime", Value: bson.Timestamp{T: 7}}, {Key: "ok", Value: 1.0}},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := startFake(t, func(req []byte) [][]byte { return scriptedUpdate(t, req) })
			batch := tc.batch
			if batch == 0 {
				batch = 2
			}
			p := startBatchingProxy(t, f.ln.Addr().String(), wireproxy.Options{Batches: map[string]int{"update": batch}})
			c, r := dial(t, p)
			m := tc.msg(t)
			got := roundTrip(t, c, r, m)
			if !equalDocs(got, tc.want) {
				t.Errorf("reply\n got %v\nwant %v", got, tc.want)
			}
			f.mu.Lock()
			defer f.mu.Unlock()
			var sizes []int
			orig := parseMsg(t, m)
			for _, req := range f.received {
				up := parseMsg(t, req)
				sizes = append(sizes, len(up.statements("updates")))
				if tc.unchanged {
					if string(req) != string(m) {
						t.Error("a command of one batch was changed on its way upstream")
					}
					continue
				}
				if up.flags&checksumPresent != 0 {
					t.Errorf("a batch went upstream with checksumPresent (flags %#x) and no checksum of the proxy's", up.flags)
				}
				if got, want := withoutField(up.body, "updates"), withoutField(orig.body, "updates"); !equalDocs(got, want) {
					t.Errorf("a batch's body %v, want the client's %v", got, want)
				}
			}
			if !slices.Equal(sizes, tc.batches) {
				t.Errorf("statements per command upstream %v, want %v", sizes, tc.batches)
			}
		})
	}
}

func withoutField(raw bson.Raw, field string) bson.D {
	var d, out bson.D
	_ = bson.Unmarshal(raw, &d)
	for _, e := range d {
		if e.Key != field {
			out = append(out, e)
		}
	}
	return out
}

func equalDocs(a, b bson.D) bool {
	x, err1 := bson.MarshalExtJSON(a, true, false)
	y, err2 := bson.MarshalExtJSON(b, true, false)
	return err1 == nil && err2 == nil && string(x) == string(y)
}

func TestProxyForwardsUnacknowledgedWritesInBatchesWithoutWaiting(t *testing.T) {
	f := startFake(t, func(req []byte) [][]byte {
		if flagsOf(req)&moreToCome != 0 {
			return nil
		}
		return [][]byte{reply(t, req, bson.D{{Key: "ok", Value: 1.0}})}
	})
	p := startBatchingProxy(t, f.ln.Addr().String(), wireproxy.Options{Batches: map[string]int{"insert": 2}})
	c, r := dial(t, p)
	docs := []bson.D{{{Key: "_id", Value: 1}}, {{Key: "_id", Value: 2}}, {{Key: "_id", Value: 3}}}
	c.Write(writeMsg(t, 1, moreToCome, bson.D{{Key: "insert", Value: "c"}, {Key: "$db", Value: "db"}}, "documents", docs...))
	if got := roundTrip(t, c, r, writeMsg(t, 2, 0, bson.D{{Key: "ping", Value: 1}, {Key: "$db", Value: "db"}}, "")); !equalDocs(got, bson.D{{Key: "ok", Value: 1.0}}) {
		t.Errorf("the reply after an unacknowledged write is %v, want the ping's", got)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	var sizes []int
	for _, req := range f.received {
		if up := parseMsg(t, req); up.flags&moreToCome != 0 {
			sizes = append(sizes, len(up.statements("documents")))
		}
	}
	if !slices.Equal(sizes, []int{2, 1}) {
		t.Errorf("unacknowledged inserts upstream %v, want batches of 2 and 1 with moreToCome", sizes)
	}
}

func TestProxyAnswersACommandWithoutReplyWithinTheDeadline(t *testing.T) {
	var mu sync.Mutex
	var timedOut []string
	hang := make(chan struct{})
	// The upstream never answers a command whose statement says "hang", nor a "hang" command.
	f := startFake(t, func(req []byte) [][]byte {
		p := parseMsg(t, req)
		if _, ok := p.body.Lookup("hang").Int32OK(); ok {
			<-hang
			return nil
		}
		for _, s := range p.statements("updates") {
			if s.Lookup("do").StringValue() == "hang" {
				<-hang
				return nil
			}
		}
		if p.body.Lookup("update").Type != 0 {
			return scriptedUpdate(t, req)
		}
		return [][]byte{reply(t, req, bson.D{{Key: "ok", Value: 1.0}})}
	})
	t.Cleanup(func() { close(hang) }) // before the fake's cleanup, which waits for its handlers
	p := startBatchingProxy(t, f.ln.Addr().String(), wireproxy.Options{Batches: map[string]int{"update": 1}, CommandTimeout: 300 * time.Millisecond,
		OnCommandTimeout: func(upstream string) { mu.Lock(); timedOut = append(timedOut, upstream); mu.Unlock() }})
	okReply := bson.D{{Key: "ok", Value: 1.0}}

	t.Run("a command gets MaxTimeMSExpired, the turn is released and the connection goes on", func(t *testing.T) {
		c, r := dial(t, p)
		other, or := dial(t, p)
		done := make(chan []byte, 1)
		go func() {
			other.Write(pingMsg(t, 9))
			m, _ := wireproxy.ReadMessage(or)
			done <- m
		}()
		got := roundTrip(t, c, r, writeMsg(t, 1, 0, bson.D{{Key: "hang", Value: int32(1)}, {Key: "$db", Value: "db"}}, ""))
		if code, _ := got[2].Value.(int32); got[0].Value != 0.0 || code != 50 || got[3].Value != "MaxTimeMSExpired" {
			t.Errorf("reply to a command that hangs: %v, want ok 0, code 50 MaxTimeMSExpired", got)
		}
		if m := <-done; m == nil || !equalDocs(replyBody(t, m), okReply) {
			t.Error("another connection's ping while a command hung was not answered")
		}
		if got := roundTrip(t, c, r, pingMsg(t, 2)); !equalDocs(got, okReply) {
			t.Errorf("the next command on the connection: %v, want answered", got)
		}
		mu.Lock()
		defer mu.Unlock()
		if want := []string{f.ln.Addr().String()}; !slices.Equal(timedOut, want) {
			t.Errorf("OnCommandTimeout called with %v, want %v", timedOut, want)
		}
	})

	t.Run("a batch without reply is a write error after the statements before it", func(t *testing.T) {
		c, r := dial(t, p)
		got := roundTrip(t, c, r, writeMsg(t, 3, 0, bson.D{{Key: "update", Value: "c"}, {Key: "ordered", Value: false}, {Key: "$db", Value: "db"}},
			"updates", stmt("match", "a"), stmt("upsert", "b"), stmt("hang", "c"), stmt("match", "d")))
		want := bson.D{{Key: "n", Value: int32(2)}, {Key: "nModified", Value: int32(1)},
			{Key: "upserted", Value: bson.A{bson.D{{Key: "index", Value: int32(1)}, {Key: "_id", Value: "b"}}}},
			{Key: "writeErrors", Value: bson.A{bson.D{{Key: "index", Value: int32(2)}, {Key: "code", Value: int32(50)}}}},
			{Key: "operationTime", Value: bson.Timestamp{T: 7}}, {Key: "ok", Value: 1.0}}
		// The message names the deadline; compare the rest.
		if we, ok := lookup(got, "writeErrors").(bson.A); ok && len(we) == 1 {
			e := we[0].(bson.D)
			we[0] = e[:2]
		}
		if !equalDocs(got, want) {
			t.Errorf("reply\n got %v\nwant %v", got, want)
		}
	})
}

func pingMsg(t *testing.T, id int32) []byte {
	return writeMsg(t, id, 0, bson.D{{Key: "ping", Value: 1}, {Key: "$db", Value: "db"}}, "")
}

func lookup(d bson.D, key string) any {
	for _, e := range d {
		if e.Key == key {
			return e.Value
		}
	}
	return nil
}

func TestProxySendsTheNextCommandToANewUpstream(t *testing.T) {
	answer := func(name string) func([]byte) [][]byte {
		return func(req []byte) [][]byte {
			return [][]byte{reply(t, req, bson.D{{Key: "from", Value: name}, {Key: "ok", Value: 1.0}})}
		}
	}
	a, b := startFake(t, answer("a")), startFake(t, answer("b"))
	p := startBatchingProxy(t, a.ln.Addr().String(), wireproxy.Options{})
	c, r := dial(t, p)
	if got := lookup(roundTrip(t, c, r, pingMsg(t, 1)), "from"); got != "a" {
		t.Fatalf("first ping answered by %v, want a", got)
	}
	p.SetUpstream(b.ln.Addr().String())
	if got := lookup(roundTrip(t, c, r, pingMsg(t, 2)), "from"); got != "b" {
		t.Errorf("ping after SetUpstream answered by %v, want b", got)
	}
}
