package embed

import (
	"bytes"
	"context"
	"encoding/json"
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
)

var tenantNamePattern = regexp.MustCompile(`^[a-z][a-z0-9-]{3,34}[a-z0-9]$`)

// ValidTenantName reports whether name is a well-formed embed tenant name.
func ValidTenantName(name string) bool { return tenantNamePattern.MatchString(name) }

const maxNameLen = 255

// validateStatic checks every rule that needs no stored state, in the order a client
// reads the answer by: who the session is for, then the request's shape, then its
// lists. It returns the normalized external id ("" for an internal user).
func validateStatic(req *GenerateSessionRequest) (string, error) {
	if req.DeploymentID == nil {
		return "", invalid("deploymentId is required")
	}
	if *req.DeploymentID <= 0 {
		return "", invalid("deploymentId must be a positive integer")
	}
	externalID, err := validateUser(req)
	if err != nil {
		return "", err
	}
	if err := validateShape(req); err != nil {
		return "", err
	}
	return externalID, validateLists(req)
}

// validateUser checks who the session is for: exactly one of externalId (normalized:
// trimmed, lower-case) and internalId, and for an internal user none of what only an
// external user has (named in a fixed order, so the message is always the same).
func validateUser(req *GenerateSessionRequest) (string, error) {
	hasExt, hasInt := req.ExternalID != nil, req.InternalID != nil
	if hasExt == hasInt {
		return "", invalid("exactly one of externalId and internalId is required")
	}
	if hasInt {
		if strings.TrimSpace(*req.InternalID) == "" {
			return "", invalid("internalId must not be empty")
		}
		if len(*req.InternalID) > maxNameLen {
			return "", invalid("internalId must be at most %d characters", maxNameLen)
		}
		for _, f := range []struct {
			field string
			set   bool
		}{
			{"groups", req.Groups != nil}, {"userAttributes", req.UserAttributes != nil},
			{"groupDefinitions", req.GroupDefinitions != nil}, {"userAttributeDefinitions", req.UserAttributeDefinitions != nil},
			{"securityContext", req.SecurityContext != nil}, {"userProfile", req.UserProfile != nil},
		} {
			if f.set {
				return "", invalid("%s is not allowed with internalId: the internal user's own permissions apply", f.field)
			}
		}
		if req.Email != nil {
			return "", invalid("email is only allowed with externalId")
		}
		return "", nil
	}
	externalID := strings.ToLower(strings.TrimSpace(*req.ExternalID))
	if externalID == "" {
		return "", invalid("externalId must not be empty")
	}
	if len(externalID) > maxNameLen {
		return "", invalid("externalId must be at most %d characters", maxNameLen)
	}
	return externalID, nil
}

// validateShape checks the single values: email, securityContext, the tenant name, what
// definitions need, the profile and the branch name.
func validateShape(req *GenerateSessionRequest) error {
	if req.Email != nil && len(*req.Email) > maxNameLen {
		return invalid("email must be at most %d characters", maxNameLen)
	}
	if req.SecurityContext != nil {
		trimmed := bytes.TrimSpace(req.SecurityContext)
		if len(trimmed) == 0 || trimmed[0] != '{' {
			return invalid("securityContext must be an object")
		}
	}
	if req.EmbedTenantName != nil && !ValidTenantName(*req.EmbedTenantName) {
		return invalid("embedTenantName %q is invalid: lowercase, 5 to 36 characters, starting with a letter, ending with a letter or digit, only a-z, 0-9 and -", *req.EmbedTenantName)
	}
	hasDefs := req.GroupDefinitions != nil || req.UserAttributeDefinitions != nil
	if hasDefs && (req.CreatorMode == nil || !*req.CreatorMode) {
		return invalid("groupDefinitions and userAttributeDefinitions require creatorMode: true")
	}
	if hasDefs && req.EmbedTenantName == nil {
		return invalid("groupDefinitions and userAttributeDefinitions require embedTenantName")
	}
	if p := req.UserProfile; p != nil {
		if p.DisplayName != nil && len(*p.DisplayName) > maxNameLen {
			return invalid("userProfile.displayName must be at most %d characters", maxNameLen)
		}
		if p.Picture != nil && !absoluteHTTPURL(*p.Picture) {
			return invalid("userProfile.picture must be an absolute http:// or https:// URL")
		}
	}
	if req.BranchName != nil && strings.TrimSpace(*req.BranchName) == "" {
		return invalid("branchName must not be empty")
	}
	if req.BranchName != nil && len(*req.BranchName) > maxNameLen {
		return invalid("branchName must be at most %d characters", maxNameLen)
	}
	return nil
}

// validateLists checks groups, userAttributes and the two definition arrays: names
// unique and present, values of an attribute type, definitions well formed.
func validateLists(req *GenerateSessionRequest) error {
	if err := uniqueNames("groups", req.Groups, func(s string) string { return s }); err != nil {
		return err
	}
	for _, g := range req.Groups {
		if g == "" {
			return invalid("groups must not contain an empty name")
		}
	}
	if err := uniqueNames("userAttributes", req.UserAttributes, func(a AttributeValue) string { return a.Name }); err != nil {
		return err
	}
	for _, a := range req.UserAttributes {
		if a.Name == "" {
			return invalid("userAttributes: name is required")
		}
		if len(a.Value) == 0 {
			return invalid("userAttributes %q: value is required (null clears it)", a.Name)
		}
		if _, ok := valueType(a.Value); !ok {
			return invalid("userAttributes %q: value must be a string, a number, an array of strings, an array of numbers or null", a.Name)
		}
	}
	for _, defs := range []struct {
		field string
		list  []DefinitionInput
	}{{"groupDefinitions", req.GroupDefinitions}, {"userAttributeDefinitions", req.UserAttributeDefinitions}} {
		if err := uniqueNames(defs.field, defs.list, func(d DefinitionInput) string { return d.Name }); err != nil {
			return err
		}
	}
	for _, d := range req.GroupDefinitions {
		if err := ValidateDefinition(KindGroup, d, "groupDefinitions"); err != nil {
			return err
		}
	}
	for _, d := range req.UserAttributeDefinitions {
		if err := ValidateDefinition(KindAttribute, d, "userAttributeDefinitions"); err != nil {
			return err
		}
	}
	return nil
}

// ValidateDefinition checks one definition input; field names the array or body.
func ValidateDefinition(kind string, d DefinitionInput, field string) error {
	if strings.TrimSpace(d.Name) == "" {
		return invalid("%s: name is required", field)
	}
	if len(d.Name) > maxNameLen {
		return invalid("%s: name must be at most %d characters", field, maxNameLen)
	}
	if kind == KindGroup {
		if d.Type != "" || d.DisplayName != nil || d.DefaultValue != nil {
			return invalid("%s %q: a group has only name and description", field, d.Name)
		}
		return nil
	}
	switch d.Type {
	case TypeString, TypeNumber, TypeStringArray, TypeNumberArray:
	case "":
		return invalid("%s %q: type is required (string, number, string_array or number_array)", field, d.Name)
	default:
		return invalid("%s %q: type %q is not one of string, number, string_array, number_array", field, d.Name, d.Type)
	}
	return nil
}

func uniqueNames[T any](field string, items []T, name func(T) string) error {
	seen := make(map[string]bool, len(items))
	var dups []string
	for _, it := range items {
		n := name(it)
		if seen[n] && n != "" {
			dups = append(dups, n)
		}
		seen[n] = true
	}
	if len(dups) > 0 {
		sort.Strings(dups)
		return invalid("%s: duplicate name %q", field, dups[0])
	}
	return nil
}

func absoluteHTTPURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" && u.Opaque == ""
}

// valueType returns the attribute type a JSON value has ("" for null).
func valueType(raw json.RawMessage) (string, bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return "", false
	}
	switch raw[0] {
	case 'n':
		return "", string(raw) == "null"
	case '"':
		var s string
		return TypeString, json.Unmarshal(raw, &s) == nil
	case '[':
		var strs []string
		if json.Unmarshal(raw, &strs) == nil {
			if len(strs) == 0 {
				return "array", true // an empty array fits either array type
			}
			return TypeStringArray, true
		}
		var nums []float64
		if json.Unmarshal(raw, &nums) == nil {
			return TypeNumberArray, true
		}
		return "", false
	case 't', 'f', '{':
		return "", false
	default:
		var n float64
		return TypeNumber, json.Unmarshal(raw, &n) == nil
	}
}

// valueFits reports whether a value of type got may be stored for a definition of type want.
func valueFits(got, want string) bool {
	if got == "array" {
		return want == TypeStringArray || want == TypeNumberArray
	}
	return got == want
}

// check refuses a generate-session body whose securityContext, arrays or attribute values
// are over the limits, before anything else looks at them: a clear 413 or 400 naming the
// limit.
func (l Limits) check(req *GenerateSessionRequest) error {
	if n := len(req.SecurityContext); n > l.SecurityContextBytes {
		return tooLarge("securityContext is %d bytes, over the limit of %d bytes (EMBED_MAX_SECURITY_CONTEXT_BYTES)", n, l.SecurityContextBytes)
	}
	if d := jsonDepth(req.SecurityContext); d > l.SecurityContextDepth {
		return invalid("securityContext nests %d levels deep, over the limit of %d (EMBED_MAX_SECURITY_CONTEXT_DEPTH)", d, l.SecurityContextDepth)
	}
	for _, a := range []struct {
		field string
		n     int
	}{
		{"groups", len(req.Groups)}, {"userAttributes", len(req.UserAttributes)},
		{"groupDefinitions", len(req.GroupDefinitions)}, {"userAttributeDefinitions", len(req.UserAttributeDefinitions)},
	} {
		if a.n > l.ArrayEntries {
			return invalid("%s has %d entries, over the limit of %d (EMBED_MAX_ARRAY_ENTRIES)", a.field, a.n, l.ArrayEntries)
		}
	}
	for i, a := range req.UserAttributes {
		if n := len(a.Value); n > l.AttributeValueBytes {
			return tooLarge("userAttributes[%d] has a value of %d bytes, over the limit of %d bytes (EMBED_MAX_ATTRIBUTE_VALUE_BYTES)", i, n, l.AttributeValueBytes)
		}
	}
	if p := req.UserProfile; p != nil && p.Picture != nil && len(*p.Picture) > l.PictureURLBytes {
		return tooLarge("userProfile.picture is %d bytes, over the limit of %d bytes (EMBED_MAX_PICTURE_URL_BYTES)", len(*p.Picture), l.PictureURLBytes)
	}
	return nil
}

// checkRoom refuses a mint that would create or change more definitions than one
// request may (the churn of one request is bounded whatever the catalog holds), or
// create definitions past the scope's limit. Concurrent mints may pass the count
// together, so that limit holds to within the number of mints in flight at once.
func (s *service) checkRoom(ctx context.Context, accountID int64, scope string, plan *definitionPlan) error {
	if n := len(plan.upserts); n > s.limits.DefinitionChanges {
		return invalid("the request creates or changes %d definitions, over the limit of %d per request (EMBED_MAX_DEFINITION_CHANGES); send them over several requests",
			n, s.limits.DefinitionChanges)
	}
	created := 0
	for _, u := range plan.upserts {
		if u.Existing == nil {
			created++
		}
	}
	return s.checkDefinitionRoom(ctx, accountID, scope, created)
}

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
	return invalid("the account has %d embed tenants, the limit (EMBED_MAX_TENANTS_PER_ACCOUNT); tenant %q cannot be created", limit, tenant)
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

// checkDefinitionRoom refuses adding created definitions to a scope at its limit.
func (s *service) checkDefinitionRoom(ctx context.Context, accountID int64, scope string, created int) error {
	if created == 0 {
		return nil
	}
	limit := int64(s.limits.DefinitionsPerScope)
	n, err := s.d.Catalog.CountDefinitions(ctx, accountID, scope, limit)
	if err != nil {
		return storeErr(err)
	}
	if n+int64(created) > limit {
		return invalid("scope %q holds %d definitions; %d more would pass the limit of %d (EMBED_MAX_DEFINITIONS_PER_SCOPE)", scope, n, created, limit)
	}
	return nil
}

// jsonDepth is the deepest nesting of objects and arrays in a JSON value.
func jsonDepth(raw []byte) int {
	depth, deepest, inString, escaped := 0, 0, false, false
	for _, c := range raw {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '{' || c == '[':
			depth++
			deepest = max(deepest, depth)
		case c == '}' || c == ']':
			depth--
		}
	}
	return deepest
}
