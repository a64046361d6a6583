'use strict';
// One run's I/O around runcore's native agent: `Host` drains the agent's outputs in order,
// stores each commit before anything after it, answers `call_model` through the stream
// function and `execute_tools` through the tools, and turns runcore's events into pi's.

const { createRequire } = require('node:module');
const { join } = require('node:path');
const { pathToFileURL } = require('node:url');
const {
  toCore, toInput, fromCore, assistantToCore, toolResultMeta, userBlockToCore, defaultConvertToLlm,
  convertIncrementally, lazyContext,
} = require('./messages.js');

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
      piAi = await import(pathToFileURL(path).href);
    } catch {
      piAi = null;
    }
  }
  return piAi;
}

function errorText(error) {
  return error instanceof Error ? error.message : String(error);
}

function errorToolResult(message) {
  return { content: [{ type: 'text', text: message }], details: {} };
}

function isEmptyObject(value) {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return false;
  for (const key in value) if (Object.hasOwn(value, key)) return false;
  return Object.getPrototypeOf(value) === Object.prototype;
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
   * @param {() => import('../index.js').Agent} options.core the native agent (read on every use)
   * @param {((output: object) => Promise<unknown>) | undefined} options.commit stores a commit
   * @param {object[]} options.messages the run's own context: the transcript as pi messages,
   *   which runcore's transcript mirrors (pushed to; replaced by `detach` when the agent's
   *   `state.messages` is reassigned mid-run)
   * @param {((message: object) => void) | undefined} options.publish also appends a message of
   *   the run to the agent's current `state.messages` when that is not the run's context
   * @param {(event: object) => Promise<void> | undefined} options.emit `undefined` when
   *   nothing listens (then nothing is awaited: no microtask hop per event)
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
    // Messages runcore appended in this run (each mirrored in `messages`), and the last one.
    this.appended = 0;
    this.lastAppended = undefined;
  }

  /**
   * Appends a message runcore appended: to the run's context, and to the agent's current
   * `state.messages` when that is another array (it was reassigned during the run).
   */
  append(message) {
    this.messages.push(message);
    this.newMessages.push(message);
    this.appended += 1;
    this.lastAppended = message;
    if (this.publish) this.publish(message, this.messages);
  }

  /**
   * The agent's `state.messages` is being replaced during this run: from here on the run's
   * context is its own copy (pi's loop runs over a snapshot), and the array the caller held
   * before receives nothing more.
   */
  detach(array) {
    if (this.messages === array) this.messages = array.slice();
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
    { const pending = this.emit({ type: 'message_start', message }); if (pending !== undefined) await pending; }
    this.append(message);
    { const pending = this.emit({ type: 'message_end', message }); if (pending !== undefined) await pending; }
  }

  /** Ends the turn that has an answer (pi's `turn_end`). */
  async closeTurn() {
    if (this.turnOpen && this.turnMessage !== null) {
      const event = { type: 'turn_end', message: this.turnMessage, toolResults: this.turnResults };
      this.turnOpen = false;
      this.turnMessage = null;
      this.turnResults = [];
      { const pending = this.emit(event); if (pending !== undefined) await pending; }
    }
  }

  /** Opens a turn unless one without an answer is open (pi's `turn_start`). */
  async openTurn() {
    await this.closeTurn();
    if (!this.turnOpen) {
      this.turnOpen = true;
      { const pending = this.emit({ type: 'turn_start' }); if (pending !== undefined) await pending; }
    }
  }

  async onEvent(event) {
    if (event.type === 'run_start') {
      this.runId = event.run_id;
      { const pending = this.emit({ type: 'agent_start' }); if (pending !== undefined) await pending; }
      await this.openTurn();
      for (const message of this.prompts) await this.message(message);
      return;
    }
    if (event.type === 'run_end') {
      await this.closeTurn();
      const result = event.result;
      this.end = result.cause;
      const unconsumed = result.unconsumed ?? [];
      let steering;
      let followUps;
      if (unconsumed.length === this.steered.length + this.followed.length) {
        // runcore hands back steering first, then follow-ups: what this host queued and
        // runcore did not take, in order.
        steering = this.steered;
        followUps = this.followed;
      } else {
        steering = [];
        followUps = unconsumed.map((m) => this.original(m));
      }
      this.unconsumed = [...steering, ...followUps];
      this.steered = [];
      this.followed = [];
      // pi's queues outlive a run: what this one did not take is queued for the next.
      if (this.requeue) this.requeue(steering, followUps);
      const end = { type: 'agent_end', messages: this.newMessages };
      { const pending = this.emit(end); if (pending !== undefined) await pending; }
      return;
    }
    if (event.type !== 'loop') return;
    const loop = event.event;
    switch (loop.type) {
      case 'assistant_message': {
        const message = this.answer ?? fromCore(loop.message, this.loop().model);
        this.answer = null;
        if (!this.streamed) { const pending = this.emit({ type: 'message_start', message: { ...message } }); if (pending !== undefined) await pending; }
        this.streamed = false;
        this.append(message);
        this.turnMessage = message;
        { const pending = this.emit({ type: 'message_end', message }); if (pending !== undefined) await pending; }
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
          // Taken by runcore: no longer queued, then announced in the new turn.
          const queue = origin === 'steering' ? this.steered : this.followed;
          const message = queue.length > 0 ? queue.shift() : fromCore(loop.message);
          await this.openTurn();
          await this.message(message);
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
      let context;
      if (loop.convertToLlm === defaultConvertToLlm && !loop.transformContext && loop.llmCache) {
        // The default conversion, incremental; the stream function's copy made when it reads it.
        context = lazyContext(loop.systemPrompt, convertIncrementally(loop.llmCache, messages), loop.tools);
      } else {
        if (loop.transformContext) messages = await loop.transformContext(messages, this.signal);
        const llmMessages = await loop.convertToLlm(messages);
        context = { systemPrompt: loop.systemPrompt, messages: llmMessages, tools: loop.tools };
      }
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
          { const pending = this.emit({ type: 'message_start', message: { ...event.partial } }); if (pending !== undefined) await pending; }
        } else if (event.type === 'done' || event.type === 'error') {
          break;
        } else if (this.streamed && event.partial) {
          this.partial(event.partial);
          { const pending = this.emit({ type: 'message_update', assistantMessageEvent: event, message: { ...event.partial } }); if (pending !== undefined) await pending; }
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
    const pending = this.emit({
      type: 'tool_execution_end',
      toolCallId: call.id,
      toolName: call.name,
      result: outcome.result,
      isError: outcome.isError,
    });
    if (pending !== undefined) await pending;
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
      { const pending = this.emit({ type: 'tool_execution_start', toolCallId: call.id, toolName: call.name, args: call.arguments }); if (pending !== undefined) await pending; }
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
    for (const { call, outcome, message } of done) {
      const options = { isError: outcome.isError };
      const details = outcome.result.details;
      // `{}` is pi's "no details" and reads back as `{}` (fromCore); it is not committed.
      if (details !== undefined && !isEmptyObject(details)) options.details = details;
      // The message's own fields (`timestamp`) ride in `meta`: a recovered transcript has them.
      const meta = toolResultMeta(message);
      if (meta !== undefined) options.meta = meta;
      const content = outcome.result.content ?? [];
      // One text block goes as its text (the native fast path), anything else as blocks.
      const answer = content.length === 1 && content[0].type === 'text' && typeof content[0].text === 'string'
        ? content[0].text
        : content.map(userBlockToCore);
      this.native.toolDone(action.run_id, call.id, answer, options);
    }
  }
}


module.exports = { Host, errorText };
