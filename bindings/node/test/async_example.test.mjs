// examples/async-host.mjs runs to its end: both tools answered (the slow one timed out), the
// steering entered after the batch, the approval let the delete run, every commit stored.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { PACKAGE, runcore } from './helpers.mjs';

test('the async host example finishes its run with every commit in SQLite', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'runcore-async-test-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const path = join(dir, 'runs.db');
  const run = spawnSync(process.execPath, [join(PACKAGE, 'examples', 'async-host.mjs'), path], {
    encoding: 'utf8',
    timeout: 60_000,
  });
  assert.equal(run.status, 0, run.stderr);
  const summary = JSON.parse(run.stdout.trim().split('\n').at(-1));
  assert.deepEqual(summary.run_end.result.cause, { type: 'natural_end' });
  assert.equal(summary.run_end.result.steps, 3);
  assert.equal(summary.stored, summary.commits);
  const store = new runcore.SqliteStore(path);
  assert.equal(await store.threadVersion('async-demo'), summary.commits);
  const messages = await store.committedMessages('async-demo');
  assert.deepEqual(messages.map((m) => m.role),
    ['user', 'assistant', 'tool_result', 'tool_result', 'user', 'assistant', 'tool_result', 'assistant']);
  const results = Object.fromEntries(messages.filter((m) => m.role === 'tool_result').map((m) => [m.call_id ?? m.tool_call_id, m]));
  const byName = messages.filter((m) => m.role === 'tool_result');
  // The slow fetch timed out (an error result); search and the approved delete succeeded.
  const text = (m) => m.content.map((b) => b.text).join('');
  assert.ok(byName.some((m) => /fetch_page timed out/.test(text(m)) && m.is_error === true), JSON.stringify(byName));
  assert.ok(byName.some((m) => text(m) === 'search ok'));
  assert.ok(byName.some((m) => text(m) === 'delete_file ok'));
  assert.ok(Object.keys(results).length === 3);
  // The steering entered after the whole batch, before the next model call.
  assert.equal(text(messages[4]), 'Also: prefer the official docs.');
});
