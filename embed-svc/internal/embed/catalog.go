package embed

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/analyticsco/platform/libs/audit"
	"github.com/analyticsco/platform/libs/errs"
	"github.com/analyticsco/platform/libs/httpx"
	"github.com/analyticsco/platform/libs/identity"
)

// MaxPageSize bounds `first`.
const MaxPageSize = httpx.MaxPage

func (s *service) requireTenant(ctx context.Context, accountID int64, scope string) error {
	if scope == AccountScope {
		return nil
	}
	if !ValidTenantName(scope) {
		return errs.NotFoundf("embed tenant %q not found", scope)
	}
	ok, err := s.d.Catalog.TenantExists(ctx, accountID, scope)
	if err != nil {
		return storeErr(err)
	}
	if !ok {
		return errs.NotFoundf("embed tenant %q not found", scope)
	}
	return nil
}

// ListDefinitions returns one page of a catalog in a stable order.
func (s *service) ListDefinitions(ctx context.Context, p *identity.Principal, q ListQuery) (httpx.Page[Definition], error) {
	if err := requireCatalogAdmin(p, q.Scope); err != nil {
		return httpx.Page[Definition]{}, err
	}
	if q.First < 1 || q.First > MaxPageSize {
		return httpx.Page[Definition]{}, httpx.BadFirst(strconv.Itoa(q.First))
	}
	if q.After != "" {
		// The cursor is the last definition's id.
		id, err := httpx.DecodeCursor[string](q.After)
		if err != nil || id == "" {
			return httpx.Page[Definition]{}, httpx.ErrBadCursor
		}
		q.After = id
	}
	if err := s.requireTenant(ctx, p.Account.ID, q.Scope); err != nil {
		return httpx.Page[Definition]{}, err
	}
	items, more, err := s.d.Catalog.ListDefinitions(ctx, p.Account.ID, q)
	if err != nil {
		return httpx.Page[Definition]{}, storeErr(err) // ErrBadCursor answers itself
	}
	return httpx.PageOf(items, more, func(d Definition) string { return d.ID }), nil
}

// ErrBadCursor means the after cursor is not one this service issued.
var ErrBadCursor = httpx.ErrBadCursor

// CreateDefinition adds a definition to the account-wide catalog.
func (s *service) CreateDefinition(ctx context.Context, p *identity.Principal, kind string, in DefinitionInput) (_ Definition, err error) {
	ev := audit.New(p, ActionDefinitionCreate, audit.Target{Type: definitionTarget(kind)})
	ev.Details = map[string]any{"scope": "account", "name": in.Name}
	defer func() { s.record(ctx, &ev, err, http.StatusOK) }()
	if err := requireCatalogAdmin(p, AccountScope); err != nil {
		return Definition{}, err
	}
	if err := keyReach(p).account("create account-wide definitions"); err != nil {
		return Definition{}, err
	}
	in.Name = strings.TrimSpace(in.Name)
	if err := ValidateDefinition(kind, in, "body"); err != nil {
		return Definition{}, err
	}
	if err := s.checkDefinitionRoom(ctx, p.Account.ID, AccountScope, 1); err != nil {
		return Definition{}, err
	}
	now := s.now().UTC()
	d := Definition{AccountID: p.Account.ID, Scope: AccountScope, Kind: kind, Name: in.Name, Type: in.Type,
		DisplayName: in.DisplayName, DefaultValue: in.DefaultValue, Description: in.Description, CreatedAt: httpx.At(now), UpdatedAt: httpx.At(now)}
	out, err := s.d.Catalog.CreateDefinition(ctx, d)
	if errors.Is(err, ErrDuplicate) {
		what := "group"
		if kind == KindAttribute {
			what = "user attribute"
		}
		return Definition{}, errs.Conflictf("a %s named %q already exists", what, in.Name)
	}
	if err != nil {
		return Definition{}, storeErr(err)
	}
	ev.Target.ID = out.ID
	return out, nil
}

// DeleteDefinition removes a definition with its memberships or values.
func (s *service) DeleteDefinition(ctx context.Context, p *identity.Principal, scope, kind, id string) (err error) {
	ev := audit.New(p, ActionDefinitionDelete, audit.Target{Type: definitionTarget(kind), ID: id})
	ev.Details = map[string]any{"scope": "account"}
	if scope != AccountScope {
		ev.Details = map[string]any{"scope": "embed_tenant", "embedTenant": scope}
	}
	defer func() { s.record(ctx, &ev, err, http.StatusNoContent) }()
	if err := requireCatalogAdmin(p, scope); err != nil {
		return err
	}
	// A definition's memberships and values go from every user of the account.
	if err := keyReach(p).account("delete definitions"); err != nil {
		return err
	}
	if err := s.requireTenant(ctx, p.Account.ID, scope); err != nil {
		return err
	}
	err = s.d.Catalog.DeleteDefinition(ctx, p.Account.ID, scope, kind, id)
	if errors.Is(err, ErrNotFound) {
		what := "group"
		if kind == KindAttribute {
			what = "user attribute"
		}
		return errs.NotFoundf("%s %q not found", what, id)
	}
	return storeErr(err)
}
