package wireproxy_test

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"net"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/event"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/analyticsco/platform/devstack"
	"github.com/analyticsco/platform/devstack/wireproxy"
)

// replicaSetProxy is a proxy presenting a fresh FerretDB (devstack.MongoForTest, bypassed
// through its UpstreamURI) as the one-node replica set rs.
func replicaSetProxy(t *testing.T) (*wireproxy.Proxy, *wireproxy.ReplicaSet) {
	t.Helper()
	m := devstack.MongoForTest(t)
	u, err := url.Parse(m.UpstreamURI)
	if err != nil {
		t.Fatal(err)
	}
	rs := wireproxy.NewReplicaSet("rs-test")
	p, err := wireproxy.ListenWith("127.0.0.1:0", u.Host, wireproxy.Options{Mode: wireproxy.Collections, EscapeNUL: true, ReplicaSet: rs})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p, rs
}

// startedCommands records the commands a client starts, by name.
type startedCommands struct {
	mu   sync.Mutex
	cmds map[string][]bson.Raw
}

func (s *startedCommands) monitor() *event.CommandMonitor {
	return &event.CommandMonitor{Started: func(_ context.Context, e *event.CommandStartedEvent) {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.cmds == nil {
			s.cmds = map[string][]bson.Raw{}
		}
		s.cmds[e.CommandName] = append(s.cmds[e.CommandName], e.Command)
	}}
}

func (s *startedCommands) of(name string) []bson.Raw {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]bson.Raw(nil), s.cmds[name]...)
}

func rsClient(t *testing.T, p *wireproxy.Proxy, selection time.Duration, cm *event.CommandMonitor) *mongo.Client {
	t.Helper()
	o := options.Client().ApplyURI("mongodb://" + p.Addr().String() + "/?replicaSet=rs-test").SetServerSelectionTimeout(selection)
	if cm != nil {
		o.SetMonitor(cm)
	}
	c, err := mongo.Connect(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Disconnect(context.Background()) })
	return c
}

func helloOf(t *testing.T, c *mongo.Client) bson.M {
	t.Helper()
	var h bson.M
	if err := c.Database("admin").RunCommand(context.Background(), bson.D{{Key: "hello", Value: 1}}).Decode(&h); err != nil {
		t.Fatalf("hello: %v", err)
	}
	return h
}

// TestReplicaSetPresentsOneNodeSet: hello names the set, its one member (the proxy's
// address), an electionId and a topologyVersion, and keeps FerretDB's own fields; the
// driver takes it for a replica set, so its inserts carry lsid and txnNumber; the legacy
// OP_QUERY isMaster of a first handshake gets the same as an OP_REPLY; an idle client's
// monitor waits in awaitable hellos rather than polling.
func TestReplicaSetPresentsOneNodeSet(t *testing.T) {
	p, rs := replicaSetProxy(t)
	var cmds startedCommands
	c := rsClient(t, p, 10*time.Second, cmds.monitor())
	ctx := context.Background()
	me := p.Addr().String()

	h := helloOf(t, c)
	for k, want := range map[string]any{"setName": "rs-test", "me": me, "primary": me, "isWritablePrimary": true, "secondary": false} {
		if h[k] != want {
			t.Errorf("hello %s = %v, want %v", k, h[k], want)
		}
	}
	if hosts, _ := h["hosts"].(bson.A); len(hosts) != 1 || hosts[0] != me {
		t.Errorf("hello hosts = %v, want [%s]", h["hosts"], me)
	}
	if _, ok := h["electionId"].(bson.ObjectID); !ok {
		t.Errorf("hello electionId = %v, want an ObjectID", h["electionId"])
	}
	if tv, _ := h["topologyVersion"].(bson.D); len(tv) != 2 || tv[0].Key != "processId" || tv[1].Key != "counter" {
		t.Errorf("hello topologyVersion = %v, want processId and counter", h["topologyVersion"])
	}
	for _, k := range []string{"maxWireVersion", "logicalSessionTimeoutMinutes", "maxBsonObjectSize", "maxMessageSizeBytes"} {
		if h[k] == nil {
			t.Errorf("hello lacks FerretDB's %s: %v", k, h)
		}
	}

	coll := c.Database("rs").Collection("docs")
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	ins := cmds.of("insert")
	if len(ins) != 1 || ins[0].Lookup("txnNumber").Type == 0 || ins[0].Lookup("lsid").Type == 0 {
		t.Errorf("the driver's insert: want lsid and txnNumber (a retryable write), got %v", ins)
	}

	// The first handshake of a driver, by hand: OP_QUERY isMaster on admin.$cmd.
	conn, err := net.Dial("tcp", me)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	q, _ := bson.Marshal(bson.D{{Key: "isMaster", Value: 1}, {Key: "helloOk", Value: true}})
	req := binary.LittleEndian.AppendUint32(make([]byte, 16), 0)
	req = append(append(req, "admin.$cmd"...), 0)
	req = binary.LittleEndian.AppendUint32(req, 0)
	req = binary.LittleEndian.AppendUint32(req, 0xffffffff)
	req = append(req, q...)
	binary.LittleEndian.PutUint32(req[0:], uint32(len(req)))
	binary.LittleEndian.PutUint32(req[4:], 77)
	binary.LittleEndian.PutUint32(req[12:], opQuery)
	if _, err := conn.Write(req); err != nil {
		t.Fatal(err)
	}
	reply, err := wireproxy.ReadMessage(bufio.NewReader(conn))
	if err != nil {
		t.Fatal(err)
	}
	if op, to := binary.LittleEndian.Uint32(reply[12:]), binary.LittleEndian.Uint32(reply[8:]); op != opReply || to != 77 {
		t.Fatalf("isMaster over OP_QUERY: want an OP_REPLY to request 77, got opcode %d to %d", op, to)
	}
	var legacy bson.M
	if err := bson.Unmarshal(reply[36:], &legacy); err != nil {
		t.Fatal(err)
	}
	if legacy["ismaster"] != true || legacy["helloOk"] != true || legacy["setName"] != "rs-test" || legacy["maxWireVersion"] == nil {
		t.Errorf("isMaster over OP_QUERY: %v", legacy)
	}

	// Idle, the client's monitor holds an awaitable hello (maxAwaitTimeMS 10 s by default):
	// over 2 s only the RTT monitor's hellos are answered, no polling loop.
	time.Sleep(500 * time.Millisecond)
	before := rs.Counts()
	time.Sleep(2 * time.Second)
	after := rs.Counts()
	if after.HelloHeld == 0 {
		t.Errorf("no awaitable hello was held: %+v", after)
	}
	if n := after.HelloAnswered - before.HelloAnswered; n > 4 {
		t.Errorf("%d hellos answered in 2 s of an idle client: the monitor spins", n)
	}
	if after.HelloForwarded != 1 {
		t.Errorf("hellos forwarded to FerretDB: %d, want 1 (its fields are cached)", after.HelloForwarded)
	}
}

// TestReplicaSetAnswersARetryFromItsRecord: a retryable write that applied and lost its
// reply (LoseWriteReplies: the connection closes instead) is retried by the driver and
// answered from the record, so it lands once: an $inc adds 1, an insert does not meet
// its own duplicate key, a findAndModify returns what the first attempt returned.
func TestReplicaSetAnswersARetryFromItsRecord(t *testing.T) {
	p, rs := replicaSetProxy(t)
	c := rsClient(t, p, 10*time.Second, nil)
	ctx := context.Background()
	coll := c.Database("rs").Collection("counters")
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: "c"}, {Key: "n", Value: 0}}); err != nil {
		t.Fatal(err)
	}
	inc := bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: 1}}}}

	rs.LoseWriteReplies(1)
	if r, err := coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: "c"}}, inc); err != nil || r.ModifiedCount != 1 {
		t.Fatalf("update whose reply was lost: %v, %+v; want the retry answered with the first reply", err, r)
	}
	rs.LoseWriteReplies(1)
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: "new"}}); err != nil {
		t.Fatalf("insert whose reply was lost: %v; want the retry answered with the first reply, not a duplicate key", err)
	}
	rs.LoseWriteReplies(1)
	var got struct {
		N int `bson:"n"`
	}
	if err := coll.FindOneAndUpdate(ctx, bson.D{{Key: "_id", Value: "c"}}, inc, options.FindOneAndUpdate().SetReturnDocument(options.After)).Decode(&got); err != nil {
		t.Fatalf("findAndModify whose reply was lost: %v", err)
	}
	if got.N != 2 {
		t.Errorf("findAndModify whose reply was lost returned n=%d, want 2 (the first attempt's)", got.N)
	}
	var final struct {
		N int `bson:"n"`
	}
	if err := coll.FindOne(ctx, bson.D{{Key: "_id", Value: "c"}}).Decode(&final); err != nil {
		t.Fatal(err)
	}
	if final.N != 2 {
		t.Errorf("the counter is %d after two $inc of 1 whose replies were lost, want 2: a retry applied again", final.N)
	}
	if n, _ := coll.CountDocuments(ctx, bson.D{{Key: "_id", Value: "new"}}); n != 1 {
		t.Errorf("%d documents _id new, want 1", n)
	}
	if cs := rs.Counts(); cs.LostReplies != 3 || cs.Retries != 3 {
		t.Errorf("counts %+v: want 3 replies lost and 3 retries answered from the record", cs)
	}
}

// TestReplicaSetStepdown: during a stepdown hello says secondary with no primary, a
// non-retryable write gets NotWritablePrimary labelled RetryableWriteError, and a client
// whose server selection outlasts the window waits for the new primary: its retryable
// write and its read succeed once the window ends, the write applied once. After it the
// electionId is higher and topologyVersion's counter has moved.
func TestReplicaSetStepdown(t *testing.T) {
	p, rs := replicaSetProxy(t)
	patient := rsClient(t, p, 10*time.Second, nil)
	ctx := context.Background()
	coll := patient.Database("rs").Collection("docs")
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: "before"}}); err != nil {
		t.Fatal(err)
	}
	h0 := helloOf(t, patient)

	// A client that never saw the stepdown's hello meets the refusal itself: a raw
	// OP_MSG update over a connection of its own.
	const window = 2 * time.Second
	if err := rs.Stepdown(window); err != nil {
		t.Fatal(err)
	}
	started := time.Now()
	if err := rs.Stepdown(window); err == nil {
		t.Error("a second Stepdown within the window: want an error")
	}
	raw := rawCommand(t, p, bson.D{{Key: "update", Value: "docs"}, {Key: "$db", Value: "rs"},
		{Key: "updates", Value: bson.A{bson.D{{Key: "q", Value: bson.D{}}, {Key: "u", Value: bson.D{{Key: "$set", Value: bson.D{{Key: "x", Value: 1}}}}}, {Key: "multi", Value: true}}}}})
	if raw["code"] != int32(10107) || raw["codeName"] != "NotWritablePrimary" || raw["topologyVersion"] == nil {
		t.Errorf("a write during the stepdown: %v, want NotWritablePrimary with a topologyVersion", raw)
	}
	if labels, _ := raw["errorLabels"].(bson.A); len(labels) != 1 || labels[0] != "RetryableWriteError" {
		t.Errorf("a write during the stepdown: labels %v, want [RetryableWriteError]", raw["errorLabels"])
	}
	read := rawCommand(t, p, bson.D{{Key: "find", Value: "docs"}, {Key: "$db", Value: "rs"}})
	if read["code"] != int32(13435) {
		t.Errorf("a read during the stepdown: %v, want NotPrimaryNoSecondaryOk", read)
	}
	hs := rawCommand(t, p, bson.D{{Key: "hello", Value: 1}, {Key: "$db", Value: "admin"}})
	if hs["isWritablePrimary"] != false || hs["secondary"] != true || hs["primary"] != nil || hs["electionId"] != nil {
		t.Errorf("hello during the stepdown: %v, want a secondary with no primary", hs)
	}

	// The driver's own retryable write and read wait for the new primary.
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: "during"}}); err != nil {
		t.Fatalf("retryable insert across the stepdown: %v", err)
	}
	if waited := time.Since(started); waited < window-200*time.Millisecond {
		t.Errorf("the insert was answered %s into a %s stepdown: it did not wait for the primary", waited, window)
	}
	if n, err := coll.CountDocuments(ctx, bson.D{}); err != nil || n != 2 {
		t.Errorf("documents after the stepdown: %d, %v; want 2", n, err)
	}
	if waited := time.Since(started); waited > window+3*time.Second {
		t.Errorf("the wait for the new primary took %s for a %s window", waited, window)
	}

	h1 := helloOf(t, patient)
	e0, _ := h0["electionId"].(bson.ObjectID)
	e1, _ := h1["electionId"].(bson.ObjectID)
	if string(e1[:]) <= string(e0[:]) {
		t.Errorf("electionId %s after the stepdown, want above %s", e1.Hex(), e0.Hex())
	}
	c0, _ := h0["topologyVersion"].(bson.D)[1].Value.(int64)
	if c1, _ := h1["topologyVersion"].(bson.D)[1].Value.(int64); c1 <= c0 {
		t.Errorf("topologyVersion counter %d after the stepdown, want above %d", c1, c0)
	}

	// A client that gives up before the window ends gets an error, never a write applied
	// twice or a hang.
	impatient := rsClient(t, p, 500*time.Millisecond, nil)
	if err := rs.Stepdown(window); err != nil {
		t.Fatal(err)
	}
	_, err := impatient.Database("rs").Collection("docs").InsertOne(ctx, bson.D{{Key: "_id", Value: "impatient"}})
	var se mongo.ServerError
	if err == nil || !(errors.As(err, &se) && se.HasErrorCode(10107)) && !isSelectionError(err) {
		t.Errorf("insert of a client with 500 ms of server selection during a stepdown: %v, want NotWritablePrimary or a server-selection error", err)
	}
	if cs := rs.Counts(); cs.Stepdowns != 2 || cs.Refused < 2 {
		t.Errorf("counts %+v: want 2 stepdowns and the refusals", cs)
	}
}

// isSelectionError: the driver found no primary within its server selection timeout.
func isSelectionError(err error) bool { return strings.Contains(err.Error(), "server selection") }

// rawCommand sends body as an OP_MSG over a new connection to p and returns the reply's body.
func rawCommand(t *testing.T, p *wireproxy.Proxy, body bson.D) bson.M {
	t.Helper()
	conn, err := net.Dial("tcp", p.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	doc, err := bson.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Write(msg(9, 0, opMsg, 0, "\x00"+string(doc))); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	reply, err := wireproxy.ReadMessage(bufio.NewReader(conn))
	if err != nil {
		t.Fatal(err)
	}
	var out bson.M
	if err := bson.Unmarshal(reply[21:], &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestReplicaSetRetryWaitsForTheFirstAttempt: a retry that arrives while the first
// attempt is still upstream (its client gave up on the connection) waits for that
// attempt's reply and is answered with it; the write reaches the upstream once. A write
// with another txnNumber of the same session is forwarded.
func TestReplicaSetRetryWaitsForTheFirstAttempt(t *testing.T) {
	release := make(chan struct{})
	var inserts sync.Map // txnNumber -> count
	up := startFake(t, func(req []byte) [][]byte {
		body := parseMsg(t, req).body
		txn, _ := body.Lookup("txnNumber").Int64OK()
		n, _ := inserts.LoadOrStore(txn, new(atomic.Int64))
		n.(*atomic.Int64).Add(1)
		if txn == 1 {
			<-release
		}
		return [][]byte{reply(t, req, bson.D{{Key: "n", Value: int32(1)}, {Key: "ok", Value: 1.0}})}
	})
	p, err := wireproxy.ListenWith("127.0.0.1:0", up.ln.Addr().String(), wireproxy.Options{ReplicaSet: wireproxy.NewReplicaSet("rs-test")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	lsid := bson.D{{Key: "id", Value: bson.Binary{Subtype: 4, Data: []byte("0123456789abcdef")}}}
	insert := func(id, txn int64) []byte {
		return writeMsg(t, int32(id), 0, bson.D{{Key: "insert", Value: "c"}, {Key: "$db", Value: "d"},
			{Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: id}}}}, {Key: "lsid", Value: lsid}, {Key: "txnNumber", Value: txn}}, "")
	}

	first, _ := dial(t, p)
	if _, err := first.Write(insert(1, 1)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond) // the first attempt is upstream, held
	_ = first.Close()
	retry, rr := dial(t, p)
	if _, err := retry.Write(insert(2, 1)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	close(release)
	got, err := wireproxy.ReadMessage(rr)
	if err != nil {
		t.Fatalf("the retry got no reply: %v", err)
	}
	if to := binary.LittleEndian.Uint32(got[8:]); to != 2 {
		t.Errorf("the retry's reply answers request %d, want 2", to)
	}
	if b := replyBody(t, got); lookup(b, "n") != int32(1) {
		t.Errorf("the retry's reply: %v, want the first attempt's", b)
	}
	if _, err := retry.Write(insert(3, 2)); err != nil {
		t.Fatal(err)
	}
	if _, err := wireproxy.ReadMessage(rr); err != nil {
		t.Fatal(err)
	}
	for _, txn := range []int64{1, 2} {
		var got int64
		if n, ok := inserts.Load(txn); ok {
			got = n.(*atomic.Int64).Load()
		}
		if got != 1 {
			t.Errorf("txnNumber %d reached the upstream %d times, want once", txn, got)
		}
	}
}
