package dbtsync

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"

	"github.com/analyticsco/platform/dbtsync-svc/internal/convert"
	"github.com/analyticsco/platform/libs/errs"
)

// SelectorField is a select or exclude field as a request sends it: omitted (Set
// false), null (Set, Value nil) or a string.
type SelectorField struct {
	Set   bool
	Value *string
}

// UnmarshalJSON reads a string or null (encoding/json calls it for null too).
func (f *SelectorField) UnmarshalJSON(b []byte) error {
	f.Set = true
	if string(b) == "null" {
		f.Value = nil
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return &json.UnmarshalTypeError{Value: "non-string", Type: reflect.TypeOf("")}
	}
	f.Value = &s
	return nil
}

// over is f applied over the stored value: omitted keeps it, null clears it.
func (f SelectorField) over(stored *string) *string {
	if !f.Set {
		return stored
	}
	return f.Value
}

// checkSelector refuses (400) a selector that cannot be read, one with graph operators
// where no manifest gives the graph (hasManifest false), and an empty string (null, or
// no field, is no selector).
func checkSelector(sel, excl *string, hasManifest bool, limits convert.SelectorLimits, withoutManifest string) error {
	graph := false
	for _, f := range []struct {
		name string
		v    *string
	}{{"select", sel}, {"exclude", excl}} {
		if f.v == nil {
			continue
		}
		if isBlank(*f.v) {
			return errs.Invalidf("field %q is empty: send null (or leave it out) for no selector", f.name).WithCode(errs.CodeInvalidSelector)
		}
		g, err := convert.CheckSelector(f.name, *f.v, limits)
		if err != nil {
			return errs.Invalidf("%s", err).WithCode(errs.CodeInvalidSelector)
		}
		graph = graph || g
	}
	if graph && !hasManifest {
		return errs.Invalidf("the graph operators of a model selector (+model, model+, N+model, model+N, @model) need a dbt manifest: %s", withoutManifest).
			WithCode(errs.CodeSelectorNeedsManifest)
	}
	return nil
}

func isBlank(s string) bool {
	for _, c := range s {
		if c != ' ' && c != '\t' && c != '\n' && c != '\r' {
			return false
		}
	}
	return true
}

// syncSelector is the selector a sync applies: for git, the integration's select and
// exclude, each replaced by the request's when it sends the field (null: none for this
// sync); for a manifest, the request's alone. Graph operators need a manifest: the
// upload, or the integration's manifestPath.
func (s *service) syncSelector(ctx context.Context, deploymentID int64, in StartSyncInput) (sel, excl *string, err error) {
	hasManifest := in.Source == SourceManifest
	why := "send the manifest (source \"manifest\")"
	if in.Source == SourceGit {
		integ, err := s.Integrations.Integration(ctx, deploymentID)
		if err != nil {
			return nil, nil, err // targetBranch has answered a missing integration already
		}
		sel, excl = strPtr(integ.Select), strPtr(integ.Exclude)
		hasManifest = integ.ManifestPath != ""
		why = "set the integration's manifestPath to the manifest dbt writes in the repository, or send the manifest (source \"manifest\")"
	}
	sel, excl = in.Select.over(sel), in.Exclude.over(excl)
	if err := checkSelector(sel, excl, hasManifest, s.selectorLimits, why); err != nil {
		return nil, nil, err
	}
	return sel, excl, nil
}

func strPtr(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func strOf(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// integrationSelector is the select and exclude a PUT saves: each field omitted keeps
// the stored value, null clears it.
func (s *service) integrationSelector(ctx context.Context, deploymentID int64, in IntegrationInput, manifestPath string) (sel, excl string, err error) {
	var stored Integration
	if !in.Select.Set || !in.Exclude.Set {
		stored, err = s.Integrations.Integration(ctx, deploymentID)
		if err != nil && !errors.Is(err, ErrNotFound) {
			return "", "", err
		}
	}
	selP, exclP := in.Select.over(strPtr(stored.Select)), in.Exclude.over(strPtr(stored.Exclude))
	if err := checkSelector(selP, exclP, manifestPath != "", s.selectorLimits,
		"set manifestPath to the manifest dbt writes in the repository (target/manifest.json)"); err != nil {
		return "", "", err
	}
	return strOf(selP), strOf(exclP), nil
}

// ApplySelector keeps in p the models the job's selector selects (none: p as it is) and
// reports what it kept and dropped. It fails the job when the selector cannot apply:
// graph operators on a project read without a manifest, graph walks over their limit,
// or a selection of no model (converting nothing would empty the branch).
func ApplySelector(p *convert.Project, sel, excl *string, limits convert.SelectorLimits) (*convert.Selection, error) {
	if sel == nil && excl == nil {
		return nil, nil
	}
	sc, err := convert.ParseSelector(strOf(sel), strOf(excl), limits)
	if err != nil {
		return nil, Permanent(Failure(CodeInvalidProject, "the model selector cannot be read: %s", err))
	}
	res, err := sc.Apply(p)
	var limit *convert.SelectorLimitError
	switch {
	case errors.Is(err, convert.ErrSelectorNeedsManifest):
		return nil, Permanent(Failure(CodeSelectorNeedsManifest, "%s, and the repository has none at manifestPath at this ref", err))
	case errors.As(err, &limit):
		return nil, Permanent(Failure(CodeWorkLimit, "%s", err))
	case err != nil:
		return nil, err
	case res.ModelsKept == 0:
		return nil, Permanent(Failure(CodeNothingSelected, "the model selector (%s) selects none of the project's %d models", describeSelector(sel, excl), res.ModelsTotal))
	}
	return &res, nil
}

func describeSelector(sel, excl *string) string {
	switch {
	case sel != nil && excl != nil:
		return fmt.Sprintf("select %q, exclude %q", *sel, *excl)
	case sel != nil:
		return fmt.Sprintf("select %q", *sel)
	}
	return fmt.Sprintf("exclude %q", strOf(excl))
}

// auditSelector records the select and exclude a request sent (null as nil), each cut at
// 512 bytes: a refused one may be as long as the body.
func auditSelector(d map[string]any, fields ...SelectorField) {
	for i, f := range fields {
		if !f.Set {
			continue
		}
		key := [...]string{"select", "exclude"}[i]
		if f.Value == nil {
			d[key] = nil
			continue
		}
		v := *f.Value
		if len(v) > 512 {
			v = strings.ToValidUTF8(v[:512], "") + "…"
		}
		d[key] = v
	}
}
