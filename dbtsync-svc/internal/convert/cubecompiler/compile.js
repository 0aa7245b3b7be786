// compile.js DIR: compiles every .yml file under DIR with Cube's own schema compiler
// (@cubejs-backend/schema-compiler, resolved from NODE_PATH) and prints one JSON object:
// {"errors": [...], "cubes": {name: {"sqlTable": ..., "dimensions": {name: {sql, type,
// primaryKey, title}}, "measures": {name: {sql, type}}, "joins": {name: sql}}}}.
// The Rust part of Cube (Jinja, Python) is not needed for plain YAML: a stand-in native
// instance lets prepareCompiler run without it.
'use strict';
const fs = require('fs');
const path = require('path');
const { prepareCompiler } = require('@cubejs-backend/schema-compiler');

const dir = process.argv[2];
const files = [];
(function walk(d) {
  for (const e of fs.readdirSync(d, { withFileTypes: true })) {
    const p = path.join(d, e.name);
    if (e.isDirectory()) walk(p);
    else if (e.name.endsWith('.yml') || e.name.endsWith('.yaml')) {
      files.push({ fileName: path.relative(dir, p), content: fs.readFileSync(p, 'utf8') });
    }
  }
})(dir);

const repo = { localPath: () => dir, dataSchemaFiles: async () => files };
const nativeInstance = {
  newJinjaEngine: () => ({ renderTemplate: () => { throw new Error('Jinja is not expected in generated files'); } }),
  loadPythonContext: async () => ({ filters: {}, functions: {}, variables: {} }),
};

function sqlOf(fn) {
  if (typeof fn !== 'function') return fn;
  // Render member references the way Cube's own tests do: each argument is a proxy
  // that prints {name}.
  const names = [];
  const src = fn.toString();
  const m = src.match(/^\(?([^)=]*)\)?\s*=>/);
  if (m) names.push(...m[1].split(',').map(s => s.trim()).filter(Boolean));
  const mk = (n) => new Proxy({}, { get: (_, k) => (k === Symbol.toPrimitive || k === 'toString') ? () => `{${n}}` : `{${n}.${String(k)}}` });
  try { return String(fn(...names.map(mk))); } catch (e) { return src; }
}

(async () => {
  const out = { errors: [], cubes: {} };
  const { compiler, cubeEvaluator } = prepareCompiler(repo, { nativeInstance, allowNodeRequire: false, standalone: true });
  try {
    await compiler.compile();
  } catch (e) {
    out.errors.push(String(e.messages || e.message || e));
  }
  if (out.errors.length === 0) {
    for (const name of Object.keys(cubeEvaluator.evaluatedCubes || {})) {
      const c = cubeEvaluator.evaluatedCubes[name];
      const cube = { sqlTable: sqlOf(c.sqlTable), title: c.title, dimensions: {}, measures: {}, joins: {} };
      for (const [dn, d] of Object.entries(c.dimensions || {})) {
        cube.dimensions[dn] = { sql: sqlOf(d.sql), type: d.type, primaryKey: !!d.primaryKey, title: d.title, description: d.description, meta: d.meta };
      }
      for (const [mn, m] of Object.entries(c.measures || {})) {
        cube.measures[mn] = { sql: sqlOf(m.sql), type: m.type };
      }
      const joins = Array.isArray(c.joins) ? c.joins.map(j => [j.name, j]) : Object.entries(c.joins || {});
      for (const [jn, j] of joins) {
        cube.joins[jn] = sqlOf(j.sql);
      }
      out.cubes[name] = cube;
    }
  }
  process.stdout.write(JSON.stringify(out));
})().catch(e => { process.stdout.write(JSON.stringify({ errors: ['compiler crashed: ' + (e.stack || e)], cubes: {} })); });
