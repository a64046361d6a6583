// The stores: fenced commits, plain-object read ports, SQLite recovery after a SIGKILL, and
// PostgreSQL (RUNCORE_PG_URL; under CI=true its absence fails).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { once } from 'node:events';

import { IN_CI, PACKAGE, runcore } from './helpers.mjs';

const { Agent, Driver, MemoryStore, SqliteStore, PostgresStore, StoreError } = runcore;

function tempDir(t) {
  const dir = mkdtempSync(join(tmpdir(), 'runcore-node-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** Runs a prompt to its end on `agent`, committing to `store`; returns the commit outputs. */
async function oneRun(agent, store, text) {
  const commits = [];
  const run = agent.prompt(text);
  for (const output of agent.drain()) {
    if (output.type === 'commit') {
      await store.commit(output);
      commits.push(output);
    }
    if (output.type === 'call_model') {
      agent.modelDone(run, output.step, { content: [{ type: 'text', text: `re: ${text}` }], stop_reason: 'stop' });
    }
  }
  return commits;
}

async function exercise(store, thread) {
  const agent = new Agent({ thread_id: thread });
  const commits = await oneRun(agent, store, 'hello');
  assert.ok(commits.length >= 2);
  assert.equal(await store.threadVersion(thread), commits.length);
  const messages = await store.committedMessages(thread);
  assert.deepEqual(messages.map((m) => m.role), ['user', 'assistant']);
  assert.deepEqual(messages, agent.transcript());
  const latest = await store.latestRun(thread);
  assert.equal(latest.id, `${thread}/run-1`);
  assert.equal(latest.state.type, 'ended');
  assert.deepEqual(await store.run(latest.id), latest);
  assert.equal(await store.run('no-such-run'), null);
  assert.equal(await store.resumeTicket(latest.id), null);
  assert.ok((await store.runState(latest.id)).type === 'ended');
  assert.deepEqual(await store.committedState(thread), []);
  assert.ok((await store.threads()).some((s) => s.thread_id === thread));
  assert.deepEqual(await store.pendingTickets(), []);
  const events = await store.listEvents({ scope: { type: 'thread', id: thread } });
  assert.ok(events.length > 0);
  assert.ok(events.every((e, i) => i === 0 || e.sequence > events[i - 1].sequence));
  const pinned = await store.transcriptSnapshot(thread);
  assert.equal(pinned.end, 2);
  assert.equal(await store.verifyTranscriptSnapshot(pinned), undefined);
  assert.deepEqual(await store.transcriptSlice(pinned, [[1, 2]]), [messages[1]]);
  await assert.rejects(
    store.verifyTranscriptSnapshot({ ...pinned, digest: 'f'.repeat(64) }),
    (e) => e instanceof StoreError && e.code === 'transcript',
  );
  // A retry of the same fenced commit is a duplicate; a changed one is refused.
  const receipt = await store.commit(commits[0]);
  assert.equal(receipt.duplicate, true);
  assert.equal(await store.threadVersion(thread), commits.length);
  const changed = structuredClone(commits[0]);
  changed.commit.messages[0].content[0].text = 'changed';
  await assert.rejects(store.commit(changed), runcore.InvalidJsonError);
  // A stale writer is fenced off.
  const other = new Agent({ thread_id: thread });
  other.prompt('a stale writer', { runId: 'stale' });
  const stale = other.pollAll().find((o) => o.type === 'commit');
  await assert.rejects(store.commit(stale), (e) => e instanceof StoreError && e.code === 'version_conflict');
  await assert.rejects(store.commit({ type: 'event' }), runcore.InvalidJsonError);
  await assert.rejects(store.listEvents({ after: -1 }), TypeError);
}

/** Resolves once the event loop has turned: a timer fires only while the JS thread is free. */
function tick() {
  return new Promise((resolve) => setImmediate(resolve));
}

test('MemoryStore: commits and read ports', async () => {
  await exercise(new MemoryStore(), 'mem');
});

test('store calls return promises and run off the JavaScript thread', async (t) => {
  const store = new SqliteStore(join(tempDir(t), 'offthread.db'));
  const agent = new Agent({ thread_id: 'off' });
  agent.prompt('hello');
  const commit = agent.pollAll().find((o) => o.type === 'commit');
  const pending = store.commit(commit);
  assert.ok(pending instanceof Promise);
  // Many reads in flight at once: the event loop keeps turning while they run.
  let turns = 0;
  let done = false;
  const spin = (async () => { while (!done) { await tick(); turns += 1; } })();
  const reads = [];
  for (let i = 0; i < 200; i += 1) reads.push(store.committedMessages('off'));
  await pending;
  const answers = await Promise.all(reads);
  done = true;
  await spin;
  assert.ok(turns > 0, 'the event loop turned while the store calls ran');
  assert.ok(answers.every((m) => Array.isArray(m)));
  assert.deepEqual(await store.committedMessages('off'), agent.transcript().slice(0, 1));
});

test('SqliteStore: commits and read ports, and a second handle sees them', async (t) => {
  const path = join(tempDir(t), 'runs.db');
  await exercise(new SqliteStore(path), 'lite');
  assert.equal(await new SqliteStore(path, { synchronous: 'normal' }).threadVersion('lite') > 0, true);
  assert.throws(() => new SqliteStore(path, { synchronous: 'sometimes' }), TypeError);
  assert.throws(() => new SqliteStore(join(tempDir(t), 'no', 'such', 'dir.db')), (e) => e instanceof StoreError && e.code === 'open');
});

test('a durable Driver stores each commit before returning its line', async (t) => {
  const store = new SqliteStore(join(tempDir(t), 'd.db'));
  const driver = new Driver({ thread_id: 'd' }, { store });
  assert.deepEqual(driver.startup, [{ type: 'idle', line: 0 }]);
  const out = driver.send({ type: 'prompt', text: 'hi', now_ms: 1000 });
  assert.equal(out[0].type, 'commit');
  assert.equal(await store.threadVersion('d'), 1);
  // A second driver on the thread writes first: the first one's next commit is refused and
  // its session ends.
  const second = new Driver({ thread_id: 'd' }, { store: new SqliteStore(join(store.path)) });
  const run = out.find((o) => o.type === 'call_model').run_id;
  second.send({ type: 'model_done', run_id: run, step: 1, message: { content: [{ type: 'text', text: 'x' }], stop_reason: 'stop' } });
  const refused = driver.send({ type: 'model_done', run_id: run, step: 1, message: { content: [{ type: 'text', text: 'y' }], stop_reason: 'stop' } });
  assert.equal(refused.at(-1).type, 'error');
  assert.equal(refused.at(-1).error.kind, 'store');
  assert.ok(driver.closed);
  assert.throws(() => driver.send({ type: 'abort' }), StoreError);
});

async function killedChild(path) {
  const child = spawn(process.execPath, [join(PACKAGE, 'test', 'recovery_child.mjs'), path], {
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
}

test('SqliteStore: recovery after the writing Node process was SIGKILLed finishes the run', async (t) => {
  const path = join(tempDir(t), 'killed.db');
  await killedChild(path);
  const store = new SqliteStore(path);
  const version = await store.threadVersion('killed');
  assert.ok(version >= 2, `committed before the kill: ${version}`);
  const config = { tools: { search: { description: 'Search' } } };
  const agent = Agent.recover(store, 'killed', 'replay', { config });
  const replayed = agent.pollAll();
  const tools = replayed.find((o) => o.type === 'execute_tools');
  assert.ok(tools, JSON.stringify(replayed));
  assert.equal(tools.calls[0].id, 'c1');
  assert.equal(await store.threadVersion('killed'), version, 'replay stores nothing');
  agent.toolDone(tools.run_id, 'c1', 'found x');
  let ended = null;
  for (const output of agent.drain()) {
    if (output.type === 'commit') await store.commit(output);
    if (output.type === 'call_model') {
      agent.modelDone(output.run_id, output.step, { content: [{ type: 'text', text: 'x is here' }], stop_reason: 'stop' });
    }
    if (output.type === 'event' && output.event.type === 'run_end') ended = output.event;
  }
  assert.equal(ended.result.cause.type, 'natural_end');
  assert.ok(agent.isIdle);
  assert.deepEqual((await store.latestRun('killed')).state, { type: 'ended', cause: { type: 'natural_end' } });
  assert.deepEqual((await store.committedMessages('killed')).map((m) => m.role), ['user', 'assistant', 'tool_result', 'assistant']);
});

test('SqliteStore: a seal recovery after SIGKILL ends the batch indeterminate', async (t) => {
  const path = join(tempDir(t), 'sealed.db');
  await killedChild(path);
  const store = new SqliteStore(path);
  const driver = new Driver({ thread_id: 'killed', tools: { search: {} } }, { store, policy: 'seal' });
  const end = driver.startup.find((o) => o.type === 'event' && o.event.type === 'run_end');
  assert.equal(end.event.result.cause.type, 'indeterminate');
  assert.equal(driver.startup.at(-1).type, 'idle');
});

test('PostgresStore: commits and read ports (RUNCORE_PG_URL)', async (t) => {
  const url = process.env.RUNCORE_PG_URL;
  if (!url) {
    if (IN_CI) assert.fail('RUNCORE_PG_URL is not set: under CI=true the PostgreSQL test must run');
    t.skip('RUNCORE_PG_URL is not set (scripts/with-postgres.sh sets it)');
    return;
  }
  const schema = `node_${process.pid}_${Date.now()}`;
  const store = new PostgresStore(url, { schema });
  assert.equal(store.schema, schema);
  await exercise(store, 'pg');
  const agent = Agent.recover(new PostgresStore(url, { schema }), 'pg', 'replay');
  assert.equal(agent.transcript().length, 2);
});

test('Store.open: any store URL through the registry; create: false creates nothing', async (t) => {
  const dir = tempDir(t);
  const path = join(dir, 'runs.db');
  const store = runcore.Store.open(`sqlite:${path}`);
  assert.ok(store instanceof runcore.Store);
  await exercise(store, 'url');
  const again = runcore.Store.open(`sqlite:${path}?synchronous=normal`, { create: false });
  assert.equal(await again.threadVersion('url'), await new SqliteStore(path).threadVersion('url'));
  const missing = join(dir, 'none.db');
  assert.throws(() => runcore.Store.open(`sqlite:${missing}`, { create: false }), (e) => e instanceof StoreError && e.code === 'open');
  assert.ok(!existsSync(missing));
  assert.throws(() => runcore.Store.open('mysql://db/x'), (e) => e instanceof StoreError && e.code === 'open');
  assert.throws(
    () => runcore.Store.open('postgresql://nobody:hunter2@127.0.0.1:1/none'),
    (e) => e instanceof StoreError && e.code === 'open' && !e.message.includes('hunter2'),
  );
  assert.throws(() => runcore.Store.open('sqlite:/tmp/\ud800.db'), (e) => e instanceof runcore.InvalidJsonError);
  assert.throws(() => new runcore.Store({}), TypeError);
});

test('store.approve / deny / sweep: the core\'s host operations, each under a claim of its own', async () => {
  const store = new MemoryStore();
  const config = {
    thread_id: 'gated',
    tools: { rm: { description: 'Remove', policy: 'require_approval', deadline_after_ms: 1000 } },
  };
  const agent = new Agent(config);
  const run = agent.prompt('clean up', { nowMs: 0 });
  const commitAll = async () => {
    for (const output of agent.drain()) if (output.type === 'commit') await store.commit(output);
  };
  await commitAll();
  agent.modelDone(run, 1, {
    role: 'assistant',
    content: [{ type: 'tool_call', id: 'c1', name: 'rm', arguments: {} }],
    stop_reason: 'tool_use',
  }, { nowMs: 10 });
  await commitAll();
  // Nothing is due before the deadline.
  assert.deepEqual(await store.sweep({ nowMs: 20 }), []);
  // A refused answer (a run that awaits nothing) changes nothing.
  await assert.rejects(store.deny('gated/run-9', { nowMs: 20 }), runcore.AgentError);
  const before = await store.threadVersion('gated');
  const answered = await store.approve(run, { note: 'fine', nowMs: 20 });
  assert.equal(answered.thread_id, 'gated');
  assert.equal(answered.version, before + 1);
  // Answered: the ticket is gone, so a second answer is refused.
  await assert.rejects(store.approve(run, { nowMs: 30 }), runcore.ResumeError);
  // Another owner's live claim: claim_held, nothing written.
  const claim = await store.claimThread({ threadId: 'gated', owner: 'other', leaseMs: 60000 }, { nowMs: 30 });
  await assert.rejects(store.deny(run, { nowMs: 40 }), (e) => e instanceof StoreError && e.code === 'claim_held');
  await store.releaseClaim(claim, { nowMs: 40 });
  await assert.rejects(store.sweep({ policy: 'sometimes' }), TypeError);

  // A second thread whose approval deadline passes: the sweep expires it, once.
  const waiting = new Agent({ ...config, thread_id: 'late' });
  const late = waiting.prompt('clean up', { nowMs: 0 });
  for (const output of waiting.drain()) if (output.type === 'commit') await store.commit(output);
  waiting.modelDone(late, 1, {
    role: 'assistant',
    content: [{ type: 'tool_call', id: 'c1', name: 'rm', arguments: {} }],
    stop_reason: 'tool_use',
  }, { nowMs: 10 });
  for (const output of waiting.drain()) if (output.type === 'commit') await store.commit(output);
  // (The approved run of the first thread, its tools never run, is an orphan left for a worker.)
  assert.deepEqual(await store.sweep({ nowMs: 5000 }), [
    { thread_id: 'gated', run_id: run, reason: 'orphaned', action: 'left' },
    { thread_id: 'late', run_id: late, reason: 'deadline', action: 'expired' },
  ]);
  assert.deepEqual((await store.sweep({ nowMs: 6000 })).map((item) => item.thread_id), ['gated']);
  await assert.rejects(store.approve(late, { nowMs: 6000 }), runcore.ResumeError);
});
