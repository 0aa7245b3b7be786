package embed

import (
	"bytes"
	"encoding/json"
	"net/url"
	"regexp"
	"sort"
	"strings"

	"github.com/analyticsco/platform/embed-svc/client/contract"
	"github.com/analyticsco/platform/embed-svc/token"
	"github.com/analyticsco/platform/libs/errs"
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
		return "", errs.Invalidf("deploymentId is required")
	}
	if *req.DeploymentID <= 0 {
		return "", errs.Invalidf("deploymentId must be a positive integer")
	}
	externalID, err := validateUser(req)
	if err != nil {
		return "", err
	}
	if err := validateShape(req); err != nil {
		return "", err
	}
	if err := validateLists(req); err != nil {
		return "", err
	}
	return externalID, validateResources(req.Resources)
}

// validateResources checks generate-session's resources: dashboards required, at most
// token.MaxResourceDashboards, each a dashboard public id, none twice.
func validateResources(r *SessionResources) error {
	if r == nil {
		return nil
	}
	if r.Dashboards == nil {
		return errs.Invalidf(`resources.dashboards is required: {"dashboards": [publicId, ...]} ([] opens nothing)`)
	}
	if n := len(r.Dashboards); n > token.MaxResourceDashboards {
		return errs.Invalidf("resources.dashboards has %d entries, over the limit of %d", n, token.MaxResourceDashboards)
	}
	seen := make(map[string]bool, len(r.Dashboards))
	for _, id := range r.Dashboards {
		if !contract.ValidDashboardPublicID(id) {
			return errs.Invalidf("resources.dashboards: %q is not a dashboard public id (16 characters of A-Z, a-z, 0-9, - and _)", id)
		}
		if seen[id] {
			return errs.Invalidf("resources.dashboards: duplicate %q", id)
		}
		seen[id] = true
	}
	return nil
}

// validateUser checks who the session is for: exactly one of externalId (normalized:
// trimmed, lower-case) and internalId, and for an internal user none of what only an
// external user has (named in a fixed order, so the message is always the same).
func validateUser(req *GenerateSessionRequest) (string, error) {
	hasExt, hasInt := req.ExternalID != nil, req.InternalID != nil
	if hasExt == hasInt {
		return "", errs.Invalidf("exactly one of externalId and internalId is required")
	}
	if hasInt {
		if strings.TrimSpace(*req.InternalID) == "" {
			return "", errs.Invalidf("internalId must not be empty")
		}
		if len(*req.InternalID) > maxNameLen {
			return "", errs.Invalidf("internalId must be at most %d characters", maxNameLen)
		}
		for _, f := range []struct {
			field string
			set   bool
		}{
			{"groups", req.Groups != nil}, {"userAttributes", req.UserAttributes != nil},
			{"groupDefinitions", req.GroupDefinitions != nil}, {"userAttributeDefinitions", req.UserAttributeDefinitions != nil},
			{"securityContext", req.SecurityContext != nil}, {"userProfile", req.UserProfile != nil},
			{"resources", req.Resources != nil},
		} {
			if f.set {
				return "", errs.Invalidf("%s is not allowed with internalId: the internal user's own permissions apply", f.field)
			}
		}
		if req.Email != nil {
			return "", errs.Invalidf("email is only allowed with externalId")
		}
		return "", nil
	}
	externalID := strings.ToLower(strings.TrimSpace(*req.ExternalID))
	if externalID == "" {
		return "", errs.Invalidf("externalId must not be empty")
	}
	if len(externalID) > maxNameLen {
		return "", errs.Invalidf("externalId must be at most %d characters", maxNameLen)
	}
	return externalID, nil
}

// validateShape checks the single values: email, securityContext, the tenant name, what
// definitions need, the profile and the branch name.
func validateShape(req *GenerateSessionRequest) error {
	if req.Email != nil && len(*req.Email) > maxNameLen {
		return errs.Invalidf("email must be at most %d characters", maxNameLen)
	}
	if req.SecurityContext != nil {
		trimmed := bytes.TrimSpace(req.SecurityContext)
		if len(trimmed) == 0 || trimmed[0] != '{' {
			return errs.Invalidf("securityContext must be an object")
		}
	}
	if req.EmbedTenantName != nil && !ValidTenantName(*req.EmbedTenantName) {
		return errs.Invalidf("embedTenantName %q is invalid: lowercase, 5 to 36 characters, starting with a letter, ending with a letter or digit, only a-z, 0-9 and -", *req.EmbedTenantName)
	}
	hasDefs := req.GroupDefinitions != nil || req.UserAttributeDefinitions != nil
	if hasDefs && (req.CreatorMode == nil || !*req.CreatorMode) {
		return errs.Invalidf("groupDefinitions and userAttributeDefinitions require creatorMode: true")
	}
	if hasDefs && req.EmbedTenantName == nil {
		return errs.Invalidf("groupDefinitions and userAttributeDefinitions require embedTenantName")
	}
	if p := req.UserProfile; p != nil {
		if p.DisplayName != nil && len(*p.DisplayName) > maxNameLen {
			return errs.Invalidf("userProfile.displayName must be at most %d characters", maxNameLen)
		}
		if p.Picture != nil && !absoluteHTTPURL(*p.Picture) {
			return errs.Invalidf("userProfile.picture must be an absolute http:// or https:// URL")
		}
	}
	if req.BranchName != nil && strings.TrimSpace(*req.BranchName) == "" {
		return errs.Invalidf("branchName must not be empty")
	}
	if req.BranchName != nil && len(*req.BranchName) > maxNameLen {
		return errs.Invalidf("branchName must be at most %d characters", maxNameLen)
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
			return errs.Invalidf("groups must not contain an empty name")
		}
	}
	if err := uniqueNames("userAttributes", req.UserAttributes, func(a AttributeValue) string { return a.Name }); err != nil {
		return err
	}
	for _, a := range req.UserAttributes {
		if a.Name == "" {
			return errs.Invalidf("userAttributes: name is required")
		}
		if len(a.Value) == 0 {
			return errs.Invalidf("userAttributes %q: value is required (null clears it)", a.Name)
		}
		if _, ok := valueType(a.Value); !ok {
			return errs.Invalidf("userAttributes %q: value must be a string, a number, an array of strings, an array of numbers or null", a.Name)
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
		return errs.Invalidf("%s: name is required", field)
	}
	if len(d.Name) > maxNameLen {
		return errs.Invalidf("%s: name must be at most %d characters", field, maxNameLen)
	}
	if kind == KindGroup {
		if d.Type != "" || d.DisplayName != nil || d.DefaultValue != nil {
			return errs.Invalidf("%s %q: a group has only name and description", field, d.Name)
		}
		return nil
	}
	switch d.Type {
	case TypeString, TypeNumber, TypeStringArray, TypeNumberArray:
	case "":
		return errs.Invalidf("%s %q: type is required (string, number, string_array or number_array)", field, d.Name)
	default:
		return errs.Invalidf("%s %q: type %q is not one of string, number, string_array, number_array", field, d.Name, d.Type)
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
		return errs.Invalidf("%s: duplicate name %q", field, dups[0])
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
