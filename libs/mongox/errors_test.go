package mongox_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readpref"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/topology"

	"github.com/analyticsco/platform/libs/mongox"
	"github.com/analyticsco/platform/libs/mongox/wiretest"
)

// commandError is MongoDB's reply to a command it refused.
func commandError(code int32, name, msg string, labels ...string) bson.D {
	d := bson.D{{Key: "ok", Value: 0}, {Key: "errmsg", Value: msg}, {Key: "code", Value: code}, {Key: "codeName", Value: name}}
	if len(labels) > 0 {
		a := bson.A{}
		for _, l := range labels {
			a = append(a, l)
		}
		d = append(d, bson.E{Key: "errorLabels", Value: a})
	}
	return d
}

// wcTimeout is the write concern error of a write applied on the primary but not
// replicated to a majority within wtimeout.
var wcTimeout = bson.D{{Key: "code", Value: int32(64)}, {Key: "codeName", Value: "WriteConcernFailed"},
	{Key: "errmsg", Value: "waiting for replication timed out"}, {Key: "errInfo", Value: bson.D{{Key: "wtimeout", Value: true}}}}

func dupKey(index int32) bson.D {
	return bson.D{{Key: "index", Value: index}, {Key: "code", Value: int32(11000)},
		{Key: "errmsg", Value: `E11000 duplicate key error collection: audit.audit_events index: _id_ dup key: { _id: "e1" }`}}
}

// MongoDB's own texts for the TTL index refusals, and FerretDB v1's.
const (
	msg85  = `An equivalent index already exists with the same name but different options. Requested index: { v: 2, key: { time: 1 }, name: "time_ttl", expireAfterSeconds: 86400 }, existing index: { v: 2, key: { time: 1 }, name: "time_ttl", expireAfterSeconds: 34560000 }`
	msg86  = `An existing index has the same name as the requested index. When index names are not specified, they are auto generated and can cause conflicts. Please refer to our documentation. Requested index: { v: 2, key: { purgeAt: -1 }, name: "purgeAt_1", expireAfterSeconds: 0 }, existing index: { v: 2, key: { purgeAt: 1 }, name: "purgeAt_1" }`
	msg238 = `Index option "expireAfterSeconds" is not implemented yet`
)

// The replies of the scenarios, by the collection the command names.
var replies = map[string]bson.D{
	"HostUnreachable":                 commandError(6, "HostUnreachable", "Connection refused"),
	"HostNotFound":                    commandError(7, "HostNotFound", "No host described in new configuration for replica set rs0 maps to this node"),
	"MaxTimeMSExpired":                commandError(50, "MaxTimeMSExpired", "operation exceeded time limit"),
	"WriteConcernFailed":              commandError(64, "WriteConcernFailed", "waiting for replication timed out"),
	"NetworkTimeout":                  commandError(89, "NetworkTimeout", "Timed out after 10000 ms"),
	"ShutdownInProgress":              commandError(91, "ShutdownInProgress", "The server is in quiesce mode and will shut down"),
	"PrimarySteppedDown":              commandError(189, "PrimarySteppedDown", "Primary stepped down while waiting for replication"),
	"ExceededTimeLimit":               commandError(262, "ExceededTimeLimit", "operation exceeded time limit"),
	"SocketException":                 commandError(9001, "SocketException", "socket exception [SEND_ERROR]"),
	"NotWritablePrimary":              commandError(10107, "NotWritablePrimary", "not primary"),
	"InterruptedAtShutdown":           commandError(11600, "InterruptedAtShutdown", "interrupted at shutdown"),
	"InterruptedDueToReplStateChange": commandError(11602, "InterruptedDueToReplStateChange", "operation was interrupted because a client disconnected"),
	"NotPrimaryNoSecondaryOk":         commandError(13435, "NotPrimaryNoSecondaryOk", "not primary and secondaryOk=false"),
	"NotPrimaryOrSecondary":           commandError(13436, "NotPrimaryOrSecondary", "not primary or secondary; cannot currently read from this replSet member"),
	"labelRetryableWrite":             commandError(1, "InternalError", "retry me", "RetryableWriteError"),
	"labelTransientTransaction":       commandError(112, "WriteConflict", "Write conflict during plan execution", "TransientTransactionError"),

	"BadValue":     commandError(2, "BadValue", "unknown operator: $nosuch"),
	"Unauthorized": commandError(13, "Unauthorized", "not authorized on audit to execute command { collMod: \"audit_events\" }"),
	"dupKeyCmd":    commandError(11000, "DuplicateKey", `E11000 duplicate key error collection: identity.users index: username_1 dup key: { username: "ann" }`),
	"ttl85":        commandError(85, "IndexOptionsConflict", msg85),
	"ttl86":        commandError(86, "IndexKeySpecsConflict", msg86),
	"ttl238":       commandError(238, "NotImplemented", msg238),

	"wcTimeout":       {{Key: "ok", Value: 1}, {Key: "n", Value: int32(1)}, {Key: "writeConcernError", Value: wcTimeout}},
	"wcShutdown":      {{Key: "ok", Value: 1}, {Key: "n", Value: int32(1)}, {Key: "writeConcernError", Value: bson.D{{Key: "code", Value: int32(91)}, {Key: "codeName", Value: "ShutdownInProgress"}, {Key: "errmsg", Value: "Replication is being shut down"}}}, {Key: "errorLabels", Value: bson.A{"RetryableWriteError"}}},
	"dupAndWCTimeout": {{Key: "ok", Value: 1}, {Key: "n", Value: int32(1)}, {Key: "writeErrors", Value: bson.A{dupKey(1)}}, {Key: "writeConcernError", Value: wcTimeout}},
	"dupOnly":         {{Key: "ok", Value: 1}, {Key: "n", Value: int32(1)}, {Key: "writeErrors", Value: bson.A{dupKey(1)}}},
	"writeNotPrimary": {{Key: "ok", Value: 1}, {Key: "n", Value: int32(0)}, {Key: "writeErrors", Value: bson.A{bson.D{{Key: "index", Value: int32(0)}, {Key: "code", Value: int32(10107)}, {Key: "errmsg", Value: "not primary"}}}}},
}

// answerByCollection answers a command with the reply its collection names; "drop"
// closes the connection instead (the server went away mid-command).
func answerByCollection(cmd string, body bson.Raw) (bson.D, bool) {
	coll, _ := body.Lookup(cmd).StringValueOK()
	if coll == "drop" {
		return nil, true
	}
	if r, found := replies[coll]; found {
		return r, false
	}
	return wiretest.OK, false
}

// errorOf runs op against the wire server and returns the driver's error.
func errorOf(t *testing.T, db *mongo.Database, op, coll string) error {
	t.Helper()
	ctx := t.Context() // no deadline: the driver's one retry at most, then the server's error
	c := db.Collection(coll)
	var err error
	switch op {
	case "find":
		err = c.FindOne(ctx, bson.D{}).Err()
	case "insertOne":
		_, err = c.InsertOne(ctx, bson.D{{Key: "_id", Value: "e0"}})
	case "insertMany":
		_, err = c.InsertMany(ctx, []any{bson.D{{Key: "_id", Value: "e0"}}, bson.D{{Key: "_id", Value: "e1"}}}, options.InsertMany().SetOrdered(false))
	case "update":
		_, err = c.UpdateOne(ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$set", Value: bson.D{{Key: "a", Value: 1}}}})
	case "findAndModify":
		err = c.FindOneAndUpdate(ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$set", Value: bson.D{{Key: "a", Value: 1}}}}, options.FindOneAndUpdate().SetUpsert(true)).Err()
	case "createIndex":
		_, err = c.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "time", Value: 1}}, Options: options.Index().SetName("time_ttl").SetExpireAfterSeconds(86400)})
	default:
		t.Fatalf("unknown op %s", op)
	}
	if err == nil {
		t.Fatalf("%s on %s: no error", op, coll)
	}
	return err
}

// verdict is what every classifier says of one error.
type verdict struct {
	unavailable, duplicate, onlyDuplicates bool
	ttl                                    mongox.TTLRefusal
}

func classify(err error) verdict {
	return verdict{mongox.Unavailable(err), mongox.IsDuplicateKey(err), mongox.OnlyDuplicateKeys(err), mongox.ClassifyTTLRefusal(err)}
}

// Every classifier judges the driver's own error values, built by the driver from
// MongoDB's replies (wiretest, a server answering as MongoDB does): a replica set without a
// writable primary, a stepdown, a shutdown, host and network failures, server-side time
// limits, write concern errors beside applied writes, retry labels, a dropped
// connection; and the errors that are the request's fault or a conflict, which are not
// unavailability. Each error is judged as returned, wrapped with %w, and joined.
func TestClassifiersOnTheDriversErrors(t *testing.T) {
	srv := wiretest.New(t, false, answerByCollection)
	// Without retries, each error is the reply to the command as sent.
	client, err := mongox.Connect(t.Context(), "mongodb://"+srv.Addr+"/?retryReads=false&retryWrites=false", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Disconnect(context.Background()) })
	db := client.Database("audit")

	unavailable := verdict{unavailable: true}
	cases := []struct {
		op, coll string
		want     verdict
	}{
		{"update", "NotWritablePrimary", unavailable},
		{"find", "NotPrimaryNoSecondaryOk", unavailable},
		{"find", "NotPrimaryOrSecondary", unavailable},
		{"update", "InterruptedDueToReplStateChange", unavailable},
		{"update", "InterruptedAtShutdown", unavailable},
		{"findAndModify", "PrimarySteppedDown", unavailable},
		{"update", "ShutdownInProgress", unavailable},
		{"find", "HostUnreachable", unavailable},
		{"find", "HostNotFound", unavailable},
		{"find", "NetworkTimeout", unavailable},
		{"find", "SocketException", unavailable},
		{"find", "ExceededTimeLimit", unavailable},
		{"find", "MaxTimeMSExpired", unavailable},
		{"findAndModify", "WriteConcernFailed", unavailable},
		{"update", "labelRetryableWrite", unavailable},
		{"update", "labelTransientTransaction", unavailable},
		{"insertOne", "wcTimeout", unavailable},
		{"update", "wcShutdown", unavailable},
		{"insertOne", "writeNotPrimary", unavailable},
		{"insertMany", "wcTimeout", unavailable},
		// A write concern error beside duplicate keys: not only duplicates (the
		// inserts that applied may be rolled back), and unavailable.
		{"insertMany", "dupAndWCTimeout", verdict{unavailable: true, duplicate: true}},
		{"find", "drop", unavailable},

		{"insertMany", "dupOnly", verdict{duplicate: true, onlyDuplicates: true}},
		{"insertOne", "dupOnly", verdict{duplicate: true}},
		{"findAndModify", "dupKeyCmd", verdict{duplicate: true}},
		{"find", "BadValue", verdict{}},
		{"update", "Unauthorized", verdict{}},
		// MongoDB's conflict text quotes expireAfterSeconds; the code decides.
		{"createIndex", "ttl85", verdict{ttl: mongox.TTLOptionsChanged}},
		{"createIndex", "ttl86", verdict{ttl: mongox.TTLOptionsChanged}},
		{"createIndex", "ttl238", verdict{ttl: mongox.TTLNotSupported}},
		{"createIndex", "BadValue", verdict{}},
	}
	for _, c := range cases {
		err := errorOf(t, db, c.op, c.coll)
		// (The driver itself marks a server's MaxTimeMSExpired as a deadline exceeded.)
		if errors.Is(err, context.DeadlineExceeded) && c.coll != "MaxTimeMSExpired" {
			t.Errorf("%s %s: %v: the deadline passed, the server's error was not returned", c.op, c.coll, err)
		}
		for _, e := range []error{err, fmt.Errorf("store: %w", err), errors.Join(errors.New("audit"), fmt.Errorf("insert: %w", err))} {
			if got := classify(e); got != c.want {
				t.Errorf("%s %s: %T %q: got %+v, want %+v", c.op, c.coll, err, e, got, c.want)
			}
		}
	}
	// The error types are the driver's, as the services receive them.
	var ce mongo.CommandError
	if err := errorOf(t, db, "update", "NotWritablePrimary"); !errors.As(err, &ce) || ce.Code != 10107 {
		t.Errorf("not primary on update: %T %v, want a CommandError with code 10107", err, err)
	}
	var we mongo.WriteException
	if err := errorOf(t, db, "insertOne", "wcTimeout"); !errors.As(err, &we) || we.WriteConcernError == nil || we.WriteConcernError.Code != 64 {
		t.Errorf("write concern timeout: %T %v, want a WriteException with write concern error 64", err, err)
	}
	var bwe mongo.BulkWriteException
	if err := errorOf(t, db, "insertMany", "dupAndWCTimeout"); !errors.As(err, &bwe) || bwe.WriteConcernError == nil || len(bwe.WriteErrors) != 1 {
		t.Errorf("bulk duplicate and write concern timeout: %T %v, want a BulkWriteException with both", err, err)
	}
	if err := errorOf(t, db, "find", "drop"); !mongo.IsNetworkError(err) {
		t.Errorf("dropped connection: %T %v, want the driver's network error", err, err)
	}
	if mongox.Unavailable(nil) || mongox.ClassifyTTLRefusal(nil) != mongox.TTLRefusedOther {
		t.Error("nil is classified")
	}
}

// An error that carries no server code is read by FerretDB's text, and only then.
func TestClassifyTTLRefusalText(t *testing.T) {
	for _, c := range []struct {
		err  error
		want mongox.TTLRefusal
	}{
		{errors.New(msg238), mongox.TTLNotSupported},
		{fmt.Errorf("index on audit_events: %w", errors.New(msg238)), mongox.TTLNotSupported},
		{errors.New(msg85), mongox.TTLRefusedOther},
		{errors.New("bad index key"), mongox.TTLRefusedOther},
		{mongo.CommandError{Code: 85, Message: msg85}, mongox.TTLOptionsChanged},
		{mongo.CommandError{Code: 67, Message: "expireAfterSeconds bad"}, mongox.TTLRefusedOther},
	} {
		if got := mongox.ClassifyTTLRefusal(c.err); got != c.want {
			t.Errorf("%v: %v, want %v", c.err, got, c.want)
		}
	}
}

// Every write carries majority, journaled write concern on the wire.
func TestWritesCarryMajorityJournaled(t *testing.T) {
	srv := wiretest.New(t, false, answerByCollection)
	client, err := mongox.Connect(t.Context(), "mongodb://"+srv.Addr+"/", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Disconnect(context.Background()) })
	c := client.Database("d").Collection("plain")
	ctx := t.Context()
	if _, err := c.InsertOne(ctx, bson.D{{Key: "a", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.UpdateOne(ctx, bson.D{}, bson.D{{Key: "$set", Value: bson.D{{Key: "a", Value: 2}}}}); err != nil {
		t.Fatal(err)
	}
	_ = c.FindOneAndUpdate(ctx, bson.D{}, bson.D{{Key: "$inc", Value: bson.D{{Key: "a", Value: 1}}}}).Err()
	writes := 0
	for _, cmd := range srv.Seen() {
		name := cmd.Index(0).Key()
		if name != "insert" && name != "update" && name != "findAndModify" {
			continue
		}
		writes++
		wc, _ := cmd.Lookup("writeConcern").DocumentOK()
		w, _ := wc.Lookup("w").StringValueOK()
		j, jok := wc.Lookup("j").BooleanOK()
		if w != "majority" || !jok || !j {
			t.Errorf("%s sent writeConcern %v, want {w: majority, j: true}", name, wc)
		}
	}
	if writes != 3 {
		t.Fatalf("saw %d writes, want 3", writes)
	}
}

// A call whose context has 200 ms left, on a server that is not there, returns when
// its deadline passes, not after the 15 s server selection, and is unavailable.
func TestRequestDeadlineBoundsServerSelection(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	client, err := mongox.Connect(t.Context(), "mongodb://"+addr+"/", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Disconnect(context.Background()) })
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = client.Database("d").Collection("c").InsertOne(ctx, bson.D{{Key: "a", Value: 1}})
	took := time.Since(start)
	if err == nil || !mongox.Unavailable(err) || took > time.Second {
		t.Fatalf("insert with a 200 ms deadline on no server: %v after %v, want an unavailable error within 1 s", err, took)
	}

	// A client with a short server selection of its own (not mongox's) fails with the
	// driver's server-selection error, which is unavailable too.
	short, err := mongo.Connect(options.Client().ApplyURI("mongodb://" + addr + "/").SetServerSelectionTimeout(200 * time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = short.Disconnect(context.Background()) })
	err = short.Database("d").Collection("c").FindOne(t.Context(), bson.D{}).Err()
	var sse topology.ServerSelectionError
	if !errors.As(err, &sse) || !mongox.Unavailable(err) || !mongox.Unavailable(fmt.Errorf("find: %w", err)) {
		t.Fatalf("server selection on no server: %T %v, want an unavailable ServerSelectionError", err, err)
	}
}

// During an election (a replica set with a secondary and no primary) the readiness ping
// succeeds, while a write waits for a primary and fails unavailable at its deadline.
func TestPingDoesNotNeedAPrimary(t *testing.T) {
	srv := wiretest.New(t, true, answerByCollection)
	client, err := mongox.Connect(t.Context(), "mongodb://"+srv.Addr+"/?replicaSet=rs0", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Disconnect(context.Background()) })
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	if err := mongox.Ping(client)(ctx); err != nil {
		t.Fatalf("readiness ping with a secondary and no primary: %v", err)
	}
	wctx, wcancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer wcancel()
	if err := client.Ping(wctx, readpref.Primary()); err == nil {
		t.Fatal("the wire server answered as a primary: the test proves nothing")
	}
	ictx, icancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer icancel()
	_, err = client.Database("d").Collection("c").InsertOne(ictx, bson.D{{Key: "a", Value: 1}})
	if err == nil || !mongox.Unavailable(err) {
		t.Fatalf("insert with no primary: %v, want unavailable", err)
	}
}
