// Every scenario file under cli/tests/scenarios, fed line by line through `Driver`, gives
// exactly what the `runcore drive` binary writes for it, run here now; in memory and durable.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { SCENARIOS, inputLines, runcore, runcoreBinary, scenarioFiles } from './helpers.mjs';

const { Agent, Driver, SqliteStore, AgentError } = runcore;
const COLD = 't6_recovery_cold.jsonl';
const WARM = 't6_recovery_warm.jsonl';
const FILES = scenarioFiles().filter((f) => f !== COLD);

function binary(args, input) {
  const run = spawnSync(runcoreBinary(), args, { input, encoding: 'utf8' });
  assert.equal(run.status, 0, run.stderr);
  return run.stdout;
}

test('there are scenario files', () => {
  assert.ok(FILES.length >= 13, FILES.join(', '));
});

for (const file of FILES) {
  test(`${file}: Driver writes what the binary writes`, () => {
    const text = readFileSync(join(SCENARIOS, file), 'utf8');
    const expected = binary(['drive'], text);
    const driver = new Driver();
    const ours = inputLines(file).map((line) => driver.sendRaw(line)).join('');
    assert.equal(ours, expected);
    // `send` gives the same lines as objects.
    const again = new Driver();
    const objects = inputLines(file).flatMap((line) => again.send(line));
    assert.deepEqual(objects, expected.trimEnd().split('\n').map((l) => JSON.parse(l)));
    assert.equal(again.linesHandled, inputLines(file).length);
  });

  test(`${file}: a durable Driver writes what \`runcore drive --store\` writes`, (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'runcore-node-'));
    t.after(() => rmSync(dir, { recursive: true, force: true }));
    const text = readFileSync(join(SCENARIOS, file), 'utf8');
    const expected = binary(['drive', '--store', `sqlite:${join(dir, 'bin.db')}`], text);
    const driver = new Driver(undefined, { store: new SqliteStore(join(dir, 'node.db')) });
    const ours = driver.startupRaw + inputLines(file).map((line) => driver.sendRaw(line)).join('');
    assert.equal(ours, expected);
  });

  for (const context of ['full', 'delta']) {
    test(`${file}: Agent outputs are the Driver's lines (${context})`, () => {
      let lines = inputLines(file);
      if (context === 'delta') {
        const first = JSON.parse(lines[0]);
        lines = first.type === 'config'
          ? [JSON.stringify({ ...first, context }), ...lines.slice(1)]
          : [JSON.stringify({ type: 'config', context }), ...lines];
      }
      const driver = new Driver();
      const agent = new Agent();
      lines.forEach((line, n) => {
        const outputs = driver.send(line);
        const errors = outputs.filter((o) => o.type === 'error').map((o) => o.error);
        const want = outputs.filter((o) => o.type !== 'error' && o.type !== 'idle');
        if (errors.length > 0) {
          assert.throws(() => agent.handle(line), (e) => {
            assert.ok(e instanceof AgentError, `${file} line ${n + 1}`);
            assert.equal(e.kind, errors[0].kind);
            assert.equal(e.message, errors[0].message);
            return true;
          });
        } else {
          agent.handle(line);
        }
        assert.equal(JSON.stringify([...agent.drain()]), JSON.stringify(want), `${file} line ${n + 1}`);
      });
    });
  }
}

test('t6: recovery from a store continues as the binary does across a restart', (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'runcore-node-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const warm = readFileSync(join(SCENARIOS, WARM), 'utf8');
  const cold = readFileSync(join(SCENARIOS, COLD), 'utf8');
  const config = JSON.parse(inputLines(WARM)[0]);
  assert.equal(config.type, 'config');
  const configFile = join(dir, 'config.json');
  const { type: _type, ...fields } = config;
  // The binary: warm lines, then a restart on the same store with the cold lines.
  const url = `sqlite:${join(dir, 'bin.db')}`;
  binary(['drive', '--store', url], warm);
  writeFileSync(configFile, JSON.stringify(fields));
  const expected = binary(['drive', '--config', configFile, '--store', url], cold);
  // Node: the same, through two durable Drivers on one SQLite file.
  const path = join(dir, 'node.db');
  const first = new Driver(undefined, { store: new SqliteStore(path) });
  for (const line of inputLines(WARM)) first.send(line);
  const second = new Driver(fields, { store: new SqliteStore(path) });
  const ours = second.startupRaw + inputLines(COLD).map((line) => second.sendRaw(line)).join('');
  assert.equal(ours, expected);
});

test('bad lines give error lines, not exceptions', () => {
  const driver = new Driver();
  for (const bad of ['', 'not json', '[1]', '{"type": 3}', '{"type":"nope"}', Buffer.from([0xff])]) {
    const out = driver.send(bad);
    assert.deepEqual(out.map((o) => o.type), ['error', 'idle']);
    assert.equal(out[0].error.kind, 'invalid_json');
  }
  assert.throws(() => driver.send('{"type":"abort"}\n{"type":"abort"}'), RangeError);
  assert.throws(() => driver.send(42), TypeError);
});

test('a Driver config is the --config file of the binary', () => {
  const driver = new Driver({ thread_id: 't-9', context: 'delta' });
  assert.equal(driver.context, 'delta');
  const call = driver.send({ type: 'prompt', text: 'hi' }).find((o) => o.type === 'call_model');
  assert.equal(call.run_id, 't-9/run-1');
  assert.equal(call.base, 0);
  assert.throws(() => new Driver({ max_stepz: 3 }), runcore.InvalidJsonError);
});
