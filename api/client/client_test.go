package client_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/analyticsco/platform/api"
	"github.com/analyticsco/platform/api/client"
)

// TestGeneratedClientIsCurrent regenerates the client with the generator pinned in
// tools/go.mod, the configuration and the document of generate.go, and fails while the
// committed client.gen.go differs: a change to openapi.yaml must come with its client.
func TestGeneratedClientIsCurrent(t *testing.T) {
	tools, err := filepath.Abs(filepath.Join("..", "..", "tools"))
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "oapi-codegen")
	build := exec.Command("go", "build", "-o", bin, "github.com/oapi-codegen/oapi-codegen/v2/cmd/oapi-codegen")
	build.Dir = tools
	build.Env = append(os.Environ(), "GOWORK=off")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building oapi-codegen from tools/go.mod: %v\n%s", err, out)
	}
	config, _ := filepath.Abs("oapi-codegen.yaml")
	doc, _ := filepath.Abs(filepath.Join("..", "openapi.yaml"))
	out := t.TempDir() // the configuration's output, client.gen.go, is relative to the working directory
	gen := exec.Command(bin, "-config", config, doc)
	gen.Dir = out
	if msg, err := gen.CombinedOutput(); err != nil {
		t.Fatalf("oapi-codegen refuses api/openapi.yaml: %v\n%s", err, msg)
	}
	want, err := os.ReadFile(filepath.Join(out, "client.gen.go"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("client.gen.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("api/client/client.gen.go is not what oapi-codegen makes of api/openapi.yaml (first difference at line %d): run `go generate ./...` in api/ and commit the result",
			firstDifference(got, want))
	}
}

// firstDifference is the 1-based number of the first line where a and b differ.
func firstDifference(a, b []byte) int {
	la, lb := strings.Split(string(a), "\n"), strings.Split(string(b), "\n")
	for i := range min(len(la), len(lb)) {
		if la[i] != lb[i] {
			return i + 1
		}
	}
	return min(len(la), len(lb)) + 1
}

// TestClientHasAMethodForEveryOperation: the client covers the whole document, one
// typed method per operation (named after its operationId), and nothing else.
func TestClientHasAMethodForEveryOperation(t *testing.T) {
	ops, err := api.Operations()
	if err != nil {
		t.Fatal(err)
	}
	methods := reflect.TypeFor[client.ClientWithResponsesInterface]()
	want := map[string]bool{}
	for _, op := range ops {
		name := strings.ToUpper(op.ID[:1]) + op.ID[1:] + "WithResponse"
		if _, ok := methods.MethodByName(name); !ok {
			// A form-encoded body (the token endpoint's): oapi-codegen names the typed
			// method after its body's media type.
			name = strings.TrimSuffix(name, "WithResponse") + "WithFormdataBodyWithResponse"
		}
		want[name] = true
		if _, ok := methods.MethodByName(name); !ok {
			t.Errorf("%s %s (%s): the client has no method %s", op.Method, op.Path, op.ID, name)
		}
	}
	covered := 0
	for i := range methods.NumMethod() {
		name := methods.Method(i).Name
		switch {
		case want[name]:
			covered++
		case strings.HasSuffix(name, "WithBodyWithResponse") && (want[strings.TrimSuffix(name, "WithBodyWithResponse")+"WithResponse"] ||
			want[strings.TrimSuffix(name, "WithBodyWithResponse")+"WithFormdataBodyWithResponse"]):
			// the same operation with a body the caller encodes
		default:
			t.Errorf("the client has a method %s for no operation of the document", name)
		}
	}
	if covered != len(ops) || len(ops) == 0 {
		t.Fatalf("the client covers %d of the document's %d operations", covered, len(ops))
	}
	t.Logf("oapi-codegen client: %d of %d operations", covered, len(ops))
}
