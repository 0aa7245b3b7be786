package workspace_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDomainDoesNotImportStorage: the domain speaks in its own terms; only the adapters
// (internal/store/...) know MongoDB. Checked on the package's own imports.
func TestDomainDoesNotImportStorage(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{join .Imports "\n"}}`, ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, imp := range strings.Fields(string(out)) {
		if strings.HasPrefix(imp, "go.mongodb.org/") || strings.Contains(imp, "/internal/store/") {
			t.Errorf("internal/workspace imports %s; storage belongs in the adapters", imp)
		}
	}
}
