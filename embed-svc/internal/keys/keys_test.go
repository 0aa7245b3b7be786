package keys_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/analyticsco/platform/devstack"
	"github.com/analyticsco/platform/devstack/mongoplan"
	"github.com/analyticsco/platform/embed-svc/internal/keys"
	"github.com/analyticsco/platform/libs/mongox"
)

// EMBED_KEY_ENCRYPTION_KEY rotates without downtime: with the new key
// listed first, loading the keyring re-seals the signing keys under it, after which a
// process holding only the new key signs with the same keys.
func TestEncryptionKeyRotation(t *testing.T) {
	ctx := context.Background()
	coll := signingKeys(t)
	oldKey := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{1}, 32))
	newKey := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{2}, 32))
	ring := func(list string) (*keys.Keyring, error) {
		kr, err := keys.New(coll, keys.Options{EncryptionKey: list, PublishDelay: time.Minute})
		if err != nil {
			return nil, err
		}
		return kr, kr.Ensure(ctx)
	}
	before, err := ring(oldKey)
	if err != nil {
		t.Fatal(err)
	}
	kid := signingKID(t, before)
	if _, err := ring(newKey); err == nil || !strings.Contains(err.Error(), "cannot decrypt") {
		t.Fatalf("a key list without the sealing key loaded the keyring: %v", err)
	}
	if _, err := ring(newKey + "," + oldKey); err != nil {
		t.Fatalf("rotation step 2: %v", err)
	}
	after, err := ring(newKey)
	if err != nil {
		t.Fatalf("only the new key after re-sealing: %v", err)
	}
	if got := signingKID(t, after); got != kid {
		t.Fatalf("signing key changed with the encryption key: %s, want %s", got, kid)
	}
	if _, err := ring(oldKey); err == nil {
		t.Fatal("the old encryption key still opens the re-sealed signing key")
	}
	n, _ := coll.CountDocuments(ctx, bson.D{})
	if n != 1 {
		t.Fatalf("%d signing keys, want the one (re-sealing must not add keys)", n)
	}
}

// signingKeys is a keyring's collection in a database of the test's own, on a FerretDB of
// its own; every query the keyring sends it is held against its indexes at the end.
func signingKeys(t *testing.T) *mongo.Collection {
	t.Helper()
	m := devstack.MongoForTest(t)
	plan := mongoplan.NewRecorder()
	client, err := mongox.ConnectWith(context.Background(), m.URI, mongox.ConnectOptions{Observe: plan.Observe})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Disconnect(context.Background()) })
	db := client.Database(devstack.UniqueName(t, "embedkeys"))
	t.Cleanup(func() { plan.Check(t, db, keyringRead); plan.CheckAllowancesUsed(t, keyringRead) })
	return db.Collection("signing_keys")
}

// keyringRead is the keyring's one read of its whole collection, allowed: every key, a
// handful at most (a rotation deletes the keys whose tokens have all expired), in
// activation order, on every reload.
var keyringRead = mongoplan.Allowance{Func: "keys.(*Keyring).reload", Collection: "signing_keys",
	Reason: "the keyring is a handful of keys, read whole on every reload"}

// signingKID is the kid a token signed by kr names.
func signingKID(t *testing.T, kr *keys.Keyring) string {
	t.Helper()
	tok, err := kr.Sign(context.Background(), jwt.MapClaims{"sub": "x"})
	if err != nil {
		t.Fatal(err)
	}
	parsed, _, err := jwt.NewParser().ParseUnverified(tok, jwt.MapClaims{})
	if err != nil {
		t.Fatal(err)
	}
	kid, _ := parsed.Header["kid"].(string)
	return kid
}
