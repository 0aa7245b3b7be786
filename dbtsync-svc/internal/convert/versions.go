package convert

import (
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// refRE reads a Jinja ref: ref('name'), ref('package', 'name'), either with v=N or
// version=N (dbt 1.5+ model versions).
var refRE = regexp.MustCompile(`ref\(\s*['"]([^'"]+)['"]\s*(?:,\s*['"]([^'"]+)['"]\s*)?(?:,\s*(?:v|version)\s*=\s*['"]?([A-Za-z0-9_.\-]+)['"]?\s*)?\)`)

// ParseRef reads the model (and version) of a Jinja ref() call; the zero Ref when s holds
// none.
func ParseRef(s string) Ref {
	// The common ref('name') without the regular expression.
	if rest, ok := strings.CutPrefix(s, "ref('"); ok {
		if name, ok := strings.CutSuffix(rest, "')"); ok && name != "" && !strings.ContainsAny(name, `'"`) {
			return Ref{Name: name}
		}
	}
	m := refRE.FindStringSubmatch(s)
	if m == nil {
		return Ref{}
	}
	r := Ref{Name: m[1], Version: normVersion(m[3])}
	if m[2] != "" {
		r.Name = m[2]
	}
	return r
}

// RefName returns the model name of a Jinja ref('name') or ref('package', 'name').
func RefName(s string) string { return ParseRef(s).Name }

// normVersion writes a model version as dbt names its relation: 2, 2.0 and "2" are "2";
// a version that is not a number stays as written.
func normVersion(v string) string {
	v = strings.TrimSpace(v)
	if v == "" {
		return ""
	}
	if f, err := strconv.ParseFloat(v, 64); err == nil {
		return strconv.FormatFloat(f, 'f', -1, 64)
	}
	return v
}

// versionedName is the cube of a model version other than the latest: <model>_v<N>.
func versionedName(name, version string) string { return name + "_v" + version }

// PathFor is where a model's cube is written, unless another model's cube takes the
// name first (then Prepare gives it a suffix). A version other than the model's latest
// is written as <model>_v<N>.
func PathFor(m *Model) string {
	name := m.Name
	if m.Version != "" && m.Latest != "" && m.Version != m.Latest {
		name = versionedName(name, m.Version)
	}
	name, _ = memberName(name)
	return CubePath(name)
}

// modelIndex resolves what a manifest names a model by (its unique id, or a ref with
// or without a version) to the key of its cube: the model's name for an unversioned
// model and for the latest version, <name>_v<N> for another version.
type modelIndex struct {
	byID   map[string]string
	latest map[string]string // versioned model name -> its latest version
}

func newModelIndex(models []*Model) modelIndex {
	ix := modelIndex{byID: map[string]string{}, latest: map[string]string{}}
	highest := map[string]string{}
	for _, m := range models {
		if m.Version == "" {
			continue
		}
		if m.Latest != "" && ix.latest[m.Name] == "" {
			ix.latest[m.Name] = m.Latest
		}
		if versionLess(highest[m.Name], m.Version) {
			highest[m.Name] = m.Version
		}
	}
	// dbt writes latest_version for every version; a manifest without it gets dbt's
	// own default, the highest version.
	for name, v := range highest {
		if ix.latest[name] == "" {
			ix.latest[name] = v
		}
	}
	for _, m := range models {
		ix.byID[m.UniqueID] = ix.key(Ref{Name: m.Name, Version: m.Version})
	}
	return ix
}

// key is the cube key of a ref: an unpinned ref means the latest version.
func (ix modelIndex) key(r Ref) string {
	if r.Version == "" || r.Version == ix.latest[r.Name] {
		return r.Name
	}
	return versionedName(r.Name, r.Version)
}

// resolve prefers the unique id (exact) and falls back on the ref.
func (ix modelIndex) resolve(id string, r Ref) string {
	if k, ok := ix.byID[id]; ok && id != "" {
		return k
	}
	return ix.key(r)
}

// versionLess orders versions numerically when both are numbers, else as text.
func versionLess(a, b string) bool {
	if a == "" {
		return b != ""
	}
	fa, errA := strconv.ParseFloat(a, 64)
	fb, errB := strconv.ParseFloat(b, 64)
	if errA == nil && errB == nil {
		return fa < fb
	}
	return a < b
}

// sortModels orders models by name, then unique id: the conversion does not depend on
// the manifest's order.
func sortModels(models []*Model) []*Model {
	out := append([]*Model(nil), models...)
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Name != out[j].Name {
			return out[i].Name < out[j].Name
		}
		return out[i].UniqueID < out[j].UniqueID
	})
	return out
}
