// An asynchronous host of runcore in Node.js: a streaming model as an async iterator, two
// concurrent tools with a timeout, steering in the middle of the tool batch, an approval, and
// every commit in a SQLite file before the host acts on anything after it.
//
//   node examples/async-host.mjs [runs.db]
//
// The agent itself is synchronous and does no I/O: the host awaits the world and hands the
// agent what happened (one input method per fact), then acts on what it polls.
import { Agent, SqliteStore } from 'runcore';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

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
