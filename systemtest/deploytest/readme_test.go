package deploytest_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/analyticsco/platform/devstack"
	"github.com/analyticsco/platform/systemtest/internal/envdoc"
)

// TestReadmeStartsWithTheTwoCommands: the README's first code block holds exactly the two
// set-up commands, `make run` and `make test`.
func TestReadmeStartsWithTheTwoCommands(t *testing.T) {
	root := devstack.RepoRoot(t)
	raw, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	var cmds []string
	inBlock := false
	for _, line := range strings.Split(string(raw), "\n") {
		if strings.HasPrefix(line, "```") {
			if inBlock {
				break
			}
			inBlock = true
			continue
		}
		if inBlock && strings.TrimSpace(line) != "" {
			f := strings.Fields(line)
			if len(f) < 2 {
				cmds = append(cmds, line)
				continue
			}
			cmds = append(cmds, f[0]+" "+f[1])
		}
	}
	if len(cmds) != 2 || cmds[0] != "make run" || cmds[1] != "make test" {
		t.Fatalf("the README's first code block must hold exactly `make run` and `make test`, got %q", cmds)
	}
}

// TestReadmeConfigurationReferenceIsGenerated: docs/configuration.md is exactly what
// envdoc writes from the config structs, so every variable a process reads is documented
// with its default and meaning, and nothing stale is.
func TestReadmeConfigurationReferenceIsGenerated(t *testing.T) {
	root := devstack.RepoRoot(t)
	got, err := os.ReadFile(filepath.Join(root, envdoc.Path))
	if err != nil {
		t.Fatalf("%v: generate it with `%s`", err, envdoc.Command)
	}
	want := envdoc.Document()
	if string(got) == want {
		return
	}
	gotLines, wantLines := strings.Split(string(got), "\n"), strings.Split(want, "\n")
	for i := 0; i < len(gotLines) || i < len(wantLines); i++ {
		var g, w string
		if i < len(gotLines) {
			g = gotLines[i]
		}
		if i < len(wantLines) {
			w = wantLines[i]
		}
		if g != w {
			t.Fatalf("%s is not what the config structs say (first difference at line %d:\nfile:      %q\ngenerated: %q)\nregenerate it from the repository's root: %s", envdoc.Path, i+1, g, w, envdoc.Command)
		}
	}
}
