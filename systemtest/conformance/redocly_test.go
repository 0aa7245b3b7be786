package conformance_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/analyticsco/platform/devstack"
)

// redoclyVersion is the pinned @redocly/cli whose recommended rules api/openapi.yaml must pass.
const redoclyVersion = "2.77.0"

// TestOpenAPIPassesRedoclyLint runs `redocly lint` with its built-in recommended rules on
// openapi.yaml: errors fail the test, warnings are printed. The CLI is installed once per
// machine from npm into the user cache, outside the repository.
func TestOpenAPIPassesRedoclyLint(t *testing.T) {
	bin := ensureRedocly(t)
	cmd := exec.Command(bin, "lint", "--format=stylish", filepath.Join(devstack.RepoRoot(t), "api", "openapi.yaml"))
	cmd.Env = append(os.Environ(), "REDOCLY_TELEMETRY=off", "REDOCLY_SUPPRESS_UPDATE_NOTICE=true", "NO_COLOR=1")
	out, err := cmd.CombinedOutput()
	t.Logf("redocly lint (recommended rules, @redocly/cli@%s):\n%s", redoclyVersion, out)
	if err != nil {
		t.Fatalf("openapi.yaml fails redocly lint: %v", err)
	}
}

func ensureRedocly(t *testing.T) string {
	t.Helper()
	if v, err := exec.Command("node", "--version").Output(); err == nil {
		parts := strings.Split(strings.TrimPrefix(strings.TrimSpace(string(v)), "v"), ".")
		major, _ := strconv.Atoi(parts[0])
		minor := 0
		if len(parts) > 1 {
			minor, _ = strconv.Atoi(parts[1])
		}
		if major < 20 || (major == 20 && minor < 19) {
			t.Fatalf("node %s is too old for @redocly/cli@%s (needs 20.19 or later)", strings.TrimSpace(string(v)), redoclyVersion)
		}
	}
	return filepath.Join(devstack.NpmPackage(t, "@redocly/cli", redoclyVersion, "the OpenAPI lint"), ".bin", "redocly")
}
