package mongostore

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
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
	ID          int64                        `bson:"_id"`
	AccountID   int64                        `bson:"accountId"`
	ExternalID  string                       `bson:"externalId"`
	Email       *string                      `bson:"email,omitempty"`
	DisplayName *string                      `bson:"displayName,omitempty"`
	Picture     *string                      `bson:"picture,omitempty"`
	Groups      map[string]map[string]string `bson:"groups,omitempty"`
	// Memberships are embed.MembershipKey of every membership in groups, all scopes:
	// the multikey field a group's members are listed by (groups is keyed by definition
	// id, which no index can name). Written with groups; users stored before it get it
	// from BackfillMemberships.
	Memberships *[]string                     `bson:"memberships,omitempty"`
	Attrs       map[string]map[string]attrDoc `bson:"attrs,omitempty"`
	Tenants     []string                      `bson:"tenants,omitempty"`
	Deployments []int64                       `bson:"deployments,omitempty"`
	// AttrBytes is the size of all values (embed.ValueBytes); absent on users stored
	// before it was kept, and after a definition's delete removed values: a read counts it.
	AttrBytes  *int64     `bson:"attrBytes,omitempty"`
	Rev        int64      `bson:"rev,omitempty"` // absent (0) on users stored before revisions
	DeletingAt *time.Time `bson:"deletingAt,omitempty"`
	CreatedAt  time.Time  `bson:"createdAt"`
	UpdatedAt  time.Time  `bson:"updatedAt"`
}

func (d userDoc) user() embed.ExternalUser {
	u := embed.ExternalUser{ID: d.ID, AccountID: d.AccountID, ExternalID: d.ExternalID, Email: d.Email, DisplayName: d.DisplayName,
		Picture: d.Picture, Groups: d.Groups, Attributes: map[string]map[string]embed.StoredValue{}, Tenants: d.Tenants, Deployments: d.Deployments,
		Rev: d.Rev, Deleting: d.DeletingAt != nil, CreatedAt: d.CreatedAt, UpdatedAt: d.UpdatedAt}
	if d.AttrBytes != nil {
		u.AttributeBytes = *d.AttrBytes
	}
	if d.Memberships != nil {
		u.Memberships = *d.Memberships
	}
	for scope, vals := range d.Attrs {
		u.Attributes[scope] = storedValues(vals)
	}
	return u
}

func storedValues(vals map[string]attrDoc) map[string]embed.StoredValue {
	m := make(map[string]embed.StoredValue, len(vals))
	for id, v := range vals {
		raw, err := json.Marshal(v.Value)
		if err != nil {
			continue
		}
		m[id] = embed.StoredValue{Name: v.Name, Value: raw}
	}
	return m
}

// profileFields are a user's fields besides its memberships and values: what a listing
// reads.
var profileFields = []string{"_id", "accountId", "externalId", "email", "displayName", "picture", "tenants", "deployments", "attrBytes", "rev",
	"deletingAt", "createdAt", "updatedAt"}

// profileProjection reads a user as a listing shows it.
func profileProjection() bson.D {
	p := make(bson.D, 0, len(profileFields))
	for _, f := range profileFields {
		p = append(p, bson.E{Key: f, Value: 1})
	}
	return p
}

// userProjection reads a user with the memberships and values of scopes only (and the
// keys of all its memberships, which an update of a scope's groups rewrites): a user's
// other scopes are never read (scope names are validated tenant names or "_").
func userProjection(scopes ...string) bson.D {
	p := append(profileProjection(), bson.E{Key: "memberships", Value: 1})
	for _, sc := range scopes {
		p = append(p, bson.E{Key: "groups." + sc, Value: 1}, bson.E{Key: "attrs." + sc, Value: 1})
	}
	return p
}

// userSet is the update of one mint's changes to a user, which moves it to its next
// revision.
func userSet(u embed.UserUpdate, now time.Time) (bson.D, error) {
	set := bson.D{{Key: "updatedAt", Value: now}, {Key: "attrBytes", Value: u.AttributeBytes}}
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
		keys := u.Memberships
		if keys == nil {
			keys = []string{}
		}
		set = append(set, bson.E{Key: "groups." + u.Scope, Value: u.Groups}, bson.E{Key: "memberships", Value: keys})
	}
	for id, v := range u.SetAttributes {
		doc, err := attrOf(v)
		if err != nil {
			return nil, err
		}
		set = append(set, bson.E{Key: "attrs." + u.Scope + "." + id, Value: doc})
	}
	update := bson.D{{Key: "$set", Value: set}, {Key: "$inc", Value: bson.D{{Key: "rev", Value: int64(1)}}}}
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

func attrOf(v embed.StoredValue) (attrDoc, error) {
	var val any
	if err := json.Unmarshal(v.Value, &val); err != nil {
		return attrDoc{}, err
	}
	return attrDoc{Name: v.Name, Value: val}, nil
}

func userFilter(accountID int64, externalID string) bson.D {
	return bson.D{{Key: "accountId", Value: accountID}, {Key: "externalId", Value: externalID}}
}

// atRev matches a user at revision rev (0: stored before revisions were kept) that no
// delete has begun on.
func atRev(f bson.D, rev int64) bson.D {
	f = append(f, bson.E{Key: "deletingAt", Value: bson.D{{Key: "$exists", Value: false}}})
	if rev == 0 {
		return append(f, bson.E{Key: "rev", Value: bson.D{{Key: "$exists", Value: false}}})
	}
	return append(f, bson.E{Key: "rev", Value: rev})
}

// ExternalUser reads one user with the memberships and values of scopes. The size of
// its values is counted from all of them when the user does not keep it.
func (s *Store) ExternalUser(ctx context.Context, accountID int64, externalID string, scopes ...string) (embed.ExternalUser, error) {
	var doc userDoc
	if err := s.users.FindOne(ctx, userFilter(accountID, externalID), options.FindOne().SetProjection(userProjection(scopes...))).Decode(&doc); err != nil {
		return embed.ExternalUser{}, wrap(err)
	}
	u := doc.user()
	if doc.AttrBytes == nil {
		var all struct {
			Attrs map[string]map[string]attrDoc `bson:"attrs"`
		}
		err := s.users.FindOne(ctx, bson.D{{Key: "_id", Value: doc.ID}}, options.FindOne().SetProjection(bson.D{{Key: "attrs", Value: 1}})).Decode(&all)
		if err != nil {
			return embed.ExternalUser{}, wrap(err)
		}
		for _, vals := range all.Attrs {
			for _, v := range storedValues(vals) {
				u.AttributeBytes += embed.ValueBytes(v.Value)
			}
		}
	}
	return u, nil
}

// UpdateExternalUser applies u to the user at revision rev in one update (the user is
// not read back: the caller knows what it is now). With u.Within, the update is made on
// a user within it only: its deployments are read, checked, and the update's filter
// names them, so a deployment added in between makes it match nothing. (FerretDB's
// $elemMatch matches the array as a whole, so "no element outside within" cannot be
// said in the filter itself.)
func (s *Store) UpdateExternalUser(ctx context.Context, accountID int64, externalID string, u embed.UserUpdate, rev int64, now time.Time) error {
	update, err := userSet(u, now)
	if err != nil {
		return err
	}
	f := atRev(userFilter(accountID, externalID), rev)
	if u.Within != nil {
		var cur userDoc
		err := s.users.FindOne(ctx, f, options.FindOne().SetProjection(bson.D{{Key: "deployments", Value: 1}})).Decode(&cur)
		switch {
		case errors.Is(err, mongo.ErrNoDocuments):
			return s.whyNotUpdated(ctx, accountID, externalID, u.Within)
		case err != nil:
			return wrap(err)
		case !within(cur.Deployments, u.Within):
			return embed.ErrOutOfReach
		}
		f = sameDeployments(f, cur.Deployments)
	}
	res, err := s.users.UpdateOne(ctx, f, update)
	if err != nil {
		return wrap(err)
	}
	if res.MatchedCount == 0 {
		return s.whyNotUpdated(ctx, accountID, externalID, u.Within)
	}
	return nil
}

// whyNotUpdated is the error of an update that matched nothing: the user is gone, being
// deleted, out of reach (within, when not nil), or at another revision.
func (s *Store) whyNotUpdated(ctx context.Context, accountID int64, externalID string, reach []int64) error {
	var cur userDoc
	err := s.users.FindOne(ctx, userFilter(accountID, externalID),
		options.FindOne().SetProjection(bson.D{{Key: "_id", Value: 1}, {Key: "deletingAt", Value: 1}, {Key: "deployments", Value: 1}})).Decode(&cur)
	switch {
	case err != nil:
		return wrap(err)
	case cur.DeletingAt != nil:
		return embed.ErrUserDeleting
	case reach != nil && !within(cur.Deployments, reach):
		return embed.ErrOutOfReach
	}
	return embed.ErrStale
}

// sameDeployments matches a user whose deployments are deps, in any order (they are a
// set: $addToSet keeps them).
func sameDeployments(f bson.D, deps []int64) bson.D {
	return append(f, bson.E{Key: "deployments", Value: bson.D{{Key: "$size", Value: len(deps)}, {Key: "$all", Value: deps}}})
}

// within reports whether deps has at least one deployment and none outside reach.
func within(deps, reach []int64) bool {
	return len(deps) > 0 && !slices.ContainsFunc(deps, func(d int64) bool { return !slices.Contains(reach, d) })
}

// MarkExternalUserDeleting records the start of the user's delete at a new revision.
func (s *Store) MarkExternalUserDeleting(ctx context.Context, accountID int64, externalID string) (bool, error) {
	res, err := s.users.UpdateOne(ctx, userFilter(accountID, externalID),
		bson.D{{Key: "$set", Value: bson.D{{Key: "deletingAt", Value: time.Now().UTC()}}}, {Key: "$inc", Value: bson.D{{Key: "rev", Value: int64(1)}}}})
	if err != nil {
		return false, wrap(err)
	}
	return res.MatchedCount == 1, nil
}

func counterID(accountID int64) string { return "external_users:" + strconv.FormatInt(accountID, 10) }

// CreateExternalUser reserves a place under the account's limit with a conditional
// increment before inserting, so concurrent mints never overshoot; a user that exists
// (a concurrent mint created it first) gives its place back and is embed.ErrStale.
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
	doc, err := newUserDoc(id, accountID, externalID, u, now)
	if err != nil {
		release()
		return embed.ExternalUser{}, err
	}
	_, err = s.users.InsertOne(ctx, doc)
	if mongox.IsDuplicateKey(err) {
		release()
		return embed.ExternalUser{}, embed.ErrStale
	}
	if err != nil {
		release()
		return embed.ExternalUser{}, wrap(err)
	}
	return doc.user(), nil
}

// newUserDoc is a new user with u applied, at its first revision.
func newUserDoc(id, accountID int64, externalID string, u embed.UserUpdate, now time.Time) (userDoc, error) {
	attrBytes := u.AttributeBytes
	keys := []string{}
	doc := userDoc{ID: id, AccountID: accountID, ExternalID: externalID, Email: u.Email, DisplayName: u.DisplayName, Picture: u.Picture,
		AttrBytes: &attrBytes, Memberships: &keys, Rev: 1, CreatedAt: now, UpdatedAt: now}
	if u.Groups != nil {
		doc.Groups = map[string]map[string]string{u.Scope: u.Groups}
		for gid := range u.Groups {
			keys = append(keys, embed.MembershipKey(u.Scope, gid))
		}
		slices.Sort(keys)
	}
	if len(u.SetAttributes) > 0 {
		vals := make(map[string]attrDoc, len(u.SetAttributes))
		for id, v := range u.SetAttributes {
			a, err := attrOf(v)
			if err != nil {
				return userDoc{}, err
			}
			vals[id] = a
		}
		doc.Attrs = map[string]map[string]attrDoc{u.Scope: vals}
	}
	if u.Tenant != "" {
		doc.Tenants = []string{u.Tenant}
	}
	if u.Deployment != 0 {
		doc.Deployments = []int64{u.Deployment}
	}
	return doc, nil
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

// ListTenantUsers lists the profiles of users with sessions in tenant by id, after
// afterID: a range of the (accountId, tenants, _id) index.
func (s *Store) ListTenantUsers(ctx context.Context, accountID int64, tenant string, afterID int64, limit int) ([]embed.ExternalUser, error) {
	f := bson.D{{Key: "accountId", Value: accountID}, {Key: "tenants", Value: tenant}}
	if afterID > 0 {
		f = append(f, bson.E{Key: "_id", Value: bson.D{{Key: "$gt", Value: afterID}}})
	}
	return findAll(ctx, s.users, f, userDoc.user, options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}).SetLimit(int64(limit)).SetProjection(profileProjection()))
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
