package deploytest_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/analyticsco/platform/devstack"
	"github.com/analyticsco/platform/systemtest/internal/envdoc"
)

// TestReadmeDocumentsEveryVariable: every environment variable a process reads is in
// the README (regenerate the tables with `go run ./systemtest/cmd/envdoc`), and the
// README starts with exactly the two set-up commands.
func TestReadmeDocumentsEveryVariable(t *testing.T) {
	root := devstack.RepoRoot(t)
	raw, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	readme := string(raw)
	for _, p := range envdoc.Processes() {
		for _, v := range p.Vars {
			if !strings.Contains(readme, "`"+v.Name+"`") {
				t.Errorf("README.md does not document %s (read by %s)", v.Name, p.Name)
			}
		}
	}
	var cmds []string
	inBlock := false
	for _, line := range strings.Split(readme, "\n") {
		if strings.HasPrefix(line, "```") {
			if inBlock {
				break
			}
			inBlock = true
			continue
		}
		if inBlock && strings.TrimSpace(line) != "" {
			cmds = append(cmds, strings.Fields(line)[0]+" "+strings.Fields(line)[1])
		}
	}
	if len(cmds) != 2 || cmds[0] != "make run" || cmds[1] != "make test" {
		t.Fatalf("the README's first code block must hold exactly `make run` and `make test`, got %q", cmds)
	}
}
