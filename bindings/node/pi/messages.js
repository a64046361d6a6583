'use strict';
// pi's messages as runcore's (SPEC §2, §2.1) and back. What runcore has no field for (pi's
// `timestamp`, `api`, `provider`, its `usage` with cost, block signatures, an app's own message)
// rides in `meta`, which the core keeps and returns exactly; `fromCore(toCore(m))` is `m`.

const EMPTY_USAGE = {
  input: 0,
  output: 0,
  cacheRead: 0,
  cacheWrite: 0,
  totalTokens: 0,
  cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 },
};

const DEFAULT_MODEL = {
  id: 'unknown',
  name: 'unknown',
  api: 'unknown',
  provider: 'unknown',
  baseUrl: '',
  reasoning: false,
  input: [],
  cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 },
  contextWindow: 0,
  maxTokens: 0,
};

const STOP_TO_CORE = { stop: 'stop', length: 'length', toolUse: 'tool_use', error: 'error', aborted: 'aborted' };
const STOP_FROM_CORE = { stop: 'stop', length: 'length', tool_use: 'toolUse', error: 'error', aborted: 'aborted' };

/** The fields of `object` other than `known`, as a JSON object; `undefined` when none. */
function rest(object, known) {
  let meta;
  for (const key of Object.keys(object)) {
    if (known.includes(key) || object[key] === undefined) continue;
    meta ??= {};
    meta[key] = object[key];
  }
  return meta;
}

function count(n) {
  return typeof n === 'number' && Number.isFinite(n) && n > 0 ? Math.round(n) : 0;
}

function userBlockToCore(block) {
  if (block.type === 'image') return { type: 'image', data: block.data, mime_type: block.mimeType };
  return { type: 'text', text: block.text };
}

function blockFromCore(block) {
  if (block.type === 'image') return { type: 'image', data: block.data, mimeType: block.mime_type };
  return { type: 'text', text: block.text };
}

function assistantBlockToCore(block) {
  let core;
  let meta;
  switch (block.type) {
    case 'text':
      core = { type: 'text', text: block.text };
      meta = rest(block, ['type', 'text']);
      break;
    case 'thinking':
      core = { type: 'thinking', thinking: block.thinking };
      if (typeof block.thinkingSignature === 'string') core.signature = block.thinkingSignature;
      meta = rest(block, ['type', 'thinking', 'thinkingSignature']);
      break;
    case 'toolCall':
      core = { type: 'tool_call', id: block.id, name: block.name, arguments: block.arguments ?? {} };
      meta = rest(block, ['type', 'id', 'name', 'arguments']);
      break;
    default:
      // A block runcore has no type for: kept whole in an empty text block's meta.
      core = { type: 'text', text: '' };
      meta = { pi_block: block };
  }
  if (meta) core.meta = meta;
  return core;
}

function assistantBlockFromCore(block) {
  const meta = block.meta ?? {};
  switch (block.type) {
    case 'text':
      if (meta.pi_block) return meta.pi_block;
      return { type: 'text', text: block.text, ...meta };
    case 'thinking': {
      const out = { type: 'thinking', thinking: block.thinking };
      if (block.signature !== undefined) out.thinkingSignature = block.signature;
      return Object.assign(out, meta);
    }
    case 'redacted_thinking':
      return { type: 'thinking', thinking: '', thinkingSignature: block.data, redacted: true, ...meta };
    case 'tool_call':
      return { type: 'toolCall', id: block.id, name: block.name, arguments: block.arguments, ...meta };
    default:
      return { ...block };
  }
}

/** A pi assistant message as runcore's `AssistantMessage`. */
function assistantToCore(message) {
  const core = {
    role: 'assistant',
    content: (message.content ?? []).map(assistantBlockToCore),
    stop_reason: STOP_TO_CORE[message.stopReason] ?? 'stop',
  };
  if (typeof message.errorMessage === 'string') core.error_message = message.errorMessage;
  if (typeof message.model === 'string' && message.model !== '') core.model = message.model;
  if (typeof message.responseId === 'string' && message.responseId !== '') core.response_id = message.responseId;
  const usage = message.usage;
  if (usage && typeof usage === 'object') {
    core.usage = { input_tokens: count(usage.input), output_tokens: count(usage.output) };
    if (usage.cacheRead !== undefined) core.usage.cache_read_tokens = count(usage.cacheRead);
    if (usage.cacheWrite !== undefined) core.usage.cache_write_tokens = count(usage.cacheWrite);
  }
  const meta = rest(message, ['role', 'content', 'stopReason', 'errorMessage', 'model', 'responseId']);
  if (meta) core.meta = meta;
  return core;
}

const TOOL_RESULT_FIELDS = ['role', 'toolCallId', 'toolName', 'content', 'isError', 'details'];

/**
 * What a pi tool-result message holds beyond runcore's fields (its `timestamp`, an app's own
 * fields): the `meta` of its runcore message (`toolDone`'s `meta`), which `fromCore` spreads
 * back; `undefined` when nothing.
 */
function toolResultMeta(message) {
  const meta = rest(message, TOOL_RESULT_FIELDS);
  if (message.details !== undefined) return meta;
  // No `details` at all (not pi's `{}`): marked, so it reads back without one.
  return meta === undefined ? { pi_no_details: true } : { ...meta, pi_no_details: true };
}

/** A pi message as a runcore message (for `prompt`, `steer`, `follow_up` and `import`). */
function toCore(message) {
  if (message === null || typeof message !== 'object') {
    throw new TypeError('runcore/pi: a message must be an object');
  }
  switch (message.role) {
    case 'user': {
      const content = typeof message.content === 'string'
        ? [{ type: 'text', text: message.content }]
        : (message.content ?? []).map(userBlockToCore);
      const meta = rest(message, ['role', 'content']) ?? {};
      if (typeof message.content === 'string') meta.pi_text = true;
      const core = { role: 'user', content };
      if (Object.keys(meta).length > 0) core.meta = meta;
      return core;
    }
    case 'assistant':
      return assistantToCore(message);
    case 'toolResult': {
      const core = {
        role: 'tool_result',
        call_id: message.toolCallId,
        tool_name: message.toolName,
        content: (message.content ?? []).map(userBlockToCore),
        is_error: message.isError === true,
        outcome: 'executed',
      };
      if (message.details !== undefined) core.details = message.details;
      const meta = toolResultMeta(message);
      if (meta) core.meta = meta;
      return core;
    }
    default:
      // An app's own message (pi's CustomAgentMessages): a user message of runcore's transcript
      // that holds the original whole in `meta.pi_message`; `convertToLlm` decides what the model sees.
      return {
        role: 'user',
        content: [{ type: 'text', text: `[${String(message.role)}]` }],
        meta: { pi_message: message },
      };
  }
}

/** A pi message as the user message a `prompt`, `steer` or `follow_up` input carries (no `role`). */
function toInput(message) {
  const { role, ...input } = toCore(message);
  if (role !== 'user') {
    throw new TypeError(`runcore/pi: a prompt, steering or follow-up message must be a user message, got ${JSON.stringify(message.role)}`);
  }
  return input;
}

/** The `prompt` input for pi's prompt messages: one message, or several (SPEC §8.10). */
function promptLine(messages) {
  if (messages.length === 1) return { type: 'prompt', text: toInput(messages[0]) };
  return { type: 'prompt', messages: messages.map(toInput) };
}

/** A runcore message as pi's message. */
function fromCore(message, model = DEFAULT_MODEL) {
  const meta = message.meta ?? {};
  switch (message.role) {
    case 'user': {
      if (meta.pi_message) return meta.pi_message;
      const { pi_text: asText, ...others } = meta;
      const content = asText === true && message.content.length === 1 && message.content[0].type === 'text'
        ? message.content[0].text
        : message.content.map(blockFromCore);
      return { role: 'user', content, ...others };
    }
    case 'assistant': {
      const out = {
        role: 'assistant',
        content: message.content.map(assistantBlockFromCore),
        api: model.api,
        provider: model.provider,
        model: message.model ?? model.id,
        usage: EMPTY_USAGE,
        stopReason: STOP_FROM_CORE[message.stop_reason] ?? 'stop',
      };
      if (message.response_id !== undefined) out.responseId = message.response_id;
      if (message.error_message !== undefined) out.errorMessage = message.error_message;
      if (message.usage && meta.usage === undefined) {
        const u = message.usage;
        out.usage = {
          input: u.input_tokens,
          output: u.output_tokens,
          cacheRead: u.cache_read_tokens ?? 0,
          cacheWrite: u.cache_write_tokens ?? 0,
          totalTokens: u.input_tokens + u.output_tokens,
          cost: { ...EMPTY_USAGE.cost },
        };
      }
      Object.assign(out, meta);
      if (out.timestamp === undefined) out.timestamp = Date.now();
      return out;
    }
    case 'tool_result': {
      if (meta.pi_no_details === true) {
        // A result pi gave without `details`: read back without one.
        const { pi_no_details: _none, ...others } = meta;
        const out = {
          role: 'toolResult',
          toolCallId: message.call_id,
          toolName: message.tool_name,
          content: message.content.map(blockFromCore),
          isError: message.is_error === true,
          ...others,
        };
        if (out.timestamp === undefined) out.timestamp = Date.now();
        return out;
      }
      const out = {
        role: 'toolResult',
        toolCallId: message.call_id,
        toolName: message.tool_name,
        content: message.content.map(blockFromCore),
        details: message.details ?? {},
        isError: message.is_error === true,
        ...meta,
      };
      if (out.timestamp === undefined) out.timestamp = Date.now();
      return out;
    }
    default:
      return { ...message };
  }
}

function isLlmMessage(m) {
  return m.role === 'user' || m.role === 'assistant' || m.role === 'toolResult';
}

function defaultConvertToLlm(messages) {
  return messages.filter(isLlmMessage);
}

/**
 * `defaultConvertToLlm(messages)` in O(new messages): the agent's transcript only grows between
 * model calls, so the messages seen before are not looked at again (an array that was replaced,
 * shortened or changed at its last seen message is converted from the start). Returns the
 * cache's array and how many of its messages are this call's: that array is only ever appended
 * to (a fresh one replaces it on a restart), so its first `length` messages never change.
 */
function convertIncrementally(cache, messages) {
  if (cache.source !== messages || cache.scanned > messages.length ||
      (cache.scanned > 0 && messages[cache.scanned - 1] !== cache.last)) {
    cache.source = messages;
    cache.scanned = 0;
    cache.out = [];
  }
  for (let i = cache.scanned; i < messages.length; i++) {
    if (isLlmMessage(messages[i])) cache.out.push(messages[i]);
  }
  cache.scanned = messages.length;
  cache.last = messages[messages.length - 1];
  return { out: cache.out, length: cache.out.length };
}

/**
 * pi's model context (`{systemPrompt, messages, tools}`) over the first `length` messages of
 * an append-only array: `messages` is a copy of them made when the stream function first
 * reads it, which then stays on the context as a plain data property (what a stream function
 * assigns replaces it). The copy is the stream function's own, so it never sees the
 * transcript grow under it, and a stream function that never reads `messages` costs no copy.
 */
function lazyContext(systemPrompt, { out, length }, tools) {
  return {
    systemPrompt,
    get messages() {
      const messages = out.slice(0, length);
      ownMessages(this, messages);
      return messages;
    },
    set messages(value) {
      ownMessages(this, value);
    },
    tools,
  };
}

/**
 * `messages` as a data property of `context`. (The copy is not kept in the getter's closure:
 * V8 then keeps every copy past young-generation collections, and a read costs twice a copy.)
 * A context frozen or sealed by the stream function keeps its accessor: each read copies.
 */
function ownMessages(context, messages) {
  try {
    Object.defineProperty(context, 'messages', { value: messages, writable: true, enumerable: true, configurable: true });
  } catch {
    // Not configurable any more: nothing to replace.
  }
}

module.exports = {
  EMPTY_USAGE,
  DEFAULT_MODEL,
  toCore,
  toInput,
  fromCore,
  promptLine,
  assistantToCore,
  toolResultMeta,
  userBlockToCore,
  isLlmMessage,
  defaultConvertToLlm,
  convertIncrementally,
  lazyContext,
};
