package architecture_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/analyticsco/platform/devstack"
)

// shipped are the modules whose code the platform ships: every process and every
// one-shot command (platformctl, embed-svc's subcommands). devstack, systemtest and tools
// are the harness.
var shipped = []string{"gateway", "workspace-svc", "embed-svc", "dbtsync-svc"}

// connectors open a connection to MongoDB, NATS or Redis, or add its metrics, by import
// path and function: libs/server's ConnectMongo, ConnectNATS, ConnectNATSOnce and
// OpenRedis call them, so every connection has the same metrics (and a process's the
// same readiness check) in every service and command.
var connectors = map[string]bool{
	"github.com/nats-io/nats.go.Connect":                    true,
	"go.mongodb.org/mongo-driver/v2/mongo.Connect":          true,
	"github.com/redis/go-redis/v9.NewClient":                true,
	"github.com/redis/go-redis/v9.NewFailoverClient":        true,
	"github.com/redis/go-redis/v9.NewFailoverClusterClient": true,
	"github.com/redis/go-redis/v9.NewClusterClient":         true,
	"github.com/redis/go-redis/v9.NewUniversalClient":       true,
	prefix + "libs/mongox.Connect":                          true,
	prefix + "libs/mongox.ConnectWithMetrics":               true,
	prefix + "libs/mongox.NewMetrics":                       true,
	prefix + "libs/mongox.Ping":                             true,
	prefix + "libs/natsx.NewMetrics":                        true,
	prefix + "libs/redisx.Open":                             true,
	prefix + "libs/redisx.NewMetrics":                       true,
}

// TestProcessesConnectThroughTheBootstrap: no shipped code (a main, a wiring package, a
// one-shot command) connects MongoDB, NATS or Redis, or adds their metrics, by hand; and
// server.Options (the public and internal handlers, the readiness checks) is built in
// internal/app only, the same place in every service.
func TestProcessesConnectThroughTheBootstrap(t *testing.T) {
	root := devstack.RepoRoot(t)
	seen := map[string]bool{}
	for _, mod := range shipped {
		err := filepath.WalkDir(filepath.Join(root, mod), func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) {
				return filepath.SkipDir
			}
			if d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
				return nil
			}
			rel, _ := filepath.Rel(root, p)
			seen[filepath.ToSlash(filepath.Dir(rel))] = true
			fset := token.NewFileSet()
			f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
			if err != nil {
				return err
			}
			for _, problem := range bootstrapDrift(fset, f, strings.Contains(filepath.ToSlash(rel), "/cmd/")) {
				t.Error(problem)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, dir := range []string{"gateway/cmd/gateway", "gateway/cmd/platformctl", "gateway/internal/platformctl",
		"workspace-svc/cmd/workspace-svc", "embed-svc/cmd/embed-svc", "dbtsync-svc/cmd/dbtsync-svc", "dbtsync-svc/internal/app"} {
		if !seen[dir] {
			t.Errorf("%s was not checked: the walk missed it (%d directories seen)", dir, len(seen))
		}
	}
}

// TestBootstrapCheckFailsOnAHandMadeConnection: the check above reports a command that
// connects NATS and MongoDB by hand (under another import name too) and a main that
// builds server.Options, and passes the same command connecting through libs/server.
func TestBootstrapCheckFailsOnAHandMadeConnection(t *testing.T) {
	handMade := `package main

import (
	natsgo "github.com/nats-io/nats.go"
	"github.com/analyticsco/platform/libs/mongox"
	"github.com/analyticsco/platform/libs/server"
)

func oneShot() {
	nc, _ := natsgo.Connect(url, natsgo.Name("cli"))
	client, _ := mongox.Connect(ctx, uri, nil)
	_ = server.Options{Service: "cli"}
}
`
	fset := token.NewFileSet()
	problems := bootstrapDrift(fset, parseFixture(t, fset, "main.go", handMade), true)
	if len(problems) != 3 || !strings.Contains(problems[0], "natsgo.Connect") ||
		!strings.Contains(problems[1], "mongox.Connect") || !strings.Contains(problems[2], "server.Options") {
		t.Errorf("a hand-made NATS and MongoDB connection and server.Options in a cmd: got %q", problems)
	}
	throughBootstrap := `package main

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/analyticsco/platform/libs/server"
)

func oneShot() {
	reg := prometheus.NewRegistry()
	nc, _ := server.ConnectNATSOnce(url, "cli", time.Second, reg)
	client, _, _ := server.ConnectMongo(ctx, uri, reg)
}
`
	if problems := bootstrapDrift(fset, parseFixture(t, fset, "main.go", throughBootstrap), true); len(problems) != 0 {
		t.Errorf("a command connecting through libs/server: %q", problems)
	}
}

// bootstrapDrift lists f's hand-made connections and, in a cmd (inCmd), its
// server.Options literals.
func bootstrapDrift(fset *token.FileSet, f *ast.File, inCmd bool) []string {
	imports := importNames(f)
	var problems []string
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.CallExpr:
			if pkg, name, ok := qualified(n.Fun, imports); ok && connectors[pkg+"."+name] {
				problems = append(problems, fset.Position(n.Pos()).String()+": "+selector(n.Fun)+
					": connect with libs/server (ConnectMongo, ConnectNATS, ConnectNATSOnce for a command, OpenRedis)")
			}
		case *ast.CompositeLit:
			if pkg, name, ok := qualified(n.Type, imports); ok && inCmd && pkg == prefix+"libs/server" && name == "Options" {
				problems = append(problems, fset.Position(n.Pos()).String()+": server.Options is built in internal/app, as in every service")
			}
		}
		return true
	})
	return problems
}

// importNames maps the names f refers to its imports by to their paths.
func importNames(f *ast.File) map[string]string {
	names := map[string]string{}
	for _, imp := range f.Imports {
		p, _ := strconv.Unquote(imp.Path.Value)
		name := packageName(p)
		if imp.Name != nil {
			name = imp.Name.Name
		}
		names[name] = p
	}
	return names
}

// packageName is the name a package at import path p declares: its last element, less a
// major version suffix and a ".go" or "go-" (nats.go, go-redis/v9).
func packageName(p string) string {
	elems := strings.Split(p, "/")
	last := elems[len(elems)-1]
	if len(elems) > 1 && strings.HasPrefix(last, "v") {
		if _, err := strconv.Atoi(last[1:]); err == nil {
			last = elems[len(elems)-2]
		}
	}
	last = strings.TrimSuffix(strings.TrimPrefix(last, "go-"), ".go")
	return path.Base(last)
}

// qualified resolves pkg.Name to the import path of pkg and Name.
func qualified(e ast.Expr, imports map[string]string) (pkg, name string, ok bool) {
	s, isSel := e.(*ast.SelectorExpr)
	if !isSel {
		return "", "", false
	}
	x, isIdent := s.X.(*ast.Ident)
	if !isIdent || imports[x.Name] == "" {
		return "", "", false
	}
	return imports[x.Name], s.Sel.Name, true
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
