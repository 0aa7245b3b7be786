// Package store is the gateway's identity store in MongoDB: accounts, deployments,
// users and API keys. Only a SHA-256 hash of an API key's secret is stored.
package store

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"regexp"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/analyticsco/platform/gateway/internal/ratelimit"
	"github.com/analyticsco/platform/libs/identity"
	"github.com/analyticsco/platform/libs/mongox"
)

// Sentinel errors; the transport maps them to status codes.
var (
	ErrNotFound = errors.New("not found")
	ErrConflict = errors.New("already exists")
	ErrInvalid  = errors.New("invalid")
)

// Plans.
const (
	PlanFree       = "free"
	PlanPremium    = "premium"
	PlanEnterprise = "enterprise"
)

// DefaultExternalUserLimit is the external-user limit of a new account.
const DefaultExternalUserLimit = 10000

// Account is a customer account.
type Account struct {
	ID                 int64  `bson:"_id" json:"id"`
	Name               string `bson:"name" json:"name"`
	Plan               string `bson:"plan" json:"plan"`
	EmbeddingEnabled   bool   `bson:"embeddingEnabled" json:"embeddingEnabled"`
	UseCreatorMode     bool   `bson:"useCreatorMode" json:"useCreatorMode"`
	DefaultEmbedTenant string `bson:"defaultEmbedTenant" json:"defaultEmbedTenant"`
	ExternalUserLimit  int64  `bson:"externalUserLimit" json:"externalUserLimit"`
	// RateLimit overrides the plan's request budget of the account, as N/window (e.g.
	// 5000/1m); "": the plan's (RATE_LIMIT_PLAN_*). It is the gateway's alone: services
	// never see it.
	RateLimit string    `bson:"rateLimit,omitempty" json:"rateLimit,omitempty"`
	CreatedAt time.Time `bson:"createdAt" json:"createdAt"`
	UpdatedAt time.Time `bson:"updatedAt" json:"updatedAt"`
}

// Identity returns what services see of the account.
func (a Account) Identity() identity.Account {
	return identity.Account{ID: a.ID, Plan: a.Plan, EmbeddingEnabled: a.EmbeddingEnabled, UseCreatorMode: a.UseCreatorMode,
		DefaultEmbedTenant: a.DefaultEmbedTenant, ExternalUserLimit: a.ExternalUserLimit}
}

// Deployment belongs to one account.
type Deployment struct {
	ID               int64     `bson:"_id" json:"id"`
	AccountID        int64     `bson:"accountId" json:"accountId"`
	Name             string    `bson:"name" json:"name"`
	ProductionBranch string    `bson:"productionBranch" json:"productionBranch"`
	CreatedAt        time.Time `bson:"createdAt" json:"createdAt"`
	UpdatedAt        time.Time `bson:"updatedAt" json:"updatedAt"`
}

// User is an internal user of one account.
type User struct {
	ID        int64  `bson:"_id" json:"id"`
	AccountID int64  `bson:"accountId" json:"accountId"`
	Username  string `bson:"username" json:"username"`
	Email     string `bson:"email" json:"email"`
	FirstName string `bson:"firstName" json:"firstName"`
	Picture   string `bson:"picture" json:"picture"`
	Role      string `bson:"role" json:"role"`
	// Kind is UserService for a service account (no person, no login); empty for a
	// person.
	Kind string `bson:"kind,omitempty" json:"kind,omitempty"`
	// Name is a service account's display name.
	Name string `bson:"name,omitempty" json:"name,omitempty"`
	// CreatedBy is the user who created a service account (0: platformctl).
	CreatedBy int64 `bson:"createdBy,omitempty" json:"createdBy,omitempty"`
	// DeletedAt marks a deleted service account: kept so the change poller sees the
	// deletion (updatedAt) and every cache drops it; it authenticates nothing.
	DeletedAt *time.Time `bson:"deletedAt,omitempty" json:"deletedAt,omitempty"`
	CreatedAt time.Time  `bson:"createdAt" json:"createdAt"`
	UpdatedAt time.Time  `bson:"updatedAt" json:"updatedAt"`
}

// UserService is the kind of a service account's user record.
const UserService = "service"

// IsService reports whether u is a service account.
func (u User) IsService() bool { return u.Kind == UserService }

// Identity returns what services see of the user.
func (u User) Identity() *identity.User {
	return &identity.User{ID: u.ID, Username: u.Username, Email: u.Email, FirstName: u.FirstName, Picture: u.Picture, Role: u.Role}
}

// APIKey is an API key's record; the secret itself is never stored.
type APIKey struct {
	ID        string `bson:"_id" json:"id"`
	AccountID int64  `bson:"accountId" json:"accountId"`
	// OwnerType is who the key acts for (UserID): OwnerUser or OwnerServiceAccount; empty
	// in records written before owners had a type, which are a user's.
	OwnerType  string  `bson:"ownerType,omitempty" json:"ownerType,omitempty"`
	UserID     int64   `bson:"userId" json:"userId"`
	Kind       string  `bson:"kind" json:"kind"`
	Name       string  `bson:"name" json:"name"`
	Scope      []int64 `bson:"scope" json:"scope"`
	SecretHash []byte  `bson:"secretHash" json:"-"`
	// PrevSecretHash is the secret a rotation replaced: it still authenticates until
	// PrevSecretUntil, then never again.
	PrevSecretHash  []byte     `bson:"prevSecretHash,omitempty" json:"-"`
	PrevSecretUntil *time.Time `bson:"prevSecretUntil,omitempty" json:"-"`
	CreatedAt       time.Time  `bson:"createdAt" json:"createdAt"`
	UpdatedAt       time.Time  `bson:"updatedAt" json:"updatedAt"`
	ExpiresAt       *time.Time `bson:"expiresAt,omitempty" json:"expiresAt,omitempty"`
	RevokedAt       *time.Time `bson:"revokedAt,omitempty" json:"revokedAt,omitempty"`
	RotatedAt       *time.Time `bson:"rotatedAt,omitempty" json:"rotatedAt,omitempty"`
	// LastUsedAt is written by the gateways' flush of their in-memory marks, without
	// touching UpdatedAt (it is no change a cache must see).
	LastUsedAt *time.Time `bson:"lastUsedAt,omitempty" json:"lastUsedAt,omitempty"`
}

// Owner types of a key: a person of its account, or one of its service accounts.
const (
	OwnerUser           = "user"
	OwnerServiceAccount = "serviceAccount"
)

// Authenticates reports whether hash is the key's secret, or the secret a rotation
// replaced while its overlap lasts, compared in constant time.
func (k APIKey) Authenticates(hash []byte, now time.Time) bool {
	if subtle.ConstantTimeCompare(hash, k.SecretHash) == 1 {
		return true
	}
	return k.PrevSecretUntil != nil && now.Before(*k.PrevSecretUntil) && subtle.ConstantTimeCompare(hash, k.PrevSecretHash) == 1
}

// Store is the identity store.
type Store struct {
	db           *mongo.Database
	accounts     *mongo.Collection
	deployments  *mongo.Collection
	users        *mongo.Collection
	keys         *mongo.Collection
	saSecrets    *mongo.Collection
	accountIDs   *mongox.IDAllocator
	deploymentID *mongox.IDAllocator
	userIDs      *mongox.IDAllocator
	now          func() time.Time
}

// New returns a store on db.
func New(db *mongo.Database) *Store {
	counters := db.Collection("counters")
	return &Store{
		db:           db,
		accounts:     db.Collection("accounts"),
		deployments:  db.Collection("deployments"),
		users:        db.Collection("users"),
		keys:         db.Collection("api_keys"),
		saSecrets:    db.Collection("service_account_secrets"),
		accountIDs:   mongox.NewIDAllocator(counters, "accounts", 1),
		deploymentID: mongox.NewIDAllocator(counters, "deployments", 1),
		userIDs:      mongox.NewIDAllocator(counters, "users", 1),
		now:          func() time.Time { return time.Now().UTC().Truncate(time.Millisecond) },
	}
}

// EnsureIndexes creates the unique indexes the store relies on.
func (s *Store) EnsureIndexes(ctx context.Context) error {
	unique := options.Index().SetUnique(true)
	for _, ix := range []struct {
		c    *mongo.Collection
		keys bson.D
	}{
		{s.accounts, bson.D{{Key: "name", Value: 1}}},
		{s.users, bson.D{{Key: "username", Value: 1}}},
		{s.deployments, bson.D{{Key: "accountId", Value: 1}, {Key: "name", Value: 1}}},
	} {
		if _, err := ix.c.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: ix.keys, Options: unique}); err != nil {
			return fmt.Errorf("create index on %s: %w", ix.c.Name(), err)
		}
	}
	// The change poller of every gateway replica asks each of these for recent updates
	// every second: an index keeps that a range read, not a scan.
	// An account's keys are listed and counted by account.
	if _, err := s.keys.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "accountId", Value: 1}, {Key: "_id", Value: 1}}}); err != nil {
		return fmt.Errorf("create accountId index on %s: %w", s.keys.Name(), err)
	}
	// A service account's secrets are listed and counted by service account, and the
	// service accounts of an account by account and kind.
	if _, err := s.saSecrets.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "userId", Value: 1}, {Key: "_id", Value: 1}}}); err != nil {
		return fmt.Errorf("create userId index on %s: %w", s.saSecrets.Name(), err)
	}
	if _, err := s.users.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "accountId", Value: 1}, {Key: "kind", Value: 1}, {Key: "_id", Value: 1}}}); err != nil {
		return fmt.Errorf("create accountId index on %s: %w", s.users.Name(), err)
	}
	for _, c := range []*mongo.Collection{s.accounts, s.users, s.deployments, s.keys} {
		if _, err := c.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "updatedAt", Value: 1}}}); err != nil {
			return fmt.Errorf("create updatedAt index on %s: %w", c.Name(), err)
		}
	}
	return nil
}

// WithClock returns the store stamping updatedAt with now: a writer on another host
// (platformctl runs anywhere) whose clock differs from the gateway's.
func (s *Store) WithClock(now func() time.Time) *Store {
	c := *s
	c.now = now
	return &c
}

// Database is the identity store's database (the gateway's audit outbox lives there).
func (s *Store) Database() *mongo.Database { return s.db }

// Ping checks the database.
func (s *Store) Ping(ctx context.Context) error { return s.db.Client().Ping(ctx, nil) }

// embedTenantName is embed-svc's rule for tenant names (the spec's embedTenantName).
var embedTenantName = regexp.MustCompile(`^[a-z][a-z0-9-]{3,34}[a-z0-9]$`)

// AccountSpec describes an account to create or update by name.
type AccountSpec struct {
	Name               string
	Plan               string
	EmbeddingEnabled   bool
	UseCreatorMode     bool
	DefaultEmbedTenant string
	ExternalUserLimit  int64
	// RateLimit is the account's own request budget, N/window ("": its plan's).
	RateLimit string
}

// UpsertAccount creates the account named spec.Name or updates its settings.
func (s *Store) UpsertAccount(ctx context.Context, spec AccountSpec) (Account, error) {
	switch spec.Plan {
	case PlanFree, PlanPremium, PlanEnterprise:
	default:
		return Account{}, fmt.Errorf("%w: plan must be free, premium or enterprise", ErrInvalid)
	}
	if spec.Name == "" {
		return Account{}, fmt.Errorf("%w: account name is required", ErrInvalid)
	}
	if spec.ExternalUserLimit <= 0 {
		spec.ExternalUserLimit = DefaultExternalUserLimit
	}
	if spec.DefaultEmbedTenant == "" {
		spec.DefaultEmbedTenant = "default"
	}
	if !embedTenantName.MatchString(spec.DefaultEmbedTenant) {
		// embed-svc uses it as a scope and inside MongoDB field paths.
		return Account{}, fmt.Errorf("%w: default embed tenant %q is invalid: lowercase, 5 to 36 characters, starting with a letter, ending with a letter or digit, only a-z, 0-9 and -", ErrInvalid, spec.DefaultEmbedTenant)
	}
	if _, err := ratelimit.ParseLimit(spec.RateLimit); err != nil {
		return Account{}, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	id, err := s.accountIDs.Next(ctx)
	if err != nil {
		return Account{}, err
	}
	now := s.now()
	var a Account
	err = s.accounts.FindOneAndUpdate(ctx, bson.D{{Key: "name", Value: spec.Name}}, bson.D{
		{Key: "$set", Value: bson.D{
			{Key: "plan", Value: spec.Plan}, {Key: "embeddingEnabled", Value: spec.EmbeddingEnabled},
			{Key: "useCreatorMode", Value: spec.UseCreatorMode}, {Key: "defaultEmbedTenant", Value: spec.DefaultEmbedTenant},
			{Key: "externalUserLimit", Value: spec.ExternalUserLimit}, {Key: "rateLimit", Value: spec.RateLimit}, {Key: "updatedAt", Value: now},
		}},
		{Key: "$setOnInsert", Value: bson.D{{Key: "_id", Value: id}, {Key: "createdAt", Value: now}}},
	}, options.FindOneAndUpdate().SetUpsert(true).SetReturnDocument(options.After)).Decode(&a)
	return a, wrap(err)
}

// UpsertDeployment creates the deployment named name in the account, or updates it.
func (s *Store) UpsertDeployment(ctx context.Context, accountID int64, name, productionBranch string) (Deployment, error) {
	if name == "" || productionBranch == "" {
		return Deployment{}, fmt.Errorf("%w: deployment name and production branch are required", ErrInvalid)
	}
	if _, err := s.Account(ctx, accountID); err != nil {
		return Deployment{}, err
	}
	id, err := s.deploymentID.Next(ctx)
	if err != nil {
		return Deployment{}, err
	}
	now := s.now()
	var d Deployment
	err = s.deployments.FindOneAndUpdate(ctx, bson.D{{Key: "accountId", Value: accountID}, {Key: "name", Value: name}}, bson.D{
		{Key: "$set", Value: bson.D{{Key: "productionBranch", Value: productionBranch}, {Key: "updatedAt", Value: now}}},
		{Key: "$setOnInsert", Value: bson.D{{Key: "_id", Value: id}, {Key: "createdAt", Value: now}}},
	}, options.FindOneAndUpdate().SetUpsert(true).SetReturnDocument(options.After)).Decode(&d)
	return d, wrap(err)
}

// UserSpec describes a user to create or update by username.
type UserSpec struct {
	AccountID int64
	Username  string
	Email     string
	FirstName string
	Picture   string
	Role      string
}

// UpsertUser creates the user with spec.Username in the account, or updates it. A
// username belongs to one account: reusing another account's username is a conflict
// (ErrConflict) and changes nothing. An existing user of the account is updated by
// {username, accountId}; a new one is created by an upsert on the unique key alone,
// {username}, with every field set only on insert: MongoDB retries on the server an
// upsert whose filter is exactly a unique key, so two first creations of one username
// both get the one user instead of a duplicate key error, and a match in another
// account is left as it was and refused.
func (s *Store) UpsertUser(ctx context.Context, spec UserSpec) (User, error) {
	if !identity.ValidRole(spec.Role) {
		return User{}, fmt.Errorf("%w: role must be viewer, ai_bi_user, developer or admin", ErrInvalid)
	}
	if spec.Username == "" || spec.Email == "" {
		return User{}, fmt.Errorf("%w: username and email are required", ErrInvalid)
	}
	if _, err := s.Account(ctx, spec.AccountID); err != nil {
		return User{}, err
	}
	now := s.now()
	fields := bson.D{
		{Key: "email", Value: spec.Email}, {Key: "firstName", Value: spec.FirstName}, {Key: "picture", Value: spec.Picture},
		{Key: "role", Value: spec.Role}, {Key: "updatedAt", Value: now},
	}
	after := options.FindOneAndUpdate().SetReturnDocument(options.After)
	for attempt := 1; ; attempt++ {
		var u User
		err := s.users.FindOneAndUpdate(ctx, bson.D{{Key: "username", Value: spec.Username}, {Key: "accountId", Value: spec.AccountID}},
			bson.D{{Key: "$set", Value: fields}}, after).Decode(&u)
		if !errors.Is(err, mongo.ErrNoDocuments) || attempt == 2 {
			return u, wrap(err)
		}
		id, err := s.userIDs.Next(ctx)
		if err != nil {
			return User{}, err
		}
		insert := append(bson.D{{Key: "_id", Value: id}, {Key: "accountId", Value: spec.AccountID}, {Key: "createdAt", Value: now}}, fields...)
		err = s.users.FindOneAndUpdate(ctx, bson.D{{Key: "username", Value: spec.Username}}, bson.D{{Key: "$setOnInsert", Value: insert}},
			options.FindOneAndUpdate().SetUpsert(true).SetReturnDocument(options.After)).Decode(&u)
		switch {
		case err != nil:
			return User{}, wrap(err)
		case u.AccountID != spec.AccountID:
			return User{}, fmt.Errorf("%w: username %q belongs to another account", ErrConflict, spec.Username)
		case u.ID == id:
			return u, nil
		}
		// Another caller created the user in this account since the update missed:
		// this caller's fields go on it as an update.
	}
}

// InsertAPIKey stores a new key record.
func (s *Store) InsertAPIKey(ctx context.Context, k APIKey) error {
	now := s.now()
	k.CreatedAt, k.UpdatedAt = now, now
	if k.Scope == nil {
		k.Scope = []int64{}
	}
	_, err := s.keys.InsertOne(ctx, k)
	return wrap(err)
}

// DeleteAPIKey removes a key record: only a key just created over the account's bound,
// whose secret nobody was given.
func (s *Store) DeleteAPIKey(ctx context.Context, keyID string) error {
	_, err := s.keys.DeleteOne(ctx, bson.D{{Key: "_id", Value: keyID}})
	return wrap(err)
}

// RevokeAPIKey marks a key revoked; revoking twice is a no-op.
func (s *Store) RevokeAPIKey(ctx context.Context, keyID string) error {
	now := s.now()
	res, err := s.keys.UpdateOne(ctx, bson.D{{Key: "_id", Value: keyID}, {Key: "revokedAt", Value: nil}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "revokedAt", Value: now}, {Key: "updatedAt", Value: now}}}})
	if err != nil {
		return wrap(err)
	}
	if res.MatchedCount == 0 {
		if _, err := s.APIKey(ctx, keyID); err != nil {
			return err
		}
	}
	return nil
}

// RotateAPIKey gives an unrevoked key a new secret hash; the current one keeps
// authenticating until overlapUntil (a rotation during an overlap ends the older
// secret's at once). It returns the record as it now is; ErrNotFound when there is no
// key id, ErrConflict when the key is revoked.
func (s *Store) RotateAPIKey(ctx context.Context, keyID string, newHash []byte, overlapUntil time.Time) (APIKey, error) {
	for attempt := 1; ; attempt++ {
		k, err := s.APIKey(ctx, keyID)
		if err != nil {
			return APIKey{}, err
		}
		if k.RevokedAt != nil {
			return APIKey{}, fmt.Errorf("%w: key %s is revoked", ErrConflict, keyID)
		}
		now := s.now()
		// The filter names the secret read: a rotation racing this one makes it miss, and
		// it is read and applied again, so no secret is lost between two rotations.
		res, err := s.keys.UpdateOne(ctx, bson.D{{Key: "_id", Value: keyID}, {Key: "revokedAt", Value: nil}, {Key: "secretHash", Value: k.SecretHash}},
			bson.D{{Key: "$set", Value: bson.D{
				{Key: "prevSecretHash", Value: k.SecretHash}, {Key: "prevSecretUntil", Value: overlapUntil},
				{Key: "secretHash", Value: newHash}, {Key: "rotatedAt", Value: now}, {Key: "updatedAt", Value: now},
			}}})
		if err != nil {
			return APIKey{}, wrap(err)
		}
		if res.MatchedCount == 1 {
			k.PrevSecretHash, k.PrevSecretUntil, k.SecretHash, k.RotatedAt, k.UpdatedAt = k.SecretHash, &overlapUntil, newHash, &now, now
			return k, nil
		}
		if attempt == 3 {
			return APIKey{}, fmt.Errorf("%w: key %s changed during the rotation; retry", ErrConflict, keyID)
		}
	}
}

// APIKeys returns the account's keys by id, those revoked before revokedSince left out.
func (s *Store) APIKeys(ctx context.Context, accountID int64, revokedSince time.Time) ([]APIKey, error) {
	cur, err := s.keys.Find(ctx, bson.D{{Key: "accountId", Value: accountID}, {Key: "$or", Value: bson.A{
		bson.D{{Key: "revokedAt", Value: nil}}, bson.D{{Key: "revokedAt", Value: bson.D{{Key: "$gte", Value: revokedSince}}}},
	}}}, options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}))
	if err != nil {
		return nil, wrap(err)
	}
	out := []APIKey{}
	return out, wrap(cur.All(ctx, &out))
}

// CountLiveAPIKeys counts the account's keys neither revoked nor expired at now.
func (s *Store) CountLiveAPIKeys(ctx context.Context, accountID int64, now time.Time) (int64, error) {
	n, err := s.keys.CountDocuments(ctx, bson.D{{Key: "accountId", Value: accountID}, {Key: "revokedAt", Value: nil}, {Key: "$or", Value: bson.A{
		bson.D{{Key: "expiresAt", Value: nil}}, bson.D{{Key: "expiresAt", Value: bson.D{{Key: "$gt", Value: now}}}},
	}}})
	return n, wrap(err)
}

// MarkAPIKeysUsed raises the lastUsedAt of each key to its time (never lowers it: two
// gateways flush in any order). UpdatedAt is left alone: no cache needs to reload a key
// for it.
func (s *Store) MarkAPIKeysUsed(ctx context.Context, used map[string]time.Time) error {
	if len(used) == 0 {
		return nil
	}
	models := make([]mongo.WriteModel, 0, len(used))
	for id, at := range used {
		models = append(models, mongo.NewUpdateOneModel().SetFilter(bson.D{{Key: "_id", Value: id}}).
			SetUpdate(bson.D{{Key: "$max", Value: bson.D{{Key: "lastUsedAt", Value: at.UTC().Truncate(time.Millisecond)}}}}))
	}
	_, err := s.keys.BulkWrite(ctx, models, options.BulkWrite().SetOrdered(false))
	return wrap(err)
}

// Account returns an account by id.
func (s *Store) Account(ctx context.Context, id int64) (Account, error) {
	var a Account
	return a, wrap(s.accounts.FindOne(ctx, bson.D{{Key: "_id", Value: id}}).Decode(&a))
}

// AccountByName returns an account by name.
func (s *Store) AccountByName(ctx context.Context, name string) (Account, error) {
	var a Account
	return a, wrap(s.accounts.FindOne(ctx, bson.D{{Key: "name", Value: name}}).Decode(&a))
}

// Deployment returns a deployment by id.
func (s *Store) Deployment(ctx context.Context, id int64) (Deployment, error) {
	var d Deployment
	return d, wrap(s.deployments.FindOne(ctx, bson.D{{Key: "_id", Value: id}}).Decode(&d))
}

// Deployments returns an account's deployments by id.
func (s *Store) Deployments(ctx context.Context, accountID int64) ([]Deployment, error) {
	cur, err := s.deployments.Find(ctx, bson.D{{Key: "accountId", Value: accountID}}, options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}))
	if err != nil {
		return nil, wrap(err)
	}
	var out []Deployment
	return out, wrap(cur.All(ctx, &out))
}

// User returns a user by id.
func (s *Store) User(ctx context.Context, id int64) (User, error) {
	var u User
	return u, wrap(s.users.FindOne(ctx, bson.D{{Key: "_id", Value: id}}).Decode(&u))
}

// UserByUsername returns a user of the account by username.
func (s *Store) UserByUsername(ctx context.Context, accountID int64, username string) (User, error) {
	var u User
	return u, wrap(s.users.FindOne(ctx, bson.D{{Key: "accountId", Value: accountID}, {Key: "username", Value: username}, {Key: "deletedAt", Value: nil}}).Decode(&u))
}

// APIKey returns a key record by id.
func (s *Store) APIKey(ctx context.Context, id string) (APIKey, error) {
	var k APIKey
	return k, wrap(s.keys.FindOne(ctx, bson.D{{Key: "_id", Value: id}}).Decode(&k))
}

// Changes lists what changed at or after since, so caches can evict it.
type Changes struct {
	Keys        []string
	Users       []int64
	Accounts    []int64
	Deployments []int64
}

// ChangedSince returns the ids of records updated at or after since.
func (s *Store) ChangedSince(ctx context.Context, since time.Time) (Changes, error) {
	var ch Changes
	filter := bson.D{{Key: "updatedAt", Value: bson.D{{Key: "$gte", Value: since}}}}
	proj := options.Find().SetProjection(bson.D{{Key: "_id", Value: 1}})
	var strIDs []struct {
		ID string `bson:"_id"`
	}
	cur, err := s.keys.Find(ctx, filter, proj)
	if err == nil {
		err = cur.All(ctx, &strIDs)
	}
	if err != nil {
		return ch, wrap(err)
	}
	for _, d := range strIDs {
		ch.Keys = append(ch.Keys, d.ID)
	}
	for _, c := range []struct {
		coll *mongo.Collection
		dst  *[]int64
	}{{s.users, &ch.Users}, {s.accounts, &ch.Accounts}, {s.deployments, &ch.Deployments}} {
		var ids []struct {
			ID int64 `bson:"_id"`
		}
		cur, err := c.coll.Find(ctx, filter, proj)
		if err == nil {
			err = cur.All(ctx, &ids)
		}
		if err != nil {
			return ch, wrap(err)
		}
		for _, d := range ids {
			*c.dst = append(*c.dst, d.ID)
		}
	}
	return ch, nil
}

func wrap(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, mongo.ErrNoDocuments):
		return ErrNotFound
	case mongo.IsDuplicateKeyError(err):
		return fmt.Errorf("%w: %v", ErrConflict, err)
	case mongox.Unavailable(err):
		return fmt.Errorf("%w: %v", mongox.ErrUnavailable, err)
	}
	return err
}
