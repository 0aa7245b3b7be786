// Package memstore is embed-svc's stores in memory: Store keeps what mongostore keeps in
// MongoDB (the catalog, external users, session records), Sessions what redisstore keeps
// in Redis (session ids, live sessions, revocations), and Directory answers as the
// identity lookup does. They exist so the service's rules can be tested without servers;
// the contract suites (internal/store/storetest) hold each store to the real adapter's
// behaviour, including its concurrency guarantees.
//
// Every method copies what it takes and what it returns, so a caller can never change
// stored state through a map or slice it holds. Times are kept in UTC at millisecond
// precision, as MongoDB keeps them.
package memstore

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/analyticsco/platform/embed-svc/internal/embed"
	"github.com/analyticsco/platform/libs/httpx"
)

// The ports each fake implements.
var (
	_ embed.CatalogStore       = (*Store)(nil)
	_ embed.UserStore          = (*Store)(nil)
	_ embed.SessionRecordStore = (*Store)(nil)
	_ embed.SessionStore       = (*Sessions)(nil)
	_ embed.Directory          = (*Directory)(nil)
)

// Store implements embed.CatalogStore, embed.UserStore and embed.SessionRecordStore.
type Store struct {
	mu        sync.Mutex
	settings  map[int64]embed.AccountSettings
	tenants   map[tenantKey]bool
	defs      map[string]embed.Definition // by id
	defSeq    int64
	users     map[userKey]*embed.ExternalUser
	userSeq   int64
	counters  map[int64]int64                // places taken under each account's external-user limit
	records   map[string]embed.SessionRecord // by public id
	retention time.Duration
}

type tenantKey struct {
	account int64
	name    string
}

type userKey struct {
	account int64
	id      string // an external id
}

// New returns an empty store.
func New() *Store {
	return &Store{settings: map[int64]embed.AccountSettings{}, tenants: map[tenantKey]bool{}, defs: map[string]embed.Definition{},
		users: map[userKey]*embed.ExternalUser{}, counters: map[int64]int64{},
		records: map[string]embed.SessionRecord{}, retention: embed.DefaultSessionRetention}
}

// WithSessionRetention sets how long a session's record stays after its token expires.
func (s *Store) WithSessionRetention(d time.Duration) *Store {
	if d > 0 {
		s.retention = d
	}
	return s
}

// stored is t as MongoDB keeps it: UTC, milliseconds.
func stored(t time.Time) time.Time { return t.UTC().Truncate(time.Millisecond) }

func storedAt(t httpx.Time) httpx.Time { return httpx.At(stored(t.Time)) }

// normalized is a JSON value as it comes back from the real store (decoded and encoded
// again: 1e2 reads back as 100, spaces go).
func normalized(raw json.RawMessage) (json.RawMessage, error) {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, err
	}
	return json.Marshal(v)
}

// copyUser copies u with the memberships and values of scopes only, as mongostore
// projects a read.
func copyUser(u *embed.ExternalUser, scopes ...string) embed.ExternalUser {
	c := *u
	c.Email, c.DisplayName, c.Picture = copyString(u.Email), copyString(u.DisplayName), copyString(u.Picture)
	c.Groups, c.Attributes = nil, map[string]map[string]embed.StoredValue{}
	for _, scope := range scopes {
		if g, ok := u.Groups[scope]; ok {
			if c.Groups == nil {
				c.Groups = map[string]map[string]string{}
			}
			c.Groups[scope] = maps.Clone(g)
		}
		if a, ok := u.Attributes[scope]; ok {
			c.Attributes[scope] = maps.Clone(a)
		}
	}
	c.Tenants, c.Deployments = slices.Clone(u.Tenants), slices.Clone(u.Deployments)
	c.Memberships = memberships(u)
	return c
}

// memberships are u's memberships in every scope, as mongostore keeps them beside the
// groups (embed.MembershipKey, sorted).
func memberships(u *embed.ExternalUser) []string {
	out := []string{}
	for scope, g := range u.Groups {
		for id := range g {
			out = append(out, embed.MembershipKey(scope, id))
		}
	}
	slices.Sort(out)
	return out
}

// allScopes are the scopes u has memberships or values in.
func allScopes(u *embed.ExternalUser) []string {
	var out []string
	for scope := range u.Groups {
		out = append(out, scope)
	}
	for scope := range u.Attributes {
		if _, ok := u.Groups[scope]; !ok {
			out = append(out, scope)
		}
	}
	return out
}

func copyString(p *string) *string {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

func copyDefinition(d embed.Definition) embed.Definition {
	d.DisplayName, d.DefaultValue, d.Description = copyString(d.DisplayName), copyString(d.DefaultValue), copyString(d.Description)
	return d
}

// nextDefinitionID is an id like MongoDB's ObjectIDs: 24 hex digits, increasing.
func (s *Store) nextDefinitionID() string {
	s.defSeq++
	return fmt.Sprintf("%024x", s.defSeq)
}
