package devstack

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// ginTriggerSQL makes PostgreSQL serve FerretDB's filters from indexes. FerretDB v1
// stores a collection as a table of one jsonb column, _jsonb, turns a MongoDB index
// into a btree on its fields' expressions (_jsonb->'dep'), and pushes an equality
// filter down as containment (_jsonb->'dep' @> '5', which also matches an array
// holding 5). No btree serves @>; a GIN index on the same expression does. So an event
// trigger joins every btree index FerretDB creates on a document field with a GIN
// index (jsonb_path_ops: containment only, the smaller kind) on each of its fields, one
// per field and table whichever indexes name it. fastupdate is off: with it, new entries
// wait in a pending list that every search reads whole until a vacuum merges it (after a
// bulk insert of 50,000 items a folder GET read 127 buffers instead of 4). The services'
// code creates its indexes as it does on MongoDB; nothing in it knows.
var ginTriggerSQL = []string{
	`CREATE OR REPLACE FUNCTION devstack_gin_indexes() RETURNS event_trigger LANGUAGE plpgsql AS $fn$
DECLARE
	cmd record;
	tbl oid;
	k int;
	expr text;
BEGIN
	FOR cmd IN SELECT objid FROM pg_event_trigger_ddl_commands() WHERE command_tag = 'CREATE INDEX' AND object_type = 'index' LOOP
		CONTINUE WHEN (SELECT am.amname FROM pg_class c JOIN pg_am am ON am.oid = c.relam WHERE c.oid = cmd.objid) <> 'btree';
		SELECT indrelid INTO tbl FROM pg_index WHERE indexrelid = cmd.objid;
		FOR k IN 1..(SELECT indnatts FROM pg_index WHERE indexrelid = cmd.objid) LOOP
			expr := pg_get_indexdef(cmd.objid, k, false);
			CONTINUE WHEN expr NOT LIKE '((_jsonb -> %';
			EXECUTE format('CREATE INDEX IF NOT EXISTS %I ON %s USING gin (%s jsonb_path_ops) WITH (fastupdate = off)',
				left((SELECT relname FROM pg_class WHERE oid = tbl), 40) || '_' || left(md5(expr), 8) || '_gin', tbl::regclass, expr);
		END LOOP;
	END LOOP;
END
$fn$`,
	`DROP EVENT TRIGGER IF EXISTS devstack_gin_indexes`,
	`CREATE EVENT TRIGGER devstack_gin_indexes ON ddl_command_end WHEN TAG IN ('CREATE INDEX') EXECUTE FUNCTION devstack_gin_indexes()`,
	// What the engine did, for make bench: statements, rows and buffers touched.
	`CREATE EXTENSION IF NOT EXISTS pg_stat_statements`,
}

// ferretTemplate is the database a shared server's FerretDB databases are copied from.
const ferretTemplate = "ferret_template"

// prepareFerretDatabase creates database db (unless it exists) with the GIN trigger, or
// without it when noGIN (indexes created meanwhile stay).
func prepareFerretDatabase(ctx context.Context, pg *Postgres, db string, noGIN bool) error {
	err := pg.Exec(ctx, "postgres", "CREATE DATABASE "+pgx.Identifier{db}.Sanitize())
	var pgErr *pgconn.PgError
	if err != nil && !(errors.As(err, &pgErr) && pgErr.Code == "42P04") { // duplicate_database
		return err
	}
	if noGIN {
		return pg.Exec(ctx, db, `DROP EVENT TRIGGER IF EXISTS devstack_gin_indexes`, ginTriggerSQL[len(ginTriggerSQL)-1])
	}
	return pg.Exec(ctx, db, ginTriggerSQL...)
}
