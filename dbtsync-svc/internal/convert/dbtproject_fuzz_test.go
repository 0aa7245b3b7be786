package convert

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"testing"
	"testing/fstest"
)

// fuzzLimits are small, so that the fuzzer meets every limit.
var fuzzLimits = ReadLimits{MaxPaths: 8, MaxEntries: 64, MaxFiles: 16, MaxBytes: 256 << 10}

// FuzzReadProject reads a project of three files the fuzzer writes, dbt_project.yml, a
// schema file and a model, beside a fixed model under models/staging and a link back to
// models/. Whatever they hold, the read returns (no panic: the parser's own is recovered,
// and fails the target here so that it is seen), within its limits, with the same result
// each time; a read that succeeds has models, each named for a .sql file.
func FuzzReadProject(f *testing.F) {
	for _, seed := range []struct{ project, schema, sql string }{
		{"name: shop\nmodel-paths: [models]\n", "version: 2\nmodels:\n  - name: orders\n    columns:\n      - name: id\n        tests: [unique]\n", "select 1 as id\n"},
		{craftedYAML[0], "version: 2\n", "select 1\n"},
		{"name: shop\n", craftedSchemaYAML[0], "select 1\n"},
		{"name: shop\nmodel-paths: [models, ./models, models/, models/staging, back, back/staging]\n", "", "{{ config(materialized='incremental') }}\nselect 1\n"},
		{"name: shop\nmodel-paths: [a, b, c, d, e, f, g, h, i]\n", "", ""},
		{"name: shop\nmodels:\n  shop:\n    +materialized: view\n    +schema: marts\n", "models: [{name: orders, config: {enabled: false, schema: s}}]\n", "select 1\n"},
	} {
		f.Add(seed.project, seed.schema, seed.sql)
	}
	f.Fuzz(func(t *testing.T, project, schema, sql string) {
		fsys := fstest.MapFS{
			"dbt_project.yml":          file(project),
			"models/schema.yml":        file(schema),
			"models/orders.sql":        file(sql),
			"models/staging/stg_a.sql": file("select 1\n"),
			"back":                     {Data: []byte("models"), Mode: fs.ModeSymlink},
		}
		read := func() (*Project, *countingFS, error) {
			c := counting(fsys)
			p, err := ReadProjectContext(context.Background(), c, "", fuzzLimits)
			return p, c, err
		}
		p, c, err := read()
		var pe *parserPanic
		if errors.As(err, &pe) {
			t.Fatalf("the YAML parser panicked (recovered): %v", err)
		}
		if c.bytes > fuzzLimits.MaxBytes {
			t.Fatalf("read %d bytes, over the limit of %d", c.bytes, fuzzLimits.MaxBytes)
		}
		files := 0
		for name, n := range c.opens {
			if _, ok := fsys[name]; ok && name != "back" {
				files += n
			}
		}
		if files > fuzzLimits.MaxFiles {
			t.Fatalf("opened %d files, over the limit of %d: %v", files, fuzzLimits.MaxFiles, c.opens)
		}
		if err == nil {
			if len(p.Models) == 0 {
				t.Fatal("a project read without an error has no models")
			}
			for _, m := range p.Models {
				if m.Name != "orders" && m.Name != "stg_a" {
					t.Fatalf("model %q is no .sql file of the project", m.Name)
				}
			}
		}
		var le *LimitError
		if errors.As(err, &le) && !strings.HasPrefix(err.Error(), "the dbt project read is over its limit of ") {
			t.Fatalf("limit error %q", err)
		}
		p2, _, err2 := read()
		if dump(p) != dump(p2) || (err == nil) != (err2 == nil) || err != nil && err.Error() != err2.Error() {
			t.Fatalf("two reads differ: %+v, %v and %+v, %v", p, err, p2, err2)
		}
	})
}

// dump is what a read returned, as text (a NaN of a meta value equals itself there).
func dump(p *Project) string {
	if p == nil {
		return "<nil>"
	}
	var b strings.Builder
	for _, m := range p.Models {
		fmt.Fprintf(&b, "%+v\n", *m)
	}
	fmt.Fprintf(&b, "%+v", p.Tests)
	return b.String()
}
