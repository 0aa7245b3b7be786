package mongostore

import (
	"context"
	"encoding/json"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/analyticsco/platform/embed-svc/internal/embed"
)

// Session records: one per minted session, written once, listed and revoked in bulk;
// purged EMBED_SESSION_RETENTION after the token expires.

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
	// What the session shows: read by SessionRecordBySID, never by a listing.
	Profile         *profileDoc `bson:"profile,omitempty"`
	SecurityContext *string     `bson:"sc,omitempty"` // the JSON as generate-session received it
}

type profileDoc struct {
	Email       *string `bson:"email,omitempty"`
	DisplayName *string `bson:"displayName,omitempty"`
	Picture     *string `bson:"picture,omitempty"`
}

// listedFields leaves out what a listing never shows (the profile, the securityContext).
var listedFields = bson.D{{Key: "profile", Value: 0}, {Key: "sc", Value: 0}}

func (d sessionDoc) record() embed.SessionRecord {
	r := embed.SessionRecord{ID: d.ID, AccountID: d.AccountID, SID: d.SID, Tenant: d.Tenant,
		User:         embed.SessionRecordUser{Kind: d.UserKind, ID: d.UserID, ExternalID: d.ExternalID, Username: d.Username},
		DeploymentID: d.DeploymentID, Branch: d.Branch, CreatedAt: d.CreatedAt.UTC(), PendingUntil: d.PendingUntil.UTC(), ExpiresAt: d.ExpiresAt.UTC()}
	if d.Profile != nil {
		r.Profile = &embed.SessionProfile{Email: d.Profile.Email, DisplayName: d.Profile.DisplayName, Picture: d.Profile.Picture}
	}
	if d.SecurityContext != nil {
		r.SecurityContext = json.RawMessage(*d.SecurityContext)
	}
	return r
}

// InsertSessionRecord stores a minted session's record; it is never updated.
func (s *Store) InsertSessionRecord(ctx context.Context, r embed.SessionRecord) error {
	d := sessionDoc{ID: r.ID, AccountID: r.AccountID, SID: r.SID, Tenant: r.Tenant, UserKind: r.User.Kind, UserID: r.User.ID,
		ExternalID: r.User.ExternalID, Username: r.User.Username, DeploymentID: r.DeploymentID, Branch: r.Branch,
		CreatedAt: r.CreatedAt, PendingUntil: r.PendingUntil, ExpiresAt: r.ExpiresAt, PurgeAt: r.ExpiresAt.Add(s.retention)}
	if p := r.Profile; p != nil {
		d.Profile = &profileDoc{Email: p.Email, DisplayName: p.DisplayName, Picture: p.Picture}
	}
	if r.SecurityContext != nil {
		sc := string(r.SecurityContext)
		d.SecurityContext = &sc
	}
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
	} else if q.Deployments != nil {
		f = append(f, bson.E{Key: "deploymentId", Value: bson.D{{Key: "$in", Value: q.Deployments}}})
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

// ListSessionRecords returns up to limit of the account's records, newest first, after
// after (the one with id when id is set): a range of the (accountId, createdAt, _id)
// index, so it reads no more than limit records whatever the listing then keeps.
func (s *Store) ListSessionRecords(ctx context.Context, accountID int64, id string, after embed.SessionCursor, now time.Time, limit int) ([]embed.SessionRecord, error) {
	return findAll(ctx, s.sessions, sessionFilter(accountID, embed.SessionQuery{ID: id, After: after}, now), sessionDoc.record,
		options.Find().SetSort(bson.D{{Key: "createdAt", Value: -1}, {Key: "_id", Value: -1}}).SetLimit(int64(limit)).SetProjection(listedFields))
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
