package conformance

import (
	"go/ast"
	"go/token"
	"strconv"
	"strings"
)

// eval returns every value e may take, or false when some part is not a compile-time
// or literal-derived value (a function call, a field of a runtime struct, ...).
func (s *scanner) eval(e ast.Expr, depth int) ([]value, bool) {
	if depth > maxDepth {
		return nil, false
	}
	switch e := e.(type) {
	case *ast.BasicLit:
		if e.Kind != token.STRING {
			return nil, false
		}
		v, err := strconv.Unquote(e.Value)
		return []value{{str: v}}, err == nil
	case *ast.ParenExpr:
		return s.eval(e.X, depth+1)
	case *ast.BinaryExpr:
		if e.Op != token.ADD {
			return nil, false
		}
		l, ok1 := s.eval(e.X, depth+1)
		r, ok2 := s.eval(e.Y, depth+1)
		if !ok1 || !ok2 {
			return nil, false
		}
		var out []value
		for _, a := range l {
			for _, b := range r {
				if v, ok := join(a, b); ok {
					out = append(out, v)
				}
			}
		}
		return out, true
	case *ast.CompositeLit:
		return []value{{lit: e}}, true
	case *ast.Ident:
		return s.evalIdent(e, depth)
	case *ast.SelectorExpr:
		// net/http's method constants (http.MethodGet is "GET").
		if pkg, ok := e.X.(*ast.Ident); ok && pkg.Name == "http" && strings.HasPrefix(e.Sel.Name, "Method") {
			return []value{{str: strings.ToUpper(strings.TrimPrefix(e.Sel.Name, "Method"))}}, true
		}
		xs, ok := s.eval(e.X, depth+1)
		if !ok {
			return nil, false
		}
		var out []value
		for _, x := range xs {
			if x.lit == nil {
				return nil, false
			}
			f, ok := structField(x, e.Sel.Name)
			if !ok {
				return nil, false
			}
			vs, ok := s.eval(f, depth+1)
			if !ok {
				return nil, false
			}
			for _, v := range vs {
				if j, ok := join(value{choices: x.choices}, v); ok {
					out = append(out, j)
				}
			}
		}
		return out, true
	}
	return nil, false
}

func (s *scanner) evalIdent(id *ast.Ident, depth int) ([]value, bool) {
	if id.Obj == nil {
		if g, ok := s.globals[id.Name]; ok {
			return s.eval(g, depth+1)
		}
		return nil, false
	}
	switch d := id.Obj.Decl.(type) {
	case *ast.ValueSpec:
		for i, n := range d.Names {
			if n.Name == id.Name && i < len(d.Values) {
				return s.eval(d.Values[i], depth+1)
			}
		}
	case *ast.AssignStmt:
		idx := -1
		for i, l := range d.Lhs {
			if lid, ok := l.(*ast.Ident); ok && lid.Name == id.Name {
				idx = i
			}
		}
		if idx < 0 {
			return nil, false
		}
		if len(d.Rhs) == 1 {
			if u, ok := d.Rhs[0].(*ast.UnaryExpr); ok && u.Op == token.RANGE {
				return s.rangeValues(d, u.X, idx, depth)
			}
		}
		if idx < len(d.Rhs) {
			return s.eval(d.Rhs[idx], depth+1)
		}
	case *ast.Field:
		return s.paramValues(d, id.Name, depth)
	}
	return nil, false
}

// rangeValues is what the key (idx 0) or value (idx 1) of a range over x takes.
// binder identifies the loop, so key and value of one element stay together.
func (s *scanner) rangeValues(binder ast.Node, x ast.Expr, idx int, depth int) ([]value, bool) {
	if id, ok := x.(*ast.Ident); ok {
		vs, ok := s.evalIdent(id, depth+1)
		if !ok || len(vs) != 1 || vs[0].lit == nil {
			return nil, false
		}
		x = vs[0].lit
	}
	lit, ok := x.(*ast.CompositeLit)
	if !ok {
		return nil, false
	}
	var out []value
	switch t := lit.Type.(type) {
	case *ast.ArrayType:
		if idx != 1 {
			return nil, false // the index of a slice is not a string
		}
		for i, el := range lit.Elts {
			var vs []value
			if cl, ok := el.(*ast.CompositeLit); ok {
				vs = []value{{lit: cl, fields: fieldNames(t.Elt)}}
			} else if vs, ok = s.eval(el, depth+1); !ok {
				return nil, false
			}
			out = appendBound(out, vs, binder, i)
		}
	case *ast.MapType:
		for i, el := range lit.Elts {
			kv, ok := el.(*ast.KeyValueExpr)
			if !ok {
				return nil, false
			}
			side := kv.Key
			if idx == 1 {
				side = kv.Value
			}
			var vs []value
			if cl, ok := side.(*ast.CompositeLit); ok && idx == 1 {
				vs = []value{{lit: cl, fields: fieldNames(t.Value)}}
			} else if vs, ok = s.eval(side, depth+1); !ok {
				return nil, false
			}
			out = appendBound(out, vs, binder, i)
		}
	default:
		return nil, false
	}
	return out, true
}

// paramValues is the union of the arguments passed for parameter name of the function
// that declares field, over every call of that function in the package.
func (s *scanner) paramValues(field *ast.Field, name string, depth int) ([]value, bool) {
	owner := s.paramOwner[field]
	if owner == nil {
		return nil, false
	}
	var params *ast.FieldList
	var calls []*ast.CallExpr
	switch o := owner.(type) {
	case *ast.FuncDecl:
		params = o.Type.Params
		calls = s.calls[o.Name.Name]
	case *ast.FuncLit:
		params = o.Type.Params
		for obj, fl := range s.closures {
			if fl == o {
				for _, c := range s.calls[obj.Name] {
					if c.Fun.(*ast.Ident).Obj == obj {
						calls = append(calls, c)
					}
				}
			}
		}
	}
	idx, i := -1, 0
	for _, f := range params.List {
		for _, n := range f.Names {
			if f == field && n.Name == name {
				idx = i
			}
			i++
		}
	}
	if idx < 0 || len(calls) == 0 {
		return nil, false
	}
	var out []value
	for i, c := range calls {
		if idx >= len(c.Args) {
			return nil, false
		}
		vs, ok := s.eval(c.Args[idx], depth+1)
		if !ok {
			return nil, false
		}
		out = appendBound(out, vs, owner, i)
	}
	return out, true
}

// appendBound appends vs, each bound to choice i of binder.
func appendBound(out, vs []value, binder ast.Node, i int) []value {
	for _, v := range vs {
		if b, ok := v.with(binder, i); ok {
			out = append(out, b)
		}
	}
	return out
}

func fieldNames(t ast.Expr) []string {
	st, ok := t.(*ast.StructType)
	if !ok {
		return nil
	}
	var names []string
	for _, f := range st.Fields.List {
		for _, n := range f.Names {
			names = append(names, n.Name)
		}
	}
	return names
}

// structField finds the expression given for field name in a struct literal, keyed or
// positional.
func structField(v value, name string) (ast.Expr, bool) {
	for i, el := range v.lit.Elts {
		if kv, ok := el.(*ast.KeyValueExpr); ok {
			if k, ok := kv.Key.(*ast.Ident); ok && k.Name == name {
				return kv.Value, true
			}
			continue
		}
		if i < len(v.fields) && v.fields[i] == name {
			return el, true
		}
	}
	return nil, false
}
