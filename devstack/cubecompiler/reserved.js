// reserved.js: prints, one per line, the names Cube reserves for member properties: the
// top-level keys of the member schemas in the installed CubeValidator (the Base*
// dimension and measure objects and every object a measure or dimension variant adds with
// inherit(Base…, {…})), in camelCase and snake_case, plus the keys the YAML compiler
// transpiles by name (sql, sqlTable, extends). Members named so do not compile, or compile
// into something else; the converter renames them (reserved.go), and a test keeps that
// list in step with this one.
'use strict';
const fs = require('fs');
const path = require('path');
const file = require.resolve('@cubejs-backend/schema-compiler/dist/src/compiler/CubeValidator.js');
const lines = fs.readFileSync(file, 'utf8').split('\n');
const names = new Set(['sql', 'sqlTable', 'extends']);
const indent = (l) => l.match(/^ */)[0].length;
let memberIndent = -1;
for (const l of lines) {
  if (l.trim() === '') continue;
  if (memberIndent >= 0 && indent(l) < memberIndent) memberIndent = -1;
  if (/^const Base(Dimension|Measure)\w* = \{$/.test(l) || /inherit\(Base(Dimension|Measure)\w*, \{$/.test(l)) {
    memberIndent = indent(l) + 4;
    continue;
  }
  const m = l.match(/^ *([a-zA-Z_][a-zA-Z0-9_]*):\s/);
  if (memberIndent >= 0 && m && indent(l) === memberIndent) names.add(m[1]);
}
const snake = (s) => s.replace(/[A-Z]/g, (c) => '_' + c.toLowerCase());
const out = new Set();
for (const n of names) { out.add(n); out.add(snake(n)); }
process.stdout.write([...out].sort().join('\n') + '\n');
