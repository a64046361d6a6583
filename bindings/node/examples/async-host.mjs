// An asynchronous host of runcore in Node.js: a streaming model as an async iterator, two
// concurrent tools with a timeout, steering in the middle of the tool batch, an approval, and
// every commit in a SQLite file before the host acts on anything after it.
//
//   node examples/async-host.mjs [runs.db]
//
// Provider mode talks to a real model over HTTP (built-in fetch) instead of the scripted one:
//
//   node examples/async-host.mjs runs.db --api anthropic --base-url https://api.anthropic.com
//   node examples/async-host.mjs runs.db --api openai-chat --base-url https://api.openai.com/v1
//
// (also `--api openai-responses`; `--model M`, `--prompt TEXT`; the key from ANTHROPIC_API_KEY
// or OPENAI_API_KEY). The codec (`providers`) makes the request body and decodes the streamed
// response into the agent's inputs; the one tool (`add`) needs an approval (a scripted person
// gives it); every commit goes to SQLite first, so a killed host run again with the same
// command recovers the run from the file and finishes it.
//
// The agent itself is synchronous and does no I/O: the host awaits the world and hands the
// agent what happened (one input method per fact), then acts on what it polls.
import { Agent, SqliteStore, providers } from 'runcore';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';

// ----- provider mode: a real model over HTTP ------------------------------------------------

/** @type {import('runcore').AgentConfig} */
const PROVIDER_CONFIG = {
  system_prompt: 'Use the provided tool to answer arithmetic questions.',
  tools: {
    add: {
      description: 'Add x and y together',
      parameters: {
        type: 'object',
        properties: { x: { type: 'number' }, y: { type: 'number' } },
        required: ['x', 'y'],
      },
      policy: 'require_approval',
      deadline_after_ms: 600_000,
    },
  },
};

/**
 * Per API: the codec, the path under --base-url (base URLs as the vendors' SDKs take them), the
 * environment variable of the key, and a small default model.
 */
const APIS = {
  anthropic: { codec: providers.anthropic, path: '/v1/messages', key: 'ANTHROPIC_API_KEY', model: 'claude-haiku-4-5' },
  'openai-chat': { codec: providers.openaiChat, path: '/chat/completions', key: 'OPENAI_API_KEY', model: 'gpt-4o-mini' },
  'openai-responses': { codec: providers.openaiResponses, path: '/responses', key: 'OPENAI_API_KEY', model: 'gpt-4.1-nano' },
};

/** @param {{ [key: string]: unknown }} line */
function log(line) {
  console.log(JSON.stringify(line));
}

/**
 * One model call: the codec's body POSTed with fetch, the streamed response fed to the codec's
 * decoder chunk by chunk, each input handed to the agent as it comes. A broken connection is
 * the decoder's business too: `finish()` on a body cut short yields `model_failed`
 * (`incomplete_stream`).
 * @param {Agent} agent
 * @param {import('runcore').CallModelOutput} request
 * @param {{ api: keyof typeof APIS, url: string, model: string }} target
 */
async function callModel(agent, request, target) {
  const { codec, key } = APIS[target.api];
  const encoded = codec.encode(request, { model: target.model, max_tokens: 1024 });
  for (const leftOut of encoded.left_out) log({ left_out: leftOut });
  const secret = process.env[key] ?? '';
  /** @type {Record<string, string>} */
  const headers = target.api === 'anthropic'
    ? { 'content-type': 'application/json', 'x-api-key': secret, 'anthropic-version': '2023-06-01' }
    : { 'content-type': 'application/json', authorization: `Bearer ${secret}` };
  let decoder = new codec.Decoder(request.run_id, request.step);
  /** @param {import('runcore').DecodedInput[]} inputs */
  const hand = (inputs) => {
    for (const input of inputs) {
      if (input.type === 'model_delta') log({ delta: input.text });
      else if (input.type === 'model_done') log({ model_done: input.step, stop_reason: input.message.stop_reason });
      else log({ model_failed: input.step, code: input.code });
      agent.handle({ ...input, now_ms: Date.now() });
    }
  };
  try {
    const response = await fetch(target.url, { method: 'POST', headers, body: JSON.stringify(encoded.body) });
    decoder = new codec.Decoder(request.run_id, request.step, response.status);
    log({ model_call: request.step, status: response.status });
    if (response.body !== null) {
      for await (const chunk of response.body) hand(decoder.feed(chunk));
    }
  } catch (error) {
    log({ transport_error: error instanceof Error ? error.name : String(error) });
  }
  hand(decoder.finish());
}

/**
 * The provider-mode host.
 * @param {string[]} argv
 */
async function providerMain(argv) {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      api: { type: 'string' },
      'base-url': { type: 'string' },
      model: { type: 'string' },
      prompt: { type: 'string', default: 'Calculate 2 + 3.' },
    },
  });
  const api = values.api;
  if (api === undefined || !(api in APIS) || values['base-url'] === undefined) {
    throw new Error('provider mode needs --api anthropic|openai-chat|openai-responses and --base-url URL');
  }
  const name = /** @type {keyof typeof APIS} */ (api);
  const target = {
    api: name,
    url: values['base-url'].replace(/\/+$/, '') + APIS[name].path,
    model: values.model ?? APIS[name].model,
  };
  const dbPath = positionals[0] ?? join(mkdtempSync(join(tmpdir(), 'runcore-provider-')), 'runs.db');
  const store = new SqliteStore(dbPath);
  const thread = 'thread-1';
  /** @type {Agent} */
  let agent;
  if ((await store.threadVersion(thread)) === 0) {
    agent = new Agent(PROVIDER_CONFIG);
    const runId = agent.prompt(values.prompt ?? '', { nowMs: Date.now() });
    log({ prompt: values.prompt, run_id: runId });
  } else {
    // A process before this one committed part of the run: rebuild the agent from the file; it
    // asks again for whatever was in flight (a model call cut mid-stream is made anew).
    agent = Agent.recover(store, thread, 'replay', { config: PROVIDER_CONFIG });
    log({ recovered: await store.threadVersion(thread), active_run: agent.activeRunId });
    if (agent.activeRunId === null) {
      const latest = await store.latestRun(thread);
      const state = /** @type {{ cause: { type: string } }} */ (/** @type {unknown} */ (latest?.state));
      console.log(state.cause.type);
      return;
    }
  }
  /** @type {{ [key: string]: import('runcore').Json } | null} */
  let result = null;
  for (;;) {
    const output = agent.poll();
    if (output === null) {
      const ticket = agent.currentTicket();
      if (ticket !== null) {
        log({ awaiting: 'add' });
        await sleep(5); // a (scripted) person reads the request and allows it
        log({ approve: 'add' });
        agent.resumeTicket({ type: 'permission', decision: 'allow' }, { nowMs: Date.now() });
        continue;
      }
      if (agent.isIdle) break;
      throw new Error('nothing to poll, no ticket, and the run is not over');
    }
    switch (output.type) {
      case 'commit':
        await store.commit(output); // durable before anything after it is acted on
        break;
      case 'call_model':
        await callModel(agent, output, target);
        break;
      case 'execute_tools':
        log({ execute: output.calls.map((c) => c.name) });
        for (const call of output.calls) {
          const args = /** @type {{ x?: unknown, y?: unknown }} */ (call.arguments);
          const ok = typeof args?.x === 'number' && typeof args?.y === 'number';
          const text = ok ? String(Number(args.x) + Number(args.y)) : 'bad arguments: x and y must be numbers';
          agent.toolDone(output.run_id, call.id, text, { isError: !ok, nowMs: Date.now() });
        }
        break;
      case 'event':
        if (output.event.type === 'loop') {
          const inner = /** @type {{ type: string, call_id?: string, is_error?: boolean }} */ (output.event.event);
          if (inner.type === 'tool_end') log({ tool_end: inner.call_id, is_error: inner.is_error });
        }
        if (output.event.type === 'run_end') {
          result = /** @type {{ [key: string]: import('runcore').Json }} */ (output.event.result);
          log({ run_end: result.cause });
        }
        break;
    }
  }
  const messages = await store.committedMessages(thread);
  log({ committed_messages: messages.length });
  const cause = /** @type {{ type: string }} */ (result?.cause);
  console.log(cause.type);
}

if (process.argv.includes('--api')) {
  await providerMain(process.argv.slice(2));
  process.exit(0);
}

// ----- the scripted host ----------------------------------------------------------------------

const path = process.argv[2] ?? join(mkdtempSync(join(tmpdir(), 'runcore-async-')), 'runs.db');
const store = new SqliteStore(path);
const agent = new Agent({
  thread_id: 'async-demo',
  tools: {
    search: { description: 'Search the web' },
    fetch_page: { description: 'Fetch a page (slow)' },
    delete_file: { description: 'Delete a file', policy: 'require_approval', deadline_after_ms: 60000 },
  },
});
const TOOL_TIMEOUT_MS = 200;

/** @typedef {import('runcore').AssistantMessage} AssistantMessage */

/**
 * A scripted model that streams: text chunks, then the whole message.
 * @param {import('runcore').CallModelOutput} request
 * @returns {AsyncGenerator<{ delta: string } | { done: AssistantMessage }>}
 */
async function* streamModel(request) {
  const said = ['Let me ', 'look that ', 'up.'];
  for (const delta of said) {
    await sleep(2);
    yield { delta };
  }
  const text = said.join('');
  /** @type {AssistantMessage} */
  let message;
  if (request.step === 1) {
    message = {
      content: [
        { type: 'text', text },
        { type: 'tool_call', id: 'search-1', name: 'search', arguments: { q: 'runcore' } },
        { type: 'tool_call', id: 'fetch-1', name: 'fetch_page', arguments: { url: 'https://example.test/' } },
      ],
      stop_reason: 'tool_use',
    };
  } else if (request.step === 2) {
    message = {
      content: [{ type: 'tool_call', id: 'delete-1', name: 'delete_file', arguments: { path: 'old.txt' } }],
      stop_reason: 'tool_use',
    };
  } else {
    message = { content: [{ type: 'text', text: 'Done: searched, and old.txt is deleted.' }], stop_reason: 'stop' };
  }
  yield { done: message };
}

/**
 * Runs one tool; `fetch_page` takes far longer than the timeout.
 * @param {import('runcore').ToolCall} call
 * @param {AbortSignal} signal
 */
async function runTool(call, signal) {
  const ms = call.name === 'fetch_page' ? 10_000 : 20;
  await sleep(ms, undefined, { signal });
  return `${call.name} ok`;
}

/**
 * A tool's result within TOOL_TIMEOUT_MS, or an error result when it takes longer.
 * @param {import('runcore').ToolCall} call
 * @returns {Promise<{ text: string, isError: boolean }>}
 */
async function withTimeout(call) {
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(), TOOL_TIMEOUT_MS);
  try {
    return { text: await runTool(call, controller.signal), isError: false };
  } catch {
    return { text: `${call.name} timed out after ${TOOL_TIMEOUT_MS} ms`, isError: true };
  } finally {
    clearTimeout(timer);
  }
}

/**
 * A person approving (after a short wait).
 * @param {{ [key: string]: import('runcore').Json }} ticket
 */
async function askForApproval(ticket) {
  await sleep(5);
  return { type: 'permission', decision: 'allow', note: `approved ${ticket.correlation_id}` };
}

let commits = 0;
/** @type {import('runcore').EventOutput['event'] | null} */
let runEnd = null;

agent.prompt('Find runcore, then delete old.txt', { nowMs: Date.now() });
for (;;) {
  const output = agent.poll();
  if (output === null) {
    const ticket = agent.currentTicket();
    if (ticket !== null) {
      // The run waits on the approval: ask, and answer the ticket.
      agent.resumeTicket(await askForApproval(ticket), { nowMs: Date.now() });
      continue;
    }
    if (agent.isIdle) break;
    throw new Error('nothing to poll, no ticket, and the run is not over');
  }
  switch (output.type) {
    case 'commit':
      await store.commit(output); // durable before anything after it is acted on
      commits += 1;
      break;
    case 'call_model':
      for await (const chunk of streamModel(output)) {
        if ('delta' in chunk) agent.modelDelta(output.run_id, output.step, chunk.delta);
        else agent.modelDone(output.run_id, output.step, chunk.done);
      }
      break;
    case 'execute_tools': {
      // Both tools at once; each result goes in as it arrives.
      const batch = Promise.all(output.calls.map(async (call) => {
        const { text, isError } = await withTimeout(call);
        agent.toolDone(output.run_id, call.id, text, { isError });
      }));
      // Steering while the batch runs: it enters at the next complete boundary.
      if (output.step === 1) agent.steer('Also: prefer the official docs.');
      await batch;
      break;
    }
    case 'event':
      if (output.event.type === 'run_end') runEnd = output.event;
      break;
  }
}

const summary = {
  path,
  commits,
  stored: await store.threadVersion('async-demo'),
  run_end: runEnd,
  roles: (await store.committedMessages('async-demo')).map((m) => m.role),
};
console.log(JSON.stringify(summary));
