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

// BudgetCollection holds the ingester's per-account counts of recent windows (Admit).
const BudgetCollection = "audit_budgets"

// budgetRetention is how long a window's count is kept: past it, an event of that window
// (relayed late from an outbox) starts a new count.
const budgetRetention = time.Hour

// Mongo is the Store in MongoDB. Events are dropped Retention after their time, and
// budget counts budgetRetention after their window: by TTL indexes where the database
// has them, else by Sweep (FerretDB v1 has none).
type Mongo struct {
	c         *mongo.Collection
	budgets   *mongo.Collection
	retention time.Duration
	sweep     atomic.Bool
}

// NewMongo keeps events in db's Collection for retention (0: DefaultRetention).
func NewMongo(db *mongo.Database, retention time.Duration) *Mongo {
	if retention <= 0 {
		retention = DefaultRetention
	}
	return &Mongo{c: db.Collection(Collection), budgets: db.Collection(BudgetCollection), retention: retention}
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
	// Merged is the count of a summary event (auditsvc.ActionMerged), added to by Merge
	// and shown as details.merged.
	Merged int64 `bson:"merged,omitempty"`
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
	if d.Merged > 0 {
		if ev.Details == nil {
			ev.Details = map[string]any{}
		}
		ev.Details["merged"] = d.Merged
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
	if err := s.ensureTTL(ctx); err != nil {
		return err
	}
	// The budgets' expiry never changes: where the database has no TTL indexes, or has an
	// at_ttl index with other options (it serves the sweep's range delete), Sweep drops
	// old counts.
	budgetTTL := mongo.IndexModel{Keys: bson.D{{Key: "at", Value: 1}},
		Options: options.Index().SetName("at_ttl").SetExpireAfterSeconds(int32(budgetRetention / time.Second))}
	_, err := s.budgets.Indexes().CreateOne(ctx, budgetTTL)
	switch mongox.ClassifyTTLRefusal(err) {
	case mongox.TTLNotSupported:
		s.sweep.Store(true)
		_, err = s.budgets.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "at", Value: 1}}, Options: options.Index().SetName("at_ttl")})
	case mongox.TTLOptionsChanged:
		s.sweep.Store(true)
		err = nil
	}
	if err != nil {
		return fmt.Errorf("index on %s: %w", BudgetCollection, wrap(err))
	}
	return nil
}

// ensureTTL makes the events' TTL index (time_ttl) expire them at the retention. On a
// database without TTL indexes (FerretDB) it makes a plain index of that name and Sweep
// enforces the retention. When the index exists with another expiry (the retention
// changed since it was made), collMod changes the expiry in place, so a shorter
// retention drops the events already past it too; that needs the collMod privilege on
// the collection, which a readWrite role does not hold (deploy/mongodb/users.js grants
// it through the auditRetention role).
func (s *Mongo) ensureTTL(ctx context.Context) error {
	secs := int32(min(s.retention/time.Second, 1<<31-1))
	ttl := mongo.IndexModel{Keys: bson.D{{Key: "time", Value: 1}}, Options: options.Index().SetName(ttlIndex).SetExpireAfterSeconds(secs)}
	_, err := s.c.Indexes().CreateOne(ctx, ttl)
	if err == nil {
		return nil
	}
	switch mongox.ClassifyTTLRefusal(err) {
	case mongox.TTLNotSupported:
		s.sweep.Store(true)
		_, err = s.c.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "time", Value: 1}}, Options: options.Index().SetName(ttlIndex)})
		if err != nil {
			return fmt.Errorf("index %s on %s: %w", ttlIndex, Collection, wrap(err))
		}
		return nil
	case mongox.TTLOptionsChanged:
		cmd := bson.D{{Key: "collMod", Value: Collection}, {Key: "index", Value: bson.D{{Key: "name", Value: ttlIndex}, {Key: "expireAfterSeconds", Value: secs}}}}
		if err := s.c.Database().RunCommand(ctx, cmd).Err(); err != nil {
			if mongox.Unavailable(err) {
				return fmt.Errorf("change the expiry of index %s on %s: %w", ttlIndex, Collection, wrap(err))
			}
			return fmt.Errorf("the retention changed: change the expiry of index %s on %s.%s to %d s with collMod: %w "+
				"(the service's database user needs the collMod action on %s.%s: deploy/mongodb/users.js grants it with the auditRetention role)",
				ttlIndex, s.c.Database().Name(), Collection, secs, err, s.c.Database().Name(), Collection)
		}
		return nil
	}
	return fmt.Errorf("index %s on %s: %w", ttlIndex, Collection, wrap(err))
}

// ttlIndex is the name of the events' TTL index.
const ttlIndex = "time_ttl"

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
				_, _ = s.budgets.DeleteMany(ctx, bson.D{{Key: "at", Value: bson.D{{Key: "$lt", Value: now.Add(-budgetRetention)}}}})
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

// Stored reports which of ids are stored.
func (s *Mongo) Stored(ctx context.Context, ids []string) (map[string]bool, error) {
	out := map[string]bool{}
	if len(ids) == 0 {
		return out, nil
	}
	cur, err := s.c.Find(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: ids}}}},
		options.Find().SetProjection(bson.D{{Key: "_id", Value: 1}}))
	if err != nil {
		return nil, wrap(err)
	}
	var docs []struct {
		ID string `bson:"_id"`
	}
	if err := cur.All(ctx, &docs); err != nil {
		return nil, wrap(err)
	}
	for _, d := range docs {
		out[d.ID] = true
	}
	return out, nil
}

type budgetDoc struct {
	ID string    `bson:"_id"`
	N  int64     `bson:"n"`
	At time.Time `bson:"at"`
}

// Admit adds n to the account's count of the window and returns the count before.
func (s *Mongo) Admit(ctx context.Context, accountID int64, window time.Time, n int) (int64, error) {
	filter := bson.D{{Key: "_id", Value: fmt.Sprintf("%d:%d", accountID, window.UnixMilli())}}
	update := bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: int64(n)}}}, {Key: "$setOnInsert", Value: bson.D{{Key: "at", Value: window.UTC()}}}}
	opts := options.FindOneAndUpdate().SetUpsert(true).SetReturnDocument(options.Before)
	var before budgetDoc
	err := s.budgets.FindOneAndUpdate(ctx, filter, update, opts).Decode(&before)
	if mongo.IsDuplicateKeyError(err) { // two first counts raced; the loser adds to the winner's
		err = s.budgets.FindOneAndUpdate(ctx, filter, update, opts).Decode(&before)
	}
	switch {
	case errors.Is(err, mongo.ErrNoDocuments):
		return 0, nil
	case err != nil:
		return 0, wrap(err)
	}
	return before.N, nil
}

// Merge adds each count to its window's summary event, inserting it the first time.
func (s *Mongo) Merge(ctx context.Context, merged []auditsvc.Merged) error {
	for _, m := range merged {
		raw, err := bson.Marshal(toDoc(m.Event()))
		if err != nil {
			return err
		}
		var fields bson.D
		if err := bson.Unmarshal(raw, &fields); err != nil {
			return err
		}
		var id any
		onInsert := bson.D{}
		for _, f := range fields {
			if f.Key == "_id" {
				id = f.Value
				continue
			}
			onInsert = append(onInsert, f)
		}
		update := bson.D{{Key: "$setOnInsert", Value: onInsert}, {Key: "$inc", Value: bson.D{{Key: "merged", Value: int64(m.Count)}}}}
		_, err = s.c.UpdateOne(ctx, bson.D{{Key: "_id", Value: id}}, update, options.UpdateOne().SetUpsert(true))
		if mongo.IsDuplicateKeyError(err) {
			_, err = s.c.UpdateOne(ctx, bson.D{{Key: "_id", Value: id}}, update, options.UpdateOne().SetUpsert(true))
		}
		if err != nil {
			return wrap(err)
		}
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
