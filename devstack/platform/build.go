package platform

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/analyticsco/platform/devstack"
)

// Binary is a main package of the repository and the file `go build` makes of it.
type Binary struct{ Name, Pkg string }

// The binaries a stack runs. Building them is the one place a harness depends on a
// service, and it is a declared list, not a string in a helper.
var (
	Gateway      = Binary{"gateway", "./gateway/cmd/gateway"}
	Platformctl  = Binary{"platformctl", "./gateway/cmd/platformctl"}
	WorkspaceSvc = Binary{"workspace-svc", "./workspace-svc/cmd/workspace-svc"}
	EmbedSvc     = Binary{"embed-svc", "./embed-svc/cmd/embed-svc"}
	DBTSyncSvc   = Binary{"dbtsync-svc", "./dbtsync-svc/cmd/dbtsync-svc"}
	// Devstack is the runner of `make run` itself.
	Devstack = Binary{"devstack", "./devstack/cmd/devstack"}

	// Stack is every binary of a whole platform: the services, the gateway and its CLI.
	Stack = []Binary{Gateway, Platformctl, WorkspaceSvc, EmbedSvc, DBTSyncSvc}
)

// Build builds bins, from the repository at root, into dir.
func Build(ctx context.Context, root, dir string, bins ...Binary) error {
	args := []string{"build", "-o", dir + string(filepath.Separator)}
	for _, b := range bins {
		args = append(args, b.Pkg)
	}
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %v: %v\n%s", bins, err, out)
	}
	return nil
}

// The test process's binaries: one directory per test process, each binary built once.
var built struct {
	mu   sync.Mutex
	dir  string
	have map[string]bool
}

const binDirPrefix = "platform-bin-"

// BinDir builds the binaries of bins not built yet by this test process and returns
// their directory, in the system's temp dir and named after the process. The
// directories of test processes that have ended are removed on first use; RemoveBinDir
// removes this one.
func BinDir(t testing.TB, bins ...Binary) string {
	t.Helper()
	built.mu.Lock()
	defer built.mu.Unlock()
	if built.dir == "" {
		removeStaleBinDirs()
		dir := filepath.Join(os.TempDir(), binDirPrefix+strconv.Itoa(os.Getpid()))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatalf("platform: %v", err)
		}
		built.dir, built.have = dir, map[string]bool{}
	}
	var missing []Binary
	for _, b := range bins {
		if !built.have[b.Name] {
			missing = append(missing, b)
		}
	}
	if len(missing) > 0 {
		if err := Build(context.Background(), devstack.RepoRoot(t), built.dir, missing...); err != nil {
			t.Fatalf("platform: %v", err)
		}
		for _, b := range missing {
			built.have[b.Name] = true
		}
	}
	return built.dir
}

// RemoveBinDir removes the binaries BinDir built (at the end of a TestMain).
func RemoveBinDir() {
	built.mu.Lock()
	defer built.mu.Unlock()
	if built.dir != "" {
		_ = os.RemoveAll(built.dir)
		built.dir, built.have = "", nil
	}
}

// removeStaleBinDirs removes the binary directories of test processes that have ended.
func removeStaleBinDirs() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), binDirPrefix+"*"))
	for _, d := range dirs {
		pid, err := strconv.Atoi(strings.TrimPrefix(filepath.Base(d), binDirPrefix))
		if err != nil || syscall.Kill(pid, 0) == nil {
			continue // not ours, or its process still runs
		}
		_ = os.RemoveAll(d)
	}
}

// FakeBinDir links the running test binary under the name of every binary of Stack, for
// tests of the launcher and of its callers that run a fake of each process (the test
// binary, in a mode its TestMain picks from the environment).
func FakeBinDir(t testing.TB) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, b := range Stack {
		if err := os.Symlink(self, filepath.Join(dir, b.Name)); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}
