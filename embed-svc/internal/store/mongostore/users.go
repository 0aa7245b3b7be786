package mongostore

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/analyticsco/platform/embed-svc/internal/embed"
	"github.com/analyticsco/platform/libs/mongox"
)

// External users: profiles, memberships and values per scope, the tenants they had
// sessions in, and the per-account counter the external-user limit is kept by.

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
	Deployments []int64                       `bson:"deployments,omitempty"`
	CreatedAt   time.Time                     `bson:"createdAt"`
	UpdatedAt   time.Time                     `bson:"updatedAt"`
}

func (d userDoc) user() embed.ExternalUser {
	u := embed.ExternalUser{ID: d.ID, AccountID: d.AccountID, ExternalID: d.ExternalID, Email: d.Email, DisplayName: d.DisplayName,
		Picture: d.Picture, Groups: d.Groups, Attributes: map[string]map[string]embed.StoredValue{}, Tenants: d.Tenants, Deployments: d.Deployments,
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
	add := bson.D{}
	if u.Tenant != "" {
		add = append(add, bson.E{Key: "tenants", Value: u.Tenant})
	}
	if u.Deployment != 0 {
		add = append(add, bson.E{Key: "deployments", Value: u.Deployment})
	}
	if len(add) > 0 {
		update = append(update, bson.E{Key: "$addToSet", Value: add})
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

// ExternalUserCount is the account's counter: the places taken under its limit, one per
// external user that exists.
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

// ListTenantUsers lists users with sessions in tenant by id, after afterID, whose
// external id starts with prefix (a range on the indexed id: no pattern is evaluated).
func (s *Store) ListTenantUsers(ctx context.Context, accountID int64, tenant, prefix string, deployments []int64, afterID int64, limit int) ([]embed.ExternalUser, error) {
	f := bson.D{{Key: "accountId", Value: accountID}, {Key: "tenants", Value: tenant}}
	if deployments != nil {
		f = append(f, bson.E{Key: "deployments", Value: bson.D{{Key: "$in", Value: deployments}}})
	}
	if prefix != "" {
		f = append(f, bson.E{Key: "externalId", Value: bson.D{{Key: "$gte", Value: prefix}, {Key: "$lt", Value: prefix + "\uffff"}}})
	}
	if afterID > 0 {
		f = append(f, bson.E{Key: "_id", Value: bson.D{{Key: "$gt", Value: afterID}}})
	}
	return findAll(ctx, s.users, f, userDoc.user, options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}).SetLimit(int64(limit)))
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
