// Command gen-manifest writes a synthetic dbt manifest.json of about a given size, for
// benchmarks: about 5,000 models per 100 MiB, 20 typed columns each (100,000 columns), two
// tests per model (10,000: unique and not_null on the key of even models, not_null and a
// relationships test to the previous model on odd ones), and raw and compiled SQL of a few
// KiB per model; every 500th model is versioned (a v1 beside the latest v2). On every
// 20th model a MetricFlow semantic model (entities joining it to the previous one,
// categorical and time dimensions, measures of every aggregation) carries a metric of
// every type: simple (with a filter), ratio (with a numerator filter), derived (across
// semantic models, and with an offset), cumulative (a window in dbt 1.6's shape,
// grain-to-date in 1.9's, unbounded) and conversion; every 100th model a saved query.
// The output is deterministic: the same -size always gives the same bytes.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "gen-manifest:", err)
		os.Exit(1)
	}
}

func parseSize(s string) (int64, error) {
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		m      int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if strings.HasSuffix(s, u.suffix) {
			s, mult = strings.TrimSuffix(s, u.suffix), u.m
			break
		}
	}
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("size %q: want e.g. 100MiB", s)
	}
	return n * mult, nil
}

var types = []string{"bigint", "varchar", "timestamp", "boolean", "numeric(18,2)", "date", "integer", "text", "double", "varchar(64)"}

func run() error {
	sizeFlag := flag.String("size", "100MiB", "approximate output size (KiB, MiB, GiB)")
	out := flag.String("out", "", "output file (required)")
	flag.Parse()
	if *out == "" {
		return fmt.Errorf("-out is required")
	}
	size, err := parseSize(*sizeFlag)
	if err != nil {
		return err
	}
	f, err := os.Create(*out)
	if err != nil {
		return err
	}
	defer f.Close()
	w := bufio.NewWriterSize(f, 1<<20)
	cw := &countingWriter{w: w}
	fmt.Fprint(cw, `{"metadata":{"dbt_schema_version":"https://schemas.getdbt.com/dbt/manifest/v12.json","dbt_version":"1.10.0","generated_at":"2025-01-01T00:00:00Z"},"nodes":{`)
	sql := strings.Repeat("select o.id, o.customer_id, sum(o.amount) as total from {{ ref('stg_orders') }} o left join {{ ref('stg_payments') }} p on p.order_id = o.id group by 1, 2\n", 52)
	compiled := strings.ReplaceAll(sql, "{{ ref('stg_orders') }}", `"analytics"."marts"."stg_orders"`)
	first := true
	var semantic semanticLayer
	for i := 0; cw.n+semantic.size() < size-4096; i++ {
		name := fmt.Sprintf("model_%06d", i)
		if !first {
			fmt.Fprint(cw, ",")
		}
		first = false
		if i%500 == 250 {
			writeModel(cw, name, 1, sql, compiled) // an older version; the latest follows
			fmt.Fprint(cw, ",")
			writeModel(cw, name, 2, sql, compiled)
		} else {
			writeModel(cw, name, 0, sql, compiled)
		}
		if i%20 == 0 {
			semantic.add(i)
		}
		if i%2 == 0 {
			fmt.Fprintf(cw, `,"test.bench.unique_%s_id":{"resource_type":"test","name":"unique_%s_id","column_name":"id","attached_node":"model.bench.%s","test_metadata":{"name":"unique","kwargs":{"column_name":"id","model":"{{ get_where_subquery(ref('%s')) }}"}}}`, name, name, name, name)
		}
		fmt.Fprintf(cw, `,"test.bench.not_null_%s_id":{"resource_type":"test","name":"not_null_%s_id","column_name":"id","attached_node":"model.bench.%s","test_metadata":{"name":"not_null","kwargs":{"column_name":"id","model":"{{ get_where_subquery(ref('%s')) }}"}}}`, name, name, name, name)
		if i%2 == 1 {
			to := fmt.Sprintf("model_%06d", i-1)
			fmt.Fprintf(cw, `,"test.bench.rel_%s":{"resource_type":"test","name":"rel_%s","column_name":"col_01","attached_node":"model.bench.%s","test_metadata":{"name":"relationships","kwargs":{"column_name":"col_01","to":"ref('%s')","field":"id","model":"{{ get_where_subquery(ref('%s')) }}"}}}`, name, name, name, to, name)
		}
	}
	fmt.Fprint(cw, `},"sources":{},"macros":{},"docs":{},"exposures":{},"metrics":{`)
	fmt.Fprint(cw, semantic.metrics.String())
	fmt.Fprint(cw, `},"groups":{},"selectors":{},"disabled":{},"parent_map":{},"child_map":{},"group_map":{},"saved_queries":{`)
	fmt.Fprint(cw, semantic.savedQueries.String())
	fmt.Fprint(cw, `},"semantic_models":{`)
	fmt.Fprint(cw, semantic.models.String())
	fmt.Fprint(cw, `},"unit_tests":{}}`)
	if err := w.Flush(); err != nil {
		return err
	}
	return f.Close()
}

// writeModel writes a model node; version 0 is an unversioned model, 1 and 2 the versions
// of a model whose latest is 2.
func writeModel(w io.Writer, name string, version int, sql, compiled string) {
	q := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	id, alias, ver := "model.bench."+name, name, `"version":null,"latest_version":null`
	if version > 0 {
		id, alias, ver = fmt.Sprintf("%s.v%d", id, version), fmt.Sprintf("%s_v%d", name, version), fmt.Sprintf(`"version":%d,"latest_version":2`, version)
	}
	fmt.Fprintf(w, `%s:{"database":"analytics","schema":"marts","name":%s,"resource_type":"model","package_name":"bench","path":"marts/%s.sql","unique_id":%s,"fqn":["bench","marts",%s],"alias":%s,"config":{"enabled":true,"materialized":"table","meta":{},"tags":[]},"tags":[],"description":%s,%s,"columns":{`,
		q(id), q(name), alias, q(id), q(name), q(alias), q("Model "+name+" of the synthetic benchmark project, one row per entity."), ver)
	for c := 0; c < 20; c++ {
		if c > 0 {
			fmt.Fprint(w, ",")
		}
		col := fmt.Sprintf("col_%02d", c)
		if c == 0 {
			col = "id"
		}
		fmt.Fprintf(w, `%s:{"name":%s,"description":%s,"meta":{},"data_type":%s,"constraints":[],"quote":null,"tags":[]}`, q(col), q(col), q("Column "+col+" of "+name), q(types[c%len(types)]))
	}
	fmt.Fprintf(w, `},"meta":{},"raw_code":%s,"compiled_code":%s,"language":"sql","refs":[{"name":"stg_orders","package":null,"version":null}],"depends_on":{"macros":[],"nodes":["model.bench.stg_orders"]}}`, q(sql), q(compiled))
}

type countingWriter struct {
	w *bufio.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}
