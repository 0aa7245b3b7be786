// Package auditstore keeps the audit trail's events: in MongoDB (Mongo) and in memory
// (Memory, for tests of the service); one contract test runs against both.
package auditstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	auditsvc "github.com/analyticsco/platform/embed-svc/internal/audit"
	"github.com/analyticsco/platform/libs/audit"
	"github.com/analyticsco/platform/libs/mongox"
)

// Collection holds the events in the audit database.
const Collection = "audit_events"

// DefaultRetention is how long an event is kept when no retention is given (400 days).
const DefaultRetention = 400 * 24 * time.Hour

// Mongo is the Store in MongoDB. Events are dropped Retention after their time: by a
// TTL index where the database has them, else by Sweep (FerretDB v1 has none).
type Mongo struct {
	c         *mongo.Collection
	retention time.Duration
	sweep     atomic.Bool
}

// NewMongo keeps events in db's Collection for retention (0: DefaultRetention).
func NewMongo(db *mongo.Database, retention time.Duration) *Mongo {
	if retention <= 0 {
		retention = DefaultRetention
	}
	return &Mongo{c: db.Collection(Collection), retention: retention}
}

// eventDoc is an event as stored: the actor's identifiers side by side (actors) so one
// index answers the actor filter, details as their JSON text (read back, never queried).
type eventDoc struct {
	ID           string    `bson:"_id"`
	Time         time.Time `bson:"time"`
	Service      string    `bson:"service"`
	AccountID    int64     `bson:"accountId"`
	DeploymentID int64     `bson:"deploymentId,omitempty"`
	Actor        actorDoc  `bson:"actor"`
	Actors       []string  `bson:"actors"`
	Action       string    `bson:"action"`
	TargetType   string    `bson:"targetType"`
	TargetID     string    `bson:"targetId,omitempty"`
	Result       string    `bson:"result"`
	Status       int       `bson:"status,omitempty"`
	Code         string    `bson:"code,omitempty"`
	RequestID    string    `bson:"requestId,omitempty"`
	ClientReqID  string    `bson:"clientRequestId,omitempty"`
	TraceID      string    `bson:"traceId,omitempty"`
	ClientAddr   string    `bson:"clientAddr,omitempty"`
	Details      string    `bson:"details,omitempty"`
}

type actorDoc struct {
	Type        string `bson:"type"`
	ID          string `bson:"id,omitempty"`
	UserID      int64  `bson:"userId,omitempty"`
	APIKeyID    string `bson:"apiKeyId,omitempty"`
	EmbedTenant string `bson:"embedTenant,omitempty"`
	ExternalID  string `bson:"externalId,omitempty"`
}

// ActorKeys are the identifiers the actor filter matches: the user id, the API key id,
// the external id and the actor's own id.
func ActorKeys(a audit.Actor) []string {
	keys := []string{}
	add := func(k string) {
		if k != "" && !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	if a.UserID != 0 {
		add(strconv.FormatInt(a.UserID, 10))
	}
	add(a.ID)
	add(a.APIKeyID)
	add(a.ExternalID)
	return keys
}

func toDoc(ev audit.Event) eventDoc {
	d := eventDoc{ID: ev.ID, Time: ev.Time.UTC(), Service: ev.Service, AccountID: ev.AccountID, DeploymentID: ev.DeploymentID,
		Actor: actorDoc(ev.Actor), Actors: ActorKeys(ev.Actor), Action: ev.Action,
		TargetType: ev.Target.Type, TargetID: ev.Target.ID, Result: ev.Outcome.Result, Status: ev.Outcome.Status, Code: ev.Outcome.Code,
		RequestID: ev.RequestID, ClientReqID: ev.ClientRequestID, TraceID: ev.TraceID, ClientAddr: ev.ClientAddr}
	if len(ev.Details) > 0 {
		if raw, err := json.Marshal(ev.Details); err == nil {
			d.Details = string(raw)
		}
	}
	return d
}

func (d eventDoc) event() audit.Event {
	ev := audit.Event{ID: d.ID, Time: d.Time.UTC(), Service: d.Service, AccountID: d.AccountID, DeploymentID: d.DeploymentID,
		Actor: audit.Actor(d.Actor), Action: d.Action, Target: audit.Target{Type: d.TargetType, ID: d.TargetID},
		Outcome: audit.Outcome{Result: d.Result, Status: d.Status, Code: d.Code}, RequestID: d.RequestID, ClientRequestID: d.ClientReqID,
		TraceID: d.TraceID, ClientAddr: d.ClientAddr}
	if d.Details != "" {
		_ = json.Unmarshal([]byte(d.Details), &ev.Details)
	}
	return ev
}

// EnsureIndexes creates the indexes of every filter (each ends in _id, the list's
// order) and the retention's TTL index, bringing its expiry to the configured
// retention when it changed.
func (s *Mongo) EnsureIndexes(ctx context.Context) error {
	for _, keys := range [][]string{{"accountId"}, {"accountId", "action"}, {"accountId", "actors"}, {"accountId", "deploymentId"},
		{"accountId", "targetType", "targetId"}} {
		k := bson.D{}
		for _, f := range keys {
			k = append(k, bson.E{Key: f, Value: 1})
		}
		k = append(k, bson.E{Key: "_id", Value: -1})
		if _, err := s.c.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: k}); err != nil {
			return fmt.Errorf("index on %s: %w", Collection, wrap(err))
		}
	}
	return s.ensureTTL(ctx)
}

func (s *Mongo) ensureTTL(ctx context.Context) error {
	secs := int32(min(s.retention/time.Second, 1<<31-1))
	ttl := mongo.IndexModel{Keys: bson.D{{Key: "time", Value: 1}}, Options: options.Index().SetName("time_ttl").SetExpireAfterSeconds(secs)}
	_, err := s.c.Indexes().CreateOne(ctx, ttl)
	switch {
	case err == nil:
		return nil
	case strings.Contains(err.Error(), "expireAfterSeconds"):
		// No TTL indexes here (FerretDB): Sweep enforces the retention.
		s.sweep.Store(true)
		_, err = s.c.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "time", Value: 1}}, Options: options.Index().SetName("time_ttl")})
		return wrap(err)
	case isIndexOptionsConflict(err):
		// The retention changed since the index was made: change its expiry in place, so
		// a shorter retention applies to the events already stored too.
		cmd := bson.D{{Key: "collMod", Value: Collection}, {Key: "index", Value: bson.D{{Key: "name", Value: "time_ttl"}, {Key: "expireAfterSeconds", Value: secs}}}}
		return wrap(s.c.Database().RunCommand(ctx, cmd).Err())
	}
	return wrap(err)
}

func isIndexOptionsConflict(err error) bool {
	var ce mongo.CommandError
	return errors.As(err, &ce) && (ce.Code == 85 || ce.Code == 86)
}

// Sweep drops events past the retention once a minute until ctx ends, where the
// database has no TTL indexes; on MongoDB the TTL index does it and Sweep only waits.
func (s *Mongo) Sweep(ctx context.Context) {
	t := time.NewTicker(time.Minute)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			if s.sweep.Load() {
				_ = s.DeleteBefore(ctx, now.Add(-s.retention))
			}
		}
	}
}

// DeleteBefore drops the events older than t.
func (s *Mongo) DeleteBefore(ctx context.Context, t time.Time) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	_, err := s.c.DeleteMany(ctx, bson.D{{Key: "time", Value: bson.D{{Key: "$lt", Value: t}}}})
	return wrap(err)
}

// Insert stores events; those already stored are left as they are.
func (s *Mongo) Insert(ctx context.Context, events []audit.Event) error {
	if len(events) == 0 {
		return nil
	}
	docs := make([]any, len(events))
	for i, ev := range events {
		docs[i] = toDoc(ev)
	}
	_, err := s.c.InsertMany(ctx, docs, options.InsertMany().SetOrdered(false))
	if err != nil && !mongox.OnlyDuplicateKeys(err) {
		return wrap(err)
	}
	return nil
}

// List returns up to limit events of the account matching f, newest first.
func (s *Mongo) List(ctx context.Context, accountID int64, f auditsvc.Filter, limit int) ([]audit.Event, error) {
	cur, err := s.c.Find(ctx, filterDoc(accountID, f), options.Find().SetSort(bson.D{{Key: "_id", Value: -1}}).SetLimit(int64(limit)))
	if err != nil {
		return nil, wrap(err)
	}
	var docs []eventDoc
	if err := cur.All(ctx, &docs); err != nil {
		return nil, wrap(err)
	}
	out := make([]audit.Event, len(docs))
	for i, d := range docs {
		out[i] = d.event()
	}
	return out, nil
}

// filterDoc is f as a query. The time range is a range of ids (ids sort as their times),
// so every filter is a range scan of one index ending in _id.
func filterDoc(accountID int64, f auditsvc.Filter) bson.D {
	q := bson.D{{Key: "accountId", Value: accountID}}
	switch {
	case f.Action != "":
		q = append(q, bson.E{Key: "action", Value: f.Action})
	case f.ActionPrefix != "":
		q = append(q, bson.E{Key: "action", Value: bson.D{{Key: "$regex", Value: "^" + regexp.QuoteMeta(f.ActionPrefix)}}})
	}
	if f.Actor != "" {
		q = append(q, bson.E{Key: "actors", Value: f.Actor})
	}
	if f.Deployments != nil {
		q = append(q, bson.E{Key: "deploymentId", Value: bson.D{{Key: "$in", Value: f.Deployments}}})
	}
	if f.TargetType != "" {
		q = append(q, bson.E{Key: "targetType", Value: f.TargetType})
	}
	if f.TargetID != "" {
		q = append(q, bson.E{Key: "targetId", Value: f.TargetID})
	}
	id := bson.D{}
	if !f.From.IsZero() {
		id = append(id, bson.E{Key: "$gte", Value: audit.IDAt(f.From)})
	}
	upper := ""
	if !f.To.IsZero() {
		upper = audit.IDAt(f.To)
	}
	if f.BeforeID != "" && (upper == "" || f.BeforeID < upper) {
		upper = f.BeforeID
	}
	if upper != "" {
		id = append(id, bson.E{Key: "$lt", Value: upper})
	}
	if len(id) > 0 {
		q = append(q, bson.E{Key: "_id", Value: id})
	}
	return q
}

func wrap(err error) error {
	if err != nil && mongox.Unavailable(err) {
		return errors.Join(auditsvc.ErrUnavailable, err)
	}
	return err
}
