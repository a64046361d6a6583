// `store.trace(threadId)` (SPEC §14): the thread's spans derived from its commits, as the
// OTLP/JSON export body, on every store.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { runcore } from './helpers.mjs';

const { Agent, MemoryStore, SqliteStore } = runcore;

/** One run: a tool call, its result, an answer; every commit into `store`. */
async function session(store) {
  const agent = new Agent({ thread_id: 't', tools: { weather: { description: 'Weather' } } });
  const run = agent.prompt('Weather?', { nowMs: 1000 });
  for (const output of agent.drain()) {
    if (output.type === 'commit') await store.commit(output);
    if (output.type === 'call_model' && output.step === 1) {
      agent.modelDone(run, 1, {
        content: [{ type: 'tool_call', id: 'c1', name: 'weather', arguments: { city: 'Paris' } }],
        stop_reason: 'tool_use', model: 'm-1',
      }, { nowMs: 1100 });
    } else if (output.type === 'execute_tools') {
      agent.toolDone(run, 'c1', '18 C', { nowMs: 1400 });
    } else if (output.type === 'call_model') {
      agent.modelDone(run, output.step, { content: [{ type: 'text', text: 'Sunny.' }], stop_reason: 'stop', model: 'm-1' }, { nowMs: 1500 });
    }
  }
}

for (const [name, open] of [
  ['memory', () => new MemoryStore()],
  ['sqlite', (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'runcore-node-trace-'));
    t.after(() => rmSync(dir, { recursive: true, force: true }));
    return new SqliteStore(join(dir, 'runs.db'));
  }],
]) {
  test(`trace returns the OTLP/JSON of the thread's spans (${name})`, async (t) => {
    const store = open(t);
    await session(store);
    const body = await store.trace('t');
    const spans = body.resourceSpans[0].scopeSpans[0].spans;
    assert.deepEqual(spans.map((s) => s.name), ['invoke_agent', 'chat m-1', 'execute_tool weather', 'chat m-1']);
    assert.equal(spans[0].parentSpanId, undefined);
    for (const span of spans.slice(1)) assert.equal(span.parentSpanId, spans[0].spanId);
    assert.equal(spans[1].kind, 3);
    assert.equal(spans[0].startTimeUnixNano, '1000000000');
    assert.equal(spans[0].endTimeUnixNano, '1500000000');
    assert.deepEqual(await store.trace('t'), body, 'the same spans twice');
    const withContent = await store.trace('t', { content: true });
    const chat = withContent.resourceSpans[0].scopeSpans[0].spans[1];
    assert.ok(chat.attributes.some((a) => a.key === 'gen_ai.input.messages'));
    assert.ok(!spans[1].attributes.some((a) => a.key === 'gen_ai.input.messages'));
    assert.deepEqual((await store.trace('nobody')).resourceSpans[0].scopeSpans[0].spans, []);
  });
}
