package convert

import (
	"fmt"
	"regexp"
	"strconv"
)

// SupportedSchemaVersions are the manifest schema versions the conversion reads: v7 to v12
// (dbt 1.3 to 1.11) and v20, which dbt documents as identical to v12.
var SupportedSchemaVersions = map[int]bool{7: true, 8: true, 9: true, 10: true, 11: true, 12: true, 20: true}

var schemaVersionRE = regexp.MustCompile(`/manifest/v(\d+)\.json`)

// ParseSchemaVersion extracts the version number from metadata.dbt_schema_version, e.g.
// "https://schemas.getdbt.com/dbt/manifest/v12.json" is 12.
func ParseSchemaVersion(s string) (int, bool) {
	m := schemaVersionRE.FindStringSubmatch(s)
	if m == nil {
		return 0, false
	}
	v, err := strconv.Atoi(m[1])
	return v, err == nil
}

// CheckSchemaVersion reports a readable error for an unsupported dbt_schema_version value.
func CheckSchemaVersion(raw string) (int, error) {
	v, ok := ParseSchemaVersion(raw)
	if !ok {
		return 0, fmt.Errorf("%w: %q is not a dbt manifest schema (supported: v7 to v12, v20)", ErrUnsupportedVersion, raw)
	}
	if !SupportedSchemaVersions[v] {
		return v, fmt.Errorf("%w: v%d (supported: v7 to v12, v20)", ErrUnsupportedVersion, v)
	}
	return v, nil
}
