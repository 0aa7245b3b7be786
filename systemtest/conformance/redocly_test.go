package conformance_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/analyticsco/platform/devstack"
)

// redoclyVersion is the pinned @redocly/cli whose recommended rules openapi.yaml must pass.
const redoclyVersion = "2.77.0"

// TestOpenAPIPassesRedoclyLint runs `redocly lint` with its built-in recommended rules on
// openapi.yaml: errors fail the test, warnings are printed. The CLI is installed once per
// machine from npm into the user cache, outside the repository.
func TestOpenAPIPassesRedoclyLint(t *testing.T) {
	bin := ensureRedocly(t)
	cmd := exec.Command(bin, "lint", "--format=stylish", filepath.Join(devstack.RepoRoot(t), "openapi.yaml"))
	cmd.Env = append(os.Environ(), "REDOCLY_TELEMETRY=off", "REDOCLY_SUPPRESS_UPDATE_NOTICE=true", "NO_COLOR=1")
	out, err := cmd.CombinedOutput()
	t.Logf("redocly lint (recommended rules, @redocly/cli@%s):\n%s", redoclyVersion, out)
	if err != nil {
		t.Fatalf("openapi.yaml fails redocly lint: %v", err)
	}
}

func ensureRedocly(t *testing.T) string {
	t.Helper()
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s not found: install Node.js and npm; the OpenAPI lint runs on it", tool)
		}
	}
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
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	dir := filepath.Join(cache, "platform-tools", "redocly-cli-"+redoclyVersion)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	lock, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = syscall.Flock(int(lock.Fd()), syscall.LOCK_UN) }()
	bin := filepath.Join(dir, "node_modules", ".bin", "redocly")
	marker := filepath.Join(dir, "node_modules", "@redocly", "cli", "package.json")
	if !hasVersion(marker, redoclyVersion) {
		if err := os.WriteFile(filepath.Join(dir, "package.json"), []byte(`{"private": true}`+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("npm", "install", "--no-audit", "--no-fund", "--ignore-scripts", "--no-save", "@redocly/cli@"+redoclyVersion)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			text := string(out)
			for _, offline := range []string{"ENOTFOUND", "ECONNREFUSED", "ETIMEDOUT", "EAI_AGAIN"} {
				if strings.Contains(text, offline) {
					t.Skipf("@redocly/cli cannot be installed: the npm registry is not reachable (%v)", err)
				}
			}
			t.Fatalf("npm install @redocly/cli@%s: %v\n%s", redoclyVersion, err, text)
		}
		if !hasVersion(marker, redoclyVersion) {
			t.Fatalf("npm install finished but %s is missing", marker)
		}
	}
	return bin
}

func hasVersion(packageJSON, version string) bool {
	raw, err := os.ReadFile(packageJSON)
	if err != nil {
		return false
	}
	var pkg struct {
		Version string `json:"version"`
	}
	return json.Unmarshal(raw, &pkg) == nil && pkg.Version == version
}
