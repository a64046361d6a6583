// runcore/pi with a store: every step committed before it is acted on, recovery at
// construction after a SIGKILL (the run resumes under replay), and a second owner refused.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { PACKAGE, runcore } from './helpers.mjs';
import { pi, MODEL, assistant, user, toolCall, scripted, echoTool, record } from './pi_helpers.mjs';

const { SqliteStore, MemoryStore } = runcore;

function tempDir(t) {
  const dir = mkdtempSync(join(tmpdir(), 'runcore-pi-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

test('durable: every commit is stored, and a new Agent on the thread recovers the transcript', async (t) => {
  const path = join(tempDir(t), 'pi.db');
  const store = new SqliteStore(path);
  const executed = [];
  const agent = new pi.Agent({
    store,
    threadId: 't1',
    streamFn: scripted([assistant([toolCall('c1', 'echo', { value: 'a' })], 'toolUse'), assistant('done')]),
    initialState: { model: MODEL, tools: [echoTool(executed)] },
  });
  const versions = [];
  agent.subscribe(async (event) => {
    if (event.type === 'message_end') versions.push(await store.threadVersion('t1'));
  });
  await agent.prompt(user('go', 42));
  assert.deepEqual(executed, ['a']);
  const committed = await store.committedMessages('t1');
  assert.deepEqual(committed.map((m) => m.role), ['user', 'assistant', 'tool_result', 'assistant']);
  // A message is announced only once it is committed: each message_end saw a version that holds it.
  assert.ok(versions.every((v) => v >= 1), JSON.stringify(versions));
  assert.deepEqual(committed[0].meta, { timestamp: 42, pi_text: true });
  assert.equal(committed[1].meta.api, MODEL.api);

  const again = new pi.Agent({ store: new SqliteStore(path), threadId: 't1', initialState: { model: MODEL } });
  assert.deepEqual(again.state.messages[0], user('go', 42));
  assert.deepEqual(again.state.messages.map((m) => m.role), ['user', 'assistant', 'toolResult', 'assistant']);
  assert.deepEqual(again.state.messages[1], agent.state.messages[1]);
  assert.equal(again.state.isStreaming, false);
  assert.throws(() => again.reset(), /durable/);
  assert.throws(() => new pi.Agent({ store }), /threadId/);
});

test('durable: a process SIGKILLed while a tool runs; the next Agent resumes the run under replay', async (t) => {
  const path = join(tempDir(t), 'killed.db');
  const child = spawn(process.execPath, [join(PACKAGE, 'test', 'pi_child.mjs'), path], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let seen = '';
  for await (const chunk of child.stdout) {
    seen += chunk;
    if (seen.includes('ready')) break;
  }
  assert.equal(seen.trim(), 'ready');
  child.kill('SIGKILL');
  const [code, signal] = await once(child, 'exit');
  assert.equal(code, null);
  assert.equal(signal, 'SIGKILL');

  const store = new SqliteStore(path);
  const before = await store.threadVersion('pi-killed');
  assert.ok(before >= 2, `committed before the kill: ${before}`);
  const executed = [];
  const streamFn = scripted([assistant('x is here')]);
  const agent = new pi.Agent({
    store,
    threadId: 'pi-killed',
    streamFn,
    initialState: { model: MODEL, tools: [echoTool(executed, { name: 'search' })] },
  });
  assert.equal(agent.state.isStreaming, true, 'the recovered run is active');
  const events = record(agent);
  await assert.rejects(agent.prompt('meanwhile'), /already processing/);
  await agent.waitForIdle();
  assert.equal(executed.length, 1, 'the unanswered call ran again (replay)');
  assert.deepEqual(events.map((e) => e.type).slice(0, 4), ['agent_start', 'turn_start', 'tool_execution_start', 'tool_execution_end']);
  assert.equal(events.at(-1).type, 'agent_end');
  assert.deepEqual(agent.state.messages.map((m) => m.role), ['user', 'assistant', 'toolResult', 'assistant']);
  assert.equal(agent.state.messages[0].content, 'find x');
  assert.equal(agent.state.messages[0].timestamp, 1234);
  const latest = await store.latestRun('pi-killed');
  assert.deepEqual(latest.state, { type: 'ended', cause: { type: 'natural_end' } });
  assert.deepEqual((await store.committedMessages('pi-killed')).map((m) => m.role), ['user', 'assistant', 'tool_result', 'assistant']);
  // The context the model saw after recovery held the replayed result.
  assert.deepEqual(streamFn.calls[0].context.map((m) => m.role), ['user', 'assistant', 'toolResult']);
});

test('durable on MemoryStore: history appended to state.messages is imported and committed', async () => {
  const store = new MemoryStore();
  const agent = new pi.Agent({ store, threadId: 'm', streamFn: scripted([assistant('hi')]), initialState: { model: MODEL } });
  agent.state.messages.push(user('earlier', 1), assistant('earlier answer'));
  await agent.prompt('now');
  assert.deepEqual((await store.committedMessages('m')).map((m) => m.role), ['user', 'assistant', 'user', 'assistant']);
  agent.state.messages = [];
  await assert.rejects(agent.prompt('again'), /cannot be replaced/);
});
