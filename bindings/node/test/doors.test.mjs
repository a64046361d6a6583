// Issue 37: every door agrees. The fast paths of `Agent` and the line path (`Driver.send`, the
// bytes `runcore drive` reads) give the same outputs or the same error kind under hostile and
// extreme input, the core's limits hold at and past each edge, and the unsafe and tape
// invariants JavaScript could break hold.
//
// The differential test prints its seed; replay one with RUNCORE_SEED=<seed>.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Worker } from 'node:worker_threads';
import { createRequire } from 'node:module';
import { PACKAGE, runcore } from './helpers.mjs';

const { Agent, Driver, MemoryStore } = runcore;
const native = createRequire(import.meta.url)(`${PACKAGE}/runcore.node`);

const MAX_LINE = 64 * 1024 * 1024;
const MAX_DEPTH = 64;

/** A deterministic generator (mulberry32). */
function generator(seed) {
  let state = seed >>> 0;
  const next = () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  return { next, pick: (items) => items[Math.floor(next() * items.length)] };
}

function nested(levels) {
  let value = 1;
  for (let i = 0; i < levels; i++) value = [value];
  return value;
}

/** JSON text as a host would write it, non-finite numbers as the bare words (not JSON). */
function lineText(line) {
  const marks = [];
  const text = JSON.stringify(line, (_key, value) => {
    if (typeof value === 'number' && !Number.isFinite(value)) {
      marks.push(String(value));
      return `\u0000MARK${marks.length - 1}\u0000`;
    }
    return value;
  });
  return text.replace(/"\\u0000MARK(\d+)\\u0000"/g, (_m, i) => marks[Number(i)]);
}

function outcome(fn) {
  try {
    fn();
    return 'ok';
  } catch (e) {
    return e.kind ?? `${e.constructor.name}: ${e.message}`;
  }
}

function drain(agent) {
  const outputs = [];
  for (let output = agent.poll(); output !== null; output = agent.poll()) outputs.push(output);
  return outputs;
}

/** The driver's lines for one input line: its outputs and the error kind (or 'ok'). */
function driverSend(driver, line) {
  let text;
  try {
    text = lineText(line);
  } catch (e) {
    return { kind: `${e.constructor.name}: ${e.message}`, outputs: [] };
  }
  const lines = driver.send(text);
  const error = lines.find((l) => l.type === 'error');
  return {
    kind: error ? error.error.kind : 'ok',
    outputs: lines.filter((l) => l.type !== 'error' && l.type !== 'idle'),
  };
}

function throwingProxy() {
  return new Proxy({}, { get() { throw new Error('hostile getter'); } });
}

/** One random input, as a fast-path call on `agent` and as the line it stands for. */
function randomInput(rng, state) {
  const run = rng.pick([state.run, state.run, state.run, 'nope', '', '\ud800', undefined]);
  const now = rng.pick([undefined, undefined, 0, -0, 7, 2 ** 53 - 1, 2 ** 53, 2 ** 53 + 2, NaN, Infinity, -1, 1.5]);
  const text = rng.pick(['hi', '', 'é🙂 "q"\n', 'lone \udc00', 'x'.repeat(300)]);
  const step = rng.pick([state.step, state.step, state.step, 0, -0, 2 ** 32, 1.5, NaN]);
  const withNow = (line) => (now === undefined ? line : { ...line, now_ms: now });
  switch (rng.pick(['prompt', 'prompt', 'delta', 'done', 'done', 'done', 'tool', 'tool'])) {
    case 'prompt': {
      const runId = rng.pick([undefined, undefined, `run-${state.n++}`, '\ud800']);
      const line = withNow({ type: 'prompt', text, ...(runId === undefined ? {} : { run_id: runId }) });
      return { line, call: (a) => a.prompt(text, { runId, nowMs: now }) };
    }
    case 'delta':
      return {
        line: withNow({ type: 'model_delta', run_id: run, step, text }),
        call: (a) => a.modelDelta(run, step, text, { nowMs: now }),
      };
    case 'done': {
      const depth = rng.pick([1, 10, MAX_DEPTH - 4, MAX_DEPTH - 3, MAX_DEPTH, 130]);
      const message = rng.pick([
        { content: [{ type: 'text', text }], stop_reason: 'stop' },
        { content: [{ type: 'text', text }], stop_reason: 'sideways' },
        { content: [{ type: 'tool_call', id: `c${state.n++}`, name: 'echo', arguments: nested(depth) }], stop_reason: 'tool_use' },
        { content: [{ type: 'tool_call', id: 'p', name: 'echo', arguments: JSON.parse('{"__proto__":{"x":1}}') }], stop_reason: 'tool_use' },
        throwingProxy(),
      ]);
      // (A hostile message with a bad time: which error comes first is the host's order.)
      const nowMs = message instanceof Object && !('content' in Object.getOwnPropertyDescriptors(message)) ? undefined : now;
      return {
        line: nowMs === undefined ? { type: 'model_done', run_id: run, step, message } : { type: 'model_done', run_id: run, step, message, now_ms: nowMs },
        call: (a) => a.modelDone(run, step, message, { nowMs }),
      };
    }
    default: {
      const callId = rng.pick([state.call ?? 'c', 'c', '\ud800']);
      const isError = rng.pick([false, true]);
      return {
        line: withNow({ type: 'tool_done', run_id: run, call_id: callId, content: text, is_error: isError }),
        call: (a) => a.toolDone(run, callId, text, { isError, nowMs: now }),
      };
    }
  }
}

test('differential: every fast path and the line path agree on random hostile input (seeded)', () => {
  const seeds = process.env.RUNCORE_SEED ? [Number(process.env.RUNCORE_SEED)] : [1, 2, 3, 37, Date.now() % 100000];
  for (const seed of seeds) {
    console.log(`doors differential seed ${seed} (replay: RUNCORE_SEED=${seed})`);
    const rng = generator(seed);
    const agent = new Agent();
    const driver = new Driver();
    const state = { run: undefined, step: 1, call: undefined, n: 0 };
    for (let i = 0; i < 120; i++) {
      const { line, call } = randomInput(rng, state);
      const fast = outcome(() => call(agent));
      const outputs = fast === 'ok' ? drain(agent) : [];
      const viaLine = driverSend(driver, line);
      const where = `seed ${seed} step ${i}: ${outcome(() => lineText(line)) === 'ok' ? lineText(line).slice(0, 200) : line.type}`;
      assert.equal(fast, viaLine.kind, where);
      assert.deepEqual(outputs, viaLine.outputs, where);
      const snapshot = agent.snapshot();
      assert.equal(snapshot, driver.snapshot(), where);
      assert.equal(Agent.restore(snapshot).snapshot(), snapshot, `${where}: the snapshot restores`);
      for (const output of outputs) {
        if (output.type === 'call_model') {
          state.run = output.run_id;
          state.step = output.step;
        }
        if (output.type === 'execute_tools') state.call = output.calls[0]?.id;
      }
    }
  }
});

test('a user message reads as written: role "user" on every door, any other role is invalid_input naming the accepted role', () => {
  const text = (t) => [{ type: 'text', text: t }];
  // What the driver prints of a user message, copied back.
  const printer = new Driver();
  const printed = printer.send(JSON.stringify({ type: 'prompt', text: 'hello' }))
    .find((l) => l.type === 'commit').commit.messages[0];
  assert.equal(printed.role, 'user');
  const agent = new Agent();
  const driver = new Driver();
  const run = agent.prompt([printed, { role: 'user', content: text('b') }], { runId: 'r' });
  assert.equal(driverSend(driver, { type: 'prompt', messages: [printed, { role: 'user', content: text('b') }], run_id: 'r' }).kind, 'ok');
  agent.steer({ role: 'user', content: text('s') });
  agent.followUp({ role: 'user', content: text('f'), id: 'f1' });
  agent.handle({ type: 'steer', text: { role: 'user', content: text('s2') } });
  for (const line of [
    { type: 'steer', text: { role: 'user', content: text('s') } },
    { type: 'follow_up', text: { role: 'user', content: text('f'), id: 'f1' } },
    { type: 'steer', text: { role: 'user', content: text('s2') } },
  ]) assert.equal(driverSend(driver, line).kind, 'ok');
  drain(agent);
  assert.equal(agent.snapshot(), driver.snapshot());
  assert.equal(run, 'r');
  // Any other role: invalid_input, nothing changed, on every door.
  const before = agent.snapshot();
  for (const [call, line] of [
    [(a) => a.prompt([{ content: text('a') }, { role: 'assistant', content: text('b') }]), { type: 'prompt', messages: [{ content: text('a') }, { role: 'assistant', content: text('b') }] }],
    [(a) => a.steer({ role: 'system', content: text('s') }), { type: 'steer', text: { role: 'system', content: text('s') } }],
    [(a) => a.followUp({ role: 'tool_result', content: text('f') }), { type: 'follow_up', text: { role: 'tool_result', content: text('f') } }],
  ]) {
    let error;
    try {
      call(agent);
    } catch (e) {
      error = e;
    }
    assert.equal(error?.kind, 'invalid_input', JSON.stringify(line));
    assert.match(error.message, /a user message has role "user" \(or none\)/);
    assert.equal(driverSend(driver, line).kind, 'invalid_input', JSON.stringify(line));
    assert.equal(agent.snapshot(), before);
  }
});

test('nowMs: NaN, Infinity, negatives, fractions and 2^53 are InvalidJsonError on every method; 2^53 - 1 is accepted', () => {
  for (const bad of [NaN, Infinity, -Infinity, -1, 1.5, 2 ** 53, 2 ** 64]) {
    const agent = new Agent();
    const before = agent.snapshot();
    assert.equal(outcome(() => agent.prompt('hi', { nowMs: bad })), 'invalid_json', String(bad));
    assert.equal(outcome(() => agent.handleTimeout(bad)), 'invalid_json', String(bad));
    assert.equal(outcome(() => agent.abort({ nowMs: bad })), 'invalid_json', String(bad));
    assert.equal(agent.snapshot(), before);
  }
  const agent = new Agent();
  const run = agent.prompt('hi', { nowMs: 2 ** 53 - 1 });
  assert.equal(agent.clockMs, 2 ** 53 - 1);
  drain(agent);
  agent.modelDelta(run, 1, 'x', { nowMs: 2 ** 53 - 1 });
  const driver = new Driver();
  const lines = driver.send(JSON.stringify({ type: 'prompt', text: 'hi', now_ms: 2 ** 53 - 1 }));
  assert.equal(lines.find((l) => l.type === 'error'), undefined);
  const past = driver.send('{"type":"prompt","text":"hi","now_ms":9007199254740992}');
  assert.equal(past.find((l) => l.type === 'error').error.kind, 'invalid_json');
});

test('the line cap: every fast path refuses what the line path refuses, at and past 64 MiB', () => {
  const head = JSON.stringify({ type: 'prompt', text: '' }).length;
  const atEdge = 'a'.repeat(MAX_LINE - head);
  const agent = new Agent();
  agent.prompt(atEdge);
  assert.equal(new Driver().send(JSON.stringify({ type: 'prompt', text: atEdge })).find((l) => l.type === 'error'), undefined);
  const past = `${atEdge}a`;
  assert.equal(outcome(() => new Agent().prompt(past)), 'invalid_json');
  assert.equal(outcome(() => new Agent().handle({ type: 'prompt', text: past })), 'invalid_json');
  // Escapes count: a text of control characters is six bytes a character on the line.
  assert.equal(outcome(() => new Agent().prompt('\u0001'.repeat(MAX_LINE / 6 + 1))), 'invalid_json');
  // modelDelta, a text-only modelDone and a text toolDone, each at 70 MiB.
  const huge = 'b'.repeat(70 * 1024 * 1024);
  const waiting = new Agent();
  const id = waiting.prompt('go');
  drain(waiting);
  const before = waiting.snapshot();
  assert.equal(outcome(() => waiting.modelDelta(id, 1, huge)), 'invalid_json');
  assert.equal(outcome(() => waiting.modelDone(id, 1, { content: [{ type: 'text', text: huge }], stop_reason: 'stop' })), 'invalid_json');
  assert.equal(outcome(() => waiting.toolDone(id, 'c', huge)), 'invalid_json');
  assert.equal(waiting.snapshot(), before);
  // A string read after a large one reads whole (the scratch buffer was released).
  const small = new Agent();
  assert.match(small.prompt('after', { runId: 'after-run' }), /after-run/);
});

test('nesting: modelDone takes exactly what the driver takes, and the snapshot restores', () => {
  for (const depth of [MAX_DEPTH - 4, MAX_DEPTH - 3, 100, 126, 200]) {
    const message = { content: [{ type: 'tool_call', id: 'c', name: 't', arguments: nested(depth) }], stop_reason: 'tool_use' };
    const agent = new Agent();
    const run = agent.prompt('go', { runId: 'r' });
    drain(agent);
    const driver = new Driver();
    driver.send(JSON.stringify({ type: 'prompt', text: 'go', run_id: 'r' }));
    const fast = outcome(() => agent.modelDone(run, 1, message));
    const line = driverSend(driver, { type: 'model_done', run_id: run, step: 1, message });
    assert.equal(fast, line.kind, `depth ${depth}`);
    assert.equal(fast, depth <= MAX_DEPTH - 4 ? 'ok' : 'invalid_input', `depth ${depth}`);
    const snapshot = agent.snapshot();
    assert.equal(Agent.restore(snapshot).snapshot(), snapshot);
  }
});

test('lone surrogates: handle(string) and Driver.send(string) refuse them as the driver does', () => {
  const agent = new Agent();
  assert.equal(outcome(() => agent.handle('{"type":"prompt","text":"\ud800"}')), 'invalid_json');
  assert.equal(outcome(() => agent.prompt('\ud800')), 'invalid_json');
  assert.equal(outcome(() => agent.prompt('ok', { runId: '\udc00' })), 'invalid_json');
  assert.equal(agent.isIdle, true);
  const lines = new Driver().send('{"type":"prompt","text":"\ud800"}');
  assert.equal(lines[0].type, 'error');
  assert.equal(lines[0].error.kind, 'invalid_json');
});

test('store limits never wrap: -1, 2^32, NaN and 1.5 are refused', async () => {
  const store = new MemoryStore();
  for (const bad of [-1, 2 ** 32, NaN, Infinity, 1.5]) {
    await assert.rejects(() => store.threads({ limit: bad }), RangeError, String(bad));
  }
  assert.deepEqual(await store.threads({ limit: 0 }), await store.threads({ limit: 0 }));
});

test('a Rust panic outside the guarded paths is InternalError, not an abort', () => {
  const driver = new native.NativeDriver();
  assert.throws(() => driver._panicForTests('boom'), (e) => {
    // The raw error as napi-rs throws it; the package's classes map it to InternalError.
    assert.match(e.message, /boom/);
    return true;
  });
  const agent = new Agent();
  assert.throws(() => agent._native._panicForTests('boom'), /"kind":"internal"/);
  assert.throws(() => agent.prompt('after'), runcore.InternalError, 'the agent is poisoned');
});

test('a second wrapper over one native agent is refused', () => {
  const agent = new Agent();
  assert.throws(() => new Agent(agent._native), TypeError);
  agent.prompt('still fine');
  assert.equal(drain(agent).length > 0, true);
});

test('decoding runs no inherited setter and no poll can reenter it', () => {
  const reference = new Agent();
  reference.prompt('hello', { runId: 'r' });
  const expected = drain(reference);
  const agent = new Agent();
  const other = new Agent();
  other.prompt('other', { runId: 'o' });
  let called = 0;
  const setter = { configurable: true, set() { called++; other.poll(); } };
  Object.defineProperty(Array.prototype, '0', setter);
  Object.defineProperty(Object.prototype, 'text', setter);
  Object.defineProperty(Object.prototype, 'type', setter);
  let outputs;
  try {
    agent.prompt('hello', { runId: 'r' });
    // (Collected by Array.from, which defines elements: the test's own code runs no setter.)
    outputs = Array.from({ length: expected.length + 1 }, () => agent.poll());
  } finally {
    delete Array.prototype[0];
    delete Object.prototype.text;
    delete Object.prototype.type;
  }
  assert.equal(called, 0);
  assert.equal(outputs.pop(), null);
  assert.deepEqual(JSON.parse(JSON.stringify(outputs)), JSON.parse(JSON.stringify(expected)));
  assert.equal(drain(other)[0].type, 'commit');
});

test('a poll whose batch cannot be made a string hands out nothing; the next poll hands it all out', () => {
  const build = () => {
    const agent = new Agent();
    const run = agent.prompt('p'.repeat(3000), { runId: 'r' });
    drain(agent);
    agent.modelDone(run, 1, { content: [{ type: 'text', text: 't'.repeat(3000) }, { type: 'tool_call', id: 'c', name: 'echo', arguments: {} }], stop_reason: 'tool_use' });
    return agent;
  };
  const expected = drain(build());
  assert.equal(expected.at(-1).type, 'execute_tools');
  // Batches stay under the cap: queued outputs together past it still come out, batch by batch.
  native._setTapeTextCapForTests(8000);
  try {
    assert.deepEqual(drain(build()), expected);
    // One output past the cap: poll throws InternalError, nothing is handed out or lost.
    native._setTapeTextCapForTests(0);
    const agent = build();
    native._setTapeTextCapForTests(1000);
    const before = agent.snapshot();
    assert.throws(() => agent.poll(), runcore.InternalError);
    assert.throws(() => agent.poll(), runcore.InternalError);
    assert.equal(agent.snapshot(), before);
    native._setTapeTextCapForTests(0);
    assert.deepEqual(drain(agent), expected);
  } finally {
    native._setTapeTextCapForTests(0);
  }
});

test('an action whose tape cannot be made a string is held, never lost', () => {
  const build = () => {
    const agent = new Agent({ context: 'delta' });
    const run = agent.prompt('go', { runId: 'r' });
    drain(agent);
    agent.modelDone(run, 1, { content: [{ type: 'tool_call', id: 'c', name: 'echo', arguments: { z: 'z'.repeat(3000) } }], stop_reason: 'tool_use' });
    return agent;
  };
  const expected = drain(build());
  assert.equal(expected.at(-1).type, 'execute_tools');
  const agent = build();
  for (let i = 0; i < expected.length - 1; i++) assert.deepEqual(JSON.parse(agent.pollLine()), expected[i]);
  native._setTapeTextCapForTests(1000);
  try {
    assert.throws(() => agent.poll(), runcore.InternalError);
    assert.throws(() => agent.pollAll(), runcore.InternalError);
    assert.throws(() => agent.pollLine(), runcore.InternalError);
  } finally {
    native._setTapeTextCapForTests(0);
  }
  assert.deepEqual(agent.poll(), expected.at(-1));
  assert.equal(agent.poll(), null);
  // The run goes on: the tool's answer is taken and the next call_model is the same as a
  // fresh agent's (the delta context was not advanced by the failed tapes).
  const reference = build();
  drain(reference);
  reference.toolDone('r', 'c', 'done');
  agent.toolDone('r', 'c', 'done');
  assert.deepEqual(drain(agent), drain(reference));
});

test('the scratch buffer size check holds past 2^31 bytes', () => {
  const READ_MAX = 2 ** 30 - 1;
  for (const capacity of [2 ** 31, 2 ** 31 + 8, 2 ** 32 + 8, 2 ** 40]) {
    const [offered, whole] = native._scratchCheckForTests(0, capacity);
    assert.equal(offered, READ_MAX, `${capacity}`);
    assert.equal(whole, 1, 'an empty read into an offered size below 2^31 is the whole string');
  }
  assert.deepEqual(native._scratchCheckForTests(READ_MAX - 6, READ_MAX), [READ_MAX, 1]);
  assert.deepEqual(native._scratchCheckForTests(READ_MAX - 5, READ_MAX), [READ_MAX, 0]);
  assert.deepEqual(native._scratchCheckForTests(250, 256), [256, 1]);
  assert.deepEqual(native._scratchCheckForTests(251, 256), [256, 0]);
});

test('shared memory raced by a worker: Driver.send(Buffer) never takes invalid UTF-8', async () => {
  const shared = new SharedArrayBuffer(4096);
  const bytes = new Uint8Array(shared);
  const line = Buffer.from(JSON.stringify({ type: 'prompt', text: 'a'.repeat(4000) }));
  bytes.set(line);
  const length = line.length;
  const worker = new Worker(`
    const { workerData } = require('node:worker_threads');
    const view = new Uint8Array(workerData.shared);
    const flag = new Int32Array(workerData.stop);
    while (Atomics.load(flag, 0) === 0) {
      for (let i = 30; i < 3900; i += 7) view[i] = view[i] === 0x61 ? 0xff : 0x61;
    }
  `, { eval: true, workerData: { shared, stop: (globalThis.stop = new SharedArrayBuffer(4)) } });
  try {
    for (let i = 0; i < 300; i++) {
      const driver = new Driver();
      const lines = driver.send(Buffer.from(shared, 0, length));
      const error = lines.find((l) => l.type === 'error');
      if (error) {
        assert.equal(error.error.kind, 'invalid_json');
        continue;
      }
      const snapshot = driver.snapshot();
      assert.doesNotMatch(snapshot, /\ufffd/);
      assert.match(JSON.parse(snapshot).agent ? snapshot : snapshot, /"a{4000}"/);
    }
    // A shared tape array for the raw poll: written by copy, never trusted as Rust memory.
    const agent = new Agent();
    agent.prompt('hi');
    const tape = new Uint32Array(new SharedArrayBuffer(4 * 4096));
    const text = native.agentPollAll(agent._native, tape);
    assert.equal(typeof text, 'string');
  } finally {
    Atomics.store(new Int32Array(globalThis.stop), 0, 1);
    await worker.terminate();
  }
});

test('pollLine: a line that cannot be made a string throws InternalError and stays queued', () => {
  const build = () => {
    const agent = new Agent({ context: 'delta' });
    const run = agent.prompt('p'.repeat(3000), { runId: 'r' });
    drain(agent);
    agent.modelDone(run, 1, { content: [{ type: 'text', text: 't'.repeat(3000) }, { type: 'tool_call', id: 'c', name: 'echo', arguments: {} }], stop_reason: 'tool_use' });
    return agent;
  };
  const lines = (agent) => {
    const out = [];
    for (let line = agent.pollLine(); line !== null; line = agent.pollLine()) out.push(line);
    return out;
  };
  const expected = lines(build());
  assert.equal(JSON.parse(expected.at(-1)).type, 'execute_tools');
  assert.ok(expected.length >= 3);
  const agent = build();
  const before = agent.snapshot();
  native._setTapeTextCapForTests(1000);
  try {
    // A queued output (the commit, past the cap) and then, after it, the action.
    assert.throws(() => agent.pollLine(), runcore.InternalError);
    assert.throws(() => agent.pollLine(), runcore.InternalError);
    assert.equal(agent.snapshot(), before, 'nothing was handed out');
  } finally {
    native._setTapeTextCapForTests(0);
  }
  assert.deepEqual(lines(agent), expected);
  // The same through poll(): a failed pollLine leaves the outputs for any kind of poll.
  const other = build();
  native._setTapeTextCapForTests(1000);
  try {
    assert.throws(() => other.pollLine(), runcore.InternalError);
  } finally {
    native._setTapeTextCapForTests(0);
  }
  assert.deepEqual(JSON.parse(JSON.stringify(drain(other))), expected.map((l) => JSON.parse(l)));
});

test('ids with a lone surrogate: every store method and Agent.recover refuse them (InvalidJsonError)', async () => {
  const S = 'a\ud800b';
  const store = new MemoryStore();
  // A thread whose id the surrogate would turn into under U+FFFD replacement.
  const agent = new Agent({ thread_id: 'a\ufffdb' });
  agent.prompt('go');
  for (const output of drain(agent)) if (output.type === 'commit') await store.commit(output);
  assert.equal(await store.threadVersion('a\ufffdb'), 1);
  const claim = { thread_id: S, owner: 'o', epoch: 1, expires_at_ms: 1 };
  const snapshot = { thread_id: S, end: 0, digest: '0'.repeat(64) };
  const calls = {
    committedMessages: () => store.committedMessages(S),
    run: () => store.run(S),
    latestRun: () => store.latestRun(S),
    resumeTicket: () => store.resumeTicket(S),
    runState: () => store.runState(S),
    committedState: () => store.committedState(S),
    threadVersion: () => store.threadVersion(S),
    threadAsOf: () => store.threadAsOf(S, 1),
    fork: () => store.fork(S, 1, 'n'),
    forkNew: () => store.fork('a\ufffdb', 1, S),
    forkedFrom: () => store.forkedFrom(S),
    threads: () => store.threads({ after: S }),
    pendingTickets: () => store.pendingTickets({ after: S }),
    listEvents: () => store.listEvents({ scope: { type: 'thread', id: S } }),
    trace: () => store.trace(S),
    transcriptSnapshot: () => store.transcriptSnapshot(S),
    verifyTranscriptSnapshot: () => store.verifyTranscriptSnapshot(snapshot),
    transcriptSlice: () => store.transcriptSlice(snapshot, [[0, 1]]),
    claimThread: () => store.claimThread({ threadId: S, owner: 'o', requestId: 'q', leaseMs: 1000 }),
    claimOwner: () => store.claimThread({ threadId: 't', owner: S, requestId: 'q', leaseMs: 1000 }),
    claimRequest: () => store.claimThread({ threadId: 't', owner: 'o', requestId: S, leaseMs: 1000 }),
    renewClaim: () => store.renewClaim(claim, 1000),
    releaseClaim: () => store.releaseClaim(claim),
    threadClaim: () => store.threadClaim(S),
    commit: () => store.commit({ type: 'commit', thread_id: S }),
  };
  for (const [name, call] of Object.entries(calls)) {
    await assert.rejects(call, runcore.InvalidJsonError, name);
  }
  assert.throws(() => Agent.recover(store, S), runcore.InvalidJsonError);
  assert.throws(() => Agent.restore(agent.snapshot().replace('"go"', `"${S}"`)), runcore.InvalidJsonError);
  assert.throws(() => new runcore.SqliteStore(`/tmp/${S}.db`), runcore.InvalidJsonError);
  assert.throws(() => new runcore.PostgresStore(`postgres://${S}/x`), runcore.InvalidJsonError);
  assert.throws(() => new runcore.PostgresStore('postgres://localhost:1/x', { schema: S }), runcore.InvalidJsonError);
  assert.equal(Agent.recover(store, 'a\ufffdb').threadId, 'a\ufffdb');
  assert.equal(await store.threadVersion('a\ufffdb'), 1, 'nothing was written');
  assert.equal(await store.thread_claim?.('t'), undefined);
  assert.equal(await store.threadClaim('t'), null);
});

test('the snapshot reader applies its own depth limit: one malformed SnapshotError past 96 levels', () => {
  const MAX_SNAPSHOT_DEPTH = MAX_DEPTH + 32;
  const agent = new Agent();
  agent.prompt('go', { runId: 'r' });
  drain(agent);
  agent.modelDone('r', 1, { content: [{ type: 'tool_call', id: 'c', name: 't', arguments: { x: 1 } }], stop_reason: 'tool_use' });
  const base = agent.snapshot();
  // The transcript's arguments sit at level 7 (envelope, agent, messages, message, content,
  // block, arguments): `levels` levels of arrays inside them make the snapshot this deep.
  const withDepth = (depth) => base.replace('{"x":1}', `{"x":${'['.repeat(depth - 7)}1${']'.repeat(depth - 7)}}`);
  assert.equal(Agent.restore(withDepth(MAX_SNAPSHOT_DEPTH)).threadId, 'thread-1');
  for (const depth of [MAX_SNAPSHOT_DEPTH + 1, 128, 129, 5000]) {
    assert.throws(() => Agent.restore(withDepth(depth)), (e) => {
      assert.equal(e.name, 'SnapshotError', `${depth}`);
      assert.equal(e.code, 'malformed');
      assert.match(e.message, new RegExp(`nests deeper than ${MAX_SNAPSHOT_DEPTH} levels`));
      return true;
    });
  }
});
