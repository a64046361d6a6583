'use strict';
// pi's `Agent` over runcore's native agent: state, subscriptions, prompt / continue / steer /
// followUp / abort, and the durable mode (a store, a claimed thread, recovery).

const { hostname } = require('node:os');
const { randomUUID } = require('node:crypto');
const runcore = require('../index.js');
const { Host, errorText } = require('./host.js');
const {
  EMPTY_USAGE, DEFAULT_MODEL, toCore, toInput, fromCore, promptLine, defaultConvertToLlm,
} = require('./messages.js');

const BUSY_PROMPT =
  'Agent is already processing a prompt. Use steer() or followUp() to queue messages, or wait for completion.';
const BUSY_CONTINUE = 'Agent is already processing. Wait for completion before continuing.';

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
  // What runcore's transcript holds: the first #coreLen messages of #coreArray, the last one
  // #coreLast (compared by identity: pi messages are objects the host keeps).
  #coreArray = [];
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
  // pi's agent-level queues: what was queued while no run could take it (idle, or after the
  // run's input closed), and what a run handed back unconsumed. The next run gets them as
  // pi would deliver them (SPEC §8.2: the host re-submits them, an explicit choice).
  #steeringQueue = [];
  #followUpQueue = [];
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
        // Reassigned during a run (by a listener, or by another promise chain before the run
        // settled): the run goes on over its own copy, and what it appends from here on lands
        // in the new array, as pi's does.
        if (self.#host !== null) self.#host.detach(self.#messages);
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
    this.#coreArray = this.#messages;
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
    core._native.setBareCalls(true);
    const model = this.#state.model;
    return { core, messages: core.transcript().map((m) => fromCore(m, model)) };
  }

  #setCommitted() {
    this.#coreArray = this.#messages;
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

  /** Changes a queue mode at any time: runcore's applies from the next boundary (`set_queue_modes`). */
  #setMode(which, mode) {
    if (!(mode in MODES)) throw new TypeError(`runcore/pi: unknown queue mode ${JSON.stringify(mode)}`);
    if (which === 'steering') this.#steeringMode = mode;
    else this.#followUpMode = mode;
    if (this.#core !== null) {
      this.#core.setQueueModes(which === 'steering' ? { steeringMode: MODES[mode] } : { followUpMode: MODES[mode] });
    }
  }

  subscribe(listener) {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  get signal() {
    return this.#active?.controller.signal;
  }

  /**
   * Queues steering: the active run's (runcore takes it at its next complete boundary), or,
   * while no run can take it, pi's queue for the next run.
   */
  steer(message) {
    if (!this.#handTo(this.#host, message, true)) this.#steeringQueue.push(message);
  }

  /** Queues a follow-up: the active run's, or, while no run can take it, pi's queue for the next run. */
  followUp(message) {
    if (!this.#handTo(this.#host, message, false)) this.#followUpQueue.push(message);
  }

  /** Queues `message` in the active run of `host`; `false` when no run takes input now. */
  #handTo(host, message, steering) {
    if (host === null || !host.started || host.end !== null) return false;
    try {
      if (steering) host.steer(message);
      else host.followUp(message);
      return true;
    } catch (error) {
      if (error instanceof runcore.NotAcceptingError) return false;
      throw error;
    }
  }

  /** Takes from pi's queue as its mode says (`one-at-a-time`: the oldest only). */
  #take(steering) {
    const queue = steering ? this.#steeringQueue : this.#followUpQueue;
    const mode = steering ? this.#steeringMode : this.#followUpMode;
    if (queue.length === 0) return [];
    if (mode === 'all') return queue.splice(0);
    return queue.splice(0, 1);
  }

  /** Hands what is left in pi's queues to the run that just started (runcore's queues, each mode applied at its boundaries). */
  #handOver(host) {
    for (const [queue, steering] of [[this.#steeringQueue, true], [this.#followUpQueue, false]]) {
      const left = queue.splice(0);
      for (let i = 0; i < left.length; i++) {
        if (!this.#handTo(host, left[i], steering)) {
          queue.push(...left.slice(i));
          break;
        }
      }
    }
  }

  /** What a run handed back, ahead of anything queued since (pi's queues outlive a run). */
  #requeue(steering, followUps) {
    this.#steeringQueue.unshift(...steering);
    this.#followUpQueue.unshift(...followUps);
  }

  /**
   * Withdraws what the active run has not taken (runcore's `clear_queues`, which empties both
   * of its queues: the other queue is given back to it), and empties pi's queue.
   */
  #clear(steering, followUps) {
    if (steering) this.#steeringQueue = [];
    if (followUps) this.#followUpQueue = [];
    const host = this.#host;
    if (host === null || host.steered.length + host.followed.length === 0) return;
    const keepSteering = steering ? [] : host.steered;
    const keepFollowUps = followUps ? [] : host.followed;
    this.#native().clearQueues();
    host.steered = [];
    host.followed = [];
    for (const m of keepSteering) if (!this.#handTo(host, m, true)) this.#steeringQueue.push(m);
    for (const m of keepFollowUps) if (!this.#handTo(host, m, false)) this.#followUpQueue.push(m);
  }

  /** Removes every queued steering message: pi's queue, and what the active run has not taken. */
  clearSteeringQueue() {
    this.#clear(true, false);
  }

  /** Removes every queued follow-up: pi's queue, and what the active run has not taken. */
  clearFollowUpQueue() {
    this.#clear(false, true);
  }

  /** Removes every queued message. */
  clearAllQueues() {
    this.#clear(true, true);
  }

  /** Whether anything is queued: in pi's queues, or in the active run not yet taken. */
  hasQueuedMessages() {
    const host = this.#host;
    const inRun = host === null ? 0 : host.steered.length + host.followed.length;
    return inRun + this.#steeringQueue.length + this.#followUpQueue.length > 0;
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
    this.#coreArray = [];
    this.#coreLen = 0;
    this.#coreLast = undefined;
    this.#state.isStreaming = false;
    this.#state.streamingMessage = undefined;
    this.#state.pendingToolCalls = new Set();
    this.#state.errorMessage = undefined;
    this.#unconsumed = [];
    this.#steeringQueue = [];
    this.#followUpQueue = [];
  }

  #native() {
    if (this.#core === null) {
      this.#core = new runcore.Agent(this.#config());
      // In memory nothing stores commits: the native agent drops them unseen (never hashed,
      // crossed or decoded); events and actions come as before.
      if (!this.#store) this.#core._native.setDropCommits(true);
      // The host keeps the transcript (state.messages): call_model's messages are never read.
      this.#core._native.setBareCalls(true);
    }
    return this.#core;
  }

  /**
   * Whether `state.messages` begins with what runcore's transcript holds: the same array (then
   * its length and the last message runcore has are compared), or a new one (then every
   * message, by identity: it was reassigned).
   */
  #extendsCore(messages) {
    const len = this.#coreLen;
    if (messages.length < len || (len > 0 && messages[len - 1] !== this.#coreLast)) return false;
    if (messages === this.#coreArray) return true;
    const core = this.#coreArray;
    for (let i = 0; i < len - 1; i++) if (messages[i] !== core[i]) return false;
    return true;
  }

  /** Brings runcore's transcript up to `state.messages`: imports what was appended, or (in memory) starts over. */
  async #sync() {
    const messages = this.#messages;
    const len = this.#coreLen;
    const extendsCore = (this.#core !== null || len === 0) && this.#extendsCore(messages);
    if (extendsCore && messages.length === len) {
      this.#coreArray = messages;
      return;
    }
    let suffix;
    if (extendsCore && this.#core !== null) {
      suffix = messages.slice(len);
    } else {
      if (this.#store) {
        throw new Error('runcore/pi: a durable thread\'s committed messages cannot be replaced; append to state.messages instead');
      }
      this.#core = null;
      this.#coreArray = [];
      this.#coreLen = 0;
      this.#coreLast = undefined;
      suffix = messages.slice();
    }
    const core = this.#native();
    if (suffix.length > 0) {
      core.handle({ type: 'import', messages: suffix.map(toCore) });
      for (const output of core.drain()) {
        if (output.type === 'commit' && this.#store) await this.#commit(output);
      }
    }
    this.#coreArray = messages;
    this.#coreLen = messages.length;
    this.#coreLast = messages[messages.length - 1];
  }

  /** Updates the state for `event`, then the listeners' promise; `undefined` when none listens. */
  #emit(event) {
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
    if (this.#listeners.size === 0) return undefined;
    return this.#notify(event, this.#active?.controller.signal);
  }

  async #notify(event, signal) {
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
      requeue: (steering, followUps) => this.#requeue(steering, followUps),
      publish: (message, context) => {
        if (this.#messages !== context) this.#messages.push(message);
      },
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
        // runcore's transcript is the run's context: what it held before, and what the run
        // appended (whatever became of state.messages meanwhile).
        if (host.appended > 0) {
          this.#coreArray = host.messages;
          this.#coreLen += host.appended;
          this.#coreLast = host.lastAppended;
        }
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
      for (let i = this.#coreLen + host.appended; i < transcript.length; i++) host.append(fromCore(transcript[i], model));
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
    await this.#start(messages, true);
  }

  /**
   * Runs over the transcript. After an assistant message, what pi's queues hold runs instead
   * (steering first, else follow-ups, each as its mode takes them) as the run's prompt.
   */
  async continue() {
    if (this.#active) throw new Error(BUSY_CONTINUE);
    const last = this.#messages[this.#messages.length - 1];
    if (!last) throw new Error('No messages to continue from');
    if (last.role === 'assistant') {
      const steering = this.#take(true);
      if (steering.length > 0) return this.#start(steering, false, 'steering');
      const followUps = this.#take(false);
      if (followUps.length > 0) return this.#start(followUps, true, 'followUp');
      throw new Error('Cannot continue from message role: assistant');
    }
    return this.#start([], true);
  }

  /**
   * A run that begins with `prompts` (none: it continues the transcript). pi's queues enter as
   * pi delivers them: queued steering (as its mode takes it, unless `steering` is false)
   * right after the prompts, in the run's first commit (SPEC §8.10: several prompt messages);
   * the rest goes to the run's queues, taken at its boundaries. `from` is the queue the
   * prompts were taken from, if any (a refused prompt gives them back).
   */
  async #start(prompts, steering, from = null) {
    await this.#run(async (host) => {
      await this.#ready();
      await this.#sync();
      const opening = steering ? [...prompts, ...this.#take(true)] : prompts;
      const native = this.#native();
      if (opening.length > 0) {
        host.prompts = opening;
        try {
          native.handle(promptLine(opening));
        } catch (error) {
          // Refused (nothing changed): the queued messages it held stay queued.
          this.#steeringQueue.unshift(...opening.slice(prompts.length));
          if (from === 'steering') this.#steeringQueue.unshift(...prompts);
          else if (from === 'followUp') this.#followUpQueue.unshift(...prompts);
          throw error;
        }
      } else {
        native.handle({ type: 'continue' });
      }
      host.started = true;
      this.#handOver(host);
      // An abort made before the run existed (while the claim was asked) still cancels it.
      if (host.signal.aborted) native.abort();
      await host.pump();
    });
  }
}

module.exports = { Agent };
