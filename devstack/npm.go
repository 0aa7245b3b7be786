package devstack

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/analyticsco/platform/devstack/internal/proc"
)

// NpmPackage installs the npm package pkg at version (pinned) into the user's cache
// directory, outside the repository, once per machine (concurrent test processes wait
// for one another), and returns its node_modules directory. The tools that judge our
// output (Cube's schema compiler, @redocly/cli) come this way. It fails t when node or
// npm is missing (CI installs Debian's nodejs and npm; usedFor says what needs them)
// and skips t only when the npm registry cannot be reached.
func NpmPackage(t testing.TB, pkg, version, usedFor string) string {
	t.Helper()
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s not found: install Debian's nodejs and npm (apt-get install -y nodejs npm); %s runs on it", tool, usedFor)
		}
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	name := strings.NewReplacer("@", "", "/", "-").Replace(pkg)
	dir := filepath.Join(cache, "platform-tools", name+"-"+version)
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
	modules := filepath.Join(dir, "node_modules")
	marker := filepath.Join(modules, filepath.FromSlash(pkg), "package.json")
	if hasNpmVersion(marker, version) {
		return modules
	}
	if err := os.WriteFile(filepath.Join(dir, "package.json"), []byte(`{"private": true}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("npm", "install", "--no-audit", "--no-fund", "--ignore-scripts", "--no-save", pkg+"@"+version)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		text := string(out)
		for _, offline := range []string{"ENOTFOUND", "ECONNREFUSED", "ETIMEDOUT", "EAI_AGAIN"} {
			if strings.Contains(text, offline) {
				t.Skipf("%s cannot be installed: the npm registry is not reachable (%v)", pkg, err)
			}
		}
		t.Fatalf("npm install %s@%s: %v\n%s", pkg, version, err, text)
	}
	if !hasNpmVersion(marker, version) {
		t.Fatalf("npm install finished but %s is missing", marker)
	}
	return modules
}

// hasNpmVersion reports whether the package.json at path is of version.
func hasNpmVersion(path, version string) bool {
	raw, err := os.ReadFile(path)
	if err != nil {
		return false
	}
	var pkg struct {
		Version string `json:"version"`
	}
	return json.Unmarshal(raw, &pkg) == nil && pkg.Version == version
}

// StartChild starts cmd, an outside tool a test runs beside it (an npm consumer such as
// Prism's proxy), so that it dies with the test process (SIGTERM when it exits, however it
// exits), and returns a channel that receives cmd.Wait's result once.
func StartChild(cmd *exec.Cmd) (<-chan error, error) { return proc.Start(cmd) }

// Node runs the node program script with args and env (added to the test's environment)
// within timeout and returns what it printed on stdout; it fails t, with both outputs,
// when the program fails.
func Node(t testing.TB, timeout time.Duration, env []string, script string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", append([]string{script}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node %s: %v\n%s\n%s", filepath.Base(script), err, out, stderr.String())
	}
	return out
}
