// Threads that begin with history (SPEC §8.10) and lossless content (§2.1) from Node: import,
// several prompt messages, thinking deltas, meta and signatures kept whole, fork.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Agent, SqliteStore, InvalidInputError, BusyError } from '../index.js';

const HISTORY = [
  { role: 'user', content: [{ type: 'text', text: 'Read a.txt' }], id: 'u1', meta: { timestamp: 1733000000000 } },
  {
    role: 'assistant', stop_reason: 'tool_use', model: 'claude-x', response_id: 'msg_1',
    usage: { input_tokens: 10, output_tokens: 4, cache_read_tokens: 6 },
    content: [
      { type: 'thinking', thinking: 'Read it first.', signature: 'sig==' },
      { type: 'redacted_thinking', data: 'opaque' },
      { type: 'tool_call', id: 'c1', name: 'read', arguments: { path: 'a.txt' }, meta: { item: 'fc_1' } },
    ],
  },
  { role: 'tool_result', call_id: 'c1', tool_name: 'read', content: [{ type: 'text', text: 'hello' }], is_error: false, outcome: 'executed' },
  { role: 'assistant', content: [{ type: 'text', text: 'It says hello.' }], stop_reason: 'stop' },
  { role: 'user', content: [{ type: 'text', text: 'And b.txt?' }] },
];

async function drain(agent, store) {
  const outs = [];
  for (let out = agent.poll(); out !== null; out = agent.poll()) {
    if (store && out.type === 'commit') await store.commit(out);
    outs.push(out);
  }
  return outs;
}

test('import keeps every field; continue runs over it; thinking deltas', async () => {
  const store = new SqliteStore(join(mkdtempSync(join(tmpdir(), 'rc-')), 'h.db'));
  const agent = new Agent({ thread_id: 'h' });
  assert.equal(agent.import(HISTORY, { nowMs: 5 }), 'h/run-1');
  const outs = await drain(agent, store);
  assert.deepEqual(outs.map((o) => o.type), ['commit', 'event', 'event']);
  assert.deepEqual(outs[0].commit.events.map((e) => e.kind), ['run_state_changed', 'imported', 'commit_clock']);
  assert.deepEqual(await store.committedMessages('h'), HISTORY);
  const run = agent.continueRun({ nowMs: 6 });
  const call = (await drain(agent, store)).at(-1);
  assert.equal(call.type, 'call_model');
  assert.deepEqual(call.messages, HISTORY);
  agent.modelDelta(run, 1, 'Hmm', { kind: 'thinking' });
  const delta = (await drain(agent)).at(-1);
  assert.deepEqual(delta.event.event, { type: 'thinking_delta', step: 1, text: 'Hmm' });
});

test('bad imports throw InvalidInputError naming the rule and change nothing', () => {
  const agent = new Agent();
  const before = agent.snapshot();
  for (const [messages, needle] of [
    [[], 'no messages'],
    [HISTORY.slice(0, 2), 'messages[1]: tool call c1 has no result'],
    [[HISTORY[0], HISTORY[0]], 'appears twice'],
  ]) {
    assert.throws(() => agent.import(messages), (e) => e instanceof InvalidInputError && e.message.includes(needle));
    assert.equal(agent.snapshot(), before);
  }
});

test('several prompt messages', async () => {
  const agent = new Agent();
  agent.prompt([{ content: [{ type: 'text', text: 'one' }] }, { content: [{ type: 'text', text: 'two' }], meta: { k: 1 } }]);
  const outs = await drain(agent);
  assert.deepEqual(outs[0].commit.messages.map((m) => m.content[0].text), ['one', 'two']);
  assert.deepEqual(outs[0].commit.messages[1].meta, { k: 1 });
  assert.throws(() => agent.prompt('again'), BusyError);
});

test('fork from a store', async () => {
  const store = new SqliteStore(join(mkdtempSync(join(tmpdir(), 'rc-')), 'f.db'));
  const agent = new Agent({ thread_id: 'main' });
  agent.import(HISTORY.slice(0, 4));
  await drain(agent, store);
  agent.prompt('Now b.txt');
  await drain(agent, store);
  assert.equal(await store.threadVersion('main'), 2);
  const at1 = await store.threadAsOf('main', 1);
  assert.deepEqual(at1.messages, HISTORY.slice(0, 4));
  assert.equal(await store.threadAsOf('main', 3), null);
  assert.deepEqual(await store.fork('main', 1, 'branch', { nowMs: 9 }),
    { thread_id: 'branch', version: 1, forked_from: { thread_id: 'main', version: 1 } });
  assert.deepEqual(await store.forkedFrom('branch'), { thread_id: 'main', version: 1 });
  assert.equal(await store.forkedFrom('main'), null);
  await assert.rejects(store.fork('main', 1, 'branch'), (e) => e instanceof InvalidInputError && /already exists/.test(e.message));
  await assert.rejects(store.fork('main', 5, 'other'), InvalidInputError);
  await assert.rejects(store.fork('main', -1, 'other'));
  assert.equal(await store.threadVersion('other'), 0);
});
