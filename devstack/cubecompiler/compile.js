// compile.js DIR: compiles every .yml file under DIR with Cube's own schema compiler
// (@cubejs-backend/schema-compiler, resolved from NODE_PATH) and prints one JSON object:
// {"errors": [...], "cubes": {name: {...}}} where each cube (or view, isView) carries
// what the compiler made of it: sqlTable; dimensions {sql, type, primaryKey, title,
// description, meta}; measures {sql, type, title, description, filters, rollingWindow,
// multiStage, timeShift, public, meta}; joins {name: {sql, relationship}}; and for a
// view its included members and default filters. Member SQL is rendered with {CUBE} and
// {other_cube} kept, as Cube's own tests print it.
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
  const m = src.match(/^\(?([^)=]*)\)?\s*=>/) || src.match(/^function[^(]*\(([^)]*)\)/);
  if (m) names.push(...m[1].split(',').map(s => s.trim()).filter(Boolean));
  const mk = (n) => new Proxy({}, { get: (_, k) => (k === Symbol.toPrimitive || k === 'toString') ? () => `{${n}}` : `{${n}.${String(k)}}` });
  try { return String(fn(...names.map(mk))); } catch (e) { return src; }
}

function measureOf(m) {
  const out = { sql: sqlOf(m.sql), type: m.type, title: m.title, description: m.description, meta: m.meta };
  if (m.filters) out.filters = m.filters.map(f => sqlOf(f.sql));
  if (m.rollingWindow) out.rollingWindow = { ...m.rollingWindow };
  if (m.multiStage) out.multiStage = true;
  if (m.timeShiftReferences) {
    out.timeShift = m.timeShiftReferences.map(t => ({ interval: t.interval, type: t.type, timeDimension: t.timeDimension }));
  }
  out.public = m.public !== false && m.shown !== false;
  return out;
}

function cubeOf(c) {
  const cube = { isView: !!c.isView, sqlTable: sqlOf(c.sqlTable), title: c.title, dimensions: {}, measures: {}, joins: {} };
  for (const [dn, d] of Object.entries(c.dimensions || {})) {
    cube.dimensions[dn] = { sql: sqlOf(d.sql), type: d.type, primaryKey: !!d.primaryKey, title: d.title, description: d.description, meta: d.meta };
  }
  for (const [mn, m] of Object.entries(c.measures || {})) {
    cube.measures[mn] = measureOf(m);
  }
  const joins = Array.isArray(c.joins) ? c.joins.map(j => [j.name, j]) : Object.entries(c.joins || {});
  for (const [jn, j] of joins) {
    cube.joins[jn] = { sql: sqlOf(j.sql), relationship: j.relationship };
  }
  if (c.isView) {
    cube.includes = (c.includedMembers || []).map(m => ({ name: m.name, memberPath: m.memberPath, type: m.type }));
    cube.defaultFilters = (c.defaultFilters || []).map(f => ({ member: f.memberReference, operator: f.operator, values: f.valuesReferences || [] }));
  }
  return cube;
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
      out.cubes[name] = cubeOf(cubeEvaluator.evaluatedCubes[name]);
    }
  }
  process.stdout.write(JSON.stringify(out));
})().catch(e => { process.stdout.write(JSON.stringify({ errors: ['compiler crashed: ' + (e.stack || e)], cubes: {} })); });
