// The tape (src/tape.rs, decoded in index.js): poll() and pollAll() give exactly the objects
// JSON.parse makes of the driver's lines (pollLine()), for values that are easy to get wrong:
// integers past 2^53 and 2^64, -0, floats, non-ASCII and astral text, a `__proto__` key,
// integer-like keys, nesting, and a batch longer than the tape array (it grows).
import { test } from 'node:test';
import assert from 'node:assert/strict';

import { runcore } from './helpers.mjs';

const { Agent } = runcore;

const ARGS = '{"__proto__":{"x":1},"big":18446744073709551615,"neg":-9007199254740993,' +
  '"f":0.1,"e":1e308,"z":-0.0,"u":"h\\u00e9llo \\ud83d\\ude00 \\u2028","empty":"",' +
  `"many":[${Array(70000).fill(1).join(',')}],"objects":[${Array(1000).fill('{"a":1}').join(',')}],` +
  '"arr":[1,[2,[3,{}]],null,true,false],"1":"one","k\\u00e9y":"v","long":"' + 'x'.repeat(70000) + '"}';
const CONTENT = '"content":[{"type":"text","text":"résumé ' + '€'.repeat(300) + '"},' +
  `{"type":"tool_call","id":"c1","name":"t","arguments":${ARGS}}]`;

function outputs(take) {
  const agent = new Agent({ tools: { t: { description: 'T' } } });
  const run = agent.prompt('go 😀', { nowMs: 5 });
  const all = [...take(agent)];
  agent.handle(`{"type":"model_done","run_id":"${run}","step":1,"message":{${CONTENT},"stop_reason":"tool_use"}}`);
  all.push(...take(agent));
  agent.toolDone(run, 'c1', 'ok');
  all.push(...take(agent));
  return all;
}

function* lines(agent) {
  for (let line = agent.pollLine(); line !== null; line = agent.pollLine()) yield JSON.parse(line);
}

test('poll() and pollAll() give what JSON.parse makes of the lines', () => {
  const expected = outputs(lines);
  for (const got of [outputs((agent) => agent.drain()), outputs((agent) => agent.pollAll())]) {
    assert.deepStrictEqual(got, expected);
    assert.deepStrictEqual(got.map((o) => JSON.stringify(o)), expected.map((o) => JSON.stringify(o)));
    const args = got.find((o) => o.type === 'execute_tools').calls[0].arguments;
    assert.equal(Object.getPrototypeOf(args), Object.prototype);
    assert.ok(Object.hasOwn(args, '__proto__'));
    assert.ok(Object.is(args.z, -0));
  }
});

test('modelDone() (the message read directly) accepts and rejects as the driver line does', () => {
  const messages = [
    { content: [{ type: 'text', text: 'hi' }], stop_reason: 'stop' },
    { role: 'assistant', content: [{ type: 'text', text: 'hi' }], stop_reason: 'stop' },
    { role: 'user', content: [{ type: 'text', text: 'hi' }], stop_reason: 'stop' },
    { content: 'not blocks' },
    { content: [], stop_reason: 'nope' },
    { content: [{ type: 'text', text: 'hi' }], stop_reason: 'stop', extra: 1 },
    // Text-only answers (built directly, without JSON) and their near misses.
    { stop_reason: 'length', content: [{ text: 'cut', type: 'text' }] },
    { content: [{ type: 'text', text: 'hi' }], stop_reason: 'nope' },
    { content: [{ type: 'text', text: 'hi' }], stop_reason: 7 },
    { content: [{ type: 'text', text: 'lone \ud800 surrogate' }], stop_reason: 'stop' },
    { content: [{ type: 'text', text: 'hi', extra: true }], stop_reason: 'stop' },
    { content: [{ type: 'thinking', text: 'hi' }], stop_reason: 'stop' },
    { content: [{ type: 'text', text: 'hi' }, { type: 'text', text: 'there' }], stop_reason: 'stop' },
    { content: [{ type: 'text', text: 'hi', toJSON: undefined }], stop_reason: 'stop' },
    { content: [{ type: 'text', text: 'hi' }], stop_reason: 'stop', toJSON: () => ({ content: [], stop_reason: 'error' }) },
    Object.assign(Object.create({ inherited: 1 }), { content: [{ type: 'text', text: 'hi' }], stop_reason: 'stop' }),
    { content: [{ type: 'text', text: '' }], stop_reason: 'stop' },
    { content: [{ type: 'text', text: 'résumé 😀 "quoted" \\ \n' }], stop_reason: 'error' },
  ];
  const outcome = (act) => {
    const agent = new Agent();
    const run = agent.prompt('q', { nowMs: 1 });
    [...agent.drain()];
    try {
      act(agent, run);
    } catch (e) {
      return { error: e.name, message: e.message };
    }
    return { outputs: [...agent.drain()] };
  };
  for (const message of messages) {
    const direct = outcome((agent, run) => agent.modelDone(run, 1, message, { nowMs: 2 }));
    const line = outcome((agent, run) => agent.handle({ type: 'model_done', run_id: run, step: 1, message, now_ms: 2 }));
    assert.deepStrictEqual(direct, line, JSON.stringify(message));
  }
});

test('the direct inputs refuse a lone surrogate as the driver line does', () => {
  const outcome = (act) => {
    const agent = new Agent({ tools: { t: { description: 'T' } } });
    try {
      act(agent);
    } catch (e) {
      return { error: e.name, message: e.message, outputs: [...agent.drain()] };
    }
    return { outputs: [...agent.drain()] };
  };
  const lone = 'bad \ud800';
  assert.deepStrictEqual(
    outcome((agent) => agent.prompt(lone, { nowMs: 1 })),
    outcome((agent) => agent.handle({ type: 'prompt', text: lone, now_ms: 1 })),
  );
  const started = (act) => outcome((agent) => {
    const run = agent.prompt('q', { nowMs: 1 });
    [...agent.drain()];
    act(agent, run);
  });
  assert.deepStrictEqual(
    started((agent, run) => agent.modelDelta(run, 1, lone)),
    started((agent, run) => agent.handle({ type: 'model_delta', run_id: run, step: 1, text: lone })),
  );
  const out = started((agent, run) => agent.modelDelta(run, 1, lone));
  assert.equal(out.error, 'InvalidJsonError');
  const calling = (act) => outcome((agent) => {
    const run = agent.prompt('q', { nowMs: 1 });
    [...agent.drain()];
    agent.modelDone(run, 1, {
      content: [{ type: 'tool_call', id: 'c1', name: 't', arguments: {} }],
      stop_reason: 'tool_use',
    });
    [...agent.drain()];
    act(agent, run);
  });
  assert.deepStrictEqual(
    calling((agent, run) => agent.toolDone(run, 'c1', lone)),
    calling((agent, run) => agent.handle({ type: 'tool_done', run_id: run, call_id: 'c1', content: lone })),
  );
});

test('poll() reads a batch ahead, yet every other call sees the agent exactly as polled so far', () => {
  // The same host script on two agents: one polls with poll() (which renders every queued
  // output at once and hands them out one by one), the other with pollLine() (one output per
  // call). After every step both agents must agree: the output, the snapshot, isIdle.
  const make = () => new Agent({ tools: { t: { description: 'T' } } });
  const viaPoll = make();
  const viaLine = make();
  const nextLine = (agent) => {
    const line = agent.pollLine();
    return line === null ? null : JSON.parse(line);
  };
  const same = (what) => {
    assert.deepStrictEqual(viaPoll.snapshot(), viaLine.snapshot(), `snapshot ${what}`);
    assert.equal(viaPoll.isIdle, viaLine.isIdle, `isIdle ${what}`);
  };
  const step = (what, act) => {
    let a;
    let b;
    try { a = act(viaPoll, (agent) => agent.poll()); } catch (e) { a = { threw: e.name }; }
    try { b = act(viaLine, nextLine); } catch (e) { b = { threw: e.name }; }
    assert.deepStrictEqual(a, b, what);
    same(what);
  };
  const take = (n) => (agent, next) => Array.from({ length: n }, () => next(agent));
  step('prompt', (agent) => agent.prompt('go', { nowMs: 1 }));
  step('one output of the batch', take(1));
  step('a steer while the batch is half handed out', (agent) => agent.steer('also', { nowMs: 2 }));
  step('the rest and the call', take(3));
  step('deltas', (agent) => { agent.modelDelta(agent.activeRunId, 1, 'a'); agent.modelDelta(agent.activeRunId, 1, 'b'); });
  step('one delta out', take(1));
  step('an input refused mid-batch', (agent) => agent.toolDone(agent.activeRunId, 'nope', 'x'));
  step('answer with a call', (agent) => agent.modelDone(agent.activeRunId, 1, {
    content: [{ type: 'tool_call', id: 'c1', name: 't', arguments: {} }],
    stop_reason: 'tool_use',
  }));
  step('two outputs', take(2));
  step('pollAll mid-batch', (agent, next) => (next === nextLine
    ? [...(function* () { for (let o = next(agent); o !== null; o = next(agent)) yield o; })()]
    : agent.pollAll()));
  step('the tool', (agent) => agent.toolDone(agent.activeRunId, 'c1', 'ok'));
  step('one output, then abort before the next call is handed out', (agent, next) => {
    const first = next(agent);
    agent.abort({ nowMs: 3 });
    return first;
  });
  step('everything after the abort', take(12));
  step('a second run, drained', (agent, next) => {
    agent.prompt('again', { nowMs: 4 });
    return take(3)(agent, next);
  });
  step('restore mid-batch', (agent) => Agent.restore(agent.snapshot()).snapshot());
});
