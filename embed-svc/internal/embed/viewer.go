package embed

import (
	"context"
	"errors"
	"sort"
	"strings"

	"github.com/analyticsco/platform/libs/errs"
)

// ViewerGroups are an external user's current memberships by name: in the account's
// catalog and in one embed tenant's (client.ViewerReply).
type ViewerGroups struct {
	Account []string
	Tenant  []string
}

// ViewerGroups reads the user once, with the memberships of the account's catalog and
// of tenant's ("" : none). A user the account does not have, or one being deleted, has
// no groups; a store that cannot answer is an error (503), never "no groups".
func (s *service) ViewerGroups(ctx context.Context, accountID int64, tenant, externalID string) (ViewerGroups, error) {
	out := ViewerGroups{Account: []string{}, Tenant: []string{}}
	if tenant != "" && !ValidTenantName(tenant) {
		return ViewerGroups{}, errs.Invalidf("embedTenantName %q is not an embed tenant name", tenant)
	}
	ext := strings.ToLower(strings.TrimSpace(externalID))
	if ext == "" || len(ext) > maxNameLen {
		return out, nil
	}
	scopes := []string{AccountScope}
	if tenant != "" {
		scopes = append(scopes, tenant)
	}
	u, err := s.d.Users.ExternalUser(ctx, accountID, ext, scopes...)
	switch {
	case errors.Is(err, ErrNotFound):
		return out, nil
	case err != nil:
		return ViewerGroups{}, storeErr(err)
	case u.Deleting:
		return out, nil
	}
	out.Account = groupNames(u.Groups[AccountScope])
	if tenant != "" {
		out.Tenant = groupNames(u.Groups[tenant])
	}
	return out, nil
}

// groupNames are the names of a scope's memberships, sorted.
func groupNames(g map[string]string) []string {
	names := make([]string, 0, len(g))
	for _, n := range g {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
