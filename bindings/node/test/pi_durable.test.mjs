// runcore/pi with a store: every step committed before it is acted on, recovery at
// construction after a SIGKILL (the run resumes under replay), and a second owner refused.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { IN_CI, PACKAGE, runcore } from './helpers.mjs';
import { pi, MODEL, assistant, user, toolCall, scripted, echoTool, record } from './pi_helpers.mjs';

const { SqliteStore, MemoryStore, PostgresStore } = runcore;

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
  // Every message is the same after the restart, the tool result's timestamp included.
  assert.deepEqual(committed[2].meta, { timestamp: agent.state.messages[2].timestamp });
  assert.deepEqual(again.state.messages, agent.state.messages);
  assert.equal(again.state.isStreaming, false);
  assert.throws(() => again.reset(), /durable/);
  assert.throws(() => new pi.Agent({ store }), /threadId/);
});

test('durable: a tool result without details reads back without details (pi\'s `{}` stays `{}`)', async (t) => {
  const path = join(tempDir(t), 'pi.db');
  const bare = {
    name: 'bare', label: 'bare', description: 'No details', parameters: { type: 'object', properties: {} },
    async execute() {
      return { content: [{ type: 'text', text: 'no details' }] };
    },
  };
  const empty = {
    name: 'empty', label: 'empty', description: 'Empty details', parameters: { type: 'object', properties: {} },
    async execute() {
      return { content: [{ type: 'text', text: 'empty details' }], details: {} };
    },
  };
  const agent = new pi.Agent({
    store: new SqliteStore(path),
    threadId: 't-details',
    streamFn: scripted([
      assistant([toolCall('c1', 'bare', {}), toolCall('c2', 'empty', {})], 'toolUse'),
      assistant('done'),
    ]),
    initialState: { model: MODEL, tools: [bare, empty] },
  });
  await agent.prompt(user('go', 1));
  const live = agent.state.messages.filter((m) => m.role === 'toolResult');
  assert.equal(live[0].details, undefined);
  assert.deepEqual(live[1].details, {});

  const again = new pi.Agent({ store: new SqliteStore(path), threadId: 't-details', initialState: { model: MODEL } });
  const read = again.state.messages.filter((m) => m.role === 'toolResult');
  assert.equal(read.length, 2);
  assert.equal('details' in read[0], false, JSON.stringify(read[0]));
  assert.deepEqual(read[1].details, {});
  // Otherwise exactly as pi gave them (the marker does not show).
  assert.deepEqual(JSON.parse(JSON.stringify(read)), JSON.parse(JSON.stringify(live)));
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
  // The dead process's claim is live until its lease passes: until then the thread is refused.
  const held = await store.threadClaim('pi-killed');
  if (held !== null) {
    const early = new pi.Agent({ store, threadId: 'pi-killed', streamFn: scripted([assistant('no')]), initialState: { model: MODEL } });
    await early.waitForIdle();
    await assert.rejects(early.prompt('x'), (e) => e instanceof runcore.StoreError && e.code === 'claim_held');
    assert.equal(early.state.isStreaming, false);
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, held.expires_at_ms - Date.now() + 20)));
  }
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

test('durable: the thread is claimed; a second owner gets ClaimHeld until the first closes', async (t) => {
  const path = join(tempDir(t), 'claim.db');
  const first = new pi.Agent({ store: new SqliteStore(path), threadId: 'c', streamFn: scripted([assistant('one')]), initialState: { model: MODEL } });
  await first.prompt('hello');
  assert.equal(first.claim.thread_id, 'c');
  assert.equal(first.claim.epoch, 1);
  const store = new SqliteStore(path);
  const second = new pi.Agent({ store, threadId: 'c', streamFn: scripted([assistant('two')]), initialState: { model: MODEL } });
  assert.deepEqual(second.state.messages.map((m) => m.role), ['user', 'assistant'], 'reading needs no claim');
  await assert.rejects(second.prompt('me too'), (e) => e instanceof runcore.StoreError && e.code === 'claim_held');
  assert.equal(second.state.isStreaming, false);
  assert.equal(await store.threadVersion('c'), 2, 'nothing committed by the refused owner');
  await first.close();
  assert.equal(await store.threadClaim('c'), null);
  const third = new pi.Agent({ store, threadId: 'c', streamFn: scripted([assistant('three')]), initialState: { model: MODEL } });
  await third.prompt('now me');
  assert.equal(third.claim.epoch, 2);
  assert.deepEqual((await store.committedMessages('c')).map((m) => m.role), ['user', 'assistant', 'user', 'assistant']);
  await third.close();
  // A commit without the claim while another owner holds the thread is refused by the store.
  const holder = await store.claimThread({ threadId: 'c', owner: 'someone', leaseMs: 10000 });
  const raw = runcore.Agent.recover(store, 'c', 'replay', { config: { thread_id: 'c' } });
  raw.prompt('sneak');
  const commit = raw.pollAll().find((o) => o.type === 'commit');
  await assert.rejects(store.commit(commit), (e) => e.code === 'claim_held');
  await store.commit(commit, { claim: holder });
  assert.equal(await store.threadVersion('c'), 5);
});

test('store claims from Node: grant, retry, renew, release, a newer epoch fences the older', async (t) => {
  const store = new SqliteStore(join(tempDir(t), 'claims.db'));
  const first = await store.claimThread({ threadId: 'x', owner: 'a', requestId: 'r1', leaseMs: 1000 }, { nowMs: 10_000 });
  assert.deepEqual(first, { thread_id: 'x', owner: 'a', epoch: 1, expires_at_ms: 11_000 });
  assert.deepEqual(await store.claimThread({ threadId: 'x', owner: 'a', requestId: 'r1', leaseMs: 1000 }, { nowMs: 10_500 }), first, 'a retry gets the same claim');
  await assert.rejects(store.claimThread({ threadId: 'x', owner: 'b', leaseMs: 1000 }, { nowMs: 10_500 }), (e) => e.code === 'claim_held');
  const renewed = await store.renewClaim(first, 5000, { nowMs: 10_900 });
  assert.equal(renewed.expires_at_ms, 15_900);
  assert.deepEqual(await store.threadClaim('x', { nowMs: 12_000 }), renewed);
  // Expired: another owner takes the thread with a new epoch; the old claim can no longer renew.
  const second = await store.claimThread({ threadId: 'x', owner: 'b', leaseMs: 1000 }, { nowMs: 16_000 });
  assert.equal(second.epoch, 2);
  await assert.rejects(store.renewClaim(renewed, 1000, { nowMs: 16_100 }), (e) => e.code === 'claim_lost');
  await store.releaseClaim(renewed, { nowMs: 16_200 });
  assert.deepEqual(await store.threadClaim('x', { nowMs: 16_300 }), second, 'releasing an old claim leaves the new one');
  await store.releaseClaim(second, { nowMs: 16_400 });
  assert.equal(await store.threadClaim('x', { nowMs: 16_500 }), null);
});

test('durable on PostgreSQL (RUNCORE_PG_URL): committed, claimed, a second owner refused, recovered', async (t) => {
  const url = process.env.RUNCORE_PG_URL;
  if (!url) {
    if (IN_CI) assert.fail('RUNCORE_PG_URL is not set: under CI=true the PostgreSQL test must run');
    t.skip('RUNCORE_PG_URL is not set (scripts/with-postgres.sh sets it)');
    return;
  }
  const schema = `pi_${process.pid}_${Date.now()}`;
  const store = new PostgresStore(url, { schema });
  const executed = [];
  const first = new pi.Agent({
    store,
    threadId: 'pg',
    streamFn: scripted([assistant([toolCall('c1', 'echo', { value: 'a' })], 'toolUse'), assistant('done')]),
    initialState: { model: MODEL, tools: [echoTool(executed)] },
  });
  await first.prompt(user('go', 7));
  assert.deepEqual(executed, ['a']);
  assert.deepEqual((await store.committedMessages('pg')).map((m) => m.role), ['user', 'assistant', 'tool_result', 'assistant']);
  const other = new pi.Agent({ store: new PostgresStore(url, { schema }), threadId: 'pg', streamFn: scripted([assistant('no')]), initialState: { model: MODEL } });
  // Read back exactly, pi's fields included (a tool result's timestamp rides in its meta).
  assert.deepEqual(other.state.messages, first.state.messages);
  await assert.rejects(other.prompt('me too'), (e) => e instanceof runcore.StoreError && e.code === 'claim_held');
  await first.close();
  await other.prompt('now me');
  assert.equal(other.claim.epoch, 2);
  assert.deepEqual(other.state.messages.map((m) => m.role), ['user', 'assistant', 'toolResult', 'assistant', 'user', 'assistant']);
  await other.close();
});
