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
