package storetest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/analyticsco/platform/embed-svc/internal/embed"
	"github.com/analyticsco/platform/libs/httpx"
)

// catalogCases are the contract of embed.CatalogStore.
var catalogCases = map[string]func(*testing.T, Durable){
	"account-settings-are-replaced-whole":           settingsReplaced,
	"tenants-are-recorded-once-and-counted":         tenantsRecorded,
	"definitions-created-listed-and-deleted":        definitionsLifecycle,
	"upsert-creates-updates-and-keeps-the-type":     upsertDefinitions,
	"a-batch-upserts-many-and-races-make-one-each":  upsertBatches,
	"deleting-a-definition-removes-what-used-it":    deleteRemovesUses,
	"definitions-of-other-accounts-are-not-visible": definitionsIsolated,
}

func settingsReplaced(t *testing.T, s Durable) {
	ctx, acc := context.Background(), Account()
	if got, err := s.AccountSettings(ctx, acc); err != nil || !reflect.DeepEqual(got, embed.AccountSettings{}) {
		t.Fatalf("no settings: %+v %v", got, err)
	}
	first := embed.AccountSettings{AllowAI: ptr(false), Locale: ptr("de-DE"), Timezone: ptr("Europe/Berlin")}
	if err := s.SetAccountSettings(ctx, acc, first); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.AccountSettings(ctx, acc); !reflect.DeepEqual(got, first) {
		t.Fatalf("read back %+v, want %+v", got, first)
	}
	second := embed.AccountSettings{ShowAIWidgets: ptr(true)}
	if err := s.SetAccountSettings(ctx, acc, second); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.AccountSettings(ctx, acc); !reflect.DeepEqual(got, second) {
		t.Fatalf("after a replace %+v, want %+v (nothing of the first left)", got, second)
	}
	if got, _ := s.AccountSettings(ctx, Account()); !reflect.DeepEqual(got, embed.AccountSettings{}) {
		t.Fatalf("another account sees %+v", got)
	}
}

func tenantsRecorded(t *testing.T, s Durable) {
	ctx, acc := context.Background(), Account()
	if created, err := s.EnsureTenant(ctx, acc, "north-tenant"); !created || err != nil {
		t.Fatalf("first ensure: %v %v", created, err)
	}
	if created, err := s.EnsureTenant(ctx, acc, "north-tenant"); created || err != nil {
		t.Fatalf("second ensure: %v %v", created, err)
	}
	for _, n := range []string{"south-tenant", "east-tenant"} {
		if _, err := s.EnsureTenant(ctx, acc, n); err != nil {
			t.Fatal(err)
		}
	}
	if ok, _ := s.TenantExists(ctx, acc, "north-tenant"); !ok {
		t.Fatal("the tenant does not exist")
	}
	if ok, _ := s.TenantExists(ctx, Account(), "north-tenant"); ok {
		t.Fatal("another account has the tenant")
	}
	if n, _ := s.CountTenants(ctx, acc, 10); n != 3 {
		t.Fatalf("count %d, want 3", n)
	}
	if n, _ := s.CountTenants(ctx, acc, 2); n != 2 {
		t.Fatalf("count stopping at 2: %d", n)
	}
	if err := s.RemoveTenantRecord(ctx, acc, "north-tenant"); err != nil {
		t.Fatal(err)
	}
	if ok, _ := s.TenantExists(ctx, acc, "north-tenant"); ok {
		t.Fatal("a removed tenant exists")
	}
	if created, _ := s.EnsureTenant(ctx, acc, "north-tenant"); !created {
		t.Fatal("a removed tenant is not created again")
	}
}

func definition(acc int64, scope, kind, name string) embed.Definition {
	now := httpx.At(at(0))
	d := embed.Definition{AccountID: acc, Scope: scope, Kind: kind, Name: name, CreatedAt: now, UpdatedAt: now}
	if kind == embed.KindAttribute {
		d.Type = embed.TypeString
	}
	return d
}

func names(ds []embed.Definition) []string {
	out := []string{}
	for _, d := range ds {
		out = append(out, d.Kind+"/"+d.Name)
	}
	return out
}

func definitionsLifecycle(t *testing.T, s Durable) {
	ctx, acc := context.Background(), Account()
	var ids []string
	for _, n := range []string{"g1", "g2", "g3"} {
		d, err := s.CreateDefinition(ctx, definition(acc, embed.AccountScope, embed.KindGroup, n))
		if err != nil || d.ID == "" || d.Name != n || d.AccountID != acc {
			t.Fatalf("create %s: %+v %v", n, d, err)
		}
		ids = append(ids, d.ID)
	}
	if _, err := s.CreateDefinition(ctx, definition(acc, embed.AccountScope, embed.KindGroup, "g1")); !errors.Is(err, embed.ErrDuplicate) {
		t.Fatalf("a taken name: %v", err)
	}
	// The same name is free in a tenant's scope and for the other kind.
	for _, d := range []embed.Definition{definition(acc, "north-tenant", embed.KindGroup, "g1"), definition(acc, embed.AccountScope, embed.KindAttribute, "g1")} {
		if _, err := s.CreateDefinition(ctx, d); err != nil {
			t.Fatalf("%s %s in %s: %v", d.Kind, d.Name, d.Scope, err)
		}
	}
	page, more, err := s.ListDefinitions(ctx, acc, embed.ListQuery{Scope: embed.AccountScope, Kind: embed.KindGroup, First: 2})
	if err != nil || !more || !reflect.DeepEqual(names(page), []string{"group/g1", "group/g2"}) {
		t.Fatalf("first page: %v more=%v %v", names(page), more, err)
	}
	page, more, err = s.ListDefinitions(ctx, acc, embed.ListQuery{Scope: embed.AccountScope, Kind: embed.KindGroup, First: 2, After: page[1].ID})
	if err != nil || more || !reflect.DeepEqual(names(page), []string{"group/g3"}) {
		t.Fatalf("second page: %v more=%v %v", names(page), more, err)
	}
	if _, _, err := s.ListDefinitions(ctx, acc, embed.ListQuery{Scope: embed.AccountScope, Kind: embed.KindGroup, First: 2, After: "not-an-id"}); !errors.Is(err, embed.ErrBadCursor) {
		t.Fatalf("a cursor that is no id: %v", err)
	}
	found, err := s.FindDefinitions(ctx, acc, embed.AccountScope, []string{"g1", "g3", "nope"})
	if err != nil || len(found) != 3 { // g1 of both kinds, g3
		t.Fatalf("find: %v %v", names(found), err)
	}
	if n, _ := s.CountDefinitions(ctx, acc, embed.AccountScope, 100); n != 4 {
		t.Fatalf("count %d, want 4 (both kinds)", n)
	}
	if n, _ := s.CountDefinitions(ctx, acc, embed.AccountScope, 2); n != 2 {
		t.Fatalf("count stopping at 2: %d", n)
	}
	for _, c := range []struct{ scope, kind, id string }{
		{"north-tenant", embed.KindGroup, ids[0]}, {embed.AccountScope, embed.KindAttribute, ids[0]}, {embed.AccountScope, embed.KindGroup, "not-an-id"},
	} {
		if err := s.DeleteDefinition(ctx, acc, c.scope, c.kind, c.id); !errors.Is(err, embed.ErrNotFound) {
			t.Fatalf("delete %+v: %v, want not found", c, err)
		}
	}
	if err := s.DeleteDefinition(ctx, acc, embed.AccountScope, embed.KindGroup, ids[0]); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteDefinition(ctx, acc, embed.AccountScope, embed.KindGroup, ids[0]); !errors.Is(err, embed.ErrNotFound) {
		t.Fatalf("second delete: %v", err)
	}
}

// upsertOne upserts one definition through the batch.
func upsertOne(t *testing.T, s Durable, acc int64, scope string, u embed.DefinitionUpsert, now time.Time) (embed.Definition, error) {
	t.Helper()
	defs, err := s.UpsertDefinitions(context.Background(), acc, scope, []embed.DefinitionUpsert{u}, now)
	if err != nil {
		return embed.Definition{}, err
	}
	if len(defs) != 1 {
		t.Fatalf("%d definitions for one upsert", len(defs))
	}
	return defs[0], nil
}

func upsertDefinitions(t *testing.T, s Durable) {
	ctx, acc, scope := context.Background(), Account(), "cm-tenant"
	t0 := at(-time.Hour)
	in := embed.DefinitionInput{Name: "level", Type: embed.TypeNumber, Description: ptr("Level")}
	d, err := upsertOne(t, s, acc, scope, embed.DefinitionUpsert{Input: in, Kind: embed.KindAttribute}, t0)
	if err != nil || d.ID == "" || d.Type != embed.TypeNumber || *d.Description != "Level" || !d.CreatedAt.Equal(t0) {
		t.Fatalf("create: %+v %v", d, err)
	}
	// Created meanwhile by another request (the caller saw none): the stored one is updated.
	in.Description = ptr("The level")
	again, err := upsertOne(t, s, acc, scope, embed.DefinitionUpsert{Input: in, Kind: embed.KindAttribute}, t0.Add(time.Minute))
	if err != nil || again.ID != d.ID || *again.Description != "The level" || !again.UpdatedAt.Equal(t0.Add(time.Minute)) {
		t.Fatalf("upsert of an existing name: %+v %v", again, err)
	}
	// ... unless it is an attribute of another type.
	in.Type = embed.TypeString
	if _, err := upsertOne(t, s, acc, scope, embed.DefinitionUpsert{Input: in, Kind: embed.KindAttribute}, t0); !errors.Is(err, embed.ErrConflictType) {
		t.Fatalf("another type: %v", err)
	}
	// An update writes the supplied fields that differ, clears none, and keeps the time
	// when nothing changed.
	in = embed.DefinitionInput{Name: "level", Type: embed.TypeNumber, DisplayName: ptr("Lvl")}
	upd, err := upsertOne(t, s, acc, scope, embed.DefinitionUpsert{Input: in, Kind: embed.KindAttribute, Existing: &again}, t0.Add(2*time.Minute))
	if err != nil || *upd.DisplayName != "Lvl" || upd.Description == nil || *upd.Description != "The level" || !upd.UpdatedAt.Equal(t0.Add(2*time.Minute)) {
		t.Fatalf("update: %+v %v", upd, err)
	}
	same, err := upsertOne(t, s, acc, scope, embed.DefinitionUpsert{Input: in, Kind: embed.KindAttribute, Existing: &upd}, t0.Add(3*time.Minute))
	if err != nil || !same.UpdatedAt.Equal(upd.UpdatedAt.Time) {
		t.Fatalf("an update changing nothing: %+v %v", same, err)
	}
	stored, _ := s.FindDefinitions(ctx, acc, scope, []string{"level"})
	if len(stored) != 1 || *stored[0].DisplayName != "Lvl" || *stored[0].Description != "The level" || stored[0].Type != embed.TypeNumber {
		t.Fatalf("stored: %+v", stored)
	}
}

// upsertBatches: one batch creates and updates many definitions and answers them in
// order; batches racing to create the same names make one definition per name, which
// every batch answers.
func upsertBatches(t *testing.T, s Durable) {
	ctx, acc, scope := context.Background(), Account(), "batch-tenant"
	t0 := at(-time.Hour)
	existing, err := upsertOne(t, s, acc, scope, embed.DefinitionUpsert{Input: embed.DefinitionInput{Name: "kept"}, Kind: embed.KindGroup}, t0)
	if err != nil {
		t.Fatal(err)
	}
	var batch []embed.DefinitionUpsert
	for i := range 100 {
		batch = append(batch, embed.DefinitionUpsert{Input: embed.DefinitionInput{Name: fmt.Sprintf("a%02d", i), Type: embed.TypeString}, Kind: embed.KindAttribute})
	}
	batch = append(batch, embed.DefinitionUpsert{Input: embed.DefinitionInput{Name: "kept", Description: ptr("now described")}, Kind: embed.KindGroup, Existing: &existing})
	defs, err := s.UpsertDefinitions(ctx, acc, scope, batch, t0.Add(time.Minute))
	if err != nil || len(defs) != len(batch) {
		t.Fatalf("batch: %d definitions, %v", len(defs), err)
	}
	for i, d := range defs {
		if d.Name != batch[i].Input.Name || d.Kind != batch[i].Kind || d.ID == "" {
			t.Fatalf("answer %d is %+v, want %s", i, d, batch[i].Input.Name)
		}
	}
	if last := defs[len(defs)-1]; last.ID != existing.ID || *last.Description != "now described" {
		t.Fatalf("the update in the batch: %+v", last)
	}
	if n, _ := s.CountDefinitions(ctx, acc, scope, 200); n != 101 {
		t.Fatalf("%d definitions stored, want 101", n)
	}
	// One batch changing all of them (one update command of 101 statements on existing
	// documents: FerretDB alone, under the local stack's proxy, never answers one of 50).
	changes := make([]embed.DefinitionUpsert, len(defs))
	for i, d := range defs {
		changes[i] = embed.DefinitionUpsert{Input: embed.DefinitionInput{Name: d.Name, Type: d.Type, Description: ptr("changed")}, Kind: d.Kind, Existing: &defs[i]}
	}
	if _, err := s.UpsertDefinitions(ctx, acc, scope, changes, t0.Add(2*time.Minute)); err != nil {
		t.Fatalf("a batch changing %d definitions: %v", len(changes), err)
	}
	names := make([]string, len(defs))
	for i, d := range defs {
		names[i] = d.Name
	}
	changed, err := s.FindDefinitions(ctx, acc, scope, names)
	if err != nil || len(changed) != len(defs) {
		t.Fatalf("after the batch of changes: %d definitions, %v", len(changed), err)
	}
	for _, d := range changed {
		if d.Description == nil || *d.Description != "changed" || !d.UpdatedAt.Equal(t0.Add(2*time.Minute)) {
			t.Fatalf("definition %s after the batch of changes: %+v", d.Name, d)
		}
	}
	// Concurrent batches creating the same names.
	var racing []embed.DefinitionUpsert
	for i := range 10 {
		racing = append(racing, embed.DefinitionUpsert{Input: embed.DefinitionInput{Name: fmt.Sprintf("r%d", i), Description: ptr("d")}, Kind: embed.KindGroup})
	}
	answers := make([][]embed.Definition, 4)
	together(4, func(i int) {
		var err error
		if answers[i], err = s.UpsertDefinitions(ctx, acc, scope, racing, t0); err != nil {
			t.Errorf("racing batch %d: %v", i, err)
		}
	})
	if n, _ := s.CountDefinitions(ctx, acc, scope, 200); n != 111 {
		t.Fatalf("%d definitions after racing batches, want 111 (one per name)", n)
	}
	for i := range answers {
		for j := range answers[i] {
			if answers[i][j].ID != answers[0][j].ID {
				t.Fatalf("batches answer different ids for %s", racing[j].Input.Name)
			}
		}
	}
}

func deleteRemovesUses(t *testing.T, s Durable) {
	ctx, acc := context.Background(), Account()
	g, _ := s.CreateDefinition(ctx, definition(acc, embed.AccountScope, embed.KindGroup, "crew"))
	a, _ := s.CreateDefinition(ctx, definition(acc, embed.AccountScope, embed.KindAttribute, "region"))
	keep, _ := s.CreateDefinition(ctx, definition(acc, embed.AccountScope, embed.KindAttribute, "floor"))
	upd := embed.UserUpdate{Scope: embed.AccountScope, Groups: map[string]string{g.ID: "crew"},
		SetAttributes: map[string]embed.StoredValue{a.ID: {Name: "region", Value: []byte(`"eu"`)}, keep.ID: {Name: "floor", Value: []byte(`3`)}}}
	if _, err := s.CreateExternalUser(ctx, acc, "u1", 10, upd, at(0)); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteDefinition(ctx, acc, embed.AccountScope, embed.KindGroup, g.ID); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteDefinition(ctx, acc, embed.AccountScope, embed.KindAttribute, a.ID); err != nil {
		t.Fatal(err)
	}
	u, err := s.ExternalUser(ctx, acc, "u1", embed.AccountScope)
	if err != nil || len(u.Groups[embed.AccountScope]) != 0 || len(u.Attributes[embed.AccountScope]) != 1 || u.Attributes[embed.AccountScope][keep.ID].Name != "floor" {
		t.Fatalf("after the deletes: groups %v attributes %v (%v)", u.Groups, u.Attributes, err)
	}
}

func definitionsIsolated(t *testing.T, s Durable) {
	ctx, acc, other := context.Background(), Account(), Account()
	d, _ := s.CreateDefinition(ctx, definition(acc, embed.AccountScope, embed.KindGroup, "mine"))
	if found, _ := s.FindDefinitions(ctx, other, embed.AccountScope, []string{"mine"}); len(found) != 0 {
		t.Fatalf("another account finds %v", names(found))
	}
	if page, _, _ := s.ListDefinitions(ctx, other, embed.ListQuery{Scope: embed.AccountScope, Kind: embed.KindGroup, First: 10}); len(page) != 0 {
		t.Fatalf("another account lists %v", names(page))
	}
	if err := s.DeleteDefinition(ctx, other, embed.AccountScope, embed.KindGroup, d.ID); !errors.Is(err, embed.ErrNotFound) {
		t.Fatalf("another account deletes: %v", err)
	}
	if _, err := s.CreateDefinition(ctx, definition(other, embed.AccountScope, embed.KindGroup, "mine")); err != nil {
		t.Fatalf("another account's own definition of the name: %v", err)
	}
}
