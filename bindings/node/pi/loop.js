'use strict';
// pi's `agentLoop` / `agentLoopContinue`: one run on a fresh in-memory native agent that holds
// the context's messages (imported, SPEC §8.10), as an async iterable of pi's events.

const runcore = require('../index.js');
const { Host, errorText } = require('./host.js');
const { toCore, promptLine } = require('./messages.js');

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
  // In memory, the host keeping the messages: no commit or call_model context is used.
  agent._native.setDropCommits(true);
  agent._native.setBareCalls(true);
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

/** The checks of pi's continue: a context that ends in a message the model can answer. */
function checkContinue(context) {
  if (context.messages.length === 0) throw new Error('Cannot continue: no messages in context');
  if (context.messages[context.messages.length - 1].role === 'assistant') {
    throw new Error('Cannot continue from message role: assistant');
  }
}

/** pi's `agentLoopContinue`: a run over the context as it is. */
function agentLoopContinue(context, config, signal, streamFn) {
  checkContinue(context);
  return startLoop([], context, config, signal, streamFn);
}

/**
 * pi's `runAgentLoop`: a run that starts with `prompts`, each event awaited through `emit`;
 * resolves to the run's new messages.
 */
async function runAgentLoop(prompts, context, config, emit, signal, streamFn) {
  const core = nativeWith(context.messages, { max_steps: config.maxSteps ?? 32, context: 'delta' });
  return runLoop(core, prompts, context, config, async (event) => {
    await emit(event);
  }, signal, streamFn);
}

/** pi's `runAgentLoopContinue`: a run over the context as it is, each event awaited through `emit`. */
async function runAgentLoopContinue(context, config, emit, signal, streamFn) {
  checkContinue(context);
  return runAgentLoop([], context, config, emit, signal, streamFn);
}

module.exports = { agentLoop, agentLoopContinue, runAgentLoop, runAgentLoopContinue, AgentEventStream };
