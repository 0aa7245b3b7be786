package mongostore

import (
	"context"
	"errors"
	"slices"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/analyticsco/platform/embed-svc/internal/embed"
)

// Group membership outside a mint: a membership is in groups.<scope>.<definition id>
// (what a mint's groups replace) and, as embed.MembershipKey, in memberships, the
// multikey field the (accountId, memberships, _id) index lists a group's members by.
// Each change moves the user to its next revision, so a mint computed from the user as
// it was is refused (embed.ErrStale) and computed again.

// FindExternalUsers reads the profiles of the users with these external ids (a point
// lookup of the unique (accountId, externalId) index per id).
func (s *Store) FindExternalUsers(ctx context.Context, accountID int64, externalIDs []string) ([]embed.ExternalUser, error) {
	f := bson.D{{Key: "accountId", Value: accountID}, {Key: "externalId", Value: bson.D{{Key: "$in", Value: externalIDs}}}}
	return findAll(ctx, s.users, f, userDoc.user, options.Find().SetProjection(profileProjection()).SetSort(bson.D{{Key: "_id", Value: 1}}))
}

// AddGroupMembers writes the membership onto every listed user that is not a member
// yet and no delete has begun on, in one update: the count of users it changed is the
// count of new members, exact under concurrent adds (each user's change is atomic).
func (s *Store) AddGroupMembers(ctx context.Context, accountID int64, scope, groupID, groupName string, externalIDs []string, now time.Time) (int64, error) {
	key := embed.MembershipKey(scope, groupID)
	f := bson.D{{Key: "accountId", Value: accountID}, {Key: "externalId", Value: bson.D{{Key: "$in", Value: externalIDs}}},
		{Key: "deletingAt", Value: bson.D{{Key: "$exists", Value: false}}}, {Key: "memberships", Value: bson.D{{Key: "$ne", Value: key}}}}
	res, err := s.users.UpdateMany(ctx, f, bson.D{
		{Key: "$set", Value: bson.D{{Key: "groups." + scope + "." + groupID, Value: groupName}, {Key: "updatedAt", Value: now}}},
		{Key: "$addToSet", Value: bson.D{{Key: "memberships", Value: key}}},
		{Key: "$inc", Value: bson.D{{Key: "rev", Value: int64(1)}}}})
	if err != nil {
		return 0, wrap(err)
	}
	return res.ModifiedCount, nil
}

// RemoveGroupMember ends one user's membership, if it is one.
func (s *Store) RemoveGroupMember(ctx context.Context, accountID int64, scope, groupID, externalID string, now time.Time) (bool, error) {
	key := embed.MembershipKey(scope, groupID)
	res, err := s.users.UpdateOne(ctx, append(userFilter(accountID, externalID), bson.E{Key: "memberships", Value: key}), bson.D{
		{Key: "$unset", Value: bson.D{{Key: "groups." + scope + "." + groupID, Value: ""}}},
		{Key: "$set", Value: bson.D{{Key: "updatedAt", Value: now}}},
		{Key: "$pull", Value: bson.D{{Key: "memberships", Value: key}}},
		{Key: "$inc", Value: bson.D{{Key: "rev", Value: int64(1)}}}})
	if err != nil {
		return false, wrap(err)
	}
	return res.MatchedCount == 1, nil
}

// ListGroupMembers lists the profiles of the group's members by id, after afterID: a
// range of the (accountId, memberships, _id) index.
func (s *Store) ListGroupMembers(ctx context.Context, accountID int64, scope, groupID string, afterID int64, limit int) ([]embed.ExternalUser, error) {
	f := bson.D{{Key: "accountId", Value: accountID}, {Key: "memberships", Value: embed.MembershipKey(scope, groupID)}}
	if afterID > 0 {
		f = append(f, bson.E{Key: "_id", Value: bson.D{{Key: "$gt", Value: afterID}}})
	}
	return findAll(ctx, s.users, f, userDoc.user, options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}).SetLimit(int64(limit)).SetProjection(profileProjection()))
}

// backfillID marks, in counters, that every user has its memberships field.
const backfillID = "memberships_backfill"

// backfillBatch is how many users one read of the backfill's walk takes.
const backfillBatch = 500

// BackfillMemberships gives every user stored without the memberships field the field,
// computed from its groups: a walk of the users by _id (the _id index, a batch at a
// time), each write conditional on the revision it read, so a change made meanwhile is
// read again. Done once: a mark in counters makes later calls one read. It returns how
// many users it wrote.
func (s *Store) BackfillMemberships(ctx context.Context) (int, error) {
	err := s.counters.FindOne(ctx, bson.D{{Key: "_id", Value: backfillID}}).Err()
	if err == nil {
		return 0, nil
	}
	if !errors.Is(err, mongo.ErrNoDocuments) {
		return 0, wrap(err)
	}
	written := 0
	var after int64
	for first := true; ; first = false {
		f := bson.D{}
		if !first {
			f = bson.D{{Key: "_id", Value: bson.D{{Key: "$gt", Value: after}}}}
		}
		var docs []struct {
			ID          int64                        `bson:"_id"`
			Groups      map[string]map[string]string `bson:"groups"`
			Memberships *[]string                    `bson:"memberships"`
			Rev         int64                        `bson:"rev"`
		}
		cur, err := s.users.Find(ctx, f, options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}).SetLimit(backfillBatch).
			SetProjection(bson.D{{Key: "groups", Value: 1}, {Key: "memberships", Value: 1}, {Key: "rev", Value: 1}}))
		if err != nil {
			return written, wrap(err)
		}
		if err := cur.All(ctx, &docs); err != nil {
			return written, wrap(err)
		}
		for _, d := range docs {
			after = d.ID
			if d.Memberships != nil {
				continue
			}
			ok, err := s.backfillUser(ctx, d.ID, d.Groups, d.Rev)
			if err != nil {
				return written, err
			}
			if ok {
				written++
			}
		}
		if len(docs) < backfillBatch {
			break
		}
	}
	_, err = s.counters.UpdateOne(ctx, bson.D{{Key: "_id", Value: backfillID}}, bson.D{{Key: "$set", Value: bson.D{{Key: "doneAt", Value: time.Now().UTC()}}}},
		options.UpdateOne().SetUpsert(true))
	return written, wrap(err)
}

// backfillUser writes one user's memberships from the groups read at rev, reading the
// user again while another write comes first. The revision stays: the field says what
// groups already say.
func (s *Store) backfillUser(ctx context.Context, id int64, groups map[string]map[string]string, rev int64) (bool, error) {
	for range 16 {
		keys := []string{}
		for scope, g := range groups {
			for gid := range g {
				keys = append(keys, embed.MembershipKey(scope, gid))
			}
		}
		slices.Sort(keys)
		f := bson.D{{Key: "_id", Value: id}, {Key: "memberships", Value: bson.D{{Key: "$exists", Value: false}}}}
		if rev == 0 {
			f = append(f, bson.E{Key: "rev", Value: bson.D{{Key: "$exists", Value: false}}})
		} else {
			f = append(f, bson.E{Key: "rev", Value: rev})
		}
		res, err := s.users.UpdateOne(ctx, f, bson.D{{Key: "$set", Value: bson.D{{Key: "memberships", Value: keys}}}})
		if err != nil {
			return false, wrap(err)
		}
		if res.MatchedCount == 1 {
			return true, nil
		}
		var cur struct {
			Groups      map[string]map[string]string `bson:"groups"`
			Memberships *[]string                    `bson:"memberships"`
			Rev         int64                        `bson:"rev"`
		}
		err = s.users.FindOne(ctx, bson.D{{Key: "_id", Value: id}}, options.FindOne().SetProjection(bson.D{{Key: "groups", Value: 1}, {Key: "memberships", Value: 1}, {Key: "rev", Value: 1}})).Decode(&cur)
		if errors.Is(err, mongo.ErrNoDocuments) {
			return false, nil // deleted meanwhile
		}
		if err != nil {
			return false, wrap(err)
		}
		if cur.Memberships != nil {
			return false, nil // a write with groups gave it the field
		}
		groups, rev = cur.Groups, cur.Rev
	}
	return false, errors.New("backfill of memberships: the user keeps changing")
}
