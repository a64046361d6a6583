// Agent: every error kind throws its class and leaves the agent unchanged; snapshot/restore;
// the input methods give what the driver's lines give.
import { test } from 'node:test';
import assert from 'node:assert/strict';

import { runcore } from './helpers.mjs';

const {
  Agent, AgentError, BusyError, NotAcceptingError, UnexpectedOutcomeError, UnknownCallError,
  DuplicateOutcomeError, ResumeError, InvalidStateError, NotExpiredError, InvalidInputError,
  InvalidJsonError, InternalError, SnapshotError,
} = runcore;

const APPROVAL = {
  tools: {
    delete_file: { description: 'Delete a file', policy: 'require_approval', deadline_after_ms: 5000 },
    search: { description: 'Search' },
  },
};

function drained(agent) {
  return [...agent.drain()];
}

function twoCalls(runId, step) {
  return {
    role: 'assistant',
    content: [
      { type: 'tool_call', id: 'c1', name: 'search', arguments: { q: 'a' } },
      { type: 'tool_call', id: 'c2', name: 'search', arguments: { q: 'b' } },
    ],
    stop_reason: 'tool_use',
  };
}

/** An agent executing two search calls. */
function executing() {
  const agent = new Agent(APPROVAL);
  const run = agent.prompt('find', { nowMs: 1000 });
  drained(agent);
  agent.modelDone(run, 1, twoCalls());
  const outputs = drained(agent);
  assert.ok(outputs.some((o) => o.type === 'execute_tools'));
  return { agent, run };
}

/** An agent awaiting approval of delete_file (deadline 6000). */
function awaiting() {
  const agent = new Agent(APPROVAL);
  const run = agent.prompt('clean up', { nowMs: 1000 });
  drained(agent);
  agent.modelDone(run, 1, {
    content: [{ type: 'tool_call', id: 'd1', name: 'delete_file', arguments: { path: 'x' } }],
    stop_reason: 'tool_use',
  });
  drained(agent);
  assert.ok(agent.currentTicket() !== null);
  return { agent, run };
}

const CASES = [
  ['busy', BusyError, () => {
    const agent = new Agent();
    agent.prompt('one');
    drained(agent);
    return { agent, act: () => agent.prompt('two') };
  }],
  ['not_accepting', NotAcceptingError, () => {
    const agent = new Agent();
    return { agent, act: () => agent.steer('nobody is running') };
  }],
  ['unexpected_outcome', UnexpectedOutcomeError, () => {
    const agent = new Agent();
    const run = agent.prompt('hi');
    drained(agent);
    return { agent, act: () => agent.modelDone(run, 7, { content: [], stop_reason: 'stop' }) };
  }],
  ['unknown_call', UnknownCallError, () => {
    const { agent, run } = executing();
    return { agent, act: () => agent.toolDone(run, 'nope', 'x') };
  }],
  ['duplicate_outcome', DuplicateOutcomeError, () => {
    const { agent, run } = executing();
    agent.toolDone(run, 'c1', 'first');
    drained(agent);
    return { agent, act: () => agent.toolDone(run, 'c1', 'again') };
  }],
  ['resume', ResumeError, () => {
    const { agent, run } = awaiting();
    const ticket = agent.currentTicket();
    const command = {
      correlation_id: 'wrong', run_id: run, thread_id: 'thread-1', snapshot_id: 'default',
      catalog_fingerprint: 'default', result: { type: 'permission', decision: 'allow' },
      now_ms: 2000,
    };
    assert.notEqual(ticket.correlation_id, 'wrong');
    return { agent, act: () => agent.resume(command) };
  }],
  ['invalid_state', InvalidStateError, () => {
    const agent = new Agent();
    return { agent, act: () => agent.continueRun() };
  }],
  ['not_expired', NotExpiredError, () => {
    const { agent } = awaiting();
    return { agent, act: () => agent.expireWait(2000) };
  }],
  ['invalid_input', InvalidInputError, () => {
    const agent = new Agent();
    return { agent, act: () => agent.prompt('hi', { runId: '' }) };
  }],
  ['invalid_json', InvalidJsonError, () => {
    const agent = new Agent();
    const run = agent.prompt('hi');
    drained(agent);
    return { agent, act: () => agent.modelDone(run, 1, { content: 'not blocks' }) };
  }],
];

for (const [kind, Class, setup] of CASES) {
  test(`${kind}: throws ${Class.name} and leaves the agent unchanged`, () => {
    const { agent, act } = setup();
    const before = agent.snapshot();
    assert.throws(act, (e) => {
      assert.ok(e instanceof Class, `${e.name}: ${e.message}`);
      assert.ok(e instanceof AgentError);
      assert.ok(e instanceof Error);
      assert.equal(e.kind, kind);
      assert.equal(e.name, Class.name);
      assert.equal(typeof e.message, 'string');
      assert.ok(e.message.length > 0);
      return true;
    });
    assert.equal(agent.snapshot(), before);
    assert.equal(agent.poll(), null);
  });
}

test('every error kind of SPEC §10 has its class', () => {
  const kinds = CASES.map(([kind]) => kind).concat('internal');
  assert.equal(new Set(kinds).size, 11);
  assert.ok(InternalError.prototype instanceof AgentError);
});

test('an error carries the driver error line\'s own fields', () => {
  const agent = new Agent();
  agent.prompt('one');
  assert.throws(() => agent.prompt('two'), (e) => {
    assert.equal(e.details.active_run, 'thread-1/run-1');
    assert.equal(e.active_run, 'thread-1/run-1');
    return true;
  });
});

test('snapshot and restore round trip, mid-run', () => {
  const { agent, run } = executing();
  const text = agent.snapshot();
  const restored = Agent.restore(text);
  assert.equal(restored.snapshot(), text);
  assert.equal(restored.activeRunId, run);
  // Both finish the same way.
  for (const a of [agent, restored]) {
    a.toolDone(run, 'c1', 'one');
    a.toolDone(run, 'c2', 'two');
  }
  assert.deepEqual(drained(restored), drained(agent));
  assert.equal(restored.snapshot(), agent.snapshot());
});

test('a bad snapshot throws SnapshotError', () => {
  assert.throws(() => Agent.restore('{"nope": 1}'), (e) => e instanceof SnapshotError && e.code === 'malformed');
  assert.throws(() => Agent.restore('{"schema_version": 999999}'), (e) => e instanceof SnapshotError && e.code === 'newer_version');
  assert.throws(() => Agent.restore('{}', { context: 'sideways' }), TypeError);
});

test('a whole run through the input methods', () => {
  const agent = new Agent({ ...APPROVAL, max_steps: 5 });
  const run = agent.prompt('clean up', { nowMs: 1000 });
  assert.equal(agent.activeRunId, run);
  assert.deepEqual(drained(agent).map((o) => o.type), ['commit', 'event', 'call_model']);
  assert.equal(agent.modelRequest().type, 'call_model');
  agent.modelDelta(run, 1, 'thinking');
  assert.equal(drained(agent)[0].event.event.type, 'text_delta');
  agent.modelDone(run, 1, twoCalls());
  const tools = drained(agent).find((o) => o.type === 'execute_tools');
  assert.deepEqual(tools.calls.map((c) => c.id), ['c1', 'c2']);
  assert.equal(agent.modelRequest(), null);
  agent.toolProgress(run, 'c1', 'half');
  agent.steer('also look at b');
  agent.toolDone(run, 'c1', [{ type: 'text', text: 'a found' }], { details: { n: 1 } });
  agent.toolDone(run, 'c2', 'b failed', { isError: true });
  const after = drained(agent);
  assert.ok(after.some((o) => o.type === 'call_model'));
  agent.modelFailed(run, 2, 'overloaded', 'try later');
  const end = drained(agent).find((o) => o.type === 'event' && o.event.type === 'run_end');
  assert.ok(end, 'the run ended');
  assert.ok(agent.isIdle);
  assert.equal(agent.transcript().length >= 4, true);
});

test('continueRun after abandoned tools', () => {
  const { agent, run } = executing();
  agent.abandonTools();
  drained(agent);
  assert.ok(agent.isIdle);
  const again = agent.continueRun();
  assert.notEqual(again, run);
  assert.equal(agent.activeRunId, again);
  agent.pause();
  drained(agent);
});

test('an approval: resumeTicket, timeouts and expiry', () => {
  const { agent } = awaiting();
  // The deadline is 1000 + 5000; the wait is expired from the millisecond after it.
  assert.equal(agent.pollTimeout(), 6001);
  agent.handleTimeout(3000);
  assert.equal(agent.poll(), null);
  agent.resumeTicket({ type: 'permission', decision: 'allow' }, { nowMs: 3000 });
  assert.ok(drained(agent).some((o) => o.type === 'execute_tools'));

  const second = awaiting().agent;
  second.expireWait(7000);
  assert.ok(drained(second).some((o) => o.type === 'event' && o.event.type === 'run_end'));

  const third = awaiting().agent;
  third.cancelWait();
  assert.ok(drained(third).some((o) => o.type === 'event' && o.event.type === 'run_end'));

  const fourth = awaiting().agent;
  fourth.stop('host policy');
  assert.ok(drained(fourth).some((o) => o.type === 'event' && o.event.type === 'run_end'));
});

test('abandonTools ends an executing batch indeterminate', () => {
  const { agent } = executing();
  agent.abandonTools();
  const end = drained(agent).find((o) => o.type === 'event' && o.event.type === 'run_end');
  assert.equal(end.event.result.cause.type, 'indeterminate');
});

test('arguments that are not an input line throw InvalidJsonError', () => {
  const agent = new Agent();
  const run = agent.prompt('hi');
  const before = agent.snapshot();
  assert.throws(() => agent.modelDelta(run, -1, 'x'), InvalidJsonError);
  assert.throws(() => agent.modelDelta(run, 1, 'x', { nowMs: 1.5 }), InvalidJsonError);
  assert.throws(() => agent.prompt(42), InvalidJsonError);
  assert.throws(() => new Agent({ max_stepz: 1 }), InvalidJsonError);
  assert.throws(() => new Agent('not an object'), TypeError);
  assert.equal(agent.snapshot(), before);
});

test('followUp enters after a natural text stop', () => {
  const agent = new Agent();
  const run = agent.prompt('hi');
  drained(agent);
  agent.followUp('and then?');
  agent.modelDone(run, 1, { content: [{ type: 'text', text: 'hello' }], stop_reason: 'stop' });
  const calls = drained(agent).filter((o) => o.type === 'call_model');
  assert.equal(calls.length, 1);
  assert.equal(calls[0].messages.at(-1).content[0].text, 'and then?');
});

test('a Rust panic is an InternalError, and the agent refuses every later call', () => {
  const agent = new Agent();
  agent.prompt('hi');
  assert.throws(() => agent._native._panicForTests('boom'), (e) => {
    // The native error, as index.js turns it into the package's class.
    assert.ok(e.message.startsWith('runcore:'), e.message);
    assert.equal(JSON.parse(e.message.slice('runcore:'.length)).kind, 'internal');
    return true;
  });
  assert.throws(() => agent.poll(), (e) => e instanceof InternalError && e.kind === 'internal' && /unusable/.test(e.message));
  assert.throws(() => agent.snapshot(), InternalError);
  assert.throws(() => agent.steer('still there?'), InternalError);
});

test('pollLine gives the same outputs as poll, as the driver lines', () => {
  const lines = new Agent({ max_steps: 3 });
  const objects = new Agent({ max_steps: 3 });
  const driver = new runcore.Driver({ max_steps: 3 });
  const run = lines.prompt('hi');
  objects.prompt('hi');
  const raw = driver.sendRaw({ type: 'prompt', text: 'hi' }).trimEnd().split('\n').slice(0, -1);
  const got = [];
  for (let line = lines.pollLine(); line !== null; line = lines.pollLine()) got.push(line);
  assert.deepEqual(got, raw);
  assert.deepEqual(got.map((l) => JSON.parse(l)), objects.pollAll());
  assert.equal(lines.pollLine(), null);
  assert.equal(run, 'thread-1/run-1');
});

test('compact: the next call_model carries the summary first, the transcript stays whole', () => {
  const agent = new Agent({ thread_id: 'compacted' });
  const runId = agent.prompt('a long story', { nowMs: 1 });
  let outputs = drained(agent);
  assert.equal(outputs.at(-1).type, 'call_model');
  assert.throws(() => agent.compact('summary', 2), InvalidInputError, 'keep_from past the end');
  agent.compact('the story so far', 1, { nowMs: 2 });
  outputs = drained(agent);
  const types = outputs.map((o) => o.type);
  assert.deepEqual(types.filter((t) => t !== 'event'), ['commit', 'call_model']);
  const call = outputs.at(-1);
  assert.equal(call.run_id, runId);
  assert.equal(call.step, 1);
  assert.equal(call.messages.length, 1, 'the summary, and nothing from before keep_from');
  assert.equal(call.messages[0].content[0].text, 'the story so far');
  const compacted = outputs.find((o) => o.type === 'event' && o.event.event?.type === 'compacted');
  assert.ok(compacted, 'a compacted loop event');
  agent.modelDelta(runId, 1, 'x');
  drained(agent);
  assert.throws(() => agent.compact('again', 1), InvalidStateError, 'not once the answer began');
});

test('toolDone meta: the fast path and the line path commit it on the result; a non-object is refused and changes nothing', () => {
  const results = (agent) => agent.transcript().filter((m) => m.role === 'tool_result');
  // The fast path (one text block) and the line path (blocks and details) give the same messages.
  const { agent, run } = executing();
  agent.toolDone(run, 'c1', 'a found', { meta: { timestamp: 1700000000123, trace: { span: 's' } } });
  agent.toolDone(run, 'c2', [{ type: 'text', text: 'b' }], { details: { n: 2 }, meta: { timestamp: 7 }, nowMs: 2000 });
  const committed = drained(agent).find((o) => o.type === 'commit').commit.messages;
  assert.deepEqual(committed.map((m) => m.meta), [{ timestamp: 1700000000123, trace: { span: 's' } }, { timestamp: 7 }]);
  assert.deepEqual(results(agent).map((m) => m.meta), committed.map((m) => m.meta));

  // Through handle (the line) the same text gives the same result as the fast path.
  const viaLine = executing();
  viaLine.agent.handle({ type: 'tool_done', run_id: viaLine.run, call_id: 'c1', content: 'a found', is_error: false, meta: { timestamp: 1700000000123, trace: { span: 's' } } });
  viaLine.agent.toolDone(viaLine.run, 'c2', 'x', { meta: {} });
  const lineResults = results(viaLine.agent);
  assert.deepEqual(lineResults[0], results(agent)[0]);
  assert.equal('meta' in lineResults[1], false, 'an empty meta is absent');

  for (const bad of [[1], 'x', 5, null, true]) {
    const { agent: a, run: r } = executing();
    const before = a.snapshot();
    assert.throws(() => a.toolDone(r, 'c1', 'ok', { meta: bad }), (e) =>
      e instanceof InvalidJsonError && /`meta` must be a JSON object/.test(e.message), `meta ${JSON.stringify(bad)}`);
    assert.deepEqual(a.snapshot(), before, 'nothing changed');
    assert.deepEqual(drained(a), []);
    a.toolDone(r, 'c1', 'ok', { meta: { fine: true } });
  }
});

/** A prompt, two calls answered (one with meta), a final answer; what `take` polled after each input. */
function twoCallSession(agent, take) {
  const out = [];
  const id = agent.prompt('find', { nowMs: 1000 });
  out.push(...take(agent));
  agent.modelDone(id, 1, twoCalls());
  out.push(...take(agent));
  agent.toolDone(id, 'c1', 'one');
  agent.toolDone(id, 'c2', 'two', { meta: { timestamp: 5 } });
  out.push(...take(agent));
  agent.modelDone(id, 2, { role: 'assistant', content: [{ type: 'text', text: 'done' }], stop_reason: 'stop' });
  out.push(...take(agent));
  return out;
}

/** Every output `pollLine` has now, parsed. */
function lines(agent) {
  const out = [];
  for (let line = agent.pollLine(); line !== null; line = agent.pollLine()) out.push(JSON.parse(line));
  return out;
}

test('setDropCommits (runcore/pi in memory): every way of polling hands out the same outputs but the commits', () => {
  const ways = { poll: drained, pollAll: (a) => a.pollAll(), pollLine: lines };
  for (const [name, take] of Object.entries(ways)) {
    const kept = new Agent(APPROVAL);
    const dropping = new Agent(APPROVAL);
    dropping._native.setDropCommits(true);
    const all = twoCallSession(kept, take);
    const some = twoCallSession(dropping, take);
    assert.ok(all.some((o) => o.type === 'commit'), name);
    assert.deepEqual(some, all.filter((o) => o.type !== 'commit'), name);
    assert.deepEqual(dropping.transcript(), kept.transcript(), name);
    assert.ok(dropping.isIdle, name);
    dropping._native.setDropCommits(false);
    dropping.prompt('again');
    assert.equal(take(dropping)[0].type, 'commit', `${name}: handed out again`);
  }
});

test('setBareCalls (runcore/pi): call_model outputs without their messages, everything else the same, with commits dropped or not, a batch handed out in part', () => {
  // poll() one output at a time, the batch it holds settled after each (an input would do the same).
  const oneByOne = (agent) => {
    const out = [];
    for (let o = agent.poll(); o !== null; o = agent.poll()) {
      out.push(o);
      agent.isIdle;
      agent.transcript();
    }
    return out;
  };
  const ways = { poll: drained, pollAll: (a) => a.pollAll(), pollLine: lines, oneByOne };
  const bare = (o) => (o.type === 'call_model' ? { ...o, messages: [] } : o);
  for (const drop of [false, true]) {
    for (const [name, take] of Object.entries(ways)) {
      const label = `${name}, drop ${drop}`;
      const kept = new Agent({ ...APPROVAL, context: 'delta' });
      const lean = new Agent({ ...APPROVAL, context: 'delta' });
      lean._native.setBareCalls(true);
      lean._native.setDropCommits(drop);
      const all = twoCallSession(kept, take);
      const some = twoCallSession(lean, take);
      assert.ok(all.some((o) => o.type === 'call_model' && o.messages.length > 0), label);
      assert.deepEqual(some, all.filter((o) => !drop || o.type !== 'commit').map(bare), label);
      assert.deepEqual(lean.transcript(), kept.transcript(), label);
      lean._native.setBareCalls(false);
      lean.prompt('again');
      const again = take(lean).find((o) => o.type === 'call_model');
      assert.ok(again.messages.length > 0, `${label}: messages again`);
    }
  }
});

test('modelDone: a message with its role first reads as the same message without it (a nested "role" and a wrong role too)', () => {
  const answer = (message) => {
    const agent = new Agent();
    const run = agent.prompt('hi');
    drained(agent);
    agent.modelDone(run, 1, message);
    drained(agent);
    return agent.transcript()[1];
  };
  const body = {
    content: [{ type: 'text', text: 'done', meta: { sig: 's' } }],
    stop_reason: 'stop',
    model: 'm',
    usage: { input_tokens: 1, output_tokens: 2 },
    meta: { api: 'a', usage: { cost: { total: 0 } }, timestamp: 5 },
  };
  const without = answer(body);
  assert.deepEqual(answer({ role: 'assistant', ...body }), without);
  const nested = { ...body, meta: { ...body.meta, role: 'x' } };
  assert.deepEqual(answer({ role: 'assistant', ...nested }), answer(nested));
  const agent = new Agent();
  const run = agent.prompt('hi');
  drained(agent);
  assert.throws(() => agent.modelDone(run, 1, { role: 'user', ...body }), InvalidJsonError);
});

test('clearQueues withdraws what the run has not taken; setQueueModes applies from the next boundary', () => {
  const agent = new Agent();
  agent.clearQueues();
  assert.deepEqual(drained(agent), [{ type: 'event', event: { type: 'queues_cleared', steering: [], follow_ups: [] } }]);
  const before = agent.snapshot();
  assert.throws(() => agent.setQueueModes({}), InvalidInputError);
  assert.throws(() => agent.setQueueModes({ steeringMode: 'sometimes' }), InvalidJsonError);
  assert.equal(agent.snapshot(), before, 'a refused input changes nothing');
  agent.setQueueModes({ steeringMode: 'one_at_a_time' });
  const run = agent.prompt('task');
  drained(agent);
  agent.steer('withdrawn');
  agent.followUp('withdrawn too');
  agent.clearQueues();
  const [cleared] = drained(agent);
  assert.equal(cleared.event.type, 'queues_cleared');
  assert.equal(cleared.event.run_id, run);
  assert.deepEqual(cleared.event.steering.map((m) => m.content[0].text), ['withdrawn']);
  assert.deepEqual(cleared.event.follow_ups.map((m) => m.content[0].text), ['withdrawn too']);
  agent.steer('one');
  agent.steer('two');
  agent.setQueueModes({ steeringMode: 'all' });
  agent.modelDone(run, 1, { role: 'assistant', content: [{ type: 'text', text: 'done' }], stop_reason: 'stop' });
  const appended = drained(agent)
    .filter((o) => o.type === 'event' && o.event.event?.type === 'message_appended')
    .map((o) => o.event.event.message.content[0].text);
  assert.deepEqual(appended, ['one', 'two']);
});
