package convert

import "strings"

// dialect is how a warehouse folds and quotes identifiers.
type dialect int

const (
	dialectANSI      dialect = iota // unknown adapter: "…", no assumption about folding
	dialectLower                    // Postgres, Redshift, DuckDB: unquoted names fold to lower case
	dialectUpper                    // Snowflake: unquoted names fold to upper case
	dialectBacktick                 // BigQuery: `…`, names are case-insensitive
	dialectSparkTick                // Databricks, Spark: `…` (doubled inside), case-insensitive
	dialectMySQL                    // MySQL, MariaDB: `…` (doubled inside)
)

// dialectOf maps dbt's metadata.adapter_type to its dialect.
func dialectOf(adapter string) dialect {
	switch strings.ToLower(strings.TrimSpace(adapter)) {
	case "postgres", "redshift", "duckdb", "materialize", "greenplum", "motherduck":
		return dialectLower
	case "snowflake":
		return dialectUpper
	case "bigquery":
		return dialectBacktick
	case "databricks", "spark":
		return dialectSparkTick
	case "mysql", "mariadb", "singlestore":
		return dialectMySQL
	}
	return dialectANSI
}

// sqlReserved are words no supported warehouse accepts as a bare column name.
var sqlReserved = func() map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(`all alter and any array as asc between both by case cast check collate column
		constraint create cross current_date current_time current_timestamp current_user default delete desc
		distinct do drop else end except exists false fetch for foreign from full grant group having if in
		inner insert intersect interval into is join lateral leading left like limit natural not null
		offset on only or order outer over partition primary qualify range references right rows select
		session_user some table tablesample then to trailing true union unique update user using values
		when where window with within`) {
		m[w] = true
	}
	return m
}()

// plainIdent: a name any warehouse reads unquoted (before case folding).
func plainIdent(s string) bool {
	return isIdent(s) && (len(s) > len("current_timestamp") || !sqlReserved[strings.ToLower(s)])
}

// quoteIdent quotes name for the dialect whenever the bare name would not reach the
// column: it is not a plain identifier, it is reserved, its case would be folded away, or
// dbt says quote: true.
func quoteIdent(d dialect, name string, force bool) string {
	bare := !force && plainIdent(name)
	switch d {
	case dialectLower:
		bare = bare && name == strings.ToLower(name)
	case dialectUpper:
		// An all-lower or all-upper name is how dbt writes a column created unquoted
		// (folded to upper case either way); a mixed-case one was created quoted.
		bare = bare && (name == strings.ToLower(name) || name == strings.ToUpper(name))
	}
	if bare {
		return name
	}
	switch d {
	case dialectBacktick:
		return "`" + strings.ReplaceAll(name, "`", "\\`") + "`"
	case dialectSparkTick, dialectMySQL:
		return "`" + strings.ReplaceAll(name, "`", "``") + "`"
	}
	return `"` + strings.ReplaceAll(name, `"`, `""`) + `"`
}

// relationOf is a model's table as the warehouse names it when the manifest has no
// relation_name: database, schema and alias, each quoted as dbt's adapter would (dbt
// quotes all three on Postgres, Redshift and DuckDB by default, and none on Snowflake).
func relationOf(d dialect, database, schema, alias string) string {
	var parts []string
	for _, s := range []string{database, schema, alias} {
		if s == "" {
			continue
		}
		switch d {
		case dialectLower:
			parts = append(parts, `"`+strings.ReplaceAll(s, `"`, `""`)+`"`)
		case dialectBacktick, dialectSparkTick, dialectMySQL:
			parts = append(parts, quoteIdent(d, s, true))
		default:
			parts = append(parts, quoteIdent(d, s, false))
		}
	}
	return strings.Join(parts, ".")
}
