// `providers`: the codecs of runcore-providers (SPEC §13) from Node. `encode` takes the
// `call_model` output as `poll()` gives it; a decoder's inputs go to `agent.handle` as they are;
// bad arguments throw `CodecError`, never crash.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

import { ROOT, runcore } from './helpers.mjs';

const { providers, Agent, CodecError } = runcore;
const FIXTURES = join(ROOT, 'providers', 'tests', 'fixtures');
const CODECS = {
  anthropic: providers.anthropic,
  'openai-chat': providers.openaiChat,
  'openai-responses': providers.openaiResponses,
};
const CASSETTE = {
  anthropic: 'anthropic/turn_termination_matrix/streaming_tool_turn_reports_tool_calls',
  'openai-chat': 'openai/turn_termination_matrix/streaming_tool_turn_reports_tool_calls',
  'openai-responses': 'openai/raw_capture_agent_matrix/responses_streamed_tool_run_records_distinct_raw',
};
const TOOLS = {
  add: {
    description: 'Add x and y together',
    parameters: { type: 'object', properties: { x: { type: 'number' }, y: { type: 'number' } } },
  },
};

function exchanges(api) {
  return readFileSync(join(FIXTURES, `${api}.jsonl`), 'utf8')
    .split('\n').filter((l) => l.trim() !== '').map((l) => JSON.parse(l));
}

function cassette(api) {
  return exchanges(api).filter((e) => e.cassette.includes(CASSETTE[api])).sort((a, b) => a.index - b.index);
}

function callModel(agent) {
  for (const out of agent.drain()) if (out.type === 'call_model') return out;
  throw new Error('no call_model');
}

for (const [api, codec] of Object.entries(CODECS)) {
  test(`${api}: a recorded tool turn drives the agent`, () => {
    const agent = new Agent({ system_prompt: 'Use the tool.', tools: TOOLS });
    const runId = agent.prompt('Calculate 2 + 3.');
    const request = callModel(agent);
    const { body, left_out } = codec.encode(request, { model: 'm', max_tokens: 100 });
    assert.deepEqual(left_out, []);
    assert.equal(body.stream, true);
    assert.deepEqual(body.tools.map((t) => t.name ?? t.function.name), ['add']);

    const recorded = Buffer.from(cassette(api)[0].response, 'utf8');
    const decoder = new codec.Decoder(runId, request.step);
    assert.equal(decoder.api, api);
    const inputs = [];
    for (let i = 0; i < recorded.length; i += 5) inputs.push(...decoder.feed(recorded.subarray(i, i + 5)));
    inputs.push(...decoder.finish());
    assert.equal(decoder.formatError, null);
    const done = inputs.at(-1);
    assert.equal(done.type, 'model_done');
    assert.equal(done.message.stop_reason, 'tool_use');
    assert.deepEqual(done.message.meta, { codec: { api } });
    const [call] = done.message.content.filter((b) => b.type === 'tool_call');
    assert.deepEqual([call.name, call.arguments], ['add', { x: 2, y: 3 }]);
    for (const line of inputs) agent.handle(line);
    const batch = agent.pollAll().find((o) => o.type === 'execute_tools');
    assert.deepEqual(batch.calls.map((c) => c.id), [call.id]);
    agent.toolDone(runId, call.id, '5');
    const second = JSON.stringify(codec.encode(callModel(agent), { model: 'm' }).body);
    assert.ok(second.includes(call.id) && second.includes('"5"'));
  });
}

test('a cut stream is incomplete_stream; an error status a typed failure', () => {
  const body = Buffer.from(cassette('anthropic')[1].response);
  const decoder = new providers.anthropic.Decoder('r', 2);
  const inputs = [...decoder.feed(body.subarray(0, body.length >> 1)), ...decoder.finish()];
  assert.equal(inputs.at(-1).code, 'incomplete_stream');
  assert.equal(inputs.filter((i) => i.type !== 'model_delta').length, 1);
  const limited = new providers.openaiChat.Decoder('r', 1, 429);
  assert.deepEqual(limited.feed('{"error":{"message":"slow down"}}'), []);
  const [failed] = limited.finish();
  assert.deepEqual([failed.type, failed.code], ['model_failed', 'rate_limited']);
});

test('bad arguments throw CodecError with a clear message', () => {
  const agent = new Agent();
  agent.prompt('hi');
  const request = callModel(agent);
  const codeOf = (f) => {
    try { f(); } catch (e) { assert.ok(e instanceof CodecError, String(e)); return [e.code, e.message]; }
    throw new Error('did not throw');
  };
  assert.match(codeOf(() => providers.anthropic.encode(request, {})).join(' '), /^options .*model/);
  assert.match(codeOf(() => providers.anthropic.encode(request)).join(' '), /^options /);
  assert.match(codeOf(() => providers.openaiChat.encode(request, { model: 'm', temprature: 1 }))[1], /unknown field/);
  assert.match(codeOf(() => providers.openaiResponses.encode(request, { model: 'm', extra: { input: [] } }))[1], /may not replace/);
  assert.equal(codeOf(() => providers.anthropic.encode({ type: 'call_model', base: 2, messages: [] }, { model: 'm' }))[0], 'call_model');
  assert.equal(codeOf(() => providers.anthropic.encode({ messages: 5n }, { model: 'm' }))[0], 'call_model');
  assert.match(codeOf(() => new providers.anthropic.Decoder('r', 1, 70000))[1], /status/);
  assert.match(codeOf(() => new providers.anthropic.Decoder('r', -1))[1], /step/);
  const decoder = new providers.anthropic.Decoder('r', 1);
  decoder.finish();
  assert.equal(codeOf(() => decoder.feed(Buffer.from('x')))[0], 'finished');
  assert.equal(codeOf(() => decoder.finish())[0], 'finished');
  assert.throws(() => new providers.anthropic.Decoder('r', 1).feed(42), TypeError);
});

test('every recorded body decodes to exactly one outcome, which the agent takes', () => {
  for (const [api, codec] of Object.entries(CODECS)) {
    for (const exchange of exchanges(api)) {
      const agent = new Agent();
      const runId = agent.prompt('hi');
      const { step } = callModel(agent);
      const decoder = new codec.Decoder(runId, step, exchange.status);
      const inputs = [...decoder.feed(Buffer.from(exchange.response)), ...decoder.finish()];
      const ends = inputs.filter((i) => i.type !== 'model_delta').map((i) => i.type);
      assert.ok(ends.length === 1 && ['model_done', 'model_failed'].includes(ends[0]), exchange.cassette);
      for (const line of inputs) agent.handle(line);
      assert.equal(agent.modelRequest(), null);
    }
  }
});

test('any bytes with any status never crash the decoder', () => {
  let seed = 33;
  const next = (n) => { seed = (seed * 1103515245 + 12345) % 2147483648; return seed % n; };
  const pieces = ['data: ', 'event: ', '\n\n', '{', '}', '[DONE]', '"type":', '"message_start"', '"choices":[', '\r\n']
    .map((p) => Buffer.from(p)).concat([Buffer.from([0xff, 0xfe]), Buffer.from([0])]);
  const codecs = Object.values(CODECS);
  for (let c = 0; c < 300; c += 1) {
    const parts = [];
    for (let i = next(40); i > 0; i -= 1) parts.push(next(10) < 7 ? pieces[next(pieces.length)] : Buffer.from([next(256)]));
    const body = Buffer.concat(parts);
    const status = [undefined, 200, 400, 429, 500, 529][next(6)];
    const decoder = new codecs[next(3)].Decoder('r', 1, status);
    const inputs = [];
    for (let i = 0; i < body.length; i += 3) inputs.push(...decoder.feed(body.subarray(i, i + 3)));
    inputs.push(...decoder.finish());
    const ends = inputs.filter((i) => i.type !== 'model_delta').map((i) => i.type);
    assert.ok(ends.length === 1, `case ${c}`);
  }
});

test('a decoder given the response headers carries retry_after_ms on model_failed', () => {
  const body = '{"error":{"code":"rate_limit_exceeded","message":"slow down"}}';
  const failed = (options) => {
    const decoder = new providers.openaiChat.Decoder('r', 1, 429, options);
    return [...decoder.feed(body), ...decoder.finish()].at(-1);
  };
  assert.equal(failed().retry_after_ms, undefined);
  assert.equal(failed({}).retry_after_ms, undefined);
  assert.equal(failed({ headers: { 'retry-after': '3' } }).retry_after_ms, 3000);
  assert.equal(failed({ headers: new Headers({ 'retry-after-ms': '1500' }) }).retry_after_ms, 1500);
  assert.equal(failed({ headers: new Map([['Retry-After', '2']]) }).retry_after_ms, 2000);
  assert.equal(
    failed({ headers: [['x-ratelimit-remaining-tokens', '0'], ['x-ratelimit-reset-tokens', '6m0s']] })
      .retry_after_ms,
    360000,
  );
  const date = { 'retry-after': 'Wed, 21 Oct 2026 07:28:30 GMT' };
  assert.equal(failed({ headers: date, nowMs: 1792567700000 }).retry_after_ms, 10000);
  assert.equal(
    failed({ headers: { ...date, date: 'Wed, 21 Oct 2026 07:28:00 GMT' } }).retry_after_ms,
    30000,
  );
  // The line goes to the agent as it is.
  const agent = new Agent();
  agent.prompt('hi');
  const call = callModel(agent);
  const decoder = new providers.openaiChat.Decoder(call.run_id, call.step, 429, {
    headers: { 'retry-after': '3' },
  });
  for (const input of [...decoder.feed(body), ...decoder.finish()]) agent.handle(input);
  const other = new Agent();
  other.prompt('hi');
  const next = callModel(other);
  other.modelFailed(next.run_id, next.step, 'rate_limited', 'slow down', { retryAfterMs: 3000 });
  assert.throws(() => new providers.openaiChat.Decoder('r', 1, 429, { headers: 5 }), TypeError);
  assert.throws(() => new providers.openaiChat.Decoder('r', 1, 429, { headers: [['a']] }), TypeError);
  assert.throws(() => new providers.openaiChat.Decoder('r', 1, 429, { nowMs: 'x' }), TypeError);
});
