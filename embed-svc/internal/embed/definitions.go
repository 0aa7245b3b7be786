package embed

import (
	"context"
	"errors"
	"sort"
	"strings"
	"time"

	"github.com/analyticsco/platform/libs/errs"
)

// definitionPlan is the outcome of validating a request against the stored catalog.
type definitionPlan struct {
	upserts []DefinitionUpsert
	byKey   map[string]*Definition // kind+"/"+name -> stored definition (existing ones)
	types   map[string]string      // attribute name -> type in effect after the upserts
}

// key names a definition by kind and name.
func key(kind, name string) string { return kind + "/" + name }

// planDefinitions checks the request's groups, attribute values and definitions against
// the scope's stored catalog (one read) and plans the writes, writing nothing: the spec's
// "cannot change type", "User attributes not found" and "Groups with names ... not found"
// are decided here, word for word.
func (s *service) planDefinitions(ctx context.Context, accountID int64, scope string, req *GenerateSessionRequest) (*definitionPlan, error) {
	plan := &definitionPlan{byKey: map[string]*Definition{}, types: map[string]string{}}
	names := map[string]bool{}
	for _, g := range req.Groups {
		names[g] = true
	}
	for _, a := range req.UserAttributes {
		names[a.Name] = true
	}
	for _, d := range req.GroupDefinitions {
		names[d.Name] = true
	}
	for _, d := range req.UserAttributeDefinitions {
		names[d.Name] = true
	}
	if len(names) == 0 {
		return plan, nil
	}
	list := make([]string, 0, len(names))
	for n := range names {
		list = append(list, n)
	}
	sort.Strings(list)
	defs, err := s.d.Catalog.FindDefinitions(ctx, accountID, scope, list)
	if err != nil {
		return nil, storeErr(err)
	}
	for i := range defs {
		plan.byKey[key(defs[i].Kind, defs[i].Name)] = &defs[i]
		if defs[i].Kind == KindAttribute {
			plan.types[defs[i].Name] = defs[i].Type
		}
	}
	for _, in := range req.UserAttributeDefinitions {
		ex := plan.byKey[key(KindAttribute, in.Name)]
		if ex != nil && ex.Type != in.Type {
			return nil, errs.Conflictf("cannot change type").WithCode(errs.CodeDefinitionType)
		}
		plan.types[in.Name] = in.Type
		if ex == nil || definitionChanged(ex, in) {
			plan.upserts = append(plan.upserts, DefinitionUpsert{Input: in, Kind: KindAttribute, Existing: ex})
		}
	}
	groupDefs := map[string]bool{}
	for _, in := range req.GroupDefinitions {
		groupDefs[in.Name] = true
		ex := plan.byKey[key(KindGroup, in.Name)]
		if ex == nil || definitionChanged(ex, in) {
			plan.upserts = append(plan.upserts, DefinitionUpsert{Input: in, Kind: KindGroup, Existing: ex})
		}
	}
	var missingAttrs bool
	for _, a := range req.UserAttributes {
		if _, ok := plan.types[a.Name]; !ok {
			missingAttrs = true
		}
	}
	if missingAttrs {
		return nil, errs.Invalidf("User attributes not found")
	}
	var missing []string
	for _, g := range req.Groups {
		if plan.byKey[key(KindGroup, g)] == nil && !groupDefs[g] {
			missing = append(missing, g)
		}
	}
	if len(missing) > 0 {
		return nil, errs.Invalidf("Groups with names %s not found", strings.Join(missing, ", "))
	}
	for _, a := range req.UserAttributes {
		got, _ := valueType(a.Value)
		if got != "" && !valueFits(got, plan.types[a.Name]) {
			return nil, errs.Invalidf("userAttributes %q: value does not match the attribute's type %s", a.Name, plan.types[a.Name])
		}
	}
	return plan, nil
}

// definitionChanged: optional fields are updated when supplied and different, never cleared.
func definitionChanged(ex *Definition, in DefinitionInput) bool {
	diff := func(supplied, stored *string) bool {
		return supplied != nil && (stored == nil || *stored != *supplied)
	}
	return diff(in.Description, ex.Description) || diff(in.DisplayName, ex.DisplayName) || diff(in.DefaultValue, ex.DefaultValue)
}

// applyDefinitions writes the planned upserts in one batch and returns the id of every
// definition the request names, by kind and name.
func (s *service) applyDefinitions(ctx context.Context, accountID int64, scope string, plan *definitionPlan, now time.Time) (map[string]string, error) {
	ids := make(map[string]string, len(plan.byKey)+len(plan.upserts))
	for k, d := range plan.byKey {
		ids[k] = d.ID
	}
	if len(plan.upserts) == 0 {
		return ids, nil
	}
	defs, err := s.d.Catalog.UpsertDefinitions(ctx, accountID, scope, plan.upserts, now)
	if errors.Is(err, ErrConflictType) {
		return nil, errs.Conflictf("cannot change type").WithCode(errs.CodeDefinitionType)
	}
	if err != nil {
		return nil, storeErr(err)
	}
	for _, d := range defs {
		ids[key(d.Kind, d.Name)] = d.ID
	}
	return ids, nil
}

// ErrConflictType means a concurrent request created the attribute with another type.
var ErrConflictType = errors.New("attribute type differs")

// userUpdate is what a mint writes onto its external user: the profile it sends, the
// scope's memberships when it sends groups, the values it sends (null clears), and the
// session's tenant and deployment.
func (m *mintPlan) userUpdate(req *GenerateSessionRequest, ids map[string]string) UserUpdate {
	u := UserUpdate{Email: req.Email, Scope: m.scope, Tenant: m.tenant, Deployment: m.deployment.ID, Within: m.reach.deployments}
	if req.UserProfile != nil {
		u.DisplayName, u.Picture = req.UserProfile.DisplayName, req.UserProfile.Picture
	}
	if req.Groups != nil {
		u.Groups = make(map[string]string, len(req.Groups))
		for _, g := range req.Groups {
			u.Groups[ids[key(KindGroup, g)]] = g
		}
	}
	for _, a := range req.UserAttributes {
		id := ids[key(KindAttribute, a.Name)]
		if t, _ := valueType(a.Value); t == "" {
			u.ClearAttributes = append(u.ClearAttributes, id)
			continue
		}
		if u.SetAttributes == nil {
			u.SetAttributes = map[string]StoredValue{}
		}
		u.SetAttributes[id] = StoredValue(a)
	}
	return u
}

// userScopeView lists the user's memberships and values in scope, sorted by name.
func userScopeView(u ExternalUser, scope string) ([]string, []AttributeValue) {
	groups := []string{}
	for _, name := range u.Groups[scope] {
		groups = append(groups, name)
	}
	sort.Strings(groups)
	attrs := []AttributeValue{}
	for _, v := range u.Attributes[scope] {
		attrs = append(attrs, AttributeValue(v))
	}
	sort.Slice(attrs, func(i, j int) bool { return attrs[i].Name < attrs[j].Name })
	return groups, attrs
}
