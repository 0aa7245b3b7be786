package architecture_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/analyticsco/platform/devstack"
)

// houseOrder is the one decorator order, innermost first: the app wraps what NewService
// returns in Auditing, then Logging, then Instrumenting (go-kit's shipping example wraps
// every service the same way), so the outer decorators see the call as the client made
// it and a refusal is audited, logged and counted alike in every service.
var houseOrder = []string{"AuditingMiddleware", "LoggingMiddleware", "InstrumentingMiddleware"}

// decoratorFiles are where a domain declares each decorator, the same in every service.
var decoratorFiles = map[string]string{"AuditingMiddleware": "audit.go", "LoggingMiddleware": "logging.go", "InstrumentingMiddleware": "metrics.go"}

// skeleton is a domain's shape: the decorators its app wraps it in, innermost first, and
// whether its constructor is NewService(Ports, Options) Service. A shape other than the
// house one names its reason.
type skeleton struct {
	order       []string
	constructor bool // NewService(Ports, Options) Service
	reason      string
}

// skeletons are the shapes of every domain package (a package under internal/ that
// declares a Service interface and NewService), by directory. A domain not listed here
// fails the test, as does one listed that is gone.
var skeletons = map[string]skeleton{
	"workspace-svc/internal/workspace": {order: houseOrder, constructor: true},
	"dbtsync-svc/internal/dbtsync":     {order: houseOrder, constructor: true},
	"embed-svc/internal/webhooks":      {order: houseOrder, constructor: true},
	// embed-svc records its audit events inside the service (Ports.Audit), not in an
	// Auditing decorator: a mint's event needs what only the mint resolves (the plan, the
	// tenant, the session), and refused exchanges of one session id are recorded at most
	// once per Limits.ExchangeFailureAudit, counted in the session store.
	"embed-svc/internal/embed": {order: houseOrder[1:], constructor: true,
		reason: "embed records its audit events in the domain (a mint's event needs what only the mint resolves; refused exchanges are recorded once per window, counted in the session store)"},
	// The audit trail's read side (GET /api/v1/audit), a second domain in embed-svc: one
	// read over one store, nothing to configure and nothing to record; the server's
	// request log and HTTP metrics are its logging and instrumenting.
	"embed-svc/internal/audit": {order: nil, constructor: false,
		reason: "the audit trail's read side is one read over its store (NewService(Store)), logged and counted by the server's request middleware"},
}

// TestEveryServiceHasOneConstructorAndOneDecoratorOrder: every domain is built by
// NewService(Ports, Options) Service and wrapped by its app (internal/app) in the house
// order, Auditing → Logging → Instrumenting, right after it is built, and nowhere else;
// the exceptions are the ones skeletons names, each with its reason. Each decorator is
// declared in its file (audit.go, logging.go, metrics.go), and the domain's errors are
// built with errs's shorthands, not copies of them.
func TestEveryServiceHasOneConstructorAndOneDecoratorOrder(t *testing.T) {
	root := devstack.RepoRoot(t)
	found := map[string]bool{}
	for _, mod := range shipped {
		dirs, err := filepath.Glob(filepath.Join(root, mod, "internal", "*"))
		if err != nil {
			t.Fatal(err)
		}
		for _, dir := range dirs {
			fset := token.NewFileSet()
			domain := parseDir(t, fset, dir)
			if !declaresService(domain) {
				continue
			}
			rel := mod + "/internal/" + filepath.Base(dir)
			found[rel] = true
			want, ok := skeletons[rel]
			if !ok {
				t.Errorf("%s declares a Service and NewService but is not in skeletons: give it the house shape (NewService(Ports, Options), %v)", rel, houseOrder)
				continue
			}
			app := parseDir(t, fset, filepath.Join(root, mod, "internal", "app"))
			for _, problem := range skeletonDrift(fset, prefix+rel, domain, app, want) {
				t.Errorf("%s: %s", rel, problem)
			}
		}
	}
	for rel := range skeletons {
		if !found[rel] {
			t.Errorf("skeletons lists %s, which declares no Service and NewService", rel)
		}
	}
}

// The skeleton check's fixture: a domain "shop" and its app, in parts a case replaces.
const (
	shopPath = prefix + "shop-svc/internal/shop"
	// The decorators, each in the file named for it.
	auditing      = "func AuditingMiddleware(rec Recorder) func(Service) Service { return nil }\n"
	logging       = "func LoggingMiddleware(l *slog.Logger) func(Service) Service { return nil }\n"
	instrumenting = "func InstrumentingMiddleware(m *Metrics) func(Service) Service { return nil }\n"
	// The app's wrapping in the house order, and the house constructor.
	house = `	svc = shop.AuditingMiddleware(d.Audit)(svc)
	svc = shop.LoggingMiddleware(d.Logger)(svc)
	svc = shop.InstrumentingMiddleware(d.Metrics)(svc)`
	ports = `func NewService(p Ports, o Options) Service { return nil }`
)

var decorators = map[string]string{"audit.go": auditing, "logging.go": logging, "metrics.go": instrumenting}

// shopDomain is the shop's service.go with constructor (and anything after it).
func shopDomain(constructor string) string {
	return `package shop

import (
	"github.com/analyticsco/platform/libs/errs"
	"github.com/analyticsco/platform/libs/httpx"
)

type Service interface{ Buy() error }

` + constructor + "\n"
}

// shopApp is the shop's internal/app, wrapping the service with wrap.
func shopApp(wrap string) string {
	return `package app

import "github.com/analyticsco/platform/shop-svc/internal/shop"

func New(d Deps) http.Handler {
	svc := shop.NewService(shop.Ports{Store: d.Store}, shop.Options{Limits: d.Limits})
` + wrap + `
	return shop.NewHTTPHandler(shop.MakeEndpoints(svc))
}
`
}

// checkShop runs the skeleton check over the shop: service.go, the decorators' files,
// and its app.
func checkShop(t *testing.T, domainSrc, appSrc string, files map[string]string) []string {
	fset := token.NewFileSet()
	d := []*ast.File{parseFixture(t, fset, "service.go", domainSrc)}
	for _, name := range slices.Sorted(maps.Keys(files)) {
		d = append(d, parseFixture(t, fset, name, "package shop\n\n"+files[name]))
	}
	a := parseFixture(t, fset, "app.go", appSrc)
	return skeletonDrift(fset, shopPath, d, []*ast.File{a}, skeleton{order: houseOrder, constructor: true})
}

// TestSkeletonCheckFailsOnAnotherConstructorOrOrder: the check passes a domain in the
// house shape and reports one whose constructor takes other parameters, an app that
// wraps in another order, a decorator applied away from NewService or declared away from
// its file, and an error helper that copies one of errs's.
func TestSkeletonCheckFailsOnAnotherConstructorOrOrder(t *testing.T) {
	if problems := checkShop(t, shopDomain(ports), shopApp(house), decorators); len(problems) != 0 {
		t.Fatalf("the house shape: %q", problems)
	}
	for _, c := range []struct {
		name, domain, app string
		files             map[string]string // the decorators' files (nil: each in its own)
		want              string
	}{
		{"a constructor of other parameters", shopDomain(`func NewService(store Store, limits Limits) Service { return nil }`), shopApp(house), nil,
			"NewService(Store, Limits) Service"},
		{"a constructor of three parameters", shopDomain(`func NewService(p Ports, o Options, now func() time.Time) Service { return nil }`), shopApp(house), nil,
			"NewService(Ports, Options, func) Service"},
		{"a constructor returning the implementation", shopDomain(`func NewService(p Ports, o Options) *service { return nil }`), shopApp(house), nil,
			"NewService(Ports, Options) *service"},
		{"Auditing outermost", shopDomain(ports), shopApp(`	svc = shop.LoggingMiddleware(d.Logger)(svc)
	svc = shop.InstrumentingMiddleware(d.Metrics)(svc)
	svc = shop.AuditingMiddleware(d.Audit)(svc)`), nil, "wraps NewService in [LoggingMiddleware InstrumentingMiddleware AuditingMiddleware]"},
		{"Logging left out", shopDomain(ports), shopApp(`	svc = shop.AuditingMiddleware(d.Audit)(svc)
	svc = shop.InstrumentingMiddleware(d.Metrics)(svc)`), nil, "wraps NewService in [AuditingMiddleware InstrumentingMiddleware]"},
		{"a decorator applied elsewhere", shopDomain(ports), shopApp(house + `
	traced := shop.LoggingMiddleware(d.Logger)(svc)
	_ = traced`), nil, "applies LoggingMiddleware away from NewService"},
		{"an error helper of its own", shopDomain(ports + `
func invalid(format string, args ...any) error { return errs.New(errs.Invalid, format, args...) }`), shopApp(house), nil,
			"invalid copies errs's shorthand of errs.Invalid"},
		{"a 400 of its own", shopDomain(ports + `
func badRequest(format string, args ...any) error { return errs.Statusf(http.StatusBadRequest, format, args...) }`), shopApp(house), nil,
			"badRequest copies errs's shorthand of http.StatusBadRequest"},
		{"a fourth decorator", shopDomain(ports + `
func CachingMiddleware(c Cache) func(Service) Service { return nil }`), shopApp(house), nil,
			"declares the decorator CachingMiddleware"},
		{"two decorators in one file", shopDomain(ports), shopApp(house),
			map[string]string{"audit.go": auditing, "middleware.go": logging + instrumenting},
			"LoggingMiddleware is declared in middleware.go, not logging.go"},
	} {
		t.Run(c.name, func(t *testing.T) {
			files := c.files
			if files == nil {
				files = decorators
			}
			problems := checkShop(t, c.domain, c.app, files)
			if !slices.ContainsFunc(problems, func(p string) bool { return strings.Contains(p, c.want) }) {
				t.Errorf("problems %q, want one saying %q", problems, c.want)
			}
		})
	}
}

// skeletonDrift lists how the domain at import path pkg (its files domain, its app's
// files app) differs from want.
func skeletonDrift(fset *token.FileSet, pkg string, domain, app []*ast.File, want skeleton) []string {
	var problems []string
	decorators := map[string]bool{}
	constructors := 0
	for _, f := range domain {
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Recv != nil {
				continue
			}
			if fn.Name.Name == "NewService" {
				constructors++
				if sig := signature(fn.Type); want.constructor && sig != "NewService(Ports, Options) Service" {
					problems = append(problems, fmt.Sprintf("%s: %s; every service's constructor is NewService(Ports, Options) Service",
						fset.Position(fn.Pos()), sig))
				}
			}
			if kind, ok := errorShorthand(fn, importNames(f)); ok {
				problems = append(problems, fmt.Sprintf("%s: %s copies errs's shorthand of %s: build the error with errs (errs.Invalidf, errs.Forbiddenf, ...)",
					fset.Position(fn.Pos()), fn.Name.Name, kind))
			}
			if isDecorator(fn.Type) {
				decorators[fn.Name.Name] = true
				file := filepath.Base(fset.Position(fn.Pos()).Filename)
				if want, ok := decoratorFiles[fn.Name.Name]; ok && file != want {
					problems = append(problems, fmt.Sprintf("%s: %s is declared in %s, not %s: each decorator has its file, the same in every service",
						fset.Position(fn.Pos()), fn.Name.Name, file, want))
				}
				if !slices.Contains(want.order, fn.Name.Name) {
					problems = append(problems, fmt.Sprintf("%s: declares the decorator %s, which is not in its order %v%s",
						fset.Position(fn.Pos()), fn.Name.Name, want.order, because(want)))
				}
			}
		}
	}
	if constructors != 1 {
		problems = append(problems, fmt.Sprintf("declares NewService %d times, want once", constructors))
	}
	for _, name := range want.order {
		if !decorators[name] {
			problems = append(problems, fmt.Sprintf("declares no %s func(Service) Service", name))
		}
	}

	chain, calls, built := wrapping(app, pkg, decorators)
	if built != 1 {
		problems = append(problems, fmt.Sprintf("its app builds it %d times (NewService), want once", built))
	}
	if !slices.Equal(chain, want.order) {
		problems = append(problems, fmt.Sprintf("its app wraps NewService in %v (innermost first), want %v%s", chain, want.order, because(want)))
	}
	for name, n := range calls {
		if n > count(chain, name) {
			problems = append(problems, fmt.Sprintf("its app applies %s away from NewService: every decorator wraps the service right after it is built, in one place", name))
		}
	}
	return problems
}

// because is the reason of a shape other than the house one, for a message.
func because(s skeleton) string {
	if s.reason == "" {
		return ""
	}
	return " (the exception: " + s.reason + ")"
}

// wrapping reads the app's files: chain, the decorators applied to what NewService of
// pkg returns, in the statements right after it (v := pkg.NewService(...); v =
// pkg.D(...)(v); ...), innermost first; calls, how many times each of decorators is
// called anywhere; built, how many times NewService is called.
func wrapping(app []*ast.File, pkg string, decorators map[string]bool) (chain []string, calls map[string]int, built int) {
	calls = map[string]int{}
	for _, f := range app {
		imports := importNames(f)
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.CallExpr:
				if p, name, ok := qualified(n.Fun, imports); ok && p == pkg {
					if name == "NewService" {
						built++
					}
					if decorators[name] {
						calls[name]++
					}
				}
			case *ast.BlockStmt:
				for i, stmt := range n.List {
					v, ok := constructed(stmt, pkg, imports)
					if !ok {
						continue
					}
					for _, next := range n.List[i+1:] {
						name, ok := wrapped(next, v, pkg, imports)
						if !ok {
							break
						}
						chain = append(chain, name)
					}
				}
			}
			return true
		})
	}
	return chain, calls, built
}

// constructed is v for the statement v := pkg.NewService(...).
func constructed(stmt ast.Stmt, pkg string, imports map[string]string) (string, bool) {
	as, ok := stmt.(*ast.AssignStmt)
	if !ok || len(as.Lhs) != 1 || len(as.Rhs) != 1 {
		return "", false
	}
	v, isIdent := as.Lhs[0].(*ast.Ident)
	call, isCall := as.Rhs[0].(*ast.CallExpr)
	if !isIdent || !isCall {
		return "", false
	}
	if p, name, ok := qualified(call.Fun, imports); !ok || p != pkg || name != "NewService" {
		return "", false
	}
	return v.Name, true
}

// wrapped is D for the statement v = pkg.D(...)(v).
func wrapped(stmt ast.Stmt, v, pkg string, imports map[string]string) (string, bool) {
	as, ok := stmt.(*ast.AssignStmt)
	if !ok || as.Tok != token.ASSIGN || len(as.Lhs) != 1 || len(as.Rhs) != 1 {
		return "", false
	}
	lhs, isIdent := as.Lhs[0].(*ast.Ident)
	outer, isCall := as.Rhs[0].(*ast.CallExpr)
	if !isIdent || lhs.Name != v || !isCall || len(outer.Args) != 1 {
		return "", false
	}
	if arg, ok := outer.Args[0].(*ast.Ident); !ok || arg.Name != v {
		return "", false
	}
	inner, ok := outer.Fun.(*ast.CallExpr)
	if !ok {
		return "", false
	}
	p, name, ok := qualified(inner.Fun, imports)
	if !ok || p != pkg {
		return "", false
	}
	return name, true
}

// errorShorthand: fn only forwards its arguments to errs.New (or errs.Statusf), a copy of
// one of errs's shorthands (errs.Invalidf, ...); kind is the kind or status it passes.
// A helper that adds something (a code, a message of its own) is not one.
func errorShorthand(fn *ast.FuncDecl, imports map[string]string) (kind string, ok bool) {
	if fn.Body == nil || len(fn.Body.List) != 1 {
		return "", false
	}
	ret, isRet := fn.Body.List[0].(*ast.ReturnStmt)
	if !isRet || len(ret.Results) != 1 {
		return "", false
	}
	call, isCall := ret.Results[0].(*ast.CallExpr)
	if !isCall || !call.Ellipsis.IsValid() || len(call.Args) != 3 {
		return "", false
	}
	pkg, name, isQualified := qualified(call.Fun, imports)
	if !isQualified || !(pkg == prefix+"libs/errs" && (name == "New" || name == "Statusf")) {
		return "", false
	}
	return types(&ast.FieldList{List: []*ast.Field{{Type: call.Args[0]}}}), true
}

// isDecorator: the function returns exactly func(Service) Service.
func isDecorator(fn *ast.FuncType) bool {
	if fn.Results == nil || len(fn.Results.List) != 1 {
		return false
	}
	ft, ok := fn.Results.List[0].Type.(*ast.FuncType)
	return ok && types(ft.Params) == "Service" && types(ft.Results) == "Service"
}

// signature is "NewService(A, B) R" for fn's parameter and result types.
func signature(fn *ast.FuncType) string {
	return "NewService(" + types(fn.Params) + ") " + types(fn.Results)
}

// types lists a field list's types, one per parameter ("Ports, Options").
func types(fl *ast.FieldList) string {
	if fl == nil {
		return ""
	}
	var out []string
	for _, f := range fl.List {
		n := max(len(f.Names), 1)
		for range n {
			out = append(out, typeName(f.Type))
		}
	}
	return strings.Join(out, ", ")
}

// typeName is a type expression as written, for the simple forms a constructor uses.
func typeName(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name
	case *ast.StarExpr:
		return "*" + typeName(e.X)
	case *ast.SelectorExpr:
		return selector(e)
	case *ast.FuncType:
		return "func"
	}
	return fmt.Sprintf("%T", e)
}

// declaresService: the files declare a Service interface and a function NewService.
func declaresService(files []*ast.File) bool {
	var iface, ctor bool
	for _, f := range files {
		for _, decl := range f.Decls {
			switch d := decl.(type) {
			case *ast.FuncDecl:
				ctor = ctor || (d.Recv == nil && d.Name.Name == "NewService")
			case *ast.GenDecl:
				for _, s := range d.Specs {
					if ts, ok := s.(*ast.TypeSpec); ok && ts.Name.Name == "Service" {
						_, isIface := ts.Type.(*ast.InterfaceType)
						iface = iface || isIface
					}
				}
			}
		}
	}
	return iface && ctor
}

// parseDir parses dir's non-test Go files (none: nil).
func parseDir(t *testing.T, fset *token.FileSet, dir string) []*ast.File {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		if os.IsNotExist(err) {
			return nil
		}
		t.Fatal(err)
	}
	var files []*ast.File
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, e.Name()), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	return files
}

// parseFixture parses src as the file name.
func parseFixture(t *testing.T, fset *token.FileSet, name, src string) *ast.File {
	t.Helper()
	f, err := parser.ParseFile(fset, name, src, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func count(list []string, s string) int {
	n := 0
	for _, x := range list {
		if x == s {
			n++
		}
	}
	return n
}
