// examples/async-host.mjs in provider mode, against a loopback server replaying recorded
// Anthropic, Chat Completions and Responses traffic (providers/tests/fixtures): real HTTP
// (fetch), the codec's body out and its decoder in, a tool call that needs an approval, every
// commit in SQLite; and a host killed with SIGKILL mid-stream that a second process recovers
// from the file and finishes.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';

import { PACKAGE, ROOT, runcore } from './helpers.mjs';

const HOST = join(PACKAGE, 'examples', 'async-host.mjs');
const CASSETTES = {
  anthropic: 'anthropic/turn_termination_matrix/streaming_tool_turn_reports_tool_calls',
  'openai-chat': 'openai/turn_termination_matrix/streaming_tool_turn_reports_tool_calls',
  'openai-responses': 'openai/raw_capture_agent_matrix/responses_streamed_tool_run_records_distinct_raw',
};
const PATHS = { anthropic: '/v1/messages', 'openai-chat': '/v1/chat/completions', 'openai-responses': '/v1/responses' };
const FIRST_TEXT = { anthropic: '"text_delta"', 'openai-chat': '"content":"The"', 'openai-responses': '"response.output_text.delta"' };

function recorded(api) {
  return readFileSync(join(ROOT, 'providers', 'tests', 'fixtures', `${api}.jsonl`), 'utf8')
    .split('\n').filter((l) => l.includes(CASSETTES[api])).map((l) => JSON.parse(l))
    .sort((a, b) => a.index - b.index);
}

/** Serves `responses` one per POST; response `stallAt` only up to `stallAfter` bytes. */
async function replay(responses, { stallAt = -1, stallAfter = 0 } = {}) {
  const requests = [];
  const stalled = [];
  let onStall = () => {};
  const stalledOnce = new Promise((resolve) => { onStall = resolve; });
  const server = createServer((req, res) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      const n = requests.length;
      requests.push({ path: req.url, headers: req.headers, body: JSON.parse(Buffer.concat(chunks).toString()) });
      const exchange = responses[n];
      if (!exchange) { res.writeHead(500).end('no more recorded responses'); return; }
      const data = Buffer.from(exchange.response, 'utf8');
      res.writeHead(exchange.status, { 'content-type': exchange.content_type, 'content-length': data.length });
      if (n === stallAt) {
        res.write(data.subarray(0, stallAfter));
        stalled.push(res);
        onStall();
        return;
      }
      const step = Math.max(1, Math.floor(data.length / 5));
      for (let i = 0; i < data.length; i += step) res.write(data.subarray(i, i + step));
      res.end();
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = /** @type {import('node:net').AddressInfo} */ (server.address());
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    stalledOnce,
    close: () => { for (const res of stalled) res.destroy(); server.closeAllConnections(); server.close(); },
  };
}

function args(db, api, url) {
  return [HOST, db, '--api', api, '--base-url', api === 'anthropic' ? url : `${url}/v1`, '--model', 'test-model'];
}
const ENV = { ...process.env, ANTHROPIC_API_KEY: 'key-a', OPENAI_API_KEY: 'key-o' };

/** Runs the host to its end: [exit code, log lines, last line]. */
async function runHost(db, api, url) {
  const child = spawn(process.execPath, args(db, api, url), { env: ENV });
  let out = '';
  let err = '';
  child.stdout.on('data', (c) => { out += c; });
  child.stderr.on('data', (c) => { err += c; });
  const [code] = await once(child, 'exit');
  const lines = out.trim().split('\n');
  assert.equal(code, 0, err);
  return { log: lines.slice(0, -1).map((l) => JSON.parse(l)), last: lines.at(-1) };
}

function checkRequests(api, requests) {
  for (const request of requests) {
    assert.equal(request.path, PATHS[api]);
    if (api === 'anthropic') assert.equal(request.headers['x-api-key'], 'key-a');
    else assert.equal(request.headers.authorization, 'Bearer key-o');
    assert.equal(request.body.model, 'test-model');
    assert.equal(request.body.stream, true);
  }
  const second = JSON.stringify(requests.at(-1).body);
  assert.ok(second.includes('"add"') && second.includes('"5"'), second);
}

async function checkStore(db) {
  const store = new runcore.SqliteStore(db);
  const run = await store.latestRun('thread-1');
  assert.deepEqual(run.state, { type: 'ended', cause: { type: 'natural_end' } });
  const messages = await store.committedMessages('thread-1');
  assert.deepEqual(messages.map((m) => m.role), ['user', 'assistant', 'tool_result', 'assistant']);
  assert.deepEqual(messages[2].content, [{ type: 'text', text: '5' }]);
  assert.ok(messages[3].content[0].text.trim().length > 0);
  assert.deepEqual(await store.pendingTickets(), []);
}

for (const api of Object.keys(CASSETTES)) {
  test(`${api}: a full run with a tool call and an approval over replayed HTTP`, async (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'runcore-provider-'));
    const server = await replay(recorded(api));
    t.after(() => { server.close(); rmSync(dir, { recursive: true, force: true }); });
    const db = join(dir, 'runs.db');
    const { log, last } = await runHost(db, api, server.url);
    assert.equal(last, 'natural_end');
    const keys = log.map((e) => Object.keys(e)[0]);
    assert.ok(keys.indexOf('awaiting') < keys.indexOf('approve') && keys.indexOf('approve') < keys.indexOf('execute'), keys.join());
    assert.deepEqual(log.filter((e) => 'model_done' in e).map((e) => e.stop_reason), ['tool_use', 'stop']);
    assert.ok(log.some((e) => 'delta' in e));
    assert.equal(server.requests.length, 2);
    checkRequests(api, server.requests);
    await checkStore(db);
  });

  test(`${api}: SIGKILL mid-stream, then the host recovers from SQLite and finishes`, async (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'runcore-provider-kill-'));
    const [first, second] = recorded(api);
    const body = second.response;
    const stallAfter = Buffer.byteLength(body.slice(0, body.indexOf('\n\n', body.indexOf(FIRST_TEXT[api])) + 2));
    const server = await replay([first, second, second], { stallAt: 1, stallAfter });
    t.after(() => { server.close(); rmSync(dir, { recursive: true, force: true }); });
    const db = join(dir, 'runs.db');

    const child = spawn(process.execPath, args(db, api, server.url), { env: ENV });
    const exited = once(child, 'exit');
    const seen = [];
    let stalled = false;
    server.stalledOnce.then(() => { stalled = true; });
    for await (const line of createInterface({ input: child.stdout })) {
      seen.push(JSON.parse(line));
      if ('delta' in seen.at(-1) && stalled) break;
    }
    assert.ok(stalled, JSON.stringify(seen));
    child.kill('SIGKILL');
    const [, signal] = await exited;
    assert.equal(signal, 'SIGKILL');
    assert.equal(seen.filter((e) => 'tool_end' in e).length, 1);

    const store = new runcore.SqliteStore(db);
    assert.deepEqual((await store.latestRun('thread-1')).state, { type: 'running' });
    assert.deepEqual((await store.committedMessages('thread-1')).map((m) => m.role), ['user', 'assistant', 'tool_result']);

    const { log, last } = await runHost(db, api, server.url);
    assert.equal(last, 'natural_end');
    assert.ok('recovered' in log[0] && log[0].active_run);
    const keys = log.map((e) => Object.keys(e)[0]);
    assert.ok(!keys.includes('approve') && !keys.includes('execute'), keys.join());
    assert.deepEqual(log.filter((e) => 'model_done' in e).map((e) => e.stop_reason), ['stop']);
    assert.equal(server.requests.length, 3);
    checkRequests(api, server.requests);
    await checkStore(db);
  });
}
