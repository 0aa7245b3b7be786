package deploytest_test

import (
	"os/exec"
	"path"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/analyticsco/platform/devstack"
)

// goFileName matches a Go file a README names in code, `moves.go` or
// `internal/app/app.go`, and testName a test or fuzz target it names.
var (
	goFileName = regexp.MustCompile("`([A-Za-z0-9_./-]*[A-Za-z0-9_-]\\.go)`")
	testName   = regexp.MustCompile("`((?:Test|Fuzz)[A-Z][A-Za-z0-9_]*)`")
)

// TestServiceRuleMapsNameWhatExists: each service's README (its rule map and layout) and
// its reference page in docs/ name only files and tests the service has, so a renamed
// file or test cannot leave them pointing at nothing. A file is found by its path (the
// whole path under the module, or its end) or, for a bare name, by its base name anywhere
// in the module; a test by its declaration in one of the module's test files.
func TestServiceRuleMapsNameWhatExists(t *testing.T) {
	root := devstack.RepoRoot(t)
	for mod, reference := range map[string]string{"workspace-svc": "docs/workspace.md", "embed-svc": "docs/embed.md", "dbtsync-svc": "docs/dbtsync.md"} {
		t.Run(mod, func(t *testing.T) {
			out, err := exec.Command("git", "-C", root, "ls-files", "--cached", "--others", "--exclude-standard", mod).Output()
			if err != nil {
				t.Fatalf("git ls-files: %v", err)
			}
			var paths []string
			bases := map[string]bool{}
			var tests strings.Builder
			for _, f := range strings.Fields(string(out)) {
				rel := strings.TrimPrefix(f, mod+"/")
				paths = append(paths, rel)
				bases[path.Base(rel)] = true
				if strings.HasSuffix(f, "_test.go") {
					tests.WriteString(docsReadFile(t, root+"/"+f))
				}
			}
			declared := tests.String()
			for _, doc := range []string{mod + "/README.md", reference} {
				text := docsReadFile(t, root+"/"+doc)
				for _, m := range goFileName.FindAllStringSubmatch(text, -1) {
					name := strings.TrimPrefix(m[1], mod+"/")
					if !strings.Contains(name, "/") && !bases[name] || strings.Contains(name, "/") && !slices.ContainsFunc(paths, func(p string) bool { return p == name || strings.HasSuffix(p, "/"+name) }) {
						t.Errorf("%s names %s, which %s does not have", doc, m[1], mod)
					}
				}
				for _, m := range testName.FindAllStringSubmatch(text, -1) {
					if !strings.Contains(declared, "func "+m[1]+"(") {
						t.Errorf("%s names %s, which no test file of %s declares", doc, m[1], mod)
					}
				}
			}
		})
	}
}
