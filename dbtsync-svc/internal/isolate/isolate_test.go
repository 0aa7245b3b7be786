package isolate

import (
	"context"
	"encoding/gob"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"testing"

	"github.com/analyticsco/platform/dbtsync-svc/internal/convert"
	"github.com/analyticsco/platform/dbtsync-svc/internal/dbtsync"
	"github.com/analyticsco/platform/dbtsync-svc/internal/gitsource"
	"github.com/analyticsco/platform/devstack/gitrepo"
)

// The child reads and converts what the worker sends it, as the worker would in its own
// process; it gets the git credentials opened, over its stdin, and none of the worker's
// environment. The child is this test binary, re-executed.

const childMode = "ISOLATE_TEST_CHILD"

func TestMain(m *testing.M) {
	switch os.Getenv(childMode) {
	case "serve":
		Main(ChildOptions{})
	case "report": // the child's limits as it runs, in a panic's message
		Main(ChildOptions{Inspect: func(*convert.Project) {
			score, _ := os.ReadFile("/proc/self/oom_score_adj")
			panic(fmt.Sprintf("oom_score_adj=%s gomemlimit=%d", strings.TrimSpace(string(score)), debug.SetMemoryLimit(-1)))
		}})
	case "dump": // what a child receives, written to DUMP_TO
		var req request
		if err := gob.NewDecoder(os.Stdin).Decode(&req); err != nil {
			os.Exit(4)
		}
		b, _ := json.Marshal(map[string]any{"credentials": string(req.Credentials), "sealed": req.Integration.Credentials,
			"env": os.Environ(), "args": os.Args[1:], "cpu": req.CPU, "memory": req.Memory, "maxFiles": req.Git.MaxFiles})
		_ = os.WriteFile(os.Getenv("DUMP_TO"), b, 0o600)
		os.Exit(3)
	}
	os.Exit(m.Run())
}

func runner(mode string, env ...string) *Runner {
	return &Runner{Command: []string{os.Args[0], Subcommand}, Env: append([]string{childMode + "=" + mode}, env...)}
}

const manifestV12 = `{"metadata":{"dbt_schema_version":"https://schemas.getdbt.com/dbt/manifest/v12.json"},"nodes":{` +
	`"model.p.orders":{"resource_type":"model","name":"orders","alias":"orders","database":"db","schema":"s","config":{"materialized":"table"},"columns":{"id":{"name":"id","data_type":"integer"}}},` +
	`"model.p.customers":{"resource_type":"model","name":"customers","alias":"customers","database":"db","schema":"s","config":{"materialized":"table"},"columns":{"id":{"name":"id","data_type":"integer"}}}}}`

func TestAManifestIsConvertedInTheChildAsInProcess(t *testing.T) {
	proj, err := dbtsync.DecodeManifest(strings.NewReader(manifestV12))
	if err != nil {
		t.Fatal(err)
	}
	want := convert.Build(proj)
	var loaded int
	var progress [][2]int
	got, err := runner("serve").Run(context.Background(), Input{Source: dbtsync.SourceManifest, Manifest: strings.NewReader(manifestV12), ProgressEvery: 1,
		Loaded: func(n int) error { loaded = n; return nil }, Progress: func(d, n int) { progress = append(progress, [2]int{d, n}) }})
	if err != nil {
		t.Fatal(err)
	}
	if loaded != 2 || !slices.Equal(progress, [][2]int{{1, 2}}) {
		t.Errorf("loaded %d, progress %v", loaded, progress)
	}
	if !slices.Equal(got.Files, want.Files) || !slices.Equal(got.Warnings, want.Warnings) {
		t.Errorf("child converted\n%+v\nin process\n%+v", got, want)
	}
}

func TestAnInputFailureInTheChildIsTheJobsFailure(t *testing.T) {
	_, err := runner("serve").Run(context.Background(), Input{Source: dbtsync.SourceManifest, Manifest: strings.NewReader(`{"metadata":{}}`)})
	code, msg, own := dbtsync.PublicFailure(err)
	if !own || code != dbtsync.CodeInvalidManifest || msg == "" || !dbtsync.IsPermanent(err) {
		t.Errorf("error %v: code %q, message %q, own %v, permanent %v", err, code, msg, own, dbtsync.IsPermanent(err))
	}
}

// The child reads an uploaded manifest within the manifest limits the worker sends it
// (Runner.Git's), not its own defaults: lowered ones fail the job with work_limit,
// naming the value set.
func TestTheChildReadsTheManifestWithinTheLimitsItIsSent(t *testing.T) {
	for _, c := range []struct {
		name string
		git  gitsource.Limits
		want string
	}{
		{"member-bytes", gitsource.Limits{MaxManifestMemberBytes: 64},
			`nodes["model.p.orders"].database: the manifest read is over its limit of 64 bytes of the members of one node the conversion reads`},
		{"names", gitsource.Limits{MaxManifestNames: 5},
			`nodes["model.p.orders"]: the manifest read is over its limit of 5 member names of the objects open at once`},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := runner("serve")
			r.Git = c.git
			_, err := r.Run(context.Background(), Input{Source: dbtsync.SourceManifest, Manifest: strings.NewReader(manifestV12)})
			code, msg, own := dbtsync.PublicFailure(err)
			if !own || code != dbtsync.CodeWorkLimit || msg != c.want || !dbtsync.IsPermanent(err) {
				t.Errorf("error %v: code %q, message %q, want work_limit %q", err, code, msg, c.want)
			}
		})
	}
}

func TestAGitProjectIsClonedAndReadInTheChild(t *testing.T) {
	dir := t.TempDir()
	r, err := gitrepo.Init(dir)
	if err != nil {
		t.Fatal(err)
	}
	root, err := r.Files(map[string][]byte{
		"dbt_project.yml":    []byte("name: shop\nmodel-paths: [models]\n"),
		"models/orders.sql":  []byte("select 1 as id"),
		"models/schema.yml":  []byte("version: 2\nmodels:\n  - name: orders\n    columns:\n      - name: id\n        data_type: integer\n"),
		"models/refunds.sql": []byte("select 2 as id"),
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Commit(root, "main"); err != nil {
		t.Fatal(err)
	}
	rn := runner("serve")
	rn.Git = gitsource.Limits{Policy: gitsource.Policy{AllowFile: true}}
	rn.CloneDir = t.TempDir()
	var loaded int
	res, err := rn.Run(context.Background(), Input{Source: dbtsync.SourceGit, Ref: "main",
		Integration: dbtsync.Integration{DeploymentID: 1, RepoURL: "file://" + dir, Branch: "main"}, Loaded: func(n int) error { loaded = n; return nil }})
	if err != nil {
		t.Fatal(err)
	}
	if loaded != 2 || len(res.Files) != 2 || res.Files[0].Path != convert.CubePath("orders") || !strings.Contains(res.Files[0].Content, "id") {
		t.Errorf("loaded %d models, result %+v", loaded, res)
	}
	// The child's clone is gone with it.
	left, _ := filepath.Glob(filepath.Join(rn.CloneDir, "dbtsync-clones-*", "job-*"))
	if len(left) > 0 {
		t.Errorf("clones left: %v", left)
	}
}

type sealedWith string

func (s sealedWith) Open(sealed []byte, dep int64) ([]byte, error) {
	if string(sealed) != string(s) || dep != 7 {
		return nil, os.ErrInvalid
	}
	return []byte(`{"token":"opened-token"}`), nil
}

// The worker opens the credentials and sends them over the pipe; the child's argv and
// environment hold neither them nor anything of the worker's environment it was not given.
func TestTheChildGetsOpenedCredentialsOverItsStdinAndNoWorkerEnvironment(t *testing.T) {
	t.Setenv("DBT_CREDENTIALS_KEY", "worker-secret")
	dump := filepath.Join(t.TempDir(), "dump.json")
	rn := runner("dump", "DUMP_TO="+dump)
	rn.Opener, rn.Git = sealedWith("sealed-bytes"), gitsource.Limits{MaxFiles: 123}
	_, err := rn.Run(context.Background(), Input{Source: dbtsync.SourceGit, Ref: "main",
		Integration: dbtsync.Integration{DeploymentID: 7, RepoURL: "https://example.test/r.git", Credentials: []byte("sealed-bytes")}})
	if code, _, _ := dbtsync.PublicFailure(err); err == nil || code != dbtsync.CodeInternal || dbtsync.IsPermanent(err) || !strings.Contains(err.Error(), "exit status 3") {
		t.Errorf("a child that exits without an outcome: %v", err)
	}
	b, err := os.ReadFile(dump)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Credentials string
		Sealed      []byte
		Env, Args   []string
		CPU         int64
		Memory      int64
		MaxFiles    int
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if got.Credentials != `{"token":"opened-token"}` || len(got.Sealed) != 0 || got.MaxFiles != 123 ||
		got.CPU != int64(DefaultLimits.CPU) || got.Memory != DefaultLimits.Memory {
		t.Errorf("the child received %+v", got)
	}
	for _, s := range append(got.Env, got.Args...) {
		if strings.Contains(s, "opened-token") || strings.Contains(s, "worker-secret") || strings.Contains(s, "DBT_CREDENTIALS_KEY") {
			t.Errorf("the child's argv or environment holds %q", s)
		}
	}

	_, err = rn.Run(context.Background(), Input{Source: dbtsync.SourceGit, Integration: dbtsync.Integration{DeploymentID: 7, Credentials: []byte("other")}})
	if err == nil || !dbtsync.IsPermanent(err) {
		t.Errorf("credentials that do not open: %v", err)
	}
}

func TestChildEnvKeepsOnlyWhatAChildNeeds(t *testing.T) {
	got := ChildEnv([]string{"PATH=/bin", "DBT_CREDENTIALS_KEY=k", "NATS_URL=nats://u:p@h", "MONGODB_URI=mongodb://x", "TMPDIR=/t", "HTTPS_PROXY=http://p", "GOMEMLIMIT=1GiB"})
	if want := []string{"PATH=/bin", "TMPDIR=/t", "HTTPS_PROXY=http://p"}; !slices.Equal(got, want) {
		t.Errorf("ChildEnv = %v, want %v", got, want)
	}
}

func TestStderrCaptureKeepsItsHeadAndTailBounded(t *testing.T) {
	var c capture
	_, _ = c.Write([]byte("fatal error: out of memory\n"))
	for range 10_000 {
		_, _ = c.Write([]byte("goroutine dump line ............................................\n"))
	}
	_, _ = c.Write([]byte("the last line\n"))
	s := c.String()
	if !strings.HasPrefix(s, "fatal error: out of memory\n") || !strings.HasSuffix(s, "the last line\n") || len(s) > 2*captureHalf+100 || !strings.Contains(s, "bytes ...]") {
		t.Errorf("captured %d bytes: %.100q ... %.100q", len(s), s, s[max(0, len(s)-100):])
	}
	if !oom(s) {
		t.Error("an out-of-memory crash is not told apart")
	}
}

// A child sets its soft memory limit, and offers itself to the OOM killer before its
// worker; its crash is an internal failure that a retry may mend, with its stderr.
func TestTheChildSetsItsMemoryLimitAndIsTheOOMKillersFirstChoice(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the limits are Linux's")
	}
	rn := runner("report")
	rn.Limits = Limits{Memory: 300 << 20}
	_, err := rn.Run(context.Background(), Input{Source: dbtsync.SourceManifest, Manifest: strings.NewReader(manifestV12)})
	if err == nil || dbtsync.IsPermanent(err) || !strings.Contains(err.Error(), fmt.Sprintf("oom_score_adj=500 gomemlimit=%d", 300<<20)) || !strings.Contains(err.Error(), "exit status 2") {
		t.Errorf("error %v", err)
	}
}
