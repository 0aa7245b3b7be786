package memstore

import (
	"context"
	"encoding/hex"
	"slices"
	"strings"
	"time"

	"github.com/analyticsco/platform/embed-svc/internal/embed"
	"github.com/analyticsco/platform/libs/httpx"
)

// AccountSettings returns the account-wide embed settings (zero when none are set).
func (s *Store) AccountSettings(_ context.Context, accountID int64) (embed.AccountSettings, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.settings[accountID]
	return embed.AccountSettings{AllowAI: copyBool(a.AllowAI), ShowDashboardChat: copyBool(a.ShowDashboardChat), ShowWorkbookChat: copyBool(a.ShowWorkbookChat),
		ShowAIWidgets: copyBool(a.ShowAIWidgets), Locale: copyString(a.Locale), Timezone: copyString(a.Timezone)}, nil
}

func copyBool(p *bool) *bool {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

// SetAccountSettings replaces the account-wide embed settings.
func (s *Store) SetAccountSettings(_ context.Context, accountID int64, v embed.AccountSettings) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.settings[accountID] = embed.AccountSettings{AllowAI: copyBool(v.AllowAI), ShowDashboardChat: copyBool(v.ShowDashboardChat),
		ShowWorkbookChat: copyBool(v.ShowWorkbookChat), ShowAIWidgets: copyBool(v.ShowAIWidgets), Locale: copyString(v.Locale), Timezone: copyString(v.Timezone)}
	return nil
}

// EnsureTenant records the tenant (idempotent) and reports whether this call created it.
func (s *Store) EnsureTenant(_ context.Context, accountID int64, tenant string) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := tenantKey{accountID, tenant}
	if s.tenants[k] {
		return false, nil
	}
	s.tenants[k] = true
	return true, nil
}

// RemoveTenantRecord deletes the record of a tenant.
func (s *Store) RemoveTenantRecord(_ context.Context, accountID int64, tenant string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.tenants, tenantKey{accountID, tenant})
	return nil
}

// TenantExists reports whether the account has used the tenant.
func (s *Store) TenantExists(_ context.Context, accountID int64, tenant string) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tenants[tenantKey{accountID, tenant}], nil
}

// CountTenants counts the account's embed tenants, stopping at max.
func (s *Store) CountTenants(_ context.Context, accountID int64, max int64) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var n int64
	for k := range s.tenants {
		if k.account == accountID && n < max {
			n++
		}
	}
	return n, nil
}

// CountDefinitions counts the definitions of both kinds in scope, stopping at max.
func (s *Store) CountDefinitions(_ context.Context, accountID int64, scope string, max int64) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var n int64
	for _, d := range s.defs {
		if d.AccountID == accountID && d.Scope == scope && n < max {
			n++
		}
	}
	return n, nil
}

// definitionsWhere returns the stored definitions for which keep holds, by id.
func (s *Store) definitionsWhere(keep func(embed.Definition) bool) []embed.Definition {
	var out []embed.Definition
	for _, d := range s.defs {
		if keep(d) {
			out = append(out, copyDefinition(d))
		}
	}
	slices.SortFunc(out, func(a, b embed.Definition) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// FindDefinitions returns the scope's definitions (both kinds) named in names.
func (s *Store) FindDefinitions(_ context.Context, accountID int64, scope string, names []string) ([]embed.Definition, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.definitionsWhere(func(d embed.Definition) bool {
		return d.AccountID == accountID && d.Scope == scope && slices.Contains(names, d.Name)
	}), nil
}

// find returns the definition with the unique key (account, scope, kind, name).
func (s *Store) find(accountID int64, scope, kind, name string) (embed.Definition, bool) {
	for _, d := range s.defs {
		if d.AccountID == accountID && d.Scope == scope && d.Kind == kind && d.Name == name {
			return d, true
		}
	}
	return embed.Definition{}, false
}

// UpsertDefinitions creates or updates each definition (upsertDefinition) and returns
// them as stored, in order; the first error stops it (the real store writes one batch,
// so a refusal leaves the batch's others written there too).
func (s *Store) UpsertDefinitions(_ context.Context, accountID int64, scope string, us []embed.DefinitionUpsert, now time.Time) ([]embed.Definition, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]embed.Definition, len(us))
	for i, u := range us {
		d, err := s.upsertDefinition(accountID, scope, u, now)
		if err != nil {
			return nil, err
		}
		out[i] = d
	}
	return out, nil
}

// upsertDefinition creates the definition, or updates the supplied fields that differ
// from Existing's; one created meanwhile by another request is updated instead
// (embed.ErrConflictType when it is an attribute of another type).
func (s *Store) upsertDefinition(accountID int64, scope string, u embed.DefinitionUpsert, now time.Time) (embed.Definition, error) {
	in, at := u.Input, httpx.At(stored(now))
	var d embed.Definition
	if u.Existing != nil {
		d = copyDefinition(*u.Existing)
	} else {
		ex, found := s.find(accountID, scope, u.Kind, in.Name)
		if !found {
			d = embed.Definition{ID: s.nextDefinitionID(), AccountID: accountID, Scope: scope, Kind: u.Kind, Name: in.Name, Type: in.Type,
				DisplayName: copyString(in.DisplayName), DefaultValue: copyString(in.DefaultValue), Description: copyString(in.Description), CreatedAt: at, UpdatedAt: at}
			s.defs[d.ID] = d
			return copyDefinition(d), nil
		}
		if u.Kind == embed.KindAttribute && ex.Type != in.Type {
			return embed.Definition{}, embed.ErrConflictType
		}
		d = copyDefinition(ex)
	}
	cur, exists := s.defs[d.ID]
	changed := false
	apply := func(supplied *string, mine, theirs **string) {
		if supplied != nil && (*mine == nil || **mine != *supplied) {
			*mine, *theirs, changed = copyString(supplied), copyString(supplied), true
		}
	}
	apply(in.Description, &d.Description, &cur.Description)
	apply(in.DisplayName, &d.DisplayName, &cur.DisplayName)
	apply(in.DefaultValue, &d.DefaultValue, &cur.DefaultValue)
	if !changed {
		return d, nil
	}
	d.UpdatedAt, cur.UpdatedAt = at, at
	if exists {
		s.defs[d.ID] = cur
	}
	return d, nil
}

// CreateDefinition inserts a new definition; embed.ErrDuplicate when the name is taken.
func (s *Store) CreateDefinition(_ context.Context, d embed.Definition) (embed.Definition, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, taken := s.find(d.AccountID, d.Scope, d.Kind, d.Name); taken {
		return embed.Definition{}, embed.ErrDuplicate
	}
	d = copyDefinition(d)
	d.ID, d.CreatedAt, d.UpdatedAt = s.nextDefinitionID(), storedAt(d.CreatedAt), storedAt(d.UpdatedAt)
	s.defs[d.ID] = d
	return copyDefinition(d), nil
}

// validID: definition ids are 24 hex digits (MongoDB's ObjectIDs).
func validID(id string) bool {
	_, err := hex.DecodeString(id)
	return err == nil && len(id) == 24
}

// ListDefinitions returns up to q.First definitions after q.After (an id), in id order,
// and whether more follow.
func (s *Store) ListDefinitions(_ context.Context, accountID int64, q embed.ListQuery) ([]embed.Definition, bool, error) {
	if q.After != "" && !validID(q.After) {
		return nil, false, embed.ErrBadCursor
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.definitionsWhere(func(d embed.Definition) bool {
		return d.AccountID == accountID && d.Scope == q.Scope && d.Kind == q.Kind && (q.After == "" || d.ID > q.After)
	})
	if len(out) > q.First {
		return out[:q.First], true, nil
	}
	return out, false, nil
}

// DeleteDefinition removes the definition, then every membership or value using it.
func (s *Store) DeleteDefinition(_ context.Context, accountID int64, scope, kind, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	d, ok := s.defs[id]
	if !ok || d.AccountID != accountID || d.Scope != scope || d.Kind != kind {
		return embed.ErrNotFound
	}
	delete(s.defs, id)
	for k, u := range s.users {
		if k.account != accountID {
			continue
		}
		if _, used := u.Groups[scope][id]; used && kind == embed.KindGroup {
			delete(u.Groups[scope], id)
			u.Rev++
		}
		if _, used := u.Attributes[scope][id]; used && kind == embed.KindAttribute {
			delete(u.Attributes[scope], id)
			u.AttributeBytes = attributeBytes(u)
			u.Rev++
		}
	}
	return nil
}

// attributeBytes is the size of all of u's values.
func attributeBytes(u *embed.ExternalUser) int64 {
	var n int64
	for _, vals := range u.Attributes {
		for _, v := range vals {
			n += embed.ValueBytes(v.Value)
		}
	}
	return n
}
