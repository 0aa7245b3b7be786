package api_test

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"

	yaml "go.yaml.in/yaml/v3"

	"github.com/analyticsco/platform/api"
)

// The rules below keep openapi.yaml in the shape every consumer reads the same way
// (oapi-codegen, ogen, openapi-typescript, Redocly, Prism): each is a way the document
// once broke a generator or let a validator disagree with the services.

func document(t *testing.T) map[string]any {
	t.Helper()
	var doc map[string]any
	if err := yaml.Unmarshal(api.YAML, &doc); err != nil {
		t.Fatalf("openapi.yaml: %v", err)
	}
	return doc
}

// TestComponentNamesAreDistinctAcrossKinds: generators name a type after each schema,
// parameter, response, request body and header component, so one name in two kinds
// (a BranchVersion parameter beside a BranchVersion schema) is a collision oapi-codegen
// refuses.
func TestComponentNamesAreDistinctAcrossKinds(t *testing.T) {
	components, _ := document(t)["components"].(map[string]any)
	seen := map[string]string{}
	for _, kind := range []string{"schemas", "parameters", "responses", "requestBodies", "headers"} {
		section, _ := components[kind].(map[string]any)
		for _, name := range slices.Sorted(maps.Keys(section)) {
			if other, ok := seen[name]; ok {
				t.Errorf("components.%s.%s has the name of components.%s.%s", kind, name, other, name)
			}
			seen[name] = kind
		}
	}
	if len(seen) < 50 {
		t.Fatalf("only %d components found", len(seen))
	}
}

// TestOperationIDsAreUnique: each operation is one method of every generated client.
func TestOperationIDsAreUnique(t *testing.T) {
	ops, err := api.Operations()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, op := range ops {
		if op.ID == "" || seen[op.ID] {
			t.Errorf("%s %s: operationId %q is empty or not unique", op.Method, op.Path, op.ID)
		}
		seen[op.ID] = true
		if op.Tag == "" {
			t.Errorf("%s %s (%s) has no tag", op.Method, op.Path, op.ID)
		}
	}
}

// mappings calls visit for every mapping of the document, with its place in it.
func mappings(doc any, visit func(where string, m map[string]any)) {
	var walk func(where string, v any)
	walk = func(where string, v any) {
		switch x := v.(type) {
		case map[string]any:
			visit(where, x)
			for _, k := range slices.Sorted(maps.Keys(x)) {
				walk(where+"/"+k, x[k])
			}
		case []any:
			for i, e := range x {
				walk(fmt.Sprintf("%s/%d", where, i), e)
			}
		}
	}
	walk("#", doc)
}

// TestNullableIsOnlyBesideAType: in OpenAPI 3.0.3, nullable adds null to the type of its
// own schema and to nothing else. Beside an allOf, oneOf, anyOf or $ref it admits no null
// at all (strict validators such as Prism refuse the null the service sends, lenient ones
// accept it, and generators disagree too): a field that may be null refers to a nullable
// component instead (NullableResourceOwner, Dashboard).
func TestNullableIsOnlyBesideAType(t *testing.T) {
	found := 0
	mappings(document(t), func(where string, s map[string]any) {
		if _, ok := s["nullable"]; !ok {
			return
		}
		found++
		if s["nullable"] != true {
			t.Errorf("%s: nullable is %v; leave it out unless it is true", where, s["nullable"])
		}
		if _, ok := s["type"]; !ok {
			t.Errorf("%s: nullable without a type admits nothing more", where)
		}
		for _, k := range []string{"allOf", "oneOf", "anyOf", "$ref"} {
			if _, ok := s[k]; ok {
				t.Errorf("%s: nullable beside %s does not admit null; refer to a nullable component instead", where, k)
			}
		}
	})
	if found < 50 {
		t.Fatalf("only %d nullable schemas found", found)
	}
}

// TestNoEnumListsNull: a nullable enum is "one of these values, or null" by its own
// nullable: true, which every consumer reads so (Prism, kin-openapi, ogen's NilX,
// openapi-typescript's "| null", oapi-codegen's pointer). null among the values would make
// Prism 5.14.2 silently stop validating every answer holding the schema, and oapi-codegen
// emit a constant "<nil>".
func TestNoEnumListsNull(t *testing.T) {
	mappings(document(t), func(where string, s map[string]any) {
		if values, ok := s["enum"].([]any); ok && slices.Contains(values, any(nil)) {
			t.Errorf("%s: enum %v lists null; write nullable: true beside it instead", where, values)
		}
	})
}

// TestNumbersStateTheirPrecision: oapi-codegen reads a number without a format as a
// float32 (an id or a position would lose digits in a Go client), so every number says
// double (or float), and an id is an integer of format int64.
func TestNumbersStateTheirPrecision(t *testing.T) {
	mappings(document(t), func(where string, s map[string]any) {
		if s["type"] == "number" && s["format"] != "double" && s["format"] != "float" {
			t.Errorf("%s: a number without format double or float", where)
		}
		if s["type"] == "integer" && strings.HasSuffix(where, "Id") && s["format"] != "int64" {
			t.Errorf("%s: an id that is not of format int64", where)
		}
	})
}

// TestNullableComponentsMatchTheirBase: NullableX is X or null, so the two carry the same
// schema apart from nullable and the description.
func TestNullableComponentsMatchTheirBase(t *testing.T) {
	components, _ := document(t)["components"].(map[string]any)
	schemas, _ := components["schemas"].(map[string]any)
	pairs := 0
	for name, s := range schemas {
		base, ok := strings.CutPrefix(name, "Nullable")
		if !ok {
			continue
		}
		want, ok := schemas[base].(map[string]any)
		if !ok {
			t.Errorf("%s has no component %s to be the nullable form of", name, base)
			continue
		}
		pairs++
		got := maps.Clone(s.(map[string]any))
		if got["nullable"] != true {
			t.Errorf("%s is not nullable", name)
		}
		want = maps.Clone(want)
		for _, m := range []map[string]any{got, want} {
			delete(m, "nullable")
			delete(m, "description")
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s differs from %s in more than nullable and the description", name, base)
		}
	}
	if pairs == 0 {
		t.Fatal("no NullableX component found")
	}
}
