// The README's "From Node" host runs as written, in a fresh folder where `runcore` resolves
// to this package, and type-checks against index.d.ts.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { PACKAGE, runcore } from './helpers.mjs';

/** The code block between the README's from-node markers. */
export function readmeHost() {
  const text = readFileSync(join(PACKAGE, 'README.md'), 'utf8');
  const section = text.split('<!-- from-node:start -->')[1].split('<!-- from-node:end -->')[0];
  return section.split('```js\n')[1].split('```')[0];
}

/** A folder with the host in `host.mjs` and `node_modules/runcore` linked to this package. */
function hostFolder(t) {
  const dir = mkdtempSync(join(tmpdir(), 'runcore-readme-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  mkdirSync(join(dir, 'node_modules'));
  symlinkSync(PACKAGE, join(dir, 'node_modules', 'runcore'), 'dir');
  writeFileSync(join(dir, 'host.mjs'), readmeHost());
  return dir;
}

test('the README host is about 20 lines', () => {
  const lines = readmeHost().trim().split('\n').length;
  assert.ok(lines >= 15 && lines <= 30, `${lines} lines`);
});

test('the README host runs and finishes its run, every commit in SQLite', async (t) => {
  const dir = hostFolder(t);
  const run = spawnSync(process.execPath, ['host.mjs'], { cwd: dir, encoding: 'utf8' });
  assert.equal(run.status, 0, run.stderr);
  assert.match(run.stdout, /run_end/);
  assert.match(run.stdout, /It is noon\./);
  const store = new runcore.SqliteStore(join(dir, 'runs.db'));
  assert.deepEqual((await store.committedMessages('demo')).map((m) => m.role), ['user', 'assistant', 'tool_result', 'assistant']);
  assert.equal((await store.latestRun('demo')).state.type, 'ended');
});

test('the README host type-checks (tsc --noEmit, checkJs, strict)', (t) => {
  const dir = hostFolder(t);
  const tsc = join(PACKAGE, 'node_modules', 'typescript', 'bin', 'tsc');
  const run = spawnSync(process.execPath, [
    tsc, '--noEmit', '--allowJs', '--checkJs', '--strict', '--target', 'es2022',
    '--module', 'nodenext', '--moduleResolution', 'nodenext',
    '--types', 'node', '--typeRoots', join(PACKAGE, 'node_modules', '@types'), 'host.mjs',
  ], { cwd: dir, encoding: 'utf8' });
  assert.equal(run.status, 0, run.stdout + run.stderr);
});

test('the package and examples/async-host.mjs type-check (tsc -p tsconfig.json)', () => {
  const tsc = join(PACKAGE, 'node_modules', 'typescript', 'bin', 'tsc');
  const run = spawnSync(process.execPath, [tsc, '-p', 'tsconfig.json'], { cwd: PACKAGE, encoding: 'utf8' });
  assert.equal(run.status, 0, run.stdout + run.stderr);
});
