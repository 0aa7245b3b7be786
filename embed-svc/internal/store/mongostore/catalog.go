package mongostore

import (
	"context"
	"errors"
	"strconv"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/analyticsco/platform/embed-svc/internal/embed"
	"github.com/analyticsco/platform/libs/httpx"
	"github.com/analyticsco/platform/libs/mongox"
)

// The catalog: account-wide settings, embed tenants, and group and attribute
// definitions (scope "_" for the account-wide catalog, else an embed tenant's).

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
	return findAll(ctx, s.defs, bson.D{{Key: "accountId", Value: accountID}, {Key: "scope", Value: scope}, {Key: "name", Value: bson.D{{Key: "$in", Value: names}}}},
		defDoc.definition)
}

// UpsertDefinitions creates and updates the definitions in one unordered bulk write (one
// insert and one update command at most; the service bounds their number,
// EMBED_MAX_DEFINITION_CHANGES), and returns them as stored, in order. A definition that
// a concurrent request created first is updated instead (embed.ErrConflictType when it
// is an attribute of another type).
func (s *Store) UpsertDefinitions(ctx context.Context, accountID int64, scope string, us []embed.DefinitionUpsert, now time.Time) ([]embed.Definition, error) {
	out := make([]embed.Definition, len(us))
	var models []mongo.WriteModel
	var of []int // the upsert each model writes
	for i, u := range us {
		if u.Existing == nil {
			in := u.Input
			doc := defDoc{ID: bson.NewObjectID(), AccountID: accountID, Scope: scope, Kind: u.Kind, Name: in.Name, Type: in.Type,
				DisplayName: in.DisplayName, DefaultValue: in.DefaultValue, Description: in.Description, CreatedAt: now, UpdatedAt: now}
			out[i] = doc.definition()
			models, of = append(models, mongo.NewInsertOneModel().SetDocument(doc)), append(of, i)
			continue
		}
		d, set := definitionChanges(*u.Existing, u.Input, now)
		out[i] = d
		if set != nil {
			oid, _ := bson.ObjectIDFromHex(d.ID)
			models = append(models, mongo.NewUpdateOneModel().SetFilter(bson.D{{Key: "_id", Value: oid}}).SetUpdate(bson.D{{Key: "$set", Value: set}}))
			of = append(of, i)
		}
	}
	if len(models) == 0 {
		return out, nil
	}
	_, err := s.defs.BulkWrite(ctx, models, options.BulkWrite().SetOrdered(false))
	var bwe mongo.BulkWriteException
	if err == nil {
		return out, nil
	}
	if !errors.As(err, &bwe) || bwe.WriteConcernError != nil {
		return nil, wrap(err)
	}
	for _, we := range bwe.WriteErrors {
		i := of[we.Index]
		if !mongo.IsDuplicateKeyError(we.WriteError) || us[i].Existing != nil {
			return nil, wrap(err)
		}
		// A concurrent request created it first: update that one instead.
		var uerr error
		if out[i], uerr = s.updateCreatedMeanwhile(ctx, accountID, scope, us[i], now); uerr != nil {
			return nil, uerr
		}
	}
	return out, nil
}

// updateCreatedMeanwhile updates the stored definition of u's kind and name, which a
// concurrent request created after u was planned as a creation.
func (s *Store) updateCreatedMeanwhile(ctx context.Context, accountID int64, scope string, u embed.DefinitionUpsert, now time.Time) (embed.Definition, error) {
	var ex defDoc
	if err := s.defs.FindOne(ctx, bson.D{{Key: "accountId", Value: accountID}, {Key: "scope", Value: scope}, {Key: "kind", Value: u.Kind}, {Key: "name", Value: u.Input.Name}}).Decode(&ex); err != nil {
		return embed.Definition{}, wrap(err)
	}
	if u.Kind == embed.KindAttribute && ex.Type != u.Input.Type {
		return embed.Definition{}, embed.ErrConflictType
	}
	d, set := definitionChanges(ex.definition(), u.Input, now)
	if set == nil {
		return d, nil
	}
	if _, err := s.defs.UpdateOne(ctx, bson.D{{Key: "_id", Value: ex.ID}}, bson.D{{Key: "$set", Value: set}}); err != nil {
		return embed.Definition{}, wrap(err)
	}
	return d, nil
}

// definitionChanges is d with the optional fields in supplies that differ from d's (none
// cleared), and the $set that writes them (nil when nothing changes).
func definitionChanges(d embed.Definition, in embed.DefinitionInput, now time.Time) (embed.Definition, bson.D) {
	var set bson.D
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
	if set == nil {
		return d, nil
	}
	d.UpdatedAt = httpx.At(now)
	return d, append(set, bson.E{Key: "updatedAt", Value: now})
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
	out, err := findAll(ctx, s.defs, filter, defDoc.definition, options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}).SetLimit(int64(q.First)+1))
	if err != nil {
		return nil, false, err
	}
	if len(out) > q.First {
		return out[:q.First], true, nil
	}
	return out, false, nil
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
	update := bson.D{{Key: "$unset", Value: bson.D{{Key: field, Value: ""}}},
		{Key: "$pull", Value: bson.D{{Key: "memberships", Value: embed.MembershipKey(scope, id)}}}}
	if kind == embed.KindAttribute {
		// The users' size of values is counted again at their next read.
		field = "attrs." + scope + "." + id
		update = bson.D{{Key: "$unset", Value: bson.D{{Key: field, Value: ""}, {Key: "attrBytes", Value: ""}}}}
	}
	update = append(update, bson.E{Key: "$inc", Value: bson.D{{Key: "rev", Value: int64(1)}}})
	_, err = s.users.UpdateMany(ctx, bson.D{{Key: "accountId", Value: accountID}, {Key: field, Value: bson.D{{Key: "$exists", Value: true}}}}, update)
	return wrap(err)
}

// Definition reads one definition of scope and kind by id.
func (s *Store) Definition(ctx context.Context, accountID int64, scope, kind, id string) (embed.Definition, error) {
	oid, err := bson.ObjectIDFromHex(id)
	if err != nil {
		return embed.Definition{}, embed.ErrNotFound
	}
	var d defDoc
	err = s.defs.FindOne(ctx, bson.D{{Key: "_id", Value: oid}, {Key: "accountId", Value: accountID}, {Key: "scope", Value: scope}, {Key: "kind", Value: kind}}).Decode(&d)
	if err != nil {
		return embed.Definition{}, wrap(err)
	}
	return d.definition(), nil
}
