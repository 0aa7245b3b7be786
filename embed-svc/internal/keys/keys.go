// Package keys manages the Ed25519 keys that sign embed tokens. Keys live in MongoDB,
// private halves encrypted with AES-256-GCM under EMBED_KEY_ENCRYPTION_KEY (a key list,
// libs/sealbox: the first seals, all open, so it can be rotated), so every replica signs
// with the same current key. Rotation never breaks a verifier: a new key
// is published (in the JWKS) for a publish delay before it starts signing, and a key
// that stopped signing stays published until the tokens it signed have expired.
package keys

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/analyticsco/platform/embed-svc/internal/embed"
	"github.com/analyticsco/platform/libs/mongox"
	"github.com/analyticsco/platform/libs/sealbox"
)

// Options configure a Keyring.
type Options struct {
	EncryptionKey string        // base64 32-byte keys, comma-separated, the sealing key first
	PublishDelay  time.Duration // how long a new key is published before it signs
	TokenLifetime time.Duration // how long a retired key stays published
	Refresh       time.Duration // how often a replica reloads the keys
	Now           func() time.Time
}

// Keyring signs with the current key and lists the published ones.
type Keyring struct {
	coll *mongo.Collection
	box  *sealbox.Box
	o    Options

	mu       sync.Mutex
	keys     []key // sorted by activation, oldest first
	loadedAt time.Time
}

type key struct {
	ID         string    `bson:"_id"`
	Public     []byte    `bson:"public"`
	Sealed     []byte    `bson:"sealed"` // sealbox(private key seed), associated data = kid
	CreatedAt  time.Time `bson:"createdAt"`
	ActivateAt time.Time `bson:"activateAt"`
	private    ed25519.PrivateKey
}

// ParseEncryptionKey checks an EMBED_KEY_ENCRYPTION_KEY key list.
func ParseEncryptionKey(s string) (*sealbox.Box, error) {
	return sealbox.Parse("EMBED_KEY_ENCRYPTION_KEY", s)
}

// New builds a keyring over coll.
func New(coll *mongo.Collection, o Options) (*Keyring, error) {
	box, err := ParseEncryptionKey(o.EncryptionKey)
	if err != nil {
		return nil, err
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.TokenLifetime <= 0 {
		o.TokenLifetime = embed.TokenLifetime
	}
	if o.Refresh <= 0 {
		o.Refresh = 30 * time.Second
	}
	return &Keyring{coll: coll, box: box, o: o}, nil
}

// KeyID derives a key id from the public key.
func KeyID(pub ed25519.PublicKey) string {
	sum := sha256.Sum256(pub)
	return base64.RawURLEncoding.EncodeToString(sum[:12])
}

func (k *Keyring) newKey(activateAt time.Time) (key, error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return key{}, err
	}
	id := KeyID(pub)
	sealed := k.box.Seal(priv.Seed(), []byte(id))
	return key{ID: id, Public: pub, Sealed: sealed, CreatedAt: k.o.Now().UTC(), ActivateAt: activateAt.UTC()}, nil
}

// Ensure loads the keys and creates a first key, active at once, when there is none:
// one read of the keyring, no count of it.
func (k *Keyring) Ensure(ctx context.Context) error {
	if err := k.reload(ctx); err != nil {
		return err
	}
	k.mu.Lock()
	n := len(k.keys)
	k.mu.Unlock()
	if n > 0 {
		return nil
	}
	nk, err := k.newKey(k.o.Now())
	if err != nil {
		return err
	}
	if _, err := k.coll.InsertOne(ctx, nk); err != nil {
		return fmt.Errorf("signing keys: %w", err)
	}
	return k.reload(ctx)
}

// Rotate adds a key that starts signing after the publish delay and drops keys whose
// tokens have all expired. It returns the new key's id.
func (k *Keyring) Rotate(ctx context.Context) (string, error) {
	now := k.o.Now()
	nk, err := k.newKey(now.Add(k.o.PublishDelay))
	if err != nil {
		return "", err
	}
	if _, err := k.coll.InsertOne(ctx, nk); err != nil {
		return "", fmt.Errorf("signing keys: %w", err)
	}
	if err := k.reload(ctx); err != nil {
		return "", err
	}
	k.mu.Lock()
	var expired []string
	for i, ky := range k.keys {
		if i+1 < len(k.keys) && !k.keys[i+1].ActivateAt.After(now) && k.keys[i+1].ActivateAt.Add(k.o.TokenLifetime).Before(now) {
			expired = append(expired, ky.ID)
		}
	}
	k.mu.Unlock()
	if len(expired) > 0 {
		if _, err := k.coll.DeleteMany(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: expired}}}}); err != nil {
			return "", fmt.Errorf("signing keys: %w", err)
		}
		if err := k.reload(ctx); err != nil {
			return "", err
		}
	}
	return nk.ID, nil
}

// ErrUnknownKey is returned by Revoke for a key id the keyring does not hold.
var ErrUnknownKey = errors.New("no signing key with this id")

// Revoke withdraws a compromised key at once, skipping the rotation's publish delay:
// a replacement key that signs from now is added, then the key is deleted, so it
// leaves the JWKS and no longer signs. Other replicas follow on their next reload
// (Refresh); the gateways refuse the key's tokens through the Redis marker the caller
// sets first (see app.RevokeSigningKey). It returns the replacement's id.
func (k *Keyring) Revoke(ctx context.Context, kid string) (string, error) {
	if err := k.reload(ctx); err != nil {
		return "", err
	}
	k.mu.Lock()
	found := false
	for _, ky := range k.keys {
		found = found || ky.ID == kid
	}
	k.mu.Unlock()
	if !found {
		return "", ErrUnknownKey
	}
	nk, err := k.newKey(k.o.Now())
	if err != nil {
		return "", err
	}
	if _, err := k.coll.InsertOne(ctx, nk); err != nil {
		return "", fmt.Errorf("signing keys: %w", err)
	}
	if _, err := k.coll.DeleteOne(ctx, bson.D{{Key: "_id", Value: kid}}); err != nil {
		return "", fmt.Errorf("signing keys: %w", err)
	}
	return nk.ID, k.reload(ctx)
}

func (k *Keyring) reload(ctx context.Context) error {
	cur, err := k.coll.Find(ctx, bson.D{}, options.Find().SetSort(bson.D{{Key: "activateAt", Value: 1}, {Key: "_id", Value: 1}}))
	if err != nil {
		return wrap(err)
	}
	var docs []key
	if err := cur.All(ctx, &docs); err != nil {
		return wrap(err)
	}
	for i := range docs {
		d := &docs[i]
		seed, err := k.box.Open(d.Sealed, []byte(d.ID))
		if err != nil || len(seed) != ed25519.SeedSize {
			return fmt.Errorf("signing key %s: cannot decrypt with any EMBED_KEY_ENCRYPTION_KEY key", d.ID)
		}
		d.private = ed25519.NewKeyFromSeed(seed)
		// Step 2 of an EMBED_KEY_ENCRYPTION_KEY rotation: a key sealed under an older
		// encryption key moves to the first one (compare-and-set: replicas racing agree).
		if out, changed, err := k.box.Reseal(d.Sealed, []byte(d.ID)); err == nil && changed {
			if _, err := k.coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: d.ID}, {Key: "sealed", Value: d.Sealed}},
				bson.D{{Key: "$set", Value: bson.D{{Key: "sealed", Value: out}}}}); err != nil {
				return wrap(err)
			}
			d.Sealed = out
		}
	}
	sort.SliceStable(docs, func(i, j int) bool { return docs[i].ActivateAt.Before(docs[j].ActivateAt) })
	k.mu.Lock()
	k.keys, k.loadedAt = docs, k.o.Now()
	k.mu.Unlock()
	return nil
}

func wrap(err error) error {
	if mongox.Unavailable(err) {
		return errors.Join(embed.ErrUnavailable, err)
	}
	return err
}

func (k *Keyring) current(ctx context.Context) ([]key, error) {
	k.mu.Lock()
	stale := k.keys == nil || k.o.Now().Sub(k.loadedAt) >= k.o.Refresh
	k.mu.Unlock()
	if stale {
		if err := k.reload(ctx); err != nil {
			k.mu.Lock()
			have := k.keys != nil
			k.mu.Unlock()
			if !have {
				return nil, err
			}
			// Keep signing with the keys we have while the database is unreachable.
		}
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.keys, nil
}

// signingKey is the newest key whose activation has come.
func signingKey(keys []key, now time.Time) (key, bool) {
	for i := len(keys) - 1; i >= 0; i-- {
		if !keys[i].ActivateAt.After(now) {
			return keys[i], true
		}
	}
	return key{}, false
}

// Sign signs claims with the current key, its id in the header.
func (k *Keyring) Sign(ctx context.Context, claims jwt.Claims) (string, error) {
	keys, err := k.current(ctx)
	if err != nil {
		return "", err
	}
	sk, ok := signingKey(keys, k.o.Now())
	if !ok {
		return "", errors.New("no active signing key: run embed-svc with a reachable database so it can create one")
	}
	tok := jwt.NewWithClaims(jwt.SigningMethodEdDSA, claims)
	tok.Header["kid"] = sk.ID
	return tok.SignedString(sk.private)
}

// JWKS lists the pending key(s), the signing key, and retired keys whose tokens may
// still be live.
func (k *Keyring) JWKS(ctx context.Context) (embed.JWKSet, error) {
	keys, err := k.current(ctx)
	if err != nil {
		return embed.JWKSet{}, err
	}
	now := k.o.Now()
	set := embed.JWKSet{Keys: []embed.JWK{}}
	for i, ky := range keys {
		if i+1 < len(keys) {
			next := keys[i+1].ActivateAt
			if !next.After(now) && next.Add(k.o.TokenLifetime).Before(now) {
				continue // stopped signing more than a token lifetime ago
			}
		}
		set.Keys = append(set.Keys, embed.JWK{Kty: "OKP", Crv: "Ed25519", X: base64.RawURLEncoding.EncodeToString(ky.Public),
			Kid: ky.ID, Use: "sig", Alg: "EdDSA"})
	}
	return set, nil
}
