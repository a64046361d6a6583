'use strict';
// `runcore/pi`: the API of pi-agent-core (`@mariozechner/pi-agent-core` 0.73.1) over runcore's
// native Agent. This file does the I/O (streams the model, runs the tools, awaits listeners,
// stores commits); the native agent decides every step: when the model is called, what a tool
// batch is, when steering and follow-ups enter, pairing, abort, the step budget. pi's messages
// are runcore's transcript: what runcore has no field for rides in `meta` (SPEC §2.1), history
// enters by `import` and a prompt of several messages is one multi-message prompt (SPEC §8.10).
// See README.md, "For pi-agent-core users", for every place where runcore's rule wins.

const { createRequire } = require('node:module');
const { join } = require('node:path');
const { hostname } = require('node:os');
const { randomUUID } = require('node:crypto');
const runcore = require('./index.js');

const BUSY_PROMPT =
  'Agent is already processing a prompt. Use steer() or followUp() to queue messages, or wait for completion.';
const BUSY_CONTINUE = 'Agent is already processing. Wait for completion before continuing.';

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

// ----- @mariozechner/pi-ai, an optional peer ----------------------------------------------------

let piAi;
/**
 * pi-ai (its `streamSimple`, the default `streamFn`, and `validateToolArguments`), when the host
 * has it installed: resolved from this package, else from the working directory; `null` when
 * neither has it.
 */
async function loadPiAi() {
  if (piAi !== undefined) return piAi;
  try {
    piAi = await import('@mariozechner/pi-ai');
  } catch {
    try {
      const path = createRequire(join(process.cwd(), 'package.json')).resolve('@mariozechner/pi-ai');
      piAi = await import(require('node:url').pathToFileURL(path).href);
    } catch {
      piAi = null;
    }
  }
  return piAi;
}

// ----- pi messages <-> runcore messages ---------------------------------------------------------

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
      const meta = rest(message, ['role', 'toolCallId', 'toolName', 'content', 'isError', 'details']);
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

// ----- an event stream (agentLoop's return value) -----------------------------------------------

/** An async iterable of events that ends with `agent_end`; `result()` resolves to its messages. */
class AgentEventStream {
  #queue = [];
  #waiting = [];
  #done = false;
  #resolveResult;
  #result = new Promise((resolve) => {
    this.#resolveResult = resolve;
  });

  push(event) {
    if (this.#done) return;
    if (event.type === 'agent_end') {
      this.#done = true;
      this.#resolveResult(event.messages);
    }
    const waiter = this.#waiting.shift();
    if (waiter) waiter({ value: event, done: false });
    else this.#queue.push(event);
    if (this.#done) for (const w of this.#waiting.splice(0)) w({ value: undefined, done: true });
  }

  end(messages) {
    if (!this.#done) {
      this.#done = true;
      this.#resolveResult(messages);
    }
    for (const w of this.#waiting.splice(0)) w({ value: undefined, done: true });
  }

  async *[Symbol.asyncIterator]() {
    for (;;) {
      if (this.#queue.length > 0) {
        yield this.#queue.shift();
      } else if (this.#done) {
        return;
      } else {
        const next = await new Promise((resolve) => this.#waiting.push(resolve));
        if (next.done) return;
        yield next.value;
      }
    }
  }

  result() {
    return this.#result;
  }
}

// ----- one run: the I/O around the native agent --------------------------------------------------

function errorText(error) {
  return error instanceof Error ? error.message : String(error);
}

function errorToolResult(message) {
  return { content: [{ type: 'text', text: message }], details: {} };
}

function isToolCall(block) {
  return block && block.type === 'toolCall';
}

/**
 * The host side of runs on one native agent: drains its outputs in order, stores each commit
 * before anything after it, answers `call_model` through the stream function and
 * `execute_tools` through the tools, and turns runcore's events into pi's.
 */
class Host {
  /**
   * @param {object} options
   * @param {() => runcore.Agent} options.core the native agent (read on every use)
   * @param {((output: object) => Promise<unknown>) | undefined} options.commit stores a commit
   * @param {AgentMessage[]} options.messages the transcript as pi messages (pushed to)
   * @param {(event: object) => Promise<void>} options.emit
   * @param {() => object} options.loop the loop configuration (model, hooks, tools, …)
   * @param {AbortSignal | undefined} options.signal
   */
  constructor(options) {
    Object.assign(this, options);
    this.newMessages = [];
    this.turnOpen = false;
    this.turnMessage = null;
    this.turnResults = [];
    this.prompts = [];
    this.steered = [];
    this.followed = [];
    this.results = new Map();
    this.answer = null;
    this.unconsumed = [];
    this.end = null;
  }

  get native() {
    return this.core();
  }

  /** Drains the native agent until it has nothing to do (the run ended, or it waits). */
  async pump() {
    for (;;) {
      const output = this.native.poll();
      if (output === null) return;
      switch (output.type) {
        case 'commit':
          if (this.commit) await this.commit(output);
          break;
        case 'event':
          await this.onEvent(output.event);
          break;
        case 'call_model':
          // Outstanding until answered: a hook or listener that throws leaves it for #failed.
          this.outstanding = output;
          await this.callModel(output);
          this.outstanding = null;
          break;
        case 'execute_tools':
          this.outstanding = output;
          await this.executeTools(output);
          this.outstanding = null;
          break;
        default:
          break;
      }
    }
  }

  async message(message) {
    await this.emit({ type: 'message_start', message });
    this.messages.push(message);
    this.newMessages.push(message);
    await this.emit({ type: 'message_end', message });
  }

  /** Ends the turn that has an answer (pi's `turn_end`). */
  async closeTurn() {
    if (this.turnOpen && this.turnMessage !== null) {
      const event = { type: 'turn_end', message: this.turnMessage, toolResults: this.turnResults };
      this.turnOpen = false;
      this.turnMessage = null;
      this.turnResults = [];
      await this.emit(event);
    }
  }

  /** Opens a turn unless one without an answer is open (pi's `turn_start`). */
  async openTurn() {
    await this.closeTurn();
    if (!this.turnOpen) {
      this.turnOpen = true;
      await this.emit({ type: 'turn_start' });
    }
  }

  async onEvent(event) {
    if (event.type === 'run_start') {
      this.runId = event.run_id;
      await this.emit({ type: 'agent_start' });
      await this.openTurn();
      for (const message of this.prompts) await this.message(message);
      return;
    }
    if (event.type === 'run_end') {
      await this.closeTurn();
      const result = event.result;
      this.end = result.cause;
      this.unconsumed = (result.unconsumed ?? []).map((m) => this.original(m));
      this.steered = [];
      this.followed = [];
      const end = { type: 'agent_end', messages: this.newMessages };
      if (this.unconsumed.length > 0) end.unconsumed = this.unconsumed;
      await this.emit(end);
      return;
    }
    if (event.type !== 'loop') return;
    const loop = event.event;
    switch (loop.type) {
      case 'assistant_message': {
        const message = this.answer ?? fromCore(loop.message, this.loop().model);
        this.answer = null;
        if (!this.streamed) await this.emit({ type: 'message_start', message: { ...message } });
        this.streamed = false;
        this.messages.push(message);
        this.newMessages.push(message);
        this.turnMessage = message;
        await this.emit({ type: 'message_end', message });
        break;
      }
      case 'message_appended': {
        const origin = loop.origin;
        if (origin === 'tool_result') {
          const message = this.results.get(loop.message.call_id) ?? fromCore(loop.message);
          this.results.delete(loop.message.call_id);
          await this.message(message);
          this.turnResults.push(message);
        } else if (origin === 'steering' || origin === 'follow_up') {
          await this.openTurn();
          const queue = origin === 'steering' ? this.steered : this.followed;
          await this.message(queue.length > 0 ? queue.shift() : fromCore(loop.message));
        } else {
          await this.message(fromCore(loop.message));
        }
        break;
      }
      default:
        break;
    }
  }

  /** The pi message a runcore message stands for (queued by this host, or converted). */
  original(core) {
    for (const queue of [this.steered, this.followed]) {
      const index = queue.findIndex((m) => JSON.stringify(toCore(m).content) === JSON.stringify(core.content));
      if (index >= 0) return queue.splice(index, 1)[0];
    }
    return fromCore(core);
  }

  steer(message) {
    this.native.steer(toInput(message));
    this.steered.push(message);
  }

  followUp(message) {
    this.native.followUp(toInput(message));
    this.followed.push(message);
  }

  /**
   * What pi's loop does after a turn, run before the outcome that ends the turn reaches runcore
   * (so runcore takes the queues at that boundary): `terminate`, `shouldStopAfterTurn`, and the
   * steering / follow-up callbacks of `agentLoop`.
   */
  async beforeBoundary(message, toolResults, terminate) {
    const loop = this.loop();
    if (terminate) {
      this.native.stop('terminate');
      return;
    }
    if (loop.shouldStopAfterTurn) {
      const context = {
        systemPrompt: loop.systemPrompt,
        messages: this.messages.includes(message)
          ? [...this.messages, ...toolResults]
          : [...this.messages, message, ...toolResults],
        tools: loop.tools,
      };
      const stop = await loop.shouldStopAfterTurn({
        message,
        toolResults,
        context,
        newMessages: [...this.newMessages, ...toolResults],
      });
      if (stop) {
        this.native.stop('stop_after_turn');
        return;
      }
    }
    if (this.signal?.aborted) return;
    let steered = 0;
    if (loop.getSteeringMessages) {
      for (const m of (await loop.getSteeringMessages()) ?? []) {
        this.steer(m);
        steered += 1;
      }
    }
    if (steered === 0 && toolResults.length === 0 && loop.getFollowUpMessages) {
      for (const m of (await loop.getFollowUpMessages()) ?? []) this.followUp(m);
    }
  }

  async callModel(action) {
    await this.openTurn();
    const loop = this.loop();
    let answer;
    try {
      let messages = this.messages;
      let llmMessages;
      if (loop.convertToLlm === defaultConvertToLlm && !loop.transformContext && loop.llmCache) {
        llmMessages = convertIncrementally(loop.llmCache, messages);
      } else {
        if (loop.transformContext) messages = await loop.transformContext(messages, this.signal);
        llmMessages = await loop.convertToLlm(messages);
      }
      const context = { systemPrompt: loop.systemPrompt, messages: llmMessages, tools: loop.tools };
      let streamFn = loop.streamFn;
      if (!streamFn) {
        const ai = await loadPiAi();
        if (!ai) throw new Error('runcore/pi: no streamFn given and @mariozechner/pi-ai is not installed');
        streamFn = ai.streamSimple;
      }
      const apiKey = (loop.getApiKey ? await loop.getApiKey(loop.model.provider) : undefined) || loop.options.apiKey;
      const response = await streamFn(loop.model, context, { ...loop.options, apiKey, signal: this.signal });
      this.streamed = false;
      for await (const event of response) {
        if (event.type === 'start') {
          this.streamed = true;
          this.partial(event.partial);
          await this.emit({ type: 'message_start', message: { ...event.partial } });
        } else if (event.type === 'done' || event.type === 'error') {
          break;
        } else if (this.streamed && event.partial) {
          this.partial(event.partial);
          await this.emit({ type: 'message_update', assistantMessageEvent: event, message: { ...event.partial } });
        }
      }
      answer = await response.result();
    } catch (error) {
      // pi's contract: a stream function never throws; one that does ends the run as an error.
      this.answer = null;
      this.native.modelFailed(action.run_id, action.step, 'stream_error', errorText(error));
      return;
    }
    this.partial(undefined);
    this.answer = answer;
    const calls = (answer.content ?? []).filter(isToolCall);
    if (answer.stopReason !== 'error' && answer.stopReason !== 'aborted' &&
        (calls.length === 0 || answer.stopReason === 'length')) {
      await this.beforeBoundary(answer, [], false);
    }
    this.native.modelDone(action.run_id, action.step, assistantToCore(answer));
  }

  partial(message) {
    if (this.onPartial) this.onPartial(message);
  }

  async prepare(tool, call, assistant) {
    const loop = this.loop();
    if (!tool) return { immediate: errorToolResult(`Tool ${call.name} not found`) };
    try {
      let prepared = call;
      if (tool.prepareArguments) {
        const args = tool.prepareArguments(call.arguments);
        if (args !== call.arguments) prepared = { ...call, arguments: args };
      }
      const ai = await loadPiAi();
      const args = ai?.validateToolArguments ? ai.validateToolArguments(tool, prepared) : prepared.arguments;
      if (loop.beforeToolCall) {
        const before = await loop.beforeToolCall(
          { assistantMessage: assistant, toolCall: call, args, context: this.context() },
          this.signal,
        );
        if (before?.block) return { immediate: errorToolResult(before.reason || 'Tool execution was blocked') };
      }
      return { args };
    } catch (error) {
      return { immediate: errorToolResult(errorText(error)) };
    }
  }

  context() {
    const loop = this.loop();
    return { systemPrompt: loop.systemPrompt, messages: this.messages, tools: loop.tools };
  }

  async execute(tool, call, args, assistant) {
    const loop = this.loop();
    const updates = [];
    let result;
    let isError = false;
    try {
      result = await tool.execute(call.id, args, this.signal, (partialResult) => {
        updates.push(Promise.resolve(this.emit({
          type: 'tool_execution_update',
          toolCallId: call.id,
          toolName: call.name,
          args: call.arguments,
          partialResult,
        })));
      });
    } catch (error) {
      result = errorToolResult(errorText(error));
      isError = true;
    }
    await Promise.all(updates);
    if (loop.afterToolCall) {
      try {
        const after = await loop.afterToolCall(
          { assistantMessage: assistant, toolCall: call, args, result, isError, context: this.context() },
          this.signal,
        );
        if (after) {
          result = {
            content: after.content ?? result.content,
            details: after.details ?? result.details,
            terminate: after.terminate ?? result.terminate,
          };
          isError = after.isError ?? isError;
        }
      } catch (error) {
        result = errorToolResult(errorText(error));
        isError = true;
      }
    }
    return { result, isError };
  }

  async finalize(call, outcome) {
    await this.emit({
      type: 'tool_execution_end',
      toolCallId: call.id,
      toolName: call.name,
      result: outcome.result,
      isError: outcome.isError,
    });
    const message = {
      role: 'toolResult',
      toolCallId: call.id,
      toolName: call.name,
      content: outcome.result.content,
      details: outcome.result.details,
      isError: outcome.isError,
      timestamp: Date.now(),
    };
    this.results.set(call.id, message);
    return { call, outcome, message };
  }

  async executeTools(action) {
    const loop = this.loop();
    const assistant = this.turnMessage ?? [...this.messages].reverse().find((m) => m.role === 'assistant');
    const blocks = new Map((assistant?.content ?? []).filter(isToolCall).map((b) => [b.id, b]));
    const calls = action.calls.map((c) => blocks.get(c.id) ?? { type: 'toolCall', id: c.id, name: c.name, arguments: c.arguments });
    const tools = loop.tools ?? [];
    const find = (name) => tools.find((t) => t.name === name);
    const sequential = loop.toolExecution === 'sequential' || calls.some((c) => find(c.name)?.executionMode === 'sequential');
    const finished = [];
    for (const call of calls) {
      await this.emit({ type: 'tool_execution_start', toolCallId: call.id, toolName: call.name, args: call.arguments });
      const tool = find(call.name);
      const prepared = await this.prepare(tool, call, assistant);
      if (prepared.immediate) {
        finished.push(await this.finalize(call, { result: prepared.immediate, isError: true }));
      } else if (sequential) {
        finished.push(await this.finalize(call, await this.execute(tool, call, prepared.args, assistant)));
      } else {
        finished.push(this.execute(tool, call, prepared.args, assistant).then((outcome) => this.finalize(call, outcome)));
      }
    }
    const done = await Promise.all(finished);
    const terminate = done.length > 0 && done.every((d) => d.outcome.result.terminate === true);
    await this.beforeBoundary(assistant, done.map((d) => d.message), terminate);
    for (const { call, outcome } of done) {
      const options = { isError: outcome.isError };
      if (outcome.result.details !== undefined) options.details = outcome.result.details;
      this.native.toolDone(action.run_id, call.id, (outcome.result.content ?? []).map(userBlockToCore), options);
    }
  }
}

// ----- agentLoop / agentLoopContinue -------------------------------------------------------------

function loopOptions(config) {
  const {
    model, convertToLlm, transformContext, getApiKey, shouldStopAfterTurn, getSteeringMessages,
    getFollowUpMessages, toolExecution, beforeToolCall, afterToolCall, maxSteps, ...options
  } = config;
  return options;
}

async function runLoop(core, prompts, context, config, emit, signal, streamFn) {
  const native = core.agent;
  const loopConfig = {
    ...config,
    systemPrompt: context.systemPrompt,
    tools: context.tools,
    streamFn,
    options: loopOptions(config),
  };
  const messages = [...context.messages];
  const host = new Host({
    core: () => native,
    commit: undefined,
    messages,
    emit,
    loop: () => loopConfig,
    signal,
  });
  const onAbort = () => native.abort();
  signal?.addEventListener('abort', onAbort);
  try {
    let initial = [];
    if (config.getSteeringMessages) initial = (await config.getSteeringMessages()) ?? [];
    const all = [...prompts, ...initial];
    if (all.length > 0) {
      host.prompts = all;
      native.handle(promptLine(all));
    } else {
      native.handle({ type: 'continue' });
      host.prompts = [];
    }
    if (signal?.aborted) native.abort();
    await host.pump();
  } finally {
    signal?.removeEventListener('abort', onAbort);
  }
  return host.newMessages;
}

/** A fresh in-memory native agent holding `messages` (imported, SPEC §8.10). */
function nativeWith(messages, config = {}) {
  const agent = new runcore.Agent(config);
  if (messages.length > 0) {
    agent.handle({ type: 'import', messages: messages.map(toCore) });
    agent.pollAll();
  }
  return { agent };
}

function startLoop(prompts, context, config, signal, streamFn) {
  const stream = new AgentEventStream();
  const core = nativeWith(context.messages, { max_steps: config.maxSteps ?? 32, context: 'delta' });
  runLoop(core, prompts, context, config, async (event) => stream.push(event), signal, streamFn).then(
    (messages) => stream.end(messages),
    (error) => {
      stream.push({ type: 'agent_end', messages: [], error: errorText(error) });
      stream.end([]);
    },
  );
  return stream;
}

/** pi's `agentLoop`: a run that starts with `prompts`, as a stream of events. */
function agentLoop(prompts, context, config, signal, streamFn) {
  return startLoop(prompts, context, config, signal, streamFn);
}

/** pi's `agentLoopContinue`: a run over the context as it is. */
function agentLoopContinue(context, config, signal, streamFn) {
  if (context.messages.length === 0) throw new Error('Cannot continue: no messages in context');
  if (context.messages[context.messages.length - 1].role === 'assistant') {
    throw new Error('Cannot continue from message role: assistant');
  }
  return startLoop([], context, config, signal, streamFn);
}

// ----- Agent ---------------------------------------------------------------------------------------

function isLlmMessage(m) {
  return m.role === 'user' || m.role === 'assistant' || m.role === 'toolResult';
}

function defaultConvertToLlm(messages) {
  return messages.filter(isLlmMessage);
}

/**
 * `defaultConvertToLlm(messages)` in O(new messages): the agent's transcript only grows between
 * model calls, so the messages seen before are not looked at again (an array that was replaced,
 * shortened or changed at its last seen message is converted from the start).
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
  return cache.out.slice();
}

const MODES = { all: 'all', 'one-at-a-time': 'one_at_a_time' };

/**
 * pi-agent-core's `Agent` over runcore: see README.md, "For pi-agent-core users".
 */
class Agent {
  #listeners = new Set();
  #state;
  #messages = [];
  #tools = [];
  #core = null;
  #coreLen = 0;
  #coreLast = undefined;
  #active = null;
  #host = null;
  #steeringMode;
  #followUpMode;
  #store;
  #threadId;
  #maxSteps;
  #unconsumed = [];
  #owner;
  #leaseMs;
  #claim = null;
  #renewal = null;
  #opening = Promise.resolve();
  #llmCache = { source: null, scanned: 0, out: [], last: undefined };

  constructor(options = {}) {
    const initial = options.initialState ?? {};
    const self = this;
    this.#messages = initial.messages ? initial.messages.slice() : [];
    this.#tools = initial.tools ? initial.tools.slice() : [];
    this.#state = {
      systemPrompt: initial.systemPrompt ?? '',
      model: initial.model ?? DEFAULT_MODEL,
      thinkingLevel: initial.thinkingLevel ?? 'off',
      get tools() {
        return self.#tools;
      },
      set tools(tools) {
        self.#tools = tools.slice();
      },
      get messages() {
        return self.#messages;
      },
      set messages(messages) {
        self.#messages = messages.slice();
      },
      isStreaming: false,
      streamingMessage: undefined,
      pendingToolCalls: new Set(),
      errorMessage: undefined,
    };
    this.convertToLlm = options.convertToLlm ?? defaultConvertToLlm;
    this.transformContext = options.transformContext;
    this.streamFn = options.streamFn;
    this.getApiKey = options.getApiKey;
    this.onPayload = options.onPayload;
    this.onResponse = options.onResponse;
    this.beforeToolCall = options.beforeToolCall;
    this.afterToolCall = options.afterToolCall;
    this.#steeringMode = options.steeringMode ?? 'one-at-a-time';
    this.#followUpMode = options.followUpMode ?? 'one-at-a-time';
    this.sessionId = options.sessionId;
    this.thinkingBudgets = options.thinkingBudgets;
    this.transport = options.transport ?? 'auto';
    this.maxRetryDelayMs = options.maxRetryDelayMs;
    this.toolExecution = options.toolExecution ?? 'parallel';
    this.#maxSteps = options.maxSteps ?? 32;
    this.#store = options.store;
    this.#threadId = options.threadId ?? (this.#store ? undefined : 'pi');
    if (this.#store) {
      if (typeof this.#threadId !== 'string' || this.#threadId === '') {
        throw new TypeError('runcore/pi: a durable Agent needs a threadId');
      }
      this.#owner = options.owner ?? `${hostname()}:${process.pid}:${randomUUID()}`;
      this.#leaseMs = options.leaseMs ?? 30000;
      this.#open();
    }
  }

  /** Durable mode: stores a commit under this agent's claim. */
  #commit(output) {
    return this.#store.commit(output, { claim: this.#claim });
  }

  #config() {
    return {
      thread_id: this.#threadId,
      // The JavaScript keeps the transcript (state.messages): a model request carries only
      // what is new, never the whole transcript again.
      context: 'delta',
      max_steps: this.#maxSteps,
      steering_mode: MODES[this.#steeringMode] ?? 'one_at_a_time',
      follow_up_mode: MODES[this.#followUpMode] ?? 'one_at_a_time',
    };
  }

  /**
   * Durable mode. In the constructor (synchronously): the transcript as committed, so
   * `state.messages` holds it at once. Then (asynchronously, before any run of this agent):
   * the thread's claim (SPEC §7.2; a live claim of another owner rejects every later `prompt`
   * / `continue` with `StoreError` code `claim_held`), renewed every third of the lease, and
   * the recovery under that claim. A run that was active when its process died resumes under
   * `replay` as a run of this agent: subscribe right after construction to see its events, and
   * await `waitForIdle()`.
   */
  #open() {
    const preview = this.#recovered();
    this.#messages = preview.messages;
    this.#core = preview.core;
    this.#setCommitted();
    this.#opening = this.#claimAndRecover();
    this.#opening.catch(() => {});
    if (preview.core.activeRunId !== null) {
      const resume = this.#run(async (host) => {
        await this.#ready();
        const core = this.#native();
        if (core.activeRunId === null) return;
        host.runId = core.activeRunId;
        host.started = true;
        await host.emit({ type: 'agent_start' });
        await host.openTurn();
        await host.pump();
      });
      resume.catch(() => {});
    }
  }

  /** Claims the thread, starts renewing, and recovers it again under the claim. */
  async #claimAndRecover() {
    const store = this.#store;
    this.#claim = await store.claimThread({ threadId: this.#threadId, owner: this.#owner, leaseMs: this.#leaseMs });
    this.#renewal = setInterval(() => {
      store.renewClaim(this.#claim, this.#leaseMs).then(
        (claim) => {
          this.#claim = claim;
        },
        () => clearInterval(this.#renewal),
      );
    }, Math.max(1, Math.floor(this.#leaseMs / 3)));
    this.#renewal.unref?.();
    // Recovered again under the claim: what another owner committed before it is included.
    // Messages the host appended to state.messages meanwhile stay after the committed ones.
    const claimed = this.#recovered();
    const previewed = this.#coreLen;
    if (claimed.messages.length !== previewed) this.#messages.splice(0, previewed, ...claimed.messages);
    this.#core = claimed.core;
    this.#coreLen = claimed.messages.length;
    this.#coreLast = this.#messages[this.#coreLen - 1];
  }

  /** Durable mode: the claim is held (asked again when an earlier attempt was refused). */
  async #ready() {
    if (!this.#store) return;
    try {
      await this.#opening;
    } catch {
      if (this.#claim === null) this.#opening = this.#claimAndRecover();
      await this.#opening;
    }
  }

  #recovered() {
    const core = runcore.Agent.recover(this.#store, this.#threadId, 'replay', { config: this.#config() });
    const model = this.#state.model;
    return { core, messages: core.transcript().map((m) => fromCore(m, model)) };
  }

  #setCommitted() {
    this.#coreLen = this.#messages.length;
    this.#coreLast = this.#messages[this.#coreLen - 1];
  }

  /** The thread's claim in durable mode (once granted), else `null`. */
  get claim() {
    return this.#claim;
  }

  /** Durable mode: stops renewing and releases the thread's claim (after the active run). */
  async close() {
    await this.waitForIdle();
    if (this.#renewal !== null) clearInterval(this.#renewal);
    this.#renewal = null;
    if (this.#claim !== null) {
      const claim = this.#claim;
      this.#claim = null;
      await this.#store.releaseClaim(claim);
    }
  }

  get state() {
    return this.#state;
  }

  /** The queued messages the last run did not take (runcore's `run_end.unconsumed`). */
  get unconsumed() {
    return this.#unconsumed;
  }

  get steeringMode() {
    return this.#steeringMode;
  }

  set steeringMode(mode) {
    this.#setMode('steering', mode);
  }

  get followUpMode() {
    return this.#followUpMode;
  }

  set followUpMode(mode) {
    this.#setMode('followUp', mode);
  }

  #setMode(which, mode) {
    if (!(mode in MODES)) throw new TypeError(`runcore/pi: unknown queue mode ${JSON.stringify(mode)}`);
    if (this.#core !== null && this.#coreHasRuns()) {
      throw new Error('runcore/pi: queue modes are runcore configuration; set them before the first prompt');
    }
    if (which === 'steering') this.#steeringMode = mode;
    else this.#followUpMode = mode;
    if (this.#core !== null) this.#core = null;
  }

  #coreHasRuns() {
    return this.#store !== undefined || this.#coreLen > 0 || this.#active !== null;
  }

  subscribe(listener) {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  get signal() {
    return this.#active?.controller.signal;
  }

  /** Queues steering for the active run; refused while idle (`NotAcceptingError`). */
  steer(message) {
    if (this.#host === null) this.#native().steer(toInput(message));
    else this.#host.steer(message);
  }

  /** Queues a follow-up for the active run; refused while idle (`NotAcceptingError`). */
  followUp(message) {
    if (this.#host === null) this.#native().followUp(toInput(message));
    else this.#host.followUp(message);
  }

  #queued(which) {
    const host = this.#host;
    if (host === null) return 0;
    return which === 'steering' ? host.steered.length : host.followed.length;
  }

  /** runcore cannot withdraw queued input: a no-op when nothing is queued, else an error. */
  clearSteeringQueue() {
    if (this.#queued('steering') > 0) {
      throw new Error('runcore/pi: queued steering cannot be withdrawn; what a run does not take comes back in agent.unconsumed');
    }
  }

  clearFollowUpQueue() {
    if (this.#queued('followUp') > 0) {
      throw new Error('runcore/pi: queued follow-ups cannot be withdrawn; what a run does not take comes back in agent.unconsumed');
    }
  }

  clearAllQueues() {
    this.clearSteeringQueue();
    this.clearFollowUpQueue();
  }

  hasQueuedMessages() {
    return this.#queued('steering') + this.#queued('followUp') > 0;
  }

  abort() {
    if (!this.#active) return;
    this.#active.controller.abort();
    if (this.#core !== null && this.#core.activeRunId !== null) this.#core.abort();
  }

  waitForIdle() {
    return this.#active?.promise ?? Promise.resolve();
  }

  /** Clears the transcript: in memory a fresh native agent; refused for a durable thread. */
  reset() {
    if (this.#store) throw new Error('runcore/pi: a durable thread keeps its committed history; use another threadId');
    if (this.#active) this.abort();
    this.#messages = [];
    this.#core = null;
    this.#coreLen = 0;
    this.#coreLast = undefined;
    this.#state.isStreaming = false;
    this.#state.streamingMessage = undefined;
    this.#state.pendingToolCalls = new Set();
    this.#state.errorMessage = undefined;
    this.#unconsumed = [];
  }

  #native() {
    if (this.#core === null) this.#core = new runcore.Agent(this.#config());
    return this.#core;
  }

  /** Brings runcore's transcript up to `state.messages`: imports what was appended, or (in memory) starts over. */
  async #sync() {
    const messages = this.#messages;
    const len = this.#coreLen;
    if (messages.length === len && (len === 0 || messages[len - 1] === this.#coreLast)) return;
    let suffix;
    if (messages.length > len && (len === 0 || messages[len - 1] === this.#coreLast) && this.#core !== null) {
      suffix = messages.slice(len);
    } else {
      if (this.#store) {
        throw new Error('runcore/pi: a durable thread\'s committed messages cannot be replaced; append to state.messages instead');
      }
      this.#core = null;
      suffix = messages.slice();
    }
    const core = this.#native();
    if (suffix.length > 0) {
      core.handle({ type: 'import', messages: suffix.map(toCore) });
      for (const output of core.drain()) {
        if (output.type === 'commit' && this.#store) await this.#commit(output);
      }
    }
    this.#coreLen = messages.length;
    this.#coreLast = messages[messages.length - 1];
  }

  async #emit(event) {
    const state = this.#state;
    switch (event.type) {
      case 'message_start':
      case 'message_update':
        state.streamingMessage = event.message;
        break;
      case 'message_end':
        state.streamingMessage = undefined;
        break;
      case 'tool_execution_start': {
        const pending = new Set(state.pendingToolCalls);
        pending.add(event.toolCallId);
        state.pendingToolCalls = pending;
        break;
      }
      case 'tool_execution_end': {
        const pending = new Set(state.pendingToolCalls);
        pending.delete(event.toolCallId);
        state.pendingToolCalls = pending;
        break;
      }
      case 'turn_end':
        if (event.message.role === 'assistant' && event.message.errorMessage) {
          state.errorMessage = event.message.errorMessage;
        }
        break;
      case 'agent_end':
        state.streamingMessage = undefined;
        break;
      default:
        break;
    }
    const signal = this.#active?.controller.signal;
    for (const listener of this.#listeners) await listener(event, signal);
  }

  #loopConfig() {
    const state = this.#state;
    return {
      model: state.model,
      systemPrompt: state.systemPrompt,
      tools: this.#tools.slice(),
      streamFn: this.streamFn,
      convertToLlm: this.convertToLlm,
      transformContext: this.transformContext,
      getApiKey: this.getApiKey,
      beforeToolCall: this.beforeToolCall,
      afterToolCall: this.afterToolCall,
      toolExecution: this.toolExecution,
      llmCache: this.#llmCache,
      options: {
        reasoning: state.thinkingLevel === 'off' ? undefined : state.thinkingLevel,
        sessionId: this.sessionId,
        onPayload: this.onPayload,
        onResponse: this.onResponse,
        transport: this.transport,
        thinkingBudgets: this.thinkingBudgets,
        maxRetryDelayMs: this.maxRetryDelayMs,
      },
    };
  }

  #run(body) {
    const controller = new AbortController();
    let resolve;
    const promise = new Promise((r) => {
      resolve = r;
    });
    this.#active = { controller, promise };
    const state = this.#state;
    state.isStreaming = true;
    state.streamingMessage = undefined;
    state.errorMessage = undefined;
    const loop = this.#loopConfig();
    const host = new Host({
      core: () => this.#native(),
      commit: this.#store ? (output) => this.#commit(output) : undefined,
      messages: this.#messages,
      emit: (event) => this.#emit(event),
      loop: () => loop,
      signal: controller.signal,
      onPartial: (message) => {
        state.streamingMessage = message;
      },
    });
    const run = (async () => {
      try {
        await body(host);
      } catch (error) {
        // Before the run started (a refused prompt, a transcript that cannot be imported) the
        // promise rejects; after, a failing hook or listener ends the run as pi's error message.
        if (host.started && host.end === null) await this.#failed(host, error, controller.signal.aborted);
        else throw error;
      } finally {
        this.#coreLen = this.#messages.length;
        this.#coreLast = this.#messages[this.#coreLen - 1];
        this.#unconsumed = host.unconsumed;
        this.#host = null;
        state.isStreaming = false;
        state.streamingMessage = undefined;
        state.pendingToolCalls = new Set();
        this.#active = null;
        resolve();
      }
    })();
    this.#host = host;
    return run;
  }

  /** A host failure (a hook or listener threw): the run is stopped and pi's error message recorded. */
  async #failed(host, error, aborted) {
    const core = this.#core;
    if (core !== null && core.activeRunId !== null) {
      try {
        // The run ends here: stopped, its outstanding model call failed, or the calls of its
        // outstanding batch `interrupted` (their outcome is not known: the run ends
        // Indeterminate). Every call keeps exactly one result.
        core.stop(aborted ? 'aborted' : 'host_error');
        const outstanding = host.outstanding;
        if (outstanding?.type === 'call_model' && core.activeRunId !== null) {
          core.modelFailed(outstanding.run_id, outstanding.step, 'host_error', errorText(error));
        } else if (outstanding?.type === 'execute_tools' && core.activeRunId !== null) {
          core.abandonTools();
        }
        for (const output of core.drain()) {
          if (output.type === 'commit' && this.#store) await this.#commit(output);
        }
      } catch {
        // The run could not be ended here; the error is still reported.
      }
      // What runcore appended meanwhile (results, an error answer) joins state.messages.
      const transcript = core.transcript();
      const model = this.#state.model;
      for (let i = this.#messages.length; i < transcript.length; i++) this.#messages.push(fromCore(transcript[i], model));
    }
    const model = this.#state.model;
    const message = {
      role: 'assistant',
      content: [{ type: 'text', text: '' }],
      api: model.api,
      provider: model.provider,
      model: model.id,
      usage: EMPTY_USAGE,
      stopReason: aborted ? 'aborted' : 'error',
      errorMessage: errorText(error),
      timestamp: Date.now(),
    };
    this.#state.errorMessage = message.errorMessage;
    host.end = { type: 'error' };
    try {
      await this.#emit({ type: 'agent_end', messages: [message] });
    } catch {
      // A listener that throws on agent_end does not keep the agent busy.
    }
  }

  async prompt(input, images) {
    if (this.#active) throw new Error(BUSY_PROMPT);
    let messages;
    if (Array.isArray(input)) messages = input;
    else if (typeof input !== 'string') messages = [input];
    else {
      const content = [{ type: 'text', text: input }];
      if (images && images.length > 0) content.push(...images);
      messages = [{ role: 'user', content, timestamp: Date.now() }];
    }
    await this.#run(async (host) => {
      await this.#ready();
      await this.#sync();
      host.prompts = messages;
      this.#native().handle(promptLine(messages));
      host.started = true;
      await host.pump();
    });
  }

  async continue() {
    if (this.#active) throw new Error(BUSY_CONTINUE);
    const last = this.#messages[this.#messages.length - 1];
    if (!last) throw new Error('No messages to continue from');
    if (last.role === 'assistant') throw new Error('Cannot continue from message role: assistant');
    await this.#run(async (host) => {
      await this.#ready();
      await this.#sync();
      this.#native().handle({ type: 'continue' });
      host.started = true;
      await host.pump();
    });
  }
}

module.exports = {
  Agent,
  agentLoop,
  agentLoopContinue,
  toCore,
  fromCore,
};
