package convert

import (
	"strings"
)

// testMetadata reads a generic test's name and the string arguments the data model uses.
func (np *nodeParser) testMetadata(tm *rawTestMetadata) error {
	s := np.s
	if s.peek() != '{' {
		return s.skip()
	}
	return s.object(func(key []byte) error {
		switch string(key) {
		case "name":
			return np.text(&tm.Name)
		case "kwargs":
			if s.peek() != '{' {
				return s.skip()
			}
			return s.object(func(key []byte) error {
				switch string(key) {
				case "column_name":
					return np.text(&tm.ColumnName)
				case "model":
					return np.text(&tm.Model)
				case "to":
					return np.text(&tm.To)
				case "field":
					return np.text(&tm.Field)
				}
				return s.skip()
			})
		}
		return s.skip()
	})
}

// refs reads the models a node refers to, in either of dbt's shapes: ["name"] or
// ["package", "name"] before dbt 1.5, {name, package, version} since.
func (np *nodeParser) refs(dst *[]Ref) error {
	s := np.s
	if s.peek() != '[' {
		return s.skip()
	}
	return s.array(func() error {
		switch s.peek() {
		case '[':
			var last string
			n := 0
			err := s.array(func() error {
				n++
				last = ""
				return np.text(&last)
			})
			if n > 0 {
				*dst = append(*dst, Ref{Name: last})
			}
			return err
		case '{':
			var r Ref
			err := s.object(func(key []byte) error {
				switch string(key) {
				case "name":
					return np.text(&r.Name)
				case "version":
					return np.version(&r.Version)
				}
				return s.skip()
			})
			*dst = append(*dst, r)
			return err
		}
		return s.skip()
	})
}

// version reads a model version of any JSON shape dbt writes (a number or a string).
func (np *nodeParser) version(dst *string) error {
	s := np.s
	switch c := s.peek(); {
	case c == '"':
		start, end, escaped, ascii, err := s.str()
		if err == nil {
			*dst = normVersion(s.text(start, end, escaped, ascii))
		}
		return err
	case c == '-' || '0' <= c && c <= '9':
		val, err := s.rawValue()
		if err == nil {
			*dst = normVersion(string(val))
		}
		return err
	}
	return s.skip()
}

func toTest(tm rawTestMetadata, columnName, attached string, refs []Ref) (Test, bool) {
	switch tm.Name {
	case "unique", "not_null", "relationships":
	default:
		return Test{}, false
	}
	t := Test{Kind: tm.Name, Column: columnName, ModelID: attached}
	if t.Column == "" {
		t.Column = tm.ColumnName
	}
	if attached != "" {
		t.Model = refOfID(attached)
	} else if tm.Model != "" {
		t.Model = ParseRef(tm.Model)
	}
	if t.Model.Name == "" && len(refs) > 0 && tm.Name != "relationships" {
		t.Model = refs[0]
	}
	if tm.Name == "relationships" {
		t.ToModel = ParseRef(tm.To)
		t.ToColumn = tm.Field
	}
	if t.Model.Name == "" || t.Column == "" {
		return Test{}, false
	}
	return t, true
}

// refOfID reads the model a unique id names: model.<package>.<name>, or
// model.<package>.<name>.v<version> for a model version.
func refOfID(id string) Ref {
	if rest, ok := strings.CutPrefix(id, "model."); ok {
		if _, rest, ok = strings.Cut(rest, "."); ok { // the package
			name, version, versioned := strings.Cut(rest, ".")
			r := Ref{Name: name}
			if versioned && strings.HasPrefix(version, "v") {
				r.Version = normVersion(version[1:])
			}
			return r
		}
	}
	return Ref{Name: id[strings.LastIndexByte(id, '.')+1:]}
}
