package architecture_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/analyticsco/platform/devstack"
)

// requestReplyCalls are the nats.Conn and nats.Msg methods a request-reply is made of:
// subscribing in a queue group, sending a request, answering one. libs/natsx (Handle,
// Endpoint) is their one caller, so every request-reply has its spans, timeouts, caps,
// metrics and typed errors. Conn.Request, whose name is common, counts with its three
// arguments (subject, data, timeout).
var requestReplyCalls = map[string]bool{
	"QueueSubscribe": true, "QueueSubscribeSync": true, "ChanQueueSubscribe": true, "QueueSubscribeSyncWithChan": true,
	"RequestMsg": true, "RequestMsgWithContext": true, "RequestWithContext": true, "Respond": true, "RespondMsg": true,
}

// kitDir is the request-reply kit's package, the one allowed to make those calls.
const kitDir = "libs/natsx"

// rawRequestReply lists the request-reply calls in one file's source ("line: call").
func rawRequestReply(fset *token.FileSet, name string, src any) ([]string, error) {
	f, err := parser.ParseFile(fset, name, src, 0)
	if err != nil {
		return nil, err
	}
	var found []string
	ast.Inspect(f, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		sel, ok := call.Fun.(*ast.SelectorExpr)
		if ok && (requestReplyCalls[sel.Sel.Name] || sel.Sel.Name == "Request" && len(call.Args) == 3) {
			found = append(found, fset.Position(call.Pos()).String()+": "+sel.Sel.Name)
		}
		return true
	})
	return found, nil
}

// TestRequestReplyGoesThroughTheKit: no non-test file outside libs/natsx subscribes in a
// queue group, sends a request or answers one itself, so no second request-reply stack
// (one with spans, a timeout and a cap beside one without) grows unnoticed.
func TestRequestReplyGoesThroughTheKit(t *testing.T) {
	fset := token.NewFileSet()
	kit := filepath.Join(devstack.RepoRoot(t), kitDir) + string(filepath.Separator)
	files := 0
	for dir := range modules(t) {
		err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				if name := d.Name(); path != dir && (strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules") {
					return filepath.SkipDir
				}
				return nil
			}
			if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") || strings.HasPrefix(path, kit) {
				return nil
			}
			files++
			src, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			calls, err := rawRequestReply(fset, path, src)
			for _, c := range calls {
				t.Errorf("%s: request-reply by hand; use libs/natsx (Handle, Endpoint)", c)
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if files < 100 {
		t.Fatalf("checked %d Go files; the walk missed the modules", files)
	}
}

// The check finds each form of a hand-made request-reply, and not an HTTP client's
// Request of another arity.
func TestRawRequestReplyIsFound(t *testing.T) {
	src := `package p
func f() {
	nc.QueueSubscribe("s", "q", func(m *nats.Msg) { _ = m.Respond(nil) })
	_, _ = nc.RequestMsgWithContext(ctx, msg)
	_, _ = nc.Request("s", nil, time.Second)
	_, _ = c.Request(method, path, authz, body)
}`
	got, err := rawRequestReply(token.NewFileSet(), "p.go", src)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"p.go:3:2: QueueSubscribe", "p.go:3:54: Respond", "p.go:4:9: RequestMsgWithContext", "p.go:5:9: Request"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("found:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
