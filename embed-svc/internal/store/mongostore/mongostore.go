// Package mongostore keeps embed-svc's durable records in MongoDB: embed tenants,
// group and attribute definitions (account-wide scope "_" or an embed tenant's scope),
// external users with their memberships and attribute values, the per-account
// external-user counter, and the account-wide embed settings. It also reads internal
// users from the gateway's identity database, read-only.
//
// Everything relies only on single-document atomicity (conditional updates,
// findAndModify, unique indexes), which MongoDB and FerretDB behind our proxy both give.
package mongostore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/analyticsco/platform/libs/httpx"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/analyticsco/platform/embed-svc/internal/embed"
	"github.com/analyticsco/platform/libs/mongox"
)

// Store implements embed.CatalogStore and embed.UserStore.
type Store struct {
	tenants     *mongo.Collection
	defs        *mongo.Collection
	users       *mongo.Collection
	counters    *mongo.Collection
	settings    *mongo.Collection
	identity    *mongo.Collection
	externalIDs *mongox.IDAllocator
	sessions    *mongo.Collection
	retention   time.Duration
	sweep       atomic.Bool // the database has no TTL indexes: Sweep removes purged records
}

// New uses db for embed-svc's records and identityDB's users collection for internal users.
func New(db, identityDB *mongo.Database) *Store {
	counters := db.Collection("counters")
	return &Store{
		tenants: db.Collection("tenants"), defs: db.Collection("definitions"), users: db.Collection("external_users"),
		counters: counters, settings: db.Collection("account_settings"), identity: identityDB.Collection("users"),
		externalIDs: mongox.NewIDAllocator(counters, "external_user_ids", 20),
		sessions:    db.Collection("sessions"), retention: embed.DefaultSessionRetention,
	}
}

// WithSessionRetention sets how long a session's record stays after its token expires.
func (s *Store) WithSessionRetention(d time.Duration) *Store {
	if d > 0 {
		s.retention = d
	}
	return s
}

// EnsureIndexes creates the unique indexes the store's guarantees rest on.
func (s *Store) EnsureIndexes(ctx context.Context) error {
	for _, ix := range []struct {
		coll *mongo.Collection
		keys bson.D
	}{
		{s.defs, bson.D{{Key: "accountId", Value: 1}, {Key: "scope", Value: 1}, {Key: "kind", Value: 1}, {Key: "name", Value: 1}}},
		{s.users, bson.D{{Key: "accountId", Value: 1}, {Key: "externalId", Value: 1}}},
		{s.sessions, bson.D{{Key: "sid", Value: 1}}},
	} {
		if _, err := ix.coll.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: ix.keys, Options: options.Index().SetUnique(true)}); err != nil {
			return fmt.Errorf("index on %s: %w", ix.coll.Name(), wrap(err))
		}
	}
	// Listing is by account, newest first. Records go when purgeAt passes: by a TTL index
	// where the database has them (MongoDB), else by Sweep (FerretDB v1 has no TTL
	// indexes); the queries ignore purged records either way.
	if _, err := s.sessions.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "accountId", Value: 1}, {Key: "createdAt", Value: -1}, {Key: "_id", Value: -1}}}); err != nil {
		return fmt.Errorf("index on sessions: %w", wrap(err))
	}
	_, err := s.sessions.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "purgeAt", Value: 1}}, Options: options.Index().SetExpireAfterSeconds(0)})
	if err != nil && strings.Contains(err.Error(), "expireAfterSeconds") {
		s.sweep.Store(true)
		_, err = s.sessions.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "purgeAt", Value: 1}}})
	}
	if err != nil {
		return fmt.Errorf("index on sessions: %w", wrap(err))
	}
	return nil
}

func wrap(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, mongo.ErrNoDocuments):
		return embed.ErrNotFound
	case mongox.IsDuplicateKey(err):
		return errors.Join(embed.ErrDuplicate, err)
	case mongox.Unavailable(err):
		return errors.Join(embed.ErrUnavailable, err)
	}
	return err
}

// ---------------------------------------------------------------- settings, tenants

// AccountSettings returns the account-wide embed settings (zero when none are set).
func (s *Store) AccountSettings(ctx context.Context, accountID int64) (embed.AccountSettings, error) {
	var out embed.AccountSettings
	err := s.settings.FindOne(ctx, bson.D{{Key: "_id", Value: accountID}}).Decode(&out)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return embed.AccountSettings{}, nil
	}
	return out, wrap(err)
}

// SetAccountSettings replaces the account-wide embed settings (the operator CLI).
func (s *Store) SetAccountSettings(ctx context.Context, accountID int64, v embed.AccountSettings) error {
	_, err := s.settings.ReplaceOne(ctx, bson.D{{Key: "_id", Value: accountID}}, v, options.Replace().SetUpsert(true))
	return wrap(err)
}

func tenantID(accountID int64, name string) string {
	return strconv.FormatInt(accountID, 10) + "/" + name
}

// EnsureTenant records the tenant (idempotent) and reports whether this call created it.
func (s *Store) EnsureTenant(ctx context.Context, accountID int64, tenant string) (bool, error) {
	res, err := s.tenants.UpdateOne(ctx, bson.D{{Key: "_id", Value: tenantID(accountID, tenant)}},
		bson.D{{Key: "$setOnInsert", Value: bson.D{{Key: "accountId", Value: accountID}, {Key: "name", Value: tenant}, {Key: "createdAt", Value: time.Now().UTC()}}}},
		options.UpdateOne().SetUpsert(true))
	if mongox.IsDuplicateKey(err) {
		return false, nil // a concurrent mint recorded it
	}
	if err != nil {
		return false, wrap(err)
	}
	return res.UpsertedCount == 1, nil
}

// RemoveTenantRecord deletes the record of a tenant that has nothing else stored.
func (s *Store) RemoveTenantRecord(ctx context.Context, accountID int64, tenant string) error {
	_, err := s.tenants.DeleteOne(ctx, bson.D{{Key: "_id", Value: tenantID(accountID, tenant)}})
	return wrap(err)
}

// TenantExists reports whether the account has used the tenant.
func (s *Store) TenantExists(ctx context.Context, accountID int64, tenant string) (bool, error) {
	err := s.tenants.FindOne(ctx, bson.D{{Key: "_id", Value: tenantID(accountID, tenant)}}).Err()
	if errors.Is(err, mongo.ErrNoDocuments) {
		return false, nil
	}
	return err == nil, wrap(err)
}

// CountTenants counts the account's embed tenants, stopping at max.
func (s *Store) CountTenants(ctx context.Context, accountID int64, max int64) (int64, error) {
	n, err := s.tenants.CountDocuments(ctx, bson.D{{Key: "accountId", Value: accountID}}, options.Count().SetLimit(max))
	return n, wrap(err)
}

// CountDefinitions counts the definitions of both kinds in scope, stopping at max.
func (s *Store) CountDefinitions(ctx context.Context, accountID int64, scope string, max int64) (int64, error) {
	n, err := s.defs.CountDocuments(ctx, bson.D{{Key: "accountId", Value: accountID}, {Key: "scope", Value: scope}}, options.Count().SetLimit(max))
	return n, wrap(err)
}

// ---------------------------------------------------------------- definitions

type defDoc struct {
	ID           bson.ObjectID `bson:"_id"`
	AccountID    int64         `bson:"accountId"`
	Scope        string        `bson:"scope"`
	Kind         string        `bson:"kind"`
	Name         string        `bson:"name"`
	Type         string        `bson:"type,omitempty"`
	DisplayName  *string       `bson:"displayName,omitempty"`
	DefaultValue *string       `bson:"defaultValue,omitempty"`
	Description  *string       `bson:"description,omitempty"`
	CreatedAt    time.Time     `bson:"createdAt"`
	UpdatedAt    time.Time     `bson:"updatedAt"`
}

func (d defDoc) definition() embed.Definition {
	return embed.Definition{ID: d.ID.Hex(), AccountID: d.AccountID, Scope: d.Scope, Kind: d.Kind, Name: d.Name, Type: d.Type,
		DisplayName: d.DisplayName, DefaultValue: d.DefaultValue, Description: d.Description, CreatedAt: httpx.At(d.CreatedAt), UpdatedAt: httpx.At(d.UpdatedAt)}
}

// FindDefinitions returns the scope's definitions (both kinds) named in names.
func (s *Store) FindDefinitions(ctx context.Context, accountID int64, scope string, names []string) ([]embed.Definition, error) {
	cur, err := s.defs.Find(ctx, bson.D{{Key: "accountId", Value: accountID}, {Key: "scope", Value: scope}, {Key: "name", Value: bson.D{{Key: "$in", Value: names}}}})
	if err != nil {
		return nil, wrap(err)
	}
	var docs []defDoc
	if err := cur.All(ctx, &docs); err != nil {
		return nil, wrap(err)
	}
	out := make([]embed.Definition, len(docs))
	for i, d := range docs {
		out[i] = d.definition()
	}
	return out, nil
}

// UpsertDefinition creates the definition, or updates the supplied fields that differ.
func (s *Store) UpsertDefinition(ctx context.Context, accountID int64, scope string, u embed.DefinitionUpsert, now time.Time) (embed.Definition, error) {
	in := u.Input
	if u.Existing == nil {
		doc := defDoc{ID: bson.NewObjectID(), AccountID: accountID, Scope: scope, Kind: u.Kind, Name: in.Name, Type: in.Type,
			DisplayName: in.DisplayName, DefaultValue: in.DefaultValue, Description: in.Description, CreatedAt: now, UpdatedAt: now}
		_, err := s.defs.InsertOne(ctx, doc)
		if err == nil {
			return doc.definition(), nil
		}
		if !mongox.IsDuplicateKey(err) {
			return embed.Definition{}, wrap(err)
		}
		// A concurrent request created it first: update that one instead.
		var ex defDoc
		if err := s.defs.FindOne(ctx, bson.D{{Key: "accountId", Value: accountID}, {Key: "scope", Value: scope}, {Key: "kind", Value: u.Kind}, {Key: "name", Value: in.Name}}).Decode(&ex); err != nil {
			return embed.Definition{}, wrap(err)
		}
		if u.Kind == embed.KindAttribute && ex.Type != in.Type {
			return embed.Definition{}, embed.ErrConflictType
		}
		d := ex.definition()
		u.Existing = &d
	}
	d := *u.Existing
	set := bson.D{{Key: "updatedAt", Value: now}}
	apply := func(field string, supplied *string, stored **string) {
		if supplied != nil && (*stored == nil || **stored != *supplied) {
			set = append(set, bson.E{Key: field, Value: *supplied})
			v := *supplied
			*stored = &v
		}
	}
	apply("description", in.Description, &d.Description)
	apply("displayName", in.DisplayName, &d.DisplayName)
	apply("defaultValue", in.DefaultValue, &d.DefaultValue)
	if len(set) == 1 {
		return d, nil
	}
	oid, _ := bson.ObjectIDFromHex(d.ID)
	if _, err := s.defs.UpdateOne(ctx, bson.D{{Key: "_id", Value: oid}}, bson.D{{Key: "$set", Value: set}}); err != nil {
		return embed.Definition{}, wrap(err)
	}
	d.UpdatedAt = httpx.At(now)
	return d, nil
}

// CreateDefinition inserts a new definition; embed.ErrDuplicate when the name is taken.
func (s *Store) CreateDefinition(ctx context.Context, d embed.Definition) (embed.Definition, error) {
	doc := defDoc{ID: bson.NewObjectID(), AccountID: d.AccountID, Scope: d.Scope, Kind: d.Kind, Name: d.Name, Type: d.Type,
		DisplayName: d.DisplayName, DefaultValue: d.DefaultValue, Description: d.Description, CreatedAt: d.CreatedAt.Time, UpdatedAt: d.UpdatedAt.Time}
	if _, err := s.defs.InsertOne(ctx, doc); err != nil {
		return embed.Definition{}, wrap(err)
	}
	return doc.definition(), nil
}

// ListDefinitions returns up to q.First definitions after q.After (an id), in id order,
// and whether more follow.
func (s *Store) ListDefinitions(ctx context.Context, accountID int64, q embed.ListQuery) ([]embed.Definition, bool, error) {
	filter := bson.D{{Key: "accountId", Value: accountID}, {Key: "scope", Value: q.Scope}, {Key: "kind", Value: q.Kind}}
	if q.After != "" {
		oid, err := bson.ObjectIDFromHex(q.After)
		if err != nil {
			return nil, false, embed.ErrBadCursor
		}
		filter = append(filter, bson.E{Key: "_id", Value: bson.D{{Key: "$gt", Value: oid}}})
	}
	cur, err := s.defs.Find(ctx, filter, options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}).SetLimit(int64(q.First)+1))
	if err != nil {
		return nil, false, wrap(err)
	}
	var docs []defDoc
	if err := cur.All(ctx, &docs); err != nil {
		return nil, false, wrap(err)
	}
	more := len(docs) > q.First
	if more {
		docs = docs[:q.First]
	}
	out := make([]embed.Definition, len(docs))
	for i, d := range docs {
		out[i] = d.definition()
	}
	return out, more, nil
}

// DeleteDefinition removes the definition, then every membership or value using it.
func (s *Store) DeleteDefinition(ctx context.Context, accountID int64, scope, kind, id string) error {
	oid, err := bson.ObjectIDFromHex(id)
	if err != nil {
		return embed.ErrNotFound
	}
	res, err := s.defs.DeleteOne(ctx, bson.D{{Key: "_id", Value: oid}, {Key: "accountId", Value: accountID}, {Key: "scope", Value: scope}, {Key: "kind", Value: kind}})
	if err != nil {
		return wrap(err)
	}
	if res.DeletedCount == 0 {
		return embed.ErrNotFound
	}
	field := "groups." + scope + "." + id
	if kind == embed.KindAttribute {
		field = "attrs." + scope + "." + id
	}
	_, err = s.users.UpdateMany(ctx, bson.D{{Key: "accountId", Value: accountID}, {Key: field, Value: bson.D{{Key: "$exists", Value: true}}}},
		bson.D{{Key: "$unset", Value: bson.D{{Key: field, Value: ""}}}})
	return wrap(err)
}

// ---------------------------------------------------------------- users

type attrDoc struct {
	Name  string `bson:"name"`
	Value any    `bson:"value"`
}

type userDoc struct {
	ID          int64                         `bson:"_id"`
	AccountID   int64                         `bson:"accountId"`
	ExternalID  string                        `bson:"externalId"`
	Email       *string                       `bson:"email,omitempty"`
	DisplayName *string                       `bson:"displayName,omitempty"`
	Picture     *string                       `bson:"picture,omitempty"`
	Groups      map[string]map[string]string  `bson:"groups,omitempty"`
	Attrs       map[string]map[string]attrDoc `bson:"attrs,omitempty"`
	Tenants     []string                      `bson:"tenants,omitempty"`
	CreatedAt   time.Time                     `bson:"createdAt"`
	UpdatedAt   time.Time                     `bson:"updatedAt"`
}

func (d userDoc) user() embed.ExternalUser {
	u := embed.ExternalUser{ID: d.ID, AccountID: d.AccountID, ExternalID: d.ExternalID, Email: d.Email, DisplayName: d.DisplayName,
		Picture: d.Picture, Groups: d.Groups, Attributes: map[string]map[string]embed.StoredValue{}, Tenants: d.Tenants,
		CreatedAt: d.CreatedAt, UpdatedAt: d.UpdatedAt}
	for scope, vals := range d.Attrs {
		m := make(map[string]embed.StoredValue, len(vals))
		for id, v := range vals {
			raw, err := json.Marshal(v.Value)
			if err != nil {
				continue
			}
			m[id] = embed.StoredValue{Name: v.Name, Value: raw}
		}
		u.Attributes[scope] = m
	}
	return u
}

// userSet is the $set/$unset of one mint's changes to a user.
func userSet(u embed.UserUpdate, now time.Time) (bson.D, error) {
	set := bson.D{{Key: "updatedAt", Value: now}}
	if u.Email != nil {
		set = append(set, bson.E{Key: "email", Value: *u.Email})
	}
	if u.DisplayName != nil {
		set = append(set, bson.E{Key: "displayName", Value: *u.DisplayName})
	}
	if u.Picture != nil {
		set = append(set, bson.E{Key: "picture", Value: *u.Picture})
	}
	if u.Groups != nil {
		set = append(set, bson.E{Key: "groups." + u.Scope, Value: u.Groups})
	}
	for id, v := range u.SetAttributes {
		var val any
		if err := json.Unmarshal(v.Value, &val); err != nil {
			return nil, err
		}
		set = append(set, bson.E{Key: "attrs." + u.Scope + "." + id, Value: attrDoc{Name: v.Name, Value: val}})
	}
	update := bson.D{{Key: "$set", Value: set}}
	if u.Tenant != "" {
		update = append(update, bson.E{Key: "$addToSet", Value: bson.D{{Key: "tenants", Value: u.Tenant}}})
	}
	if len(u.ClearAttributes) > 0 {
		unset := bson.D{}
		for _, id := range u.ClearAttributes {
			unset = append(unset, bson.E{Key: "attrs." + u.Scope + "." + id, Value: ""})
		}
		update = append(update, bson.E{Key: "$unset", Value: unset})
	}
	return update, nil
}

func userFilter(accountID int64, externalID string) bson.D {
	return bson.D{{Key: "accountId", Value: accountID}, {Key: "externalId", Value: externalID}}
}

// ExternalUser reads one user.
func (s *Store) ExternalUser(ctx context.Context, accountID int64, externalID string) (embed.ExternalUser, error) {
	var doc userDoc
	if err := s.users.FindOne(ctx, userFilter(accountID, externalID)).Decode(&doc); err != nil {
		return embed.ExternalUser{}, wrap(err)
	}
	return doc.user(), nil
}

// UpdateExternalUser applies u to a known user in one findAndModify.
func (s *Store) UpdateExternalUser(ctx context.Context, accountID int64, externalID string, u embed.UserUpdate, now time.Time) (embed.ExternalUser, error) {
	update, err := userSet(u, now)
	if err != nil {
		return embed.ExternalUser{}, err
	}
	var doc userDoc
	err = s.users.FindOneAndUpdate(ctx, userFilter(accountID, externalID), update, options.FindOneAndUpdate().SetReturnDocument(options.After)).Decode(&doc)
	if err != nil {
		return embed.ExternalUser{}, wrap(err)
	}
	return doc.user(), nil
}

func counterID(accountID int64) string { return "external_users:" + strconv.FormatInt(accountID, 10) }

// CreateExternalUser reserves a place under the account's limit with a conditional
// increment before inserting, so concurrent mints never overshoot; a place reserved
// for a user that a concurrent mint created first is given back.
func (s *Store) CreateExternalUser(ctx context.Context, accountID int64, externalID string, limit int64, u embed.UserUpdate, now time.Time) (embed.ExternalUser, error) {
	if err := s.reservePlace(ctx, accountID, limit); err != nil {
		return embed.ExternalUser{}, err
	}
	release := func() {
		_, _ = s.counters.UpdateOne(context.WithoutCancel(ctx), bson.D{{Key: "_id", Value: counterID(accountID)}},
			bson.D{{Key: "$inc", Value: bson.D{{Key: "count", Value: int64(-1)}}}})
	}
	id, err := s.externalIDs.Next(ctx)
	if err != nil {
		release()
		return embed.ExternalUser{}, wrap(err)
	}
	update, err := userSet(u, now)
	if err != nil {
		release()
		return embed.ExternalUser{}, err
	}
	update = append(update, bson.E{Key: "$setOnInsert", Value: bson.D{{Key: "_id", Value: id}, {Key: "createdAt", Value: now}}})
	var doc userDoc
	err = s.users.FindOneAndUpdate(ctx, userFilter(accountID, externalID), update,
		options.FindOneAndUpdate().SetUpsert(true).SetReturnDocument(options.After)).Decode(&doc)
	if mongox.IsDuplicateKey(err) {
		// Two upserts raced; the other inserted the user, so this is an update.
		release()
		return s.UpdateExternalUser(ctx, accountID, externalID, u, now)
	}
	if err != nil {
		release()
		return embed.ExternalUser{}, wrap(err)
	}
	if doc.ID != id {
		release()
	}
	return doc.user(), nil
}

// reservePlace increments the account's counter only while it is under limit. When
// the counter is at the limit the upsert tries to insert a second document with the
// same _id and fails with a duplicate key; so does the loser of two concurrent first
// upserts, which is why a duplicate key is retried once before it means "limit".
func (s *Store) reservePlace(ctx context.Context, accountID, limit int64) error {
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		err = s.counters.FindOneAndUpdate(ctx,
			bson.D{{Key: "_id", Value: counterID(accountID)}, {Key: "count", Value: bson.D{{Key: "$lt", Value: limit}}}},
			bson.D{{Key: "$inc", Value: bson.D{{Key: "count", Value: int64(1)}}}},
			options.FindOneAndUpdate().SetUpsert(true)).Err()
		if err == nil || errors.Is(err, mongo.ErrNoDocuments) {
			return nil
		}
		if !mongox.IsDuplicateKey(err) {
			return wrap(err)
		}
		n, cerr := s.ExternalUserCount(ctx, accountID)
		if cerr != nil {
			return cerr
		}
		if n >= limit {
			return embed.ErrLimitReached
		}
	}
	return embed.ErrLimitReached
}

// ExternalUserCount is the account's counter (tests and the operator CLI).
func (s *Store) ExternalUserCount(ctx context.Context, accountID int64) (int64, error) {
	var doc struct {
		Count int64 `bson:"count"`
	}
	err := s.counters.FindOne(ctx, bson.D{{Key: "_id", Value: counterID(accountID)}}).Decode(&doc)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return 0, nil
	}
	return doc.Count, wrap(err)
}

// InternalUser reads a user of the gateway's identity store.
func (s *Store) InternalUser(ctx context.Context, accountID int64, username string) (embed.InternalUser, error) {
	var doc struct {
		ID        int64  `bson:"_id"`
		AccountID int64  `bson:"accountId"`
		Username  string `bson:"username"`
		Email     string `bson:"email"`
		FirstName string `bson:"firstName"`
		Picture   string `bson:"picture"`
		Role      string `bson:"role"`
	}
	err := s.identity.FindOne(ctx, bson.D{{Key: "accountId", Value: accountID}, {Key: "username", Value: username}}).Decode(&doc)
	if err != nil {
		return embed.InternalUser{}, wrap(err)
	}
	return embed.InternalUser{ID: doc.ID, AccountID: doc.AccountID, Username: doc.Username, Email: doc.Email,
		FirstName: doc.FirstName, Picture: doc.Picture, Role: doc.Role}, nil
}

// ---------------------------------------------------------------- session records

type sessionDoc struct {
	ID           string    `bson:"_id"`
	AccountID    int64     `bson:"accountId"`
	SID          string    `bson:"sid"`
	Tenant       string    `bson:"tenant"`
	UserKind     string    `bson:"userKind"`
	UserID       int64     `bson:"userId"`
	ExternalID   *string   `bson:"externalId,omitempty"`
	Username     *string   `bson:"username,omitempty"`
	DeploymentID int64     `bson:"deploymentId"`
	Branch       string    `bson:"branch"`
	CreatedAt    time.Time `bson:"createdAt"`
	PendingUntil time.Time `bson:"pendingUntil"`
	ExpiresAt    time.Time `bson:"expiresAt"`
	PurgeAt      time.Time `bson:"purgeAt"`
}

func (d sessionDoc) record() embed.SessionRecord {
	return embed.SessionRecord{ID: d.ID, AccountID: d.AccountID, SID: d.SID, Tenant: d.Tenant,
		User:         embed.SessionRecordUser{Kind: d.UserKind, ID: d.UserID, ExternalID: d.ExternalID, Username: d.Username},
		DeploymentID: d.DeploymentID, Branch: d.Branch, CreatedAt: d.CreatedAt.UTC(), PendingUntil: d.PendingUntil.UTC(), ExpiresAt: d.ExpiresAt.UTC()}
}

// InsertSessionRecord stores a minted session's record; it is never updated.
func (s *Store) InsertSessionRecord(ctx context.Context, r embed.SessionRecord) error {
	d := sessionDoc{ID: r.ID, AccountID: r.AccountID, SID: r.SID, Tenant: r.Tenant, UserKind: r.User.Kind, UserID: r.User.ID,
		ExternalID: r.User.ExternalID, Username: r.User.Username, DeploymentID: r.DeploymentID, Branch: r.Branch,
		CreatedAt: r.CreatedAt, PendingUntil: r.PendingUntil, ExpiresAt: r.ExpiresAt, PurgeAt: r.ExpiresAt.Add(s.retention)}
	_, err := s.sessions.InsertOne(ctx, d)
	return wrap(err)
}

// SessionRecordBySID reads a session's record by its sid (the unique index on sid).
func (s *Store) SessionRecordBySID(ctx context.Context, sid string) (embed.SessionRecord, error) {
	var d sessionDoc
	if err := s.sessions.FindOne(ctx, bson.D{{Key: "sid", Value: sid}}).Decode(&d); err != nil {
		return embed.SessionRecord{}, wrap(err)
	}
	return d.record(), nil
}

// Sweep removes purged session records once a minute until ctx ends, where the database
// has no TTL indexes (FerretDB); on MongoDB the TTL index does it and Sweep only waits.
func (s *Store) Sweep(ctx context.Context) {
	t := time.NewTicker(time.Minute)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			if s.sweep.Load() {
				wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
				_, _ = s.sessions.DeleteMany(wctx, bson.D{{Key: "purgeAt", Value: bson.D{{Key: "$lte", Value: now}}}})
				cancel()
			}
		}
	}
}

// sessionFilter is the query of q for the account at now. A state is narrowed by time
// only (what the record knows): the service tells revoked, active and pending apart
// with Redis.
func sessionFilter(accountID int64, q embed.SessionQuery, now time.Time) bson.D {
	f := bson.D{{Key: "accountId", Value: accountID}, {Key: "purgeAt", Value: bson.D{{Key: "$gt", Value: now}}}}
	if q.ID != "" {
		f = append(f, bson.E{Key: "_id", Value: q.ID})
	}
	if q.DeploymentID > 0 {
		f = append(f, bson.E{Key: "deploymentId", Value: q.DeploymentID})
	}
	if q.Tenant != "" {
		f = append(f, bson.E{Key: "tenant", Value: q.Tenant})
	}
	if q.ExternalID != "" {
		f = append(f, bson.E{Key: "userKind", Value: "external"}, bson.E{Key: "externalId", Value: q.ExternalID})
	}
	if q.InternalID != "" {
		f = append(f, bson.E{Key: "userKind", Value: "internal"}, bson.E{Key: "username", Value: q.InternalID})
	}
	switch q.State {
	case embed.StateActive, embed.StateRevoked:
		f = append(f, bson.E{Key: "expiresAt", Value: bson.D{{Key: "$gt", Value: now}}})
	case embed.StatePending:
		f = append(f, bson.E{Key: "pendingUntil", Value: bson.D{{Key: "$gt", Value: now}}})
	}
	if !q.After.IsZero() {
		f = append(f, bson.E{Key: "$or", Value: bson.A{
			bson.D{{Key: "createdAt", Value: bson.D{{Key: "$lt", Value: q.After.CreatedAt}}}},
			bson.D{{Key: "createdAt", Value: q.After.CreatedAt}, {Key: "_id", Value: bson.D{{Key: "$lt", Value: q.After.ID}}}},
		}})
	}
	return f
}

// ListSessionRecords returns up to limit matching records, newest first.
func (s *Store) ListSessionRecords(ctx context.Context, accountID int64, q embed.SessionQuery, now time.Time, limit int) ([]embed.SessionRecord, error) {
	cur, err := s.sessions.Find(ctx, sessionFilter(accountID, q, now),
		options.Find().SetSort(bson.D{{Key: "createdAt", Value: -1}, {Key: "_id", Value: -1}}).SetLimit(int64(limit)))
	if err != nil {
		return nil, wrap(err)
	}
	var docs []sessionDoc
	if err := cur.All(ctx, &docs); err != nil {
		return nil, wrap(err)
	}
	out := make([]embed.SessionRecord, len(docs))
	for i, d := range docs {
		out[i] = d.record()
	}
	return out, nil
}

// EachRevocable iterates the matching records whose token has not expired, in batches,
// by a cursor over the few fields a revocation needs.
func (s *Store) EachRevocable(ctx context.Context, accountID int64, q embed.SessionQuery, now time.Time, batch int, fn func([]embed.SessionRecord) error) error {
	q.State = ""
	f := append(sessionFilter(accountID, q, now), bson.E{Key: "expiresAt", Value: bson.D{{Key: "$gt", Value: now}}})
	cur, err := s.sessions.Find(ctx, f, options.Find().SetProjection(bson.D{{Key: "_id", Value: 1}, {Key: "sid", Value: 1}}).SetBatchSize(int32(batch)))
	if err != nil {
		return wrap(err)
	}
	defer cur.Close(ctx)
	recs := make([]embed.SessionRecord, 0, batch)
	for cur.Next(ctx) {
		var d struct {
			ID  string `bson:"_id"`
			SID string `bson:"sid"`
		}
		if err := cur.Decode(&d); err != nil {
			return err
		}
		recs = append(recs, embed.SessionRecord{ID: d.ID, SID: d.SID, AccountID: accountID})
		if len(recs) == batch {
			if err := fn(recs); err != nil {
				return err
			}
			recs = recs[:0]
		}
	}
	if err := cur.Err(); err != nil {
		return wrap(err)
	}
	if len(recs) > 0 {
		return fn(recs)
	}
	return nil
}

// ListTenantUsers lists users with sessions in tenant by id, after afterID, whose
// external id starts with prefix (a range on the indexed id: no pattern is evaluated).
func (s *Store) ListTenantUsers(ctx context.Context, accountID int64, tenant, prefix string, afterID int64, limit int) ([]embed.ExternalUser, error) {
	f := bson.D{{Key: "accountId", Value: accountID}, {Key: "tenants", Value: tenant}}
	if prefix != "" {
		f = append(f, bson.E{Key: "externalId", Value: bson.D{{Key: "$gte", Value: prefix}, {Key: "$lt", Value: prefix + "\uffff"}}})
	}
	if afterID > 0 {
		f = append(f, bson.E{Key: "_id", Value: bson.D{{Key: "$gt", Value: afterID}}})
	}
	cur, err := s.users.Find(ctx, f, options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}).SetLimit(int64(limit)))
	if err != nil {
		return nil, wrap(err)
	}
	var docs []userDoc
	if err := cur.All(ctx, &docs); err != nil {
		return nil, wrap(err)
	}
	out := make([]embed.ExternalUser, len(docs))
	for i, d := range docs {
		out[i] = d.user()
	}
	return out, nil
}

// DeleteExternalUser deletes the user and, only when it deleted one, gives its place
// under the limit back: the counter never drops below the users that exist.
func (s *Store) DeleteExternalUser(ctx context.Context, accountID int64, externalID string) (bool, error) {
	res, err := s.users.DeleteOne(ctx, userFilter(accountID, externalID))
	if err != nil {
		return false, wrap(err)
	}
	if res.DeletedCount == 0 {
		return false, nil
	}
	_, err = s.counters.UpdateOne(ctx, bson.D{{Key: "_id", Value: counterID(accountID)}, {Key: "count", Value: bson.D{{Key: "$gt", Value: 0}}}},
		bson.D{{Key: "$inc", Value: bson.D{{Key: "count", Value: int64(-1)}}}})
	return true, wrap(err)
}
