// Shared by the pi*.test.mjs tests: a scripted stream function in pi-ai's shapes (no pi-ai
// needed), pi messages and tools.
import { createRequire } from 'node:module';
import { PACKAGE } from './helpers.mjs';

/** `runcore/pi`, as a host imports it. */
export const pi = createRequire(import.meta.url)(`${PACKAGE}/pi.js`);

export const MODEL = {
  id: 'scripted',
  name: 'scripted',
  api: 'scripted-api',
  provider: 'scripted',
  baseUrl: '',
  reasoning: false,
  input: ['text'],
  cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 },
  contextWindow: 1000,
  maxTokens: 100,
};

export function usage() {
  return { input: 3, output: 5, cacheRead: 1, cacheWrite: 0, totalTokens: 8, cost: { input: 0.5, output: 0.25, cacheRead: 0, cacheWrite: 0, total: 0.75 } };
}

/** A pi assistant message. */
export function assistant(content, stopReason = 'stop', extra = {}) {
  return {
    role: 'assistant',
    content: typeof content === 'string' ? [{ type: 'text', text: content }] : content,
    api: MODEL.api,
    provider: MODEL.provider,
    model: MODEL.id,
    usage: usage(),
    stopReason,
    timestamp: 1700000000000,
    ...extra,
  };
}

export function user(text, timestamp = 1700000000001) {
  return { role: 'user', content: text, timestamp };
}

export function toolCall(id, name, args) {
  return { type: 'toolCall', id, name, arguments: args };
}

/**
 * A stream of pi-ai events for `message`: `start`, one `text_delta` per text block, `done`.
 * With `waitForAbort`, it starts and then waits until the signal aborts, ending `aborted`.
 */
export function stream(message, { signal, waitForAbort = false } = {}) {
  let final;
  const events = async function* events() {
    if (waitForAbort) {
      yield { type: 'start', partial: assistant([]) };
      await new Promise((resolve) => {
        if (signal.aborted) resolve();
        else signal.addEventListener('abort', resolve, { once: true });
      });
      final = assistant([], 'aborted', { errorMessage: 'Request was aborted' });
      yield { type: 'error', reason: 'aborted', error: final };
      return;
    }
    const partial = { ...message, content: [] };
    yield { type: 'start', partial };
    for (const block of message.content) {
      if (block.type === 'text') {
        partial.content = [...partial.content, block];
        yield { type: 'text_delta', contentIndex: partial.content.length - 1, delta: block.text, partial };
      }
    }
    final = message;
    yield { type: 'done', reason: message.stopReason, message };
  };
  const iterator = events();
  return {
    [Symbol.asyncIterator]: () => iterator,
    result: async () => final,
  };
}

/** A stream function answering with `answers` in order (a function gets the context). */
export function scripted(answers) {
  const calls = [];
  const fn = (model, context, options) => {
    calls.push({ model, context: structuredClone(context.messages), options });
    const next = answers[Math.min(calls.length - 1, answers.length - 1)];
    if (next === 'wait') return stream(null, { signal: options.signal, waitForAbort: true });
    return stream(typeof next === 'function' ? next(context) : next);
  };
  fn.calls = calls;
  return fn;
}

/** A tool that records its calls and answers after `delayMs`. */
export function echoTool(executed = [], { delayMs = 0, name = 'echo', terminate } = {}) {
  return {
    name,
    label: name,
    description: 'Echoes its value',
    parameters: { type: 'object', properties: { value: { type: 'string' } }, required: ['value'] },
    async execute(id, params, signal) {
      executed.push(params.value);
      if (delayMs > 0) await new Promise((resolve) => setTimeout(resolve, delayMs));
      return { content: [{ type: 'text', text: `echo ${params.value}` }], details: { value: params.value }, terminate };
    },
  };
}

/** Records events by type. */
export function record(agent) {
  const events = [];
  agent.subscribe((event) => {
    events.push(event);
  });
  return events;
}
