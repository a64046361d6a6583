// index.d.ts and the module agree: the same exported classes, and for each class the same
// methods, accessors and static members (read from the declarations with the TypeScript
// compiler API, and from the classes at run time).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createRequire } from 'node:module';

import { PACKAGE, runcore } from './helpers.mjs';

const ts = createRequire(import.meta.url)(join(PACKAGE, 'node_modules', 'typescript'));

/** Instance fields set by constructors (not on the prototype), checked on real instances. */
const FIELDS = {
  AgentError: ['kind', 'details'],
  StoreError: ['kind', 'reason', 'code'],
  SnapshotError: ['kind', 'code'],
  CodecError: ['kind', 'code'],
  SqliteStore: ['path'],
  PostgresStore: ['schema'],
};

function declared() {
  const path = join(PACKAGE, 'index.d.ts');
  const source = ts.createSourceFile(path, readFileSync(path, 'utf8'), ts.ScriptTarget.ES2022, true);
  const classes = new Map();
  for (const statement of source.statements) {
    if (!ts.isClassDeclaration(statement) || !statement.name) continue;
    const members = { instance: new Set(), statics: new Set(), parent: null };
    const heritage = statement.heritageClauses?.[0]?.types?.[0];
    if (heritage) members.parent = heritage.expression.getText(source);
    for (const member of statement.members) {
      if (ts.isConstructorDeclaration(member) || ts.isIndexSignatureDeclaration(member)) continue;
      const name = member.name.getText(source);
      const isStatic = member.modifiers?.some((m) => m.kind === ts.SyntaxKind.StaticKeyword);
      (isStatic ? members.statics : members.instance).add(name);
    }
    classes.set(statement.name.text, members);
  }
  return classes;
}

function runtimeMembers(Class) {
  const instance = new Set(Object.getOwnPropertyNames(Class.prototype)
    .filter((n) => n !== 'constructor' && !n.startsWith('_')));
  const statics = new Set(Object.getOwnPropertyNames(Class)
    .filter((n) => !['length', 'name', 'prototype'].includes(n) && !n.startsWith('_')));
  return { instance, statics };
}

test('index.d.ts declares exactly the exported classes', () => {
  const names = [...declared().keys()].sort();
  const classes = Object.keys(runcore).filter((name) => typeof runcore[name] === 'function');
  assert.deepEqual(names, classes.sort());
  // The one export that is not a class: the provider codecs.
  assert.deepEqual(Object.keys(runcore).filter((n) => typeof runcore[n] !== 'function'), ['providers']);
});

test('each codec decoder has exactly the members of ProviderDecoder', () => {
  const path = join(PACKAGE, 'index.d.ts');
  const source = ts.createSourceFile(path, readFileSync(path, 'utf8'), ts.ScriptTarget.ES2022, true);
  const decl = source.statements.find((s) => ts.isInterfaceDeclaration(s) && s.name.text === 'ProviderDecoder');
  const declaredMembers = decl.members.map((m) => m.name.getText(source)).sort();
  assert.deepEqual(Object.keys(runcore.providers).sort(), ['anthropic', 'openaiChat', 'openaiResponses']);
  for (const codec of Object.values(runcore.providers)) {
    assert.deepEqual(runtimeMembers(codec.Decoder).instance, new Set(declaredMembers), codec.api);
    assert.equal(typeof codec.encode, 'function');
  }
});

test('each class has exactly the declared members', () => {
  for (const [name, members] of declared()) {
    const Class = runcore[name];
    assert.equal(typeof Class, 'function', name);
    const runtime = runtimeMembers(Class);
    const fields = new Set(FIELDS[name] ?? []);
    const declaredInstance = [...members.instance].filter((m) => !fields.has(m)).sort();
    assert.deepEqual(declaredInstance, [...runtime.instance].sort(), `${name}: instance members`);
    assert.deepEqual([...members.statics].sort(), [...runtime.statics].sort(), `${name}: static members`);
    if (members.parent && members.parent in runcore) {
      assert.ok(Class.prototype instanceof runcore[members.parent], `${name} extends ${members.parent}`);
    }
  }
});

test('the declared instance fields are there on real instances', (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'runcore-types-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const agent = new runcore.Agent();
  agent.prompt('one');
  let busy;
  try { agent.prompt('two'); } catch (e) { busy = e; }
  let snapshot;
  try { runcore.Agent.restore('{}'); } catch (e) { snapshot = e; }
  let store;
  try { new runcore.SqliteStore('/nonexistent/dir/x.db'); } catch (e) { store = e; }
  let codec;
  try { runcore.providers.anthropic.encode({ messages: [] }, {}); } catch (e) { codec = e; }
  const instances = {
    CodecError: codec,
    AgentError: busy,
    SnapshotError: snapshot,
    StoreError: store,
    SqliteStore: new runcore.SqliteStore(join(dir, 'fields.db')),
  };
  for (const [name, object] of Object.entries(instances)) {
    assert.ok(object instanceof runcore[name], name);
    for (const field of FIELDS[name]) assert.ok(field in object, `${name}.${field}`);
  }
});
