package consumers_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/analyticsco/platform/api"
	"github.com/analyticsco/platform/devstack"
	"github.com/analyticsco/platform/systemtest/stacktest"
)

// The pinned npm packages of the TypeScript checks: the generator, the compiler it
// supports (^5) and Node's types for the script (Node 20, Debian's).
const (
	openapiTypescriptVersion = "7.13.0"
	typescriptVersion        = "5.9.3"
	nodeTypesVersion         = "20.19.43"
)

func TestMain(m *testing.M) { os.Exit(stacktest.Main(m)) }

// generateTypes runs openapi-typescript on the document into dir/api.d.ts.
func generateTypes(t *testing.T, dir string) {
	t.Helper()
	modules := devstack.NpmPackage(t, "openapi-typescript", openapiTypescriptVersion, "the TypeScript types check")
	doc := filepath.Join(devstack.RepoRoot(t), "api", "openapi.yaml")
	cmd := exec.Command(filepath.Join(modules, ".bin", "openapi-typescript"), doc, "-o", filepath.Join(dir, "api.d.ts"))
	cmd.Env = append(os.Environ(), "NO_COLOR=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("openapi-typescript refuses api/openapi.yaml: %v\n%s", err, out)
	}
}

// tsc runs the pinned TypeScript compiler in dir with --strict and args.
func tsc(t *testing.T, dir string, args ...string) {
	t.Helper()
	modules := devstack.NpmPackage(t, "typescript", typescriptVersion, "the TypeScript types check")
	cmd := exec.Command(filepath.Join(modules, ".bin", "tsc"), append([]string{"--strict", "--pretty", "false"}, args...)...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("tsc --strict %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// operationsBlock is the operations interface of openapi-typescript's output: one
// property per operationId.
var operationsBlock = regexp.MustCompile(`(?ms)^export interface operations \{\n(.*?)^\}`)

// TestOpenAPITypescriptTypesCompileStrictForEveryOperation: the types openapi-typescript
// generates from the document compile with tsc --strict and name every operation.
func TestOpenAPITypescriptTypesCompileStrictForEveryOperation(t *testing.T) {
	dir := t.TempDir()
	generateTypes(t, dir)
	tsc(t, dir, "--noEmit", "api.d.ts")
	raw, err := os.ReadFile(filepath.Join(dir, "api.d.ts"))
	if err != nil {
		t.Fatal(err)
	}
	block := operationsBlock.FindSubmatch(raw)
	if block == nil {
		t.Fatal("api.d.ts has no operations interface")
	}
	var names []string
	for _, m := range regexp.MustCompile(`(?m)^    "?([A-Za-z0-9_]+)"?: \{$`).FindAllSubmatch(block[1], -1) {
		names = append(names, string(m[1]))
	}
	checkCoverage(t, "openapi-typescript "+openapiTypescriptVersion, names, func(op api.Operation) string { return op.ID })
}

// TestTypeScriptEmbedFlowRunsAgainstThePlatform: a short script typed by the generated
// types (testdata/embed-flow.ts) compiles with tsc --strict and, run by node with its
// built-in fetch, mints a session with an account API key, exchanges it and gets a
// data-API token from the running platform.
func TestTypeScriptEmbedFlowRunsAgainstThePlatform(t *testing.T) {
	dir := t.TempDir()
	generateTypes(t, dir)
	script, err := os.ReadFile(filepath.Join("testdata", "embed-flow.ts"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "embed-flow.ts"), script, 0o644); err != nil {
		t.Fatal(err)
	}
	types := filepath.Join(devstack.NpmPackage(t, "@types/node", nodeTypesVersion, "the TypeScript embed flow"), "@types")
	tsc(t, dir, "--target", "es2022", "--module", "commonjs", "--lib", "es2022", "--typeRoots", types, "--types", "node",
		"--outDir", "out", "embed-flow.ts")

	s := stacktest.Start(t, stacktest.Options{})
	acme := s.Seed.Accounts["acme"]
	out := devstack.Node(t, time.Minute, []string{"GATEWAY=" + s.Gateway, "API_KEY=" + acme.APIKeys["admin"],
		"DEPLOYMENT_ID=" + strconv.FormatInt(acme.Deployments[0].ID, 10)}, filepath.Join(dir, "out", "embed-flow.js"))
	var got struct {
		SessionToken, DataToken       bool
		ExpiresAt, DataTokenExpiresAt string
		RefreshInHours                int
		DataTokenID                   string
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("the script printed %q: %v", out, err)
	}
	if !got.SessionToken || !got.DataToken || got.DataTokenID == "" || got.RefreshInHours != 23 {
		t.Errorf("the embed flow got %+v: want a session token (refresh in 23 hours) and a data-API token with its id", got)
	}
	for _, ts := range []string{got.ExpiresAt, got.DataTokenExpiresAt} {
		if _, err := time.Parse(time.RFC3339, ts); err != nil {
			t.Errorf("expiry %q: %v", ts, err)
		}
	}
}
