package conformance

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// Route is one "METHOD /path" a router serves, with the source position that registers it.
type Route struct {
	Method string
	Path   string
	Pos    string
}

// Key is the route's method and path with every path parameter written as {} (and a
// trailing wildcard {name...} as {}), so routes compare by shape, not by parameter name.
func (r Route) Key() string { return r.Method + " " + NormalizePath(r.Path) }

// NormalizePath replaces every {name} and {name...} segment with {}.
func NormalizePath(p string) string {
	segs := strings.Split(p, "/")
	for i, s := range segs {
		if strings.HasPrefix(s, "{") && strings.HasSuffix(s, "}") {
			segs[i] = "{}"
		}
	}
	return strings.Join(segs, "/")
}

// Unresolved is a Handle/HandleFunc pattern argument the scanner could not evaluate to
// constant strings; a router registered that way cannot be checked, so callers fail on it.
type Unresolved struct {
	Pos  string
	Expr string
}

// ServeMuxRoutes parses the non-test Go files under dir and returns every pattern of the
// form "METHOD /path" passed to a Handle or HandleFunc call. Patterns are evaluated
// symbolically: string literals, + concatenation, constants (package or local), local
// variables, parameters of closures and functions (the union over their call sites), and
// range variables over composite literals (slice elements, map keys and values, fields of
// struct elements). Patterns without a method (catch-alls, 405 fallbacks) are not routes.
func ServeMuxRoutes(dir string) ([]Route, []Unresolved, error) {
	pkgs := map[string][]*ast.File{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != dir && (name == "testdata" || strings.HasPrefix(name, ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		f, err := parser.ParseFile(fset, path, src, 0)
		if err != nil {
			return err
		}
		pkgs[filepath.Dir(path)] = append(pkgs[filepath.Dir(path)], f)
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	var routes []Route
	var unresolved []Unresolved
	for _, files := range pkgs {
		r, u := scanPackage(fset, files)
		routes = append(routes, r...)
		unresolved = append(unresolved, u...)
	}
	sort.Slice(routes, func(i, j int) bool { return routes[i].Key() < routes[j].Key() })
	return routes, unresolved, nil
}

// ScanSource is ServeMuxRoutes for one file's source, for testing the scanner itself.
func ScanSource(src string) ([]Route, []Unresolved, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "src.go", src, 0)
	if err != nil {
		return nil, nil, err
	}
	r, u := scanPackage(fset, []*ast.File{f})
	return r, u, nil
}

// scanner holds what one package declares, for evaluating pattern expressions.
type scanner struct {
	fset *token.FileSet
	// top-level constants and variables by name (they resolve across files)
	globals map[string]ast.Expr
	// top-level functions by name
	funcs map[string]*ast.FuncDecl
	// every call expression of the package, by the name of the function called
	calls map[string][]*ast.CallExpr
	// the function literal assigned to a local name, by that name's object
	//lint:ignore SA1019 this scanner resolves names through the parser's objects, without type information, which is enough for the literal route tables it reads
	closures map[*ast.Object]*ast.FuncLit
	// the function (literal or declaration) whose parameter list holds a field
	paramOwner map[*ast.Field]ast.Node
}

// value is what an expression may evaluate to: a string, or a struct literal (with its
// type, for positional fields) from which a selector picks a field. choices records, for
// every call site set or range loop the value came through, which call or element it
// was, so that values bound together (two parameters of one call, key and value of one
// element) are never combined across different calls or elements.
type value struct {
	str     string
	lit     *ast.CompositeLit
	fields  []string
	choices map[ast.Node]int
}

// with returns v bound to choice i of binder.
func (v value) with(binder ast.Node, i int) (value, bool) {
	if c, ok := v.choices[binder]; ok && c != i {
		return v, false
	}
	m := make(map[ast.Node]int, len(v.choices)+1)
	for k, c := range v.choices {
		m[k] = c
	}
	m[binder] = i
	v.choices = m
	return v, true
}

// join concatenates a and b when their choices agree.
func join(a, b value) (value, bool) {
	out := value{str: a.str + b.str, choices: map[ast.Node]int{}}
	for k, c := range a.choices {
		out.choices[k] = c
	}
	for k, c := range b.choices {
		if ac, ok := out.choices[k]; ok && ac != c {
			return value{}, false
		}
		out.choices[k] = c
	}
	return out, true
}

func scanPackage(fset *token.FileSet, files []*ast.File) ([]Route, []Unresolved) {
	s := &scanner{fset: fset, globals: map[string]ast.Expr{}, funcs: map[string]*ast.FuncDecl{},
		//lint:ignore SA1019 see scanner.closures
		calls: map[string][]*ast.CallExpr{}, closures: map[*ast.Object]*ast.FuncLit{}, paramOwner: map[*ast.Field]ast.Node{}}
	for _, f := range files {
		s.index(f)
	}
	var routes []Route
	var unresolved []Unresolved
	for _, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			r, u, ok := s.registration(call)
			if ok {
				routes = append(routes, r...)
				unresolved = append(unresolved, u...)
			}
			return true
		})
	}
	return routes, unresolved
}

// index records what evaluating a pattern may need: the package's global values,
// functions and their call sites, closures assigned to variables, and which function
// owns each parameter.
func (s *scanner) index(f *ast.File) {
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.GenDecl:
			for _, spec := range d.Specs {
				if vs, ok := spec.(*ast.ValueSpec); ok {
					for i, n := range vs.Names {
						if i < len(vs.Values) {
							s.globals[n.Name] = vs.Values[i]
						}
					}
				}
			}
		case *ast.FuncDecl:
			if d.Recv == nil {
				s.funcs[d.Name.Name] = d
			}
			for _, fld := range d.Type.Params.List {
				s.paramOwner[fld] = d
			}
		}
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.CallExpr:
			if id, ok := n.Fun.(*ast.Ident); ok {
				s.calls[id.Name] = append(s.calls[id.Name], n)
			}
		case *ast.FuncLit:
			for _, fld := range n.Type.Params.List {
				s.paramOwner[fld] = n
			}
		case *ast.AssignStmt:
			for i, lhs := range n.Lhs {
				id, ok := lhs.(*ast.Ident)
				if !ok || id.Obj == nil || i >= len(n.Rhs) {
					continue
				}
				if fl, ok := n.Rhs[i].(*ast.FuncLit); ok {
					s.closures[id.Obj] = fl
				}
			}
		}
		return true
	})
}

// registration reads the routes one Handle or HandleFunc call registers; ok is false
// when the call registers nothing.
func (s *scanner) registration(call *ast.CallExpr) (routes []Route, unresolved []Unresolved, ok bool) {
	sel, isSel := call.Fun.(*ast.SelectorExpr)
	if !isSel || (sel.Sel.Name != "Handle" && sel.Sel.Name != "HandleFunc") {
		return nil, nil, false
	}
	// ServeMux.Handle(pattern, h); httpx.Router.Handle(method, path, h) and
	// httpx.Handle(router, method, path, endpoint, decoder, options), whose pattern is
	// method + " " + path.
	var pattern ast.Expr
	method, path := -1, -1
	switch pkg, isIdent := sel.X.(*ast.Ident); {
	case isIdent && pkg.Name == "httpx" && len(call.Args) == 6:
		method, path = 1, 2
	case len(call.Args) == 3:
		method, path = 0, 1
	case len(call.Args) == 2:
		pattern = call.Args[0]
	default:
		return nil, nil, false
	}
	if method >= 0 {
		pattern = &ast.BinaryExpr{Op: token.ADD, Y: call.Args[path],
			X: &ast.BinaryExpr{Op: token.ADD, X: call.Args[method], Y: &ast.BasicLit{Kind: token.STRING, Value: `" "`}}}
	}
	pos := s.fset.Position(call.Pos()).String()
	vals, evaluated := s.eval(pattern, 0)
	if !evaluated {
		return nil, []Unresolved{{Pos: pos, Expr: s.source(pattern)}}, true
	}
	for _, v := range vals {
		method, path, hasMethod := strings.Cut(v.str, " ")
		if !hasMethod || !strings.HasPrefix(strings.TrimSpace(path), "/") {
			continue // a pattern without a method: catch-all or 405 fallback
		}
		routes = append(routes, Route{Method: method, Path: strings.TrimSpace(path), Pos: pos})
	}
	return routes, nil, true
}

func (s *scanner) source(e ast.Expr) string {
	var b strings.Builder
	ast.Inspect(e, func(n ast.Node) bool {
		if id, ok := n.(*ast.Ident); ok {
			b.WriteString(id.Name + " ")
		}
		if bl, ok := n.(*ast.BasicLit); ok {
			b.WriteString(bl.Value + " ")
		}
		return true
	})
	return strings.TrimSpace(b.String())
}

const maxDepth = 16

// String formats a route with where it is registered.
func (r Route) String() string { return fmt.Sprintf("%s %s (%s)", r.Method, r.Path, r.Pos) }

// GatewayOwnRoutes returns the routes the gateway answers itself, before its service
// table: an if statement comparing a request's URL.Path with a literal path, whose body
// names the methods it serves as http.Method* constants (HEAD is implied by GET and not
// listed in OpenAPI).
func GatewayOwnRoutes(dir string) ([]Route, error) {
	fset := token.NewFileSet()
	var routes []Route
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			ifs, ok := n.(*ast.IfStmt)
			if !ok {
				return true
			}
			lit := comparedPath(ifs.Cond)
			if lit == "" {
				return true
			}
			methods := map[string]bool{}
			ast.Inspect(ifs.Body, func(n ast.Node) bool {
				if sel, ok := n.(*ast.SelectorExpr); ok {
					if x, ok := sel.X.(*ast.Ident); ok && x.Name == "http" && strings.HasPrefix(sel.Sel.Name, "Method") {
						methods[strings.ToUpper(strings.TrimPrefix(sel.Sel.Name, "Method"))] = true
					}
				}
				return true
			})
			delete(methods, "HEAD")
			for m := range methods {
				routes = append(routes, Route{Method: m, Path: lit, Pos: fset.Position(ifs.Pos()).String()})
			}
			return true
		})
		return nil
	})
	return routes, err
}

// comparedPath finds `<x>.URL.Path == "<literal>"` in a condition.
func comparedPath(cond ast.Expr) string {
	var found string
	ast.Inspect(cond, func(n ast.Node) bool {
		be, ok := n.(*ast.BinaryExpr)
		if !ok || be.Op != token.EQL {
			return true
		}
		for _, pair := range [][2]ast.Expr{{be.X, be.Y}, {be.Y, be.X}} {
			sel, ok := pair[0].(*ast.SelectorExpr)
			lit, ok2 := pair[1].(*ast.BasicLit)
			if !ok || !ok2 || sel.Sel.Name != "Path" || lit.Kind != token.STRING {
				continue
			}
			if inner, ok := sel.X.(*ast.SelectorExpr); ok && inner.Sel.Name == "URL" {
				found, _ = strconv.Unquote(lit.Value)
			}
		}
		return true
	})
	return found
}
