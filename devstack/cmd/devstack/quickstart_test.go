package main_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/analyticsco/platform/devstack"
)

// TestREADMEQuickstart runs the README's quickstart against a fresh local stack (the
// real binaries under the real runner, as make run starts them) and compares every
// answer with the one the README shows, so the quickstart cannot drift from the code.
// The blocks run in one bash, in order, from a directory laid out like the repository:
// bin/ (the binaries), .data/ (the running stack's) and ../shared beside it.
func TestREADMEQuickstart(t *testing.T) {
	for _, tool := range []string{"bash", "curl", "jq"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s not found: the quickstart uses it (`sudo apt-get install -y curl jq`; make test and .ci/run install them)", tool)
		}
	}
	root := devstack.RepoRoot(t)
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	steps, err := quickstartSteps(string(readme))
	if err != nil {
		t.Fatalf("README.md: %v", err)
	}
	shared, err := filepath.Abs(filepath.Join(root, "..", "shared"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(shared, "fixtures", "dbt")); err != nil {
		t.Fatalf("the quickstart uploads a manifest from ../shared/fixtures/dbt: %v", err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	bin := buildStack(t)
	dataDir := filepath.Join(t.TempDir(), "data")
	r := startRunner(t, filepath.Join(bin, "devstack"), bin, dataDir, freshAddrs(t))
	r.waitReady(ctx)

	ws := t.TempDir()
	repo := filepath.Join(ws, "repo")
	for _, l := range [][2]string{{bin, filepath.Join(repo, "bin")}, {dataDir, filepath.Join(repo, ".data")}, {shared, filepath.Join(ws, "shared")}} {
		if err := os.MkdirAll(filepath.Dir(l[1]), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(l[0], l[1]); err != nil {
			t.Fatal(err)
		}
	}
	outputs, err := runSteps(ctx, repo, steps)
	for i, got := range outputs {
		if !steps[i].match(got) {
			t.Errorf("README quickstart: $ %s\nanswered:\n%s\nthe README shows:\n%s", steps[i].command, got, steps[i].want)
		}
	}
	if err != nil {
		t.Fatal(err)
	}
}

// step is one `$ command` of the quickstart and the answer shown under it.
type step struct {
	command string // with its continuation lines
	want    string // "…" stands for anything
}

// match reports whether got is the shown answer, "…" matching any text.
func (s step) match(got string) bool {
	parts := strings.Split(s.want, "…")
	for i, p := range parts {
		parts[i] = regexp.QuoteMeta(p)
	}
	return regexp.MustCompile(`(?s)^` + strings.Join(parts, `.*`) + `$`).MatchString(got)
}

// quickstartSteps reads the console blocks of the README's "## Quickstart" section: a
// line "$ cmd" is a command (continued while a line ends in a backslash), the lines
// after it, up to the next command, its answer.
func quickstartSteps(readme string) ([]step, error) {
	start := strings.Index(readme, "\n## Quickstart\n")
	if start < 0 {
		return nil, fmt.Errorf("no \"## Quickstart\" section")
	}
	section := readme[start+1:]
	if end := strings.Index(section, "\n## "); end >= 0 {
		section = section[:end]
	}
	blocks := regexp.MustCompile("(?s)```console\n(.*?)```").FindAllStringSubmatch(section, -1)
	var steps []step
	for _, b := range blocks {
		continued := false
		for _, line := range strings.Split(strings.TrimSuffix(b[1], "\n"), "\n") {
			switch {
			case continued:
				steps[len(steps)-1].command += "\n" + line
			case strings.HasPrefix(line, "$ "):
				steps = append(steps, step{command: line[2:]})
			case len(steps) == 0:
				return nil, fmt.Errorf("a quickstart block starts with %q, not a command", line)
			default:
				s := &steps[len(steps)-1]
				s.want = strings.TrimPrefix(s.want+"\n"+line, "\n")
				continue
			}
			continued = strings.HasSuffix(line, `\`)
		}
	}
	if len(steps) < 10 {
		return nil, fmt.Errorf("%d commands in the quickstart's console blocks: the section has changed shape", len(steps))
	}
	return steps, nil
}

// runSteps runs the steps in one bash in dir and returns each one's output (stdout and
// stderr, trailing white space trimmed), stopping at the first that fails.
func runSteps(ctx context.Context, dir string, steps []step) ([]string, error) {
	const mark = "\x1equickstart-step\x1e"
	var script strings.Builder
	for i, s := range steps {
		fmt.Fprintf(&script, "printf '\\n%s%d\\n'\n%s\nrc=$?; if [ $rc -ne 0 ]; then printf '\\n%sfailed %%d\\n' $rc; exit 1; fi\n", mark, i, s.command, mark)
	}
	cmd := exec.CommandContext(ctx, "bash", "--noprofile", "--norc", "-c", script.String())
	cmd.Dir = dir
	var env []string
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); k != "PLATFORM_STACK_FILE" && !strings.HasPrefix(k, "BASH_FUNC_") {
			env = append(env, kv)
		}
	}
	cmd.Env = env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	runErr := cmd.Run()
	var outputs []string
	for _, chunk := range strings.Split(out.String(), mark)[1:] {
		head, body, _ := strings.Cut(chunk, "\n")
		if strings.HasPrefix(head, "failed") {
			return outputs, fmt.Errorf("$ %s: exit status %s\n%s", steps[len(outputs)-1].command, strings.TrimPrefix(head, "failed "), outputs[len(outputs)-1])
		}
		outputs = append(outputs, strings.TrimRight(body, " \n"))
	}
	if runErr != nil || len(outputs) != len(steps) {
		return outputs, fmt.Errorf("bash: %v after %d of %d commands\n%s", runErr, len(outputs), len(steps), out.String())
	}
	return outputs, nil
}
