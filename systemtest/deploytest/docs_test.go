package deploytest_test

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/analyticsco/platform/devstack"
)

// readmeMaxBytes bounds the README: a front door a newcomer reads in minutes, the rest
// in docs/.
const readmeMaxBytes = 15 * 1024

// TestREADMEIsAFrontDoor: the README stays short, and the map of docs/ is whole: every
// page under docs/ is linked from the README or from docs/README.md (the figures of
// docs/bench/ and the records of docs/decisions/ by their directory), and every top-level
// page of docs/ from docs/README.md, the index with the reading path.
func TestREADMEIsAFrontDoor(t *testing.T) {
	root := devstack.RepoRoot(t)
	readme := docsReadFile(t, filepath.Join(root, "README.md"))
	if len(readme) > readmeMaxBytes {
		t.Errorf("README.md is %d bytes, more than %d: move the detail into docs/ and link it", len(readme), readmeMaxBytes)
	}
	index := docsReadFile(t, filepath.Join(root, "docs", "README.md"))
	fromReadme := linkedFiles(root, "README.md", readme)
	fromIndex := linkedFiles(root, "docs/README.md", index)

	err := filepath.WalkDir(filepath.Join(root, "docs"), func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel := filepath.ToSlash(docsMust(filepath.Rel(root, path)))
		if d.IsDir() || !strings.HasSuffix(rel, ".md") || rel == "docs/README.md" {
			return nil
		}
		if dir, _, nested := strings.Cut(strings.TrimPrefix(rel, "docs/"), "/"); nested {
			if dir == "bench" || dir == "decisions" {
				if !fromReadme["docs/"+dir] && !fromIndex["docs/"+dir] {
					t.Errorf("%s: neither README.md nor docs/README.md links docs/%s/", rel, dir)
				}
				return nil
			}
			if !fromReadme[rel] && !fromIndex[rel] {
				t.Errorf("%s is linked from neither README.md nor docs/README.md", rel)
			}
			return nil
		}
		if !fromIndex[rel] {
			t.Errorf("%s is not linked from docs/README.md, the index of docs/", rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestRelativeLinksResolve: every relative link of the Markdown files of the repository
// (the README, docs/, every module's README) names a file or directory that exists.
func TestRelativeLinksResolve(t *testing.T) {
	root := devstack.RepoRoot(t)
	out, err := exec.Command("git", "-C", root, "ls-files", "--cached", "--others", "--exclude-standard", "*.md").Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	files := strings.Fields(string(out))
	if len(files) == 0 {
		t.Fatal("git ls-files lists no Markdown file")
	}
	for _, file := range files {
		path := filepath.Join(root, file)
		if _, err := os.Stat(path); err != nil {
			continue // deleted in the work tree, not yet in the index
		}
		text := docsReadFile(t, path)
		for _, target := range relativeLinks(text) {
			resolved := filepath.Join(filepath.Dir(path), filepath.FromSlash(target))
			if _, err := os.Stat(resolved); err != nil {
				t.Errorf("%s links %q, which does not exist", file, target)
			}
		}
	}
}

// markdownLink matches an inline link or image, [text](target) or [text](target "title").
var markdownLink = regexp.MustCompile(`\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)`)

// fencedBlock matches a fenced code block, whose text is not Markdown.
var fencedBlock = regexp.MustCompile("(?ms)^\\s*```.*?^\\s*```")

// inlineCode matches an inline code span.
var inlineCode = regexp.MustCompile("`[^`\n]*`")

// relativeLinks returns the targets of the relative links of a Markdown text, without
// their fragment: links to other schemes and to anchors of the same page are left out.
func relativeLinks(text string) []string {
	text = fencedBlock.ReplaceAllString(text, "")
	text = inlineCode.ReplaceAllString(text, "")
	var targets []string
	for _, m := range markdownLink.FindAllStringSubmatch(text, -1) {
		target := m[1]
		if strings.HasPrefix(target, "#") || regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`).MatchString(target) {
			continue
		}
		target, _, _ = strings.Cut(target, "#")
		target, _, _ = strings.Cut(target, "?")
		if target != "" {
			targets = append(targets, target)
		}
	}
	return targets
}

// linkedFiles returns the repository-relative paths (slash-separated, no trailing slash)
// that the relative links of file, itself repository-relative, point at.
func linkedFiles(root, file, text string) map[string]bool {
	linked := map[string]bool{}
	for _, target := range relativeLinks(text) {
		abs := filepath.Join(root, filepath.Dir(filepath.FromSlash(file)), filepath.FromSlash(target))
		if rel, err := filepath.Rel(root, abs); err == nil {
			linked[filepath.ToSlash(rel)] = true
		}
	}
	return linked
}

func docsReadFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func docsMust[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
