package architecture_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"

	"github.com/analyticsco/platform/devstack"
)

// processes are the services' mains and their wiring packages.
var processes = []string{
	"gateway/cmd/gateway", "gateway/internal/app",
	"workspace-svc/cmd/workspace-svc", "workspace-svc/internal/app",
	"embed-svc/cmd/embed-svc", "embed-svc/internal/app",
	"dbtsync-svc/cmd/dbtsync-svc", "dbtsync-svc/internal/app",
}

// connectors open a process's connections or their metrics: libs/server's ConnectMongo,
// ConnectNATS and OpenRedis call them, so every connection has the same metrics and the
// same readiness check in every service.
var connectors = map[string]bool{
	"nats.Connect": true, "natsx.NewMetrics": true,
	"mongox.ConnectWithMetrics": true, "mongox.NewMetrics": true, "mongox.Ping": true,
	"redisx.Open": true, "redisx.NewMetrics": true,
}

// TestProcessesConnectThroughTheBootstrap: no main or wiring package connects MongoDB,
// NATS or Redis, or adds their metrics, by hand; and server.Options (the public and
// internal handlers, the readiness checks) is built in internal/app only, the same
// place in every service.
func TestProcessesConnectThroughTheBootstrap(t *testing.T) {
	root := devstack.RepoRoot(t)
	for _, dir := range processes {
		fset := token.NewFileSet()
		files, err := filepath.Glob(filepath.Join(root, dir, "*.go"))
		if err != nil || len(files) == 0 {
			t.Fatalf("%s: no Go files (%v)", dir, err)
		}
		for _, path := range files {
			if strings.HasSuffix(path, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(fset, path, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			ast.Inspect(f, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.CallExpr:
					if name := selector(n.Fun); connectors[name] {
						t.Errorf("%s: %s: connect with libs/server (ConnectMongo, ConnectNATS, OpenRedis)", fset.Position(n.Pos()), name)
					}
				case *ast.CompositeLit:
					if selector(n.Type) == "server.Options" && strings.Contains(dir, "/cmd/") {
						t.Errorf("%s: server.Options is built in internal/app, as in every service", fset.Position(n.Pos()))
					}
				}
				return true
			})
		}
	}
}

// selector is "pkg.Name" for a pkg.Name expression, "" otherwise.
func selector(e ast.Expr) string {
	s, ok := e.(*ast.SelectorExpr)
	if !ok {
		return ""
	}
	x, ok := s.X.(*ast.Ident)
	if !ok {
		return ""
	}
	return x.Name + "." + s.Sel.Name
}
