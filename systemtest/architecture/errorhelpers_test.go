package architecture_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/analyticsco/platform/devstack"
)

// TestDomainsBuildErrorsWithErrs: no domain package (a package under internal/ that
// declares a Service interface and NewService) declares a copy of one of errs's
// shorthands (errs.Invalidf, errs.Forbiddenf, ...): a function that only forwards its
// arguments to errs.New or errs.Statusf. The order of a domain's decorators needs no
// check: its NewService applies them through kit.Decorate, and nothing else can reach
// them.
func TestDomainsBuildErrorsWithErrs(t *testing.T) {
	root := devstack.RepoRoot(t)
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
			for _, problem := range errorCopies(fset, domain) {
				t.Errorf("%s/internal/%s: %s", mod, filepath.Base(dir), problem)
			}
		}
	}
}

// TestErrorCopiesAreFound: the check reports a helper that forwards to errs.New or
// errs.Statusf, and passes one that adds something of its own.
func TestErrorCopiesAreFound(t *testing.T) {
	const head = `package shop

import "github.com/analyticsco/platform/libs/errs"

`
	for _, c := range []struct {
		name, src, want string
	}{
		{"an error helper of its own", `func invalid(format string, args ...any) error { return errs.New(errs.Invalid, format, args...) }`,
			"invalid copies errs's shorthand of errs.Invalid"},
		{"a 400 of its own", `func badRequest(format string, args ...any) error { return errs.Statusf(http.StatusBadRequest, format, args...) }`,
			"badRequest copies errs's shorthand of http.StatusBadRequest"},
		{"a helper with a code", `func taken(format string, args ...any) error { return errs.New(errs.Conflict, format, args...).WithCode("taken") }`, ""},
	} {
		fset := token.NewFileSet()
		problems := errorCopies(fset, []*ast.File{parseFixture(t, fset, "service.go", head+c.src+"\n")})
		switch {
		case c.want == "" && len(problems) != 0:
			t.Errorf("%s: problems %q, want none", c.name, problems)
		case c.want != "" && (len(problems) != 1 || !strings.Contains(problems[0], c.want)):
			t.Errorf("%s: problems %q, want one saying %q", c.name, problems, c.want)
		}
	}
}

// errorCopies lists the functions of files that copy one of errs's shorthands.
func errorCopies(fset *token.FileSet, files []*ast.File) []string {
	var problems []string
	for _, f := range files {
		for _, decl := range f.Decls {
			if fn, ok := decl.(*ast.FuncDecl); ok && fn.Recv == nil {
				if kind, ok := errorShorthand(fn, importNames(f)); ok {
					problems = append(problems, fmt.Sprintf("%s: %s copies errs's shorthand of %s: build the error with errs (errs.Invalidf, errs.Forbiddenf, ...)",
						fset.Position(fn.Pos()), fn.Name.Name, kind))
				}
			}
		}
	}
	return problems
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
	return selector(call.Args[0]), true
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
