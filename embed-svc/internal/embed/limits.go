package embed

import (
	"context"

	"github.com/analyticsco/platform/libs/errs"
)

// The mint's limits: what one generate-session body may hold (Limits.check, before
// anything else reads it) and how far one request may grow the catalog (checkRoom).

// check refuses a generate-session body whose securityContext, arrays or attribute values
// are over the limits, before anything else looks at them: a clear 413 or 400 naming the
// limit.
func (l Limits) check(req *GenerateSessionRequest) error {
	if n := len(req.SecurityContext); n > l.SecurityContextBytes {
		return errs.TooLargef("securityContext is %d bytes, over the limit of %d bytes", n, l.SecurityContextBytes)
	}
	if d := jsonDepth(req.SecurityContext); d > l.SecurityContextDepth {
		return errs.Invalidf("securityContext nests %d levels deep, over the limit of %d", d, l.SecurityContextDepth)
	}
	for _, a := range []struct {
		field string
		n     int
	}{
		{"groups", len(req.Groups)}, {"userAttributes", len(req.UserAttributes)},
		{"groupDefinitions", len(req.GroupDefinitions)}, {"userAttributeDefinitions", len(req.UserAttributeDefinitions)},
	} {
		if a.n > l.ArrayEntries {
			return errs.Invalidf("%s has %d entries, over the limit of %d", a.field, a.n, l.ArrayEntries)
		}
	}
	for i, a := range req.UserAttributes {
		if n := len(a.Value); n > l.AttributeValueBytes {
			return errs.TooLargef("userAttributes[%d] has a value of %d bytes, over the limit of %d bytes", i, n, l.AttributeValueBytes)
		}
	}
	if p := req.UserProfile; p != nil && p.Picture != nil && len(*p.Picture) > l.PictureURLBytes {
		return errs.TooLargef("userProfile.picture is %d bytes, over the limit of %d bytes", len(*p.Picture), l.PictureURLBytes)
	}
	return nil
}

// checkRoom refuses a mint that would create or change more definitions than one
// request may (the churn of one request is bounded whatever the catalog holds), or
// create definitions past the scope's limit. Concurrent mints may pass the count
// together, so that limit holds to within the number of mints in flight at once.
func (s *service) checkRoom(ctx context.Context, accountID int64, scope string, plan *definitionPlan) error {
	if n := len(plan.upserts); n > s.limits.DefinitionChanges {
		return errs.Invalidf("the request creates or changes %d definitions, over the limit of %d per request; send them over several requests",
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
		return errs.Invalidf("scope %q holds %d definitions; %d more would pass the limit of %d", scope, n, created, limit)
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
