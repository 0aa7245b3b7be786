package embed

import (
	"context"
	"strconv"
	"sync"

	"github.com/analyticsco/platform/libs/errs"
)

// ensureTenant records the tenant, the first write of a mint. A tenant this call created
// is counted against the account's limit and removed again when it is over: nothing else
// of the mint is written yet, and two new tenants racing for the last place both lose
// rather than both win. Known tenants cost no extra round trip.
func (s *service) ensureTenant(ctx context.Context, accountID int64, tenant string) error {
	// Tenant records are never removed once they fit under the limit, so a tenant seen
	// here needs no write: most mints name a known tenant.
	if s.tenants.has(accountID, tenant) {
		return nil
	}
	created, err := s.d.Catalog.EnsureTenant(ctx, accountID, tenant)
	if err != nil {
		return storeErr(err)
	}
	if !created {
		s.tenants.add(accountID, tenant)
		return nil
	}
	limit := int64(s.limits.TenantsPerAccount)
	n, err := s.d.Catalog.CountTenants(ctx, accountID, limit+1)
	if err != nil {
		return storeErr(err)
	}
	if n > limit {
		if err := s.d.Catalog.RemoveTenantRecord(ctx, accountID, tenant); err != nil {
			return storeErr(err)
		}
		return tenantLimitReached(limit, tenant)
	}
	s.tenants.add(accountID, tenant)
	return nil
}

// tenantLimitReached is the mint's and the dry run's one answer to a new tenant past the
// account's limit.
func tenantLimitReached(limit int64, tenant string) error {
	return errs.Invalidf("the account has %d embed tenants, the limit; tenant %q cannot be created", limit, tenant)
}

// knownTenants remembers tenants that exist, bounded in entries (emptied when full: it
// is only a shortcut, keyed by names that already passed validation and the limit).
type knownTenants struct {
	mu sync.Mutex
	m  map[string]struct{}
}

const maxKnownTenants = 100_000

func tenantKey(accountID int64, tenant string) string {
	return strconv.FormatInt(accountID, 10) + "/" + tenant
}

func (k *knownTenants) has(accountID int64, tenant string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	_, ok := k.m[tenantKey(accountID, tenant)]
	return ok
}

func (k *knownTenants) add(accountID int64, tenant string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.m == nil || len(k.m) >= maxKnownTenants {
		k.m = make(map[string]struct{})
	}
	k.m[tenantKey(accountID, tenant)] = struct{}{}
}

// wouldFitTenant is ensureTenant's check without the write: a tenant that does not
// exist yet must fit under the account's limit.
func (s *service) wouldFitTenant(ctx context.Context, accountID int64, tenant string) error {
	ok, err := s.d.Catalog.TenantExists(ctx, accountID, tenant)
	if err != nil || ok {
		return storeErr(err)
	}
	limit := int64(s.limits.TenantsPerAccount)
	n, err := s.d.Catalog.CountTenants(ctx, accountID, limit+1)
	if err != nil {
		return storeErr(err)
	}
	if n+1 > limit {
		return tenantLimitReached(limit, tenant)
	}
	return nil
}
