package store

import (
	"context"
	"crypto/subtle"
	"fmt"
	"strconv"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/analyticsco/platform/libs/identity"
)

// ServiceAccountSpec describes a service account to create.
type ServiceAccountSpec struct {
	AccountID int64
	Name      string
	Role      string
	CreatedBy int64
}

// InsertServiceAccount creates a service account: a user record of kind UserService,
// whose username ("service-account-<id>") and email are derived from its id, so it never
// collides with a person's.
func (s *Store) InsertServiceAccount(ctx context.Context, spec ServiceAccountSpec) (User, error) {
	if !identity.ValidRole(spec.Role) {
		return User{}, fmt.Errorf("%w: role must be viewer, ai_bi_user, developer or admin", ErrInvalid)
	}
	if _, err := s.Account(ctx, spec.AccountID); err != nil {
		return User{}, err
	}
	id, err := s.userIDs.Next(ctx)
	if err != nil {
		return User{}, err
	}
	now := s.now()
	u := User{ID: id, AccountID: spec.AccountID, Username: "service-account-" + strconv.FormatInt(id, 10),
		Email: "service-account-" + strconv.FormatInt(id, 10) + "@service-accounts.invalid", FirstName: spec.Name,
		Role: spec.Role, Kind: UserService, Name: spec.Name, CreatedBy: spec.CreatedBy, CreatedAt: now, UpdatedAt: now}
	if _, err := s.users.InsertOne(ctx, u); err != nil {
		return User{}, wrap(err)
	}
	return u, nil
}

// ServiceAccounts returns the account's service accounts that are not deleted, by id.
func (s *Store) ServiceAccounts(ctx context.Context, accountID int64) ([]User, error) {
	cur, err := s.users.Find(ctx, bson.D{{Key: "accountId", Value: accountID}, {Key: "kind", Value: UserService}, {Key: "deletedAt", Value: nil}},
		options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}))
	if err != nil {
		return nil, wrap(err)
	}
	out := []User{}
	return out, wrap(cur.All(ctx, &out))
}

// CountServiceAccounts counts the account's service accounts that are not deleted.
func (s *Store) CountServiceAccounts(ctx context.Context, accountID int64) (int64, error) {
	n, err := s.users.CountDocuments(ctx, bson.D{{Key: "accountId", Value: accountID}, {Key: "kind", Value: UserService}, {Key: "deletedAt", Value: nil}})
	return n, wrap(err)
}

// DeleteServiceAccount marks a service account deleted and revokes its client secrets
// and API keys; the record stays, so every gateway's change poller sees it. Deleting a
// deleted one is a no-op.
func (s *Store) DeleteServiceAccount(ctx context.Context, accountID, id int64) error {
	now := s.now()
	if _, err := s.users.UpdateOne(ctx, bson.D{{Key: "_id", Value: id}, {Key: "kind", Value: UserService}, {Key: "deletedAt", Value: nil}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "deletedAt", Value: now}, {Key: "updatedAt", Value: now}}}}); err != nil {
		return wrap(err)
	}
	revoke := bson.D{{Key: "$set", Value: bson.D{{Key: "revokedAt", Value: now}, {Key: "updatedAt", Value: now}}}}
	if _, err := s.saSecrets.UpdateMany(ctx, bson.D{{Key: "userId", Value: id}, {Key: "revokedAt", Value: nil}}, revoke); err != nil {
		return wrap(err)
	}
	_, err := s.keys.UpdateMany(ctx, bson.D{{Key: "accountId", Value: accountID}, {Key: "userId", Value: id}, {Key: "revokedAt", Value: nil}}, revoke)
	return wrap(err)
}

// ClientSecret is a service account's client secret record (OAuth 2.0 client
// credentials): the client id is public, the secret is stored only as its SHA-256 hash.
type ClientSecret struct {
	ID         string `bson:"_id" json:"id"` // the client id
	AccountID  int64  `bson:"accountId" json:"accountId"`
	UserID     int64  `bson:"userId" json:"userId"` // the service account
	SecretHash []byte `bson:"secretHash" json:"-"`
	// PrevSecretHash is the secret a rotation replaced, valid until PrevSecretUntil.
	PrevSecretHash  []byte     `bson:"prevSecretHash,omitempty" json:"-"`
	PrevSecretUntil *time.Time `bson:"prevSecretUntil,omitempty" json:"-"`
	CreatedAt       time.Time  `bson:"createdAt" json:"createdAt"`
	UpdatedAt       time.Time  `bson:"updatedAt" json:"updatedAt"`
	RevokedAt       *time.Time `bson:"revokedAt,omitempty" json:"revokedAt,omitempty"`
	RotatedAt       *time.Time `bson:"rotatedAt,omitempty" json:"rotatedAt,omitempty"`
	LastUsedAt      *time.Time `bson:"lastUsedAt,omitempty" json:"lastUsedAt,omitempty"`
}

// Authenticates reports whether hash is the secret, or the one a rotation replaced while
// its overlap lasts, compared in constant time; a revoked secret authenticates nothing.
func (c ClientSecret) Authenticates(hash []byte, now time.Time) bool {
	if c.RevokedAt != nil {
		return false
	}
	if subtle.ConstantTimeCompare(hash, c.SecretHash) == 1 {
		return true
	}
	return c.PrevSecretUntil != nil && now.Before(*c.PrevSecretUntil) && subtle.ConstantTimeCompare(hash, c.PrevSecretHash) == 1
}

// InsertClientSecret stores a new client secret record.
func (s *Store) InsertClientSecret(ctx context.Context, c ClientSecret) error {
	now := s.now()
	c.CreatedAt, c.UpdatedAt = now, now
	_, err := s.saSecrets.InsertOne(ctx, c)
	return wrap(err)
}

// DeleteClientSecret removes a secret just created over its service account's bound.
func (s *Store) DeleteClientSecret(ctx context.Context, id string) error {
	_, err := s.saSecrets.DeleteOne(ctx, bson.D{{Key: "_id", Value: id}})
	return wrap(err)
}

// ClientSecret returns a client secret record by client id.
func (s *Store) ClientSecret(ctx context.Context, id string) (ClientSecret, error) {
	var c ClientSecret
	return c, wrap(s.saSecrets.FindOne(ctx, bson.D{{Key: "_id", Value: id}}).Decode(&c))
}

// ClientSecrets returns a service account's secrets by client id, those revoked before
// revokedSince left out.
func (s *Store) ClientSecrets(ctx context.Context, userID int64, revokedSince time.Time) ([]ClientSecret, error) {
	cur, err := s.saSecrets.Find(ctx, bson.D{{Key: "userId", Value: userID}, {Key: "$or", Value: bson.A{
		bson.D{{Key: "revokedAt", Value: nil}}, bson.D{{Key: "revokedAt", Value: bson.D{{Key: "$gte", Value: revokedSince}}}},
	}}}, options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}))
	if err != nil {
		return nil, wrap(err)
	}
	out := []ClientSecret{}
	return out, wrap(cur.All(ctx, &out))
}

// CountLiveClientSecrets counts a service account's unrevoked secrets.
func (s *Store) CountLiveClientSecrets(ctx context.Context, userID int64) (int64, error) {
	n, err := s.saSecrets.CountDocuments(ctx, bson.D{{Key: "userId", Value: userID}, {Key: "revokedAt", Value: nil}})
	return n, wrap(err)
}

// RevokeClientSecret marks a secret revoked; revoking twice is a no-op.
func (s *Store) RevokeClientSecret(ctx context.Context, id string) error {
	now := s.now()
	_, err := s.saSecrets.UpdateOne(ctx, bson.D{{Key: "_id", Value: id}, {Key: "revokedAt", Value: nil}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "revokedAt", Value: now}, {Key: "updatedAt", Value: now}}}})
	return wrap(err)
}

// RotateClientSecret gives an unrevoked secret a new hash; the current one keeps
// authenticating until overlapUntil. ErrConflict when it is revoked.
func (s *Store) RotateClientSecret(ctx context.Context, id string, newHash []byte, overlapUntil time.Time) (ClientSecret, error) {
	for attempt := 1; ; attempt++ {
		c, err := s.ClientSecret(ctx, id)
		if err != nil {
			return ClientSecret{}, err
		}
		if c.RevokedAt != nil {
			return ClientSecret{}, fmt.Errorf("%w: client secret %s is revoked", ErrConflict, id)
		}
		now := s.now()
		res, err := s.saSecrets.UpdateOne(ctx, bson.D{{Key: "_id", Value: id}, {Key: "revokedAt", Value: nil}, {Key: "secretHash", Value: c.SecretHash}},
			bson.D{{Key: "$set", Value: bson.D{
				{Key: "prevSecretHash", Value: c.SecretHash}, {Key: "prevSecretUntil", Value: overlapUntil},
				{Key: "secretHash", Value: newHash}, {Key: "rotatedAt", Value: now}, {Key: "updatedAt", Value: now},
			}}})
		if err != nil {
			return ClientSecret{}, wrap(err)
		}
		if res.MatchedCount == 1 {
			c.PrevSecretHash, c.PrevSecretUntil, c.SecretHash, c.RotatedAt, c.UpdatedAt = c.SecretHash, &overlapUntil, newHash, &now, now
			return c, nil
		}
		if attempt == 3 {
			return ClientSecret{}, fmt.Errorf("%w: client secret %s changed during the rotation; retry", ErrConflict, id)
		}
	}
}

// MarkClientSecretUsed raises a secret's lastUsedAt to at.
func (s *Store) MarkClientSecretUsed(ctx context.Context, id string, at time.Time) error {
	_, err := s.saSecrets.UpdateOne(ctx, bson.D{{Key: "_id", Value: id}},
		bson.D{{Key: "$max", Value: bson.D{{Key: "lastUsedAt", Value: at.UTC().Truncate(time.Millisecond)}}}})
	return wrap(err)
}
