'use strict';
// The package `runcore`: the native module (`runcore.node`, built by `npm run build`) wrapped
// in the package's API. Every output is the JSON line `runcore drive` writes, as `JSON.parse`
// makes it: an Agent's outputs cross as a tape (src/tape.rs) rebuilt here, the rest as the
// JSON text itself. Every input method builds the driver's input line (or, for the hot inputs,
// the input itself).

const { hostname } = require('node:os');
const { randomUUID } = require('node:crypto');
const native = require('./runcore.node');

/** A claim owner unique to this process and call: host name, pid and a random id. */
function defaultOwner() {
  return `${hostname()}:${process.pid}:${randomUUID()}`;
}

const MARK = 'runcore:';

/** An input the agent rejected (SPEC §10); the agent is unchanged. */
class AgentError extends Error {
  constructor(body) {
    super(body.message);
    this.name = new.target.name;
    this.kind = body.kind;
    const details = {};
    for (const [key, value] of Object.entries(body)) {
      if (key !== 'kind' && key !== 'message') details[key] = value;
    }
    this.details = details;
    for (const [key, value] of Object.entries(details)) {
      if (!(key in this)) this[key] = value;
    }
  }
}

const KINDS = {
  busy: 'BusyError',
  not_accepting: 'NotAcceptingError',
  unexpected_outcome: 'UnexpectedOutcomeError',
  unknown_call: 'UnknownCallError',
  duplicate_outcome: 'DuplicateOutcomeError',
  resume: 'ResumeError',
  invalid_state: 'InvalidStateError',
  not_expired: 'NotExpiredError',
  invalid_input: 'InvalidInputError',
  invalid_json: 'InvalidJsonError',
  internal: 'InternalError',
};

const errorClasses = { AgentError };
for (const name of Object.values(KINDS)) {
  // A named subclass per kind, so `instanceof BusyError` and `err.name` both work.
  errorClasses[name] = { [name]: class extends AgentError {} }[name];
}

/**
 * A store call failed: `.reason` is the rejection's code, `transcript`, `unavailable` or `open`
 * (the `reason` of the core's store error body); `.code` is the same, its older name.
 */
class StoreError extends Error {
  constructor(body) {
    super(body.message);
    this.name = 'StoreError';
    this.kind = 'store';
    // A body written before the field had one name carries `code`.
    this.reason = body.reason ?? body.code;
    this.code = this.reason;
  }
}

/** A snapshot that cannot be restored: `.code` is `newer_version`, `malformed`, … */
class SnapshotError extends Error {
  constructor(body) {
    super(body.message);
    this.name = 'SnapshotError';
    this.kind = 'snapshot';
    this.code = body.code;
  }
}

/**
 * A provider codec (`providers.*`) refused its arguments: `.code` is `options` (bad options),
 * `call_model` (not a full-context `call_model` output), `api` (unknown API) or `finished` (a
 * decoder used after `finish()`).
 */
class CodecError extends Error {
  constructor(body) {
    super(body.message);
    this.name = 'CodecError';
    this.kind = 'codec';
    this.code = body.code;
  }
}

function fromBody(body) {
  if (body.kind === 'store') return new StoreError(body);
  if (body.kind === 'codec') return new CodecError(body);
  if (body.kind === 'snapshot') return new SnapshotError(body);
  if (body.kind === 'argument') return new TypeError(body.message);
  const name = KINDS[body.kind];
  return new (name ? errorClasses[name] : AgentError)(body);
}

/** Rethrows a native error as the package's class. */
function rethrow(error) {
  if (error && typeof error.message === 'string' && error.message.startsWith(MARK)) {
    let body;
    try {
      body = JSON.parse(error.message.slice(MARK.length));
    } catch {
      body = { kind: 'internal', message: error.message };
    }
    throw fromBody(body);
  }
  if (error instanceof Error && error.code === 'GenericFailure') {
    // A Rust panic the native boundary caught (napi-rs's `catch_unwind`): runcore's bug.
    throw fromBody({ kind: 'internal', message: `runcore panicked (a bug): ${error.message}` });
  }
  throw error;
}

/** The `InvalidJsonError` the driver gives a line that does not read. */
function invalidJson(message) {
  return fromBody({ kind: 'invalid_json', message });
}

function parseOrNull(text) {
  return text === null || text === undefined ? null : JSON.parse(text);
}

/** Lines ending in `\n` (what the binary writes) as objects. */
function parseLines(text) {
  if (text.length === 0) return [];
  return JSON.parse('[' + text.slice(0, -1).replaceAll('\n', ',') + ']');
}

function isNow(nowMs) {
  return Number.isSafeInteger(nowMs) && nowMs >= 0;
}

/**
 * A string the fast paths may hand Rust as it is: Node-API would turn a lone surrogate into
 * U+FFFD, where the JSON line (`JSON.stringify` writes it as `\\uD800`) is refused by the
 * driver, so such a string takes the line's way.
 */
function isText(value) {
  return typeof value === 'string' && value.isWellFormed();
}

/** An object made by `{…}` (its JSON text is an object's, unless a `toJSON` says otherwise). */
function isPlainObject(value) {
  return value !== null && typeof value === 'object' &&
    Object.getPrototypeOf(value) === Object.prototype && typeof value.toJSON !== 'function';
}

/**
 * The text of a text-only answer, `{content: [{type: "text", text}], stop_reason}` with
 * exactly those keys on plain objects (nothing `JSON.stringify` would write differently), or
 * `undefined`.
 */
function answerText(message) {
  if (Object.getPrototypeOf(message) !== Object.prototype || !isText(message.stop_reason)) {
    return undefined;
  }
  const content = message.content;
  if (!Array.isArray(content) || content.length !== 1 ||
      Object.getPrototypeOf(content) !== Array.prototype) {
    return undefined;
  }
  const block = content[0];
  if (block === null || typeof block !== 'object' || Object.getPrototypeOf(block) !== Object.prototype ||
      block.type !== 'text' || !isText(block.text) || 'toJSON' in message || 'toJSON' in block ||
      Object.keys(message).length !== 2 || Object.keys(block).length !== 2) {
    return undefined;
  }
  return block.text;
}

function isStep(step) {
  return Number.isInteger(step) && step >= 0 && step <= 0xffffffff;
}

/**
 * A `nowMs` argument as the line carries it: a number that is not an integer from 0 to
 * 2^53 - 1 (`NaN`, `Infinity`, negative, fractional, past 2^53 - 1) goes as its text, which the
 * driver refuses (`InvalidJsonError`, after the checks it makes first, as for any line),
 * never as `null` (which `JSON.stringify` writes for `NaN` and would read as no time).
 */
function checkNow(nowMs) {
  return typeof nowMs === 'number' && !isNow(nowMs) ? String(nowMs) : nowMs;
}

function withNow(line, nowMs) {
  if (nowMs !== undefined && nowMs !== null) line.now_ms = checkNow(nowMs);
  return line;
}

/** The index of the first lone surrogate of `text` (a string that is not well-formed). */
function loneSurrogate(text) {
  for (let i = 0; i < text.length; i++) {
    const unit = text.charCodeAt(i);
    if (unit >= 0xd800 && unit <= 0xdbff) {
      const next = text.charCodeAt(i + 1);
      if (next >= 0xdc00 && next <= 0xdfff) {
        i++;
        continue;
      }
      return i;
    }
    if (unit >= 0xdc00 && unit <= 0xdfff) return i;
  }
  return -1;
}

/**
 * A line's text as the bytes the driver reads: UTF-8, with a lone surrogate written as its
 * three-byte form (WTF-8), which is not UTF-8, so the driver refuses the line as it refuses
 * those bytes on its stdin (Node-API would turn it into U+FFFD instead).
 */
function lineBytes(text) {
  if (text.isWellFormed()) return text;
  const parts = [];
  let start = 0;
  for (let at = loneSurrogate(text); at !== -1; at = loneSurrogate(text.slice(start))) {
    at += start;
    parts.push(Buffer.from(text.slice(start, at), 'utf8'));
    const unit = text.charCodeAt(at);
    parts.push(Buffer.from([0xe0 | (unit >> 12), 0x80 | ((unit >> 6) & 0x3f), 0x80 | (unit & 0x3f)]));
    start = at + 1;
  }
  parts.push(Buffer.from(text.slice(start), 'utf8'));
  return Buffer.concat(parts);
}

/** Refuses a line that is not well-formed Unicode, as the driver refuses its bytes. */
function checkLineText(text) {
  if (typeof text === 'string' && !text.isWellFormed()) {
    const at = Buffer.byteLength(text.slice(0, loneSurrogate(text)), 'utf8');
    throw invalidJson(`the line is not valid UTF-8 (at byte ${at})`);
  }
  return text;
}

/**
 * Refuses a string argument (an id, an owner, a cursor) holding a lone surrogate as the
 * driver refuses a line holding one (`InvalidJsonError`): Node-API would turn it into U+FFFD
 * and the call would act on another id.
 */
function checkText(value, name) {
  if (typeof value === 'string' && !value.isWellFormed()) {
    throw invalidJson(`not a valid input line: ${name} holds a lone surrogate at index ` +
      `${loneSurrogate(value)}, which is not valid Unicode`);
  }
  return value;
}

/**
 * `JSON.stringify(value)`, refusing a string in it that holds a lone surrogate (which
 * `JSON.stringify` writes as a `\uD800`-style escape, every literal backslash doubled) as
 * `checkText` does.
 */
function stringified(value, name) {
  const text = JSON.stringify(value);
  if (typeof text === 'string' && text.includes('\\ud') && /(^|[^\\])(\\\\)*\\ud[89a-f]/.test(text)) {
    throw invalidJson(`not a valid input line: a string in ${name} holds a lone surrogate, ` +
      'which is not valid Unicode');
  }
  return text;
}

function configText(config) {
  if (config === undefined || config === null) return undefined;
  if (typeof config !== 'object' || Array.isArray(config)) {
    throw new TypeError('config must be an object with the fields of a config line');
  }
  return JSON.stringify(config);
}

/**
 * A store read's `limit`: `undefined` (the default, 100) or an integer from 0 to 2^32 - 1;
 * anything else throws (`TypeError` for a non-number, `RangeError` for `NaN`, `Infinity`,
 * negatives, fractions and larger numbers), never wraps.
 */
function checkLimit(limit) {
  if (limit === undefined || limit === null) return undefined;
  if (typeof limit !== 'number') throw new TypeError('limit must be a number');
  if (!Number.isInteger(limit) || limit < 0 || limit > 0xffffffff) {
    throw new RangeError(`limit must be an integer from 0 to 2^32 - 1, got ${limit}`);
  }
  return limit;
}

const POLICIES = ['replay', 'seal'];

function checkPolicy(policy) {
  if (!POLICIES.includes(policy)) {
    throw new TypeError(`policy must be "replay" or "seal", got ${JSON.stringify(policy)}`);
  }
  return policy;
}

// ----- the tape (src/tape.rs) ------------------------------------------------------------
// A batch of outputs crosses as a string (every string's contents back to back) and words in
// TAPE: a header (total words, reset flag, the batch's new keys and shapes), then the values,
// each a tag in its low 3 bits and a payload above. Keys and shapes are numbered per agent
// (both sides keep the same tables); a shape (an object's keys in order) becomes a function
// that builds the object as one literal, shared by every agent.

let TAPE = new Uint32Array(1 << 16);
// The batch being decoded: its words, text, positions in both, keys and shapes.
let T = TAPE;
let S = '';
let P = 0;
let SP = 0;
let K = [];
let SH = [];
const F64 = new Float64Array(1);
const F64_WORDS = new Uint32Array(F64.buffer);
const LONG = (1 << 29) - 1;
// True while a batch is decoded: no poll may start then (it would overwrite the batch).
let DECODING = false;

function value() {
  const op = T[P++];
  const x = op >>> 3;
  switch (op & 7) {
    case 0:
      return x;
    case 1: {
      const end = SP + (x === LONG ? T[P++] : x);
      const s = S.slice(SP, end);
      SP = end;
      return s;
    }
    case 2:
      // Array literals and `Array.from` define their elements: no setter an inherited
      // `Array.prototype` property may have runs.
      return x < ARRAYS.length ? ARRAYS[x]() : Array.from({ length: x }, element);
    case 3:
      return SH[x]();
    case 4:
      return K[x];
    case 5:
      return x === 0 ? null : x === 2;
    case 6:
      F64_WORDS[0] = T[P++];
      F64_WORDS[1] = T[P++];
      return F64[0];
    default: {
      const end = SP + (x === LONG ? T[P++] : x);
      const text = S.slice(SP, end);
      SP = end;
      return JSON.parse(text);
    }
  }
}

/** Appends `item` to `array` by defining it (no inherited setter runs). */
function append(array, item) {
  Object.defineProperty(array, array.length, { value: item, writable: true, enumerable: true, configurable: true });
}

function element() {
  return value();
}

/** Builders of arrays of 0 to 15 elements, each one array literal. */
const ARRAYS = Array.from({ length: 16 }, (_, n) =>
  new Function('v', `'use strict';return function(){return[${Array(n).fill('v()').join(',')}]}`)(value));

/**
 * Builds an object of shape `keys` key by key, every key defined as an own property (no
 * inherited setter runs, a key `__proto__` included), as `JSON.parse` does.
 */
function keyByKey(keys) {
  return function build() {
    const object = {};
    for (let i = 0; i < keys.length; i++) {
      Object.defineProperty(object, keys[i], { value: value(), writable: true, enumerable: true, configurable: true });
    }
    return object;
  };
}

/** Builds an object of shape `keys` as one literal, or null (too many keys, no `Function`). */
function literal(keys) {
  if (keys.length > 64) return null;
  // `["__proto__"]:` defines an own property, as JSON.parse does; `"__proto__":` would not.
  const fields = keys.map((key) => `${key === '__proto__' ? '["__proto__"]' : JSON.stringify(key)}:v()`);
  try {
    return new Function('v', `'use strict';return function(){return{${fields.join(',')}}}`)(value);
  } catch {
    return null;
  }
}

const SHAPES = new Map();
const MAX_SHAPES = 4096;

function shapeOf(keys) {
  const signature = JSON.stringify(keys);
  let build = SHAPES.get(signature);
  if (build !== undefined) return build;
  if (SHAPES.size >= MAX_SHAPES) return keyByKey(keys);
  build = literal(keys) ?? keyByKey(keys);
  SHAPES.set(signature, build);
  return build;
}

/** One agent's side of the tape: its keys and shapes. */
class TapeReader {
  constructor(native) {
    this.native = native;
    this.keys = [];
    this.shapes = [];
  }

  /**
   * Tells the native side, in the tape's first two words, how many keys and shapes this side
   * holds, before a poll: when they are not its own counts it starts both tables afresh (in
   * the batch's reset flag), so a batch is never decoded with tables that differ from the ones
   * it was written with.
   */
  announce() {
    if (DECODING) {
      throw fromBody({
        kind: 'internal',
        message: 'an Agent was polled while a batch was being decoded (reentrant poll)',
      });
    }
    TAPE[0] = this.keys.length;
    TAPE[1] = this.shapes.length;
    return TAPE;
  }

  /** Starts decoding the batch just polled (its text `text`): reads its header. */
  begin(text) {
    if (TAPE[0] > TAPE.length) {
      TAPE = new Uint32Array(Math.max(TAPE[0], TAPE.length * 2));
      this.native.tapeCopy(TAPE);
    }
    T = TAPE;
    S = text;
    SP = 0;
    const { keys, shapes } = this;
    if ((T[1] & 1) !== 0) {
      keys.length = 0;
      shapes.length = 0;
    }
    let p = 2;
    for (let n = T[p++]; n > 0; n--) {
      const end = SP + T[p++];
      append(keys, S.slice(SP, end));
      SP = end;
    }
    for (let n = T[p++]; n > 0; n--) {
      const count = T[p++];
      const names = Array.from({ length: count }, () => keys[T[p++]]);
      append(shapes, shapeOf(names));
    }
    P = p;
    K = keys;
    SH = shapes;
  }

  /** The batch's one value. */
  one(text) {
    DECODING = true;
    try {
      this.begin(text);
      return value();
    } catch (e) {
      this.lost();
      throw e;
    } finally {
      DECODING = false;
    }
  }

  /** The batch's values. */
  all(text) {
    DECODING = true;
    try {
      this.begin(text);
      // The batch's value count is in the header (above the reset flag): the array is built
      // by defining its elements, never by setting them.
      const count = T[1] >>> 1;
      return count < ARRAYS.length ? ARRAYS[count]() : Array.from({ length: count }, element);
    } catch (e) {
      this.lost();
      throw e;
    } finally {
      DECODING = false;
    }
  }

  /** A batch not decoded to its end: both sides forget their tables. */
  lost() {
    this.keys.length = 0;
    this.shapes.length = 0;
    this.native.tapeReset();
  }
}

/**
 * One agent per thread (SPEC §8): call one input method, then `poll()` until it returns
 * `null` (or iterate `drain()`), acting on each output in order.
 */
class Agent {
  #native;
  #tape;
  // The batch the last poll() got ahead (outputs still queued in Rust until handed out), and
  // how many of it poll() has handed out.
  #ahead = null;
  #next = 0;

  /** An idle agent; `config` has the fields of the driver's `config` line. */
  constructor(config) {
    if (config instanceof native.NativeAgent) {
      this.#native = config;
    } else {
      try {
        this.#native = new native.NativeAgent(configText(config));
      } catch (e) {
        rethrow(e);
      }
    }
    try {
      this.#native.enableFastCalls();
    } catch (e) {
      rethrow(e);
    }
    this.#tape = new TapeReader(this.#native);
  }

  #line(line) {
    try {
      native.agentHandle(this.#agent, JSON.stringify(line));
    } catch (e) {
      rethrow(e);
    }
  }

  #starting(line) {
    try {
      return this.#agent.handleStarting(JSON.stringify(line));
    } catch (e) {
      rethrow(e);
    }
  }

  /** Any driver input line, as an object or its JSON text. */
  handle(line) {
    try {
      this.#agent.handle(checkLineText(typeof line === 'string' ? line : JSON.stringify(line)));
    } catch (e) {
      rethrow(e);
    }
  }

  /** Starts a run with the user's `text`; returns its run id. */
  prompt(text, { runId, nowMs } = {}) {
    if (Array.isArray(text)) {
      // Several user messages (SPEC §8.10), through the line path.
      const line = { type: 'prompt', messages: text };
      if (runId !== undefined) line.run_id = runId;
      return this.#starting(withNow(line, nowMs));
    }
    if (isText(text) && (runId === undefined || isText(runId)) &&
        (nowMs === undefined || isNow(nowMs))) {
      try {
        return native.agentPrompt(this.#agent, text, runId, nowMs);
      } catch (e) {
        rethrow(e);
      }
    }
    const line = { type: 'prompt', text };
    if (runId !== undefined) line.run_id = runId;
    return this.#starting(withNow(line, nowMs));
  }

  /**
   * Appends existing messages (any roles) to this idle agent's transcript as one committed,
   * ended run, without a model call (SPEC §8.10); returns the import's run id. Throws
   * `InvalidInputError` naming the broken rule and the message index, `BusyError` while a run
   * is active.
   */
  import(messages, { nowMs } = {}) {
    try {
      return this.#agent.handleImported(JSON.stringify(withNow({ type: 'import', messages }, nowMs)));
    } catch (e) {
      rethrow(e);
    }
  }

  /** Queues steering for the active run (enters at the next complete boundary). */
  steer(text, { nowMs } = {}) {
    this.#line(withNow({ type: 'steer', text }, nowMs));
  }

  /** Queues a follow-up (enters only after a natural text stop). */
  followUp(text, { nowMs } = {}) {
    this.#line(withNow({ type: 'follow_up', text }, nowMs));
  }

  /** Cancels the active run (a no-op when idle). */
  abort({ nowMs } = {}) {
    this.#line(withNow({ type: 'abort' }, nowMs));
  }

  /** Asks the running run to pause at its next boundary. */
  pause({ nowMs } = {}) {
    this.#line(withNow({ type: 'pause' }, nowMs));
  }

  /**
   * Withdraws what the active run has not taken from its queues (SPEC §8.2): a
   * `queues_cleared` event carries them (both empty while idle); nothing committed changes.
   */
  clearQueues({ nowMs } = {}) {
    this.#line(withNow({ type: 'clear_queues' }, nowMs));
  }

  /**
   * Changes the queue modes (`'all'` or `'one_at_a_time'`; an absent one is kept) at any time,
   * from the next boundary on (SPEC §8.2); neither given is `InvalidInputError`.
   */
  setQueueModes({ steeringMode, followUpMode, nowMs } = {}) {
    const line = { type: 'set_queue_modes' };
    if (steeringMode !== undefined) line.steering_mode = steeringMode;
    if (followUpMode !== undefined) line.follow_up_mode = followUpMode;
    this.#line(withNow(line, nowMs));
  }

  /**
   * Streamed text of the outstanding model call; `kind: 'thinking'` for streamed reasoning
   * (a `thinking_delta` event).
   */
  modelDelta(runId, step, text, { nowMs, kind } = {}) {
    if (kind !== undefined && kind !== 'text') {
      this.#line(withNow({ type: 'model_delta', run_id: runId, step, text, kind }, nowMs));
      return;
    }
    if (isText(runId) && isStep(step) && isText(text) &&
        (nowMs === undefined || isNow(nowMs))) {
      try {
        native.agentModelDelta(this.#agent, runId, step, text, nowMs);
        return;
      } catch (e) {
        rethrow(e);
      }
    }
    this.#line(withNow({ type: 'model_delta', run_id: runId, step, text }, nowMs));
  }

  /** The model's answer: an assistant message (`content`, `stop_reason`, …). */
  modelDone(runId, step, message, { nowMs } = {}) {
    if (isText(runId) && isStep(step) && message !== null && typeof message === 'object' &&
        !Array.isArray(message) && (nowMs === undefined || isNow(nowMs))) {
      const answer = answerText(message);
      if (answer !== undefined) {
        try {
          if (native.agentModelDoneText(this.#agent, runId, step, answer, message.stop_reason, nowMs)) return;
        } catch (e) {
          rethrow(e);
        }
      }
      let text;
      try {
        text = JSON.stringify(message);
      } catch {
        text = undefined;
      }
      if (typeof text === 'string') {
        try {
          native.agentModelDone(this.#agent, runId, step, text, nowMs);
          return;
        } catch (e) {
          rethrow(e);
        }
      }
    }
    this.#line(withNow({ type: 'model_done', run_id: runId, step, message }, nowMs));
  }

  /**
   * The outstanding model call failed with the provider's `code` and `message`; `retryAfterMs`
   * is the wait the provider asked for, if any (carried on the input: SPEC §8.11).
   */
  modelFailed(runId, step, code, message, { nowMs, retryAfterMs } = {}) {
    const line = { type: 'model_failed', run_id: runId, step, code, message };
    if (retryAfterMs !== undefined && retryAfterMs !== null) line.retry_after_ms = retryAfterMs;
    this.#line(withNow(line, nowMs));
  }

  /** Live progress of an executing call (a string or content blocks; never committed). */
  toolProgress(runId, callId, content, { nowMs } = {}) {
    this.#line(withNow({ type: 'tool_progress', run_id: runId, call_id: callId, content }, nowMs));
  }

  /**
   * The result of one executing call (a string or content blocks); `meta`, a JSON object the
   * core keeps on the result message exactly (SPEC §2.1).
   */
  toolDone(runId, callId, content, { isError = false, details, meta, nowMs } = {}) {
    if (isText(content) && details === undefined && isText(runId) &&
        isText(callId) && typeof isError === 'boolean' &&
        (nowMs === undefined || isNow(nowMs)) &&
        (meta === undefined || isPlainObject(meta))) {
      try {
        // A plain object's JSON text is an object's: the driver's check is the same.
        const metaJson = meta === undefined ? undefined : JSON.stringify(meta);
        native.agentToolDoneText(this.#agent, runId, callId, content, isError, nowMs, metaJson);
        return;
      } catch (e) {
        rethrow(e);
      }
    }
    const line = { type: 'tool_done', run_id: runId, call_id: callId, content, is_error: isError };
    if (details !== undefined) line.details = details;
    if (meta !== undefined) line.meta = meta;
    this.#line(withNow(line, nowMs));
  }

  /** A full resume command (a `ResumeCommand` object). */
  resume(command, { nowMs } = {}) {
    this.#line(withNow({ type: 'resume', command }, nowMs));
  }

  /** Answers the current ticket with a `ResumeResult` (`{type: "permission", decision: "allow"}`, …). */
  resumeTicket(result, { nowMs } = {}) {
    this.#line(withNow({ type: 'resume_ticket', result }, nowMs));
  }

  /** Ends the awaiting run `cancelled`. */
  cancelWait({ nowMs } = {}) {
    this.#line(withNow({ type: 'cancel_wait' }, nowMs));
  }

  /** Ends the active run by host policy, `stopped` with `reason`. */
  stop(reason, { nowMs } = {}) {
    this.#line(withNow({ type: 'stop', reason }, nowMs));
  }

  /** Ends an expired wait (`NotExpiredError` before its deadline). */
  expireWait(nowMs) {
    this.#line({ type: 'expire_wait', now_ms: checkNow(nowMs) });
  }

  /** Does what is due at `nowMs` (SPEC §8.5); a no-op when nothing is due yet. */
  handleTimeout(nowMs) {
    this.#line({ type: 'timeout', now_ms: checkNow(nowMs) });
  }

  /** Starts a run from the current transcript without a new message; returns its run id. */
  continueRun({ nowMs } = {}) {
    return this.#starting(withNow({ type: 'continue' }, nowMs));
  }

  /** Gives up on the executing tools: open calls `interrupted`, the run `indeterminate`. */
  abandonTools({ nowMs } = {}) {
    this.#line(withNow({ type: 'abandon_tools' }, nowMs));
  }

  /**
   * Compacts the model context (SPEC §8.9) instead of answering the outstanding model call:
   * from then on the model sees `[summary, ...transcript.slice(keepFrom)]`; the transcript
   * stays committed. `summary` is text, content blocks or a user message.
   */
  compact(summary, keepFrom, { nowMs } = {}) {
    this.#line(withNow({ type: 'compact', summary, keep_from: keepFrom }, nowMs));
  }

  /**
   * The next output as the object `runcore drive` prints (`commit`, `event`, `call_model`,
   * `execute_tools`), or `null` when there is nothing to do until the next input.
   */
  poll() {
    const ahead = this.#ahead;
    if (ahead !== null && this.#next < ahead.length) return ahead[this.#next++];
    // One call takes what was handed out of the batch held and gets the next batch: every
    // queued output at once (rendered ahead, taken one by one as they are handed out here), or
    // the next action.
    const consumed = ahead === null ? 0 : this.#next;
    this.#ahead = null;
    this.#next = 0;
    let text;
    try {
      text = native.agentPollAhead(this.#native, this.#tape.announce(), consumed);
    } catch (e) {
      rethrow(e);
    }
    if (text === null) return null;
    const batch = this.#tape.all(text);
    const first = batch[0];
    if (batch.length > 1 || (first.type !== 'call_model' && first.type !== 'execute_tools')) {
      this.#ahead = batch;
      this.#next = 1;
    }
    return first;
  }

  /**
   * The native agent, after telling it which outputs of the batch poll() holds were handed
   * out (the rest are polled again): every call but poll() goes through here, so the native
   * agent never acts with outputs handed out here still queued there.
   */
  get #agent() {
    if (this.#ahead !== null) {
      const consumed = this.#next;
      this.#ahead = null;
      this.#next = 0;
      try {
        native.agentSettle(this.#native, consumed);
      } catch (e) {
        rethrow(e);
      }
    }
    return this.#native;
  }

  /**
   * Like `poll()`, but the output as the exact JSON line `runcore drive` writes (without its
   * `\n`), or `null`: for a host that forwards lines elsewhere (its `"type"` comes first).
   */
  pollLine() {
    try {
      // A line past V8's string limit throws InternalError and stays queued (as in poll()).
      return native.agentPollLine(this.#agent);
    } catch (e) {
      rethrow(e);
    }
  }

  /** Every output up to the next input at once (what polling until `null` gives). */
  pollAll() {
    let text;
    try {
      text = native.agentPollAll(this.#agent, this.#tape.announce());
    } catch (e) {
      rethrow(e);
    }
    return this.#tape.all(text);
  }

  /** An iterator that polls lazily until `poll()` returns `null`. */
  *drain() {
    for (let output = this.poll(); output !== null; output = this.poll()) yield output;
  }

  /** The outstanding model call as its `call_model` object with the whole transcript, or `null`. */
  modelRequest() {
    try {
      return parseOrNull(this.#agent.modelRequest());
    } catch (e) {
      rethrow(e);
    }
  }

  /** The earliest `nowMs` at which something is due (call `handleTimeout` then), or `null`. */
  pollTimeout() {
    return this.#agent.pollTimeout();
  }

  /** The whole agent as JSON text (queues and in-flight actions included). */
  snapshot() {
    try {
      return this.#agent.snapshot();
    } catch (e) {
      rethrow(e);
    }
  }

  /** An agent from `snapshot()` text. */
  static restore(snapshot, { context } = {}) {
    checkText(snapshot, 'snapshot');
    try {
      return new Agent(native.NativeAgent.restore(snapshot, context));
    } catch (e) {
      rethrow(e);
    }
  }

  /**
   * An agent rebuilt from what `store` committed for `threadId` (SPEC §8.7); drain it first.
   * `config` is the configuration the thread ran with.
   */
  static recover(store, threadId, policy = 'replay', { config } = {}) {
    if (!(store instanceof Store)) {
      throw new TypeError('store must be a MemoryStore, SqliteStore or PostgresStore');
    }
    checkPolicy(policy);
    checkText(threadId, 'threadId');
    try {
      return new Agent(native.NativeAgent.recover(store._native, threadId, policy, configText(config)));
    } catch (e) {
      rethrow(e);
    }
  }

  /** The thread this agent drives. */
  get threadId() {
    return this.#agent.threadId;
  }

  /** The active run's id (`null` when idle). */
  get activeRunId() {
    return this.#agent.activeRunId;
  }

  /** The agent's clock: the latest `nowMs` of an accepted input. */
  get clockMs() {
    return this.#agent.clockMs;
  }

  /** True when no run is active and nothing is left to poll. */
  get isIdle() {
    return this.#agent.isIdle;
  }

  /** `"full"` or `"delta"`. */
  get context() {
    return this.#agent.context;
  }

  /** The ticket the active run waits on (`null` unless awaiting). */
  currentTicket() {
    return parseOrNull(this.#agent.currentTicket());
  }

  /** The transcript, as message objects. */
  transcript() {
    return JSON.parse(this.#agent.transcript());
  }

  /** @internal */
  get _native() {
    return this.#agent;
  }
}

function lineArgument(line) {
  if (typeof line === 'string') return lineBytes(line);
  if (line instanceof Uint8Array) {
    // Bytes another thread may write (a SharedArrayBuffer) are copied first (the native side
    // copies too, and reads only its copy).
    return Buffer.isBuffer(line) && !(line.buffer instanceof SharedArrayBuffer) ? line : Buffer.from(line);
  }
  if (line !== null && typeof line === 'object') return JSON.stringify(line);
  throw new TypeError('a line is a string, a Buffer or an object');
}

/**
 * `runcore drive` in process: `send(line)` returns what the binary writes for that line. With
 * `{store}` it is `runcore drive --store` (SPEC §12.2): every commit is stored before its line
 * is returned.
 */
class Driver {
  #native;

  constructor(config, { store, policy = 'replay' } = {}) {
    if (config instanceof native.NativeDriver) {
      this.#native = config;
      return;
    }
    checkPolicy(policy);
    try {
      if (store !== undefined && store !== null) {
        if (!(store instanceof Store)) {
          throw new TypeError('store must be a MemoryStore, SqliteStore or PostgresStore');
        }
        this.#native = native.NativeDriver.durable(configText(config), store._native, policy);
      } else {
        if (policy !== 'replay') {
          throw new TypeError('policy is for a durable driver (it recovers from a store): pass {store}');
        }
        this.#native = new native.NativeDriver(configText(config));
      }
    } catch (e) {
      rethrow(e);
    }
  }

  /** A driver over a copy of `agent`. */
  static fromAgent(agent) {
    return new Driver(native.NativeDriver.fromAgent(agent._native));
  }

  /** Handles one input line (text, bytes or an object) and returns the output objects. */
  send(line) {
    return parseLines(this.sendRaw(line));
  }

  /** Like `send`, but the exact text the binary writes (lines, each ending in `\n`). */
  sendRaw(line) {
    const argument = lineArgument(line);
    if (typeof argument === 'string' && argument.includes('\n')) {
      throw new RangeError('send() takes one line: the text contains a newline');
    }
    try {
      return this.#native.send(argument);
    } catch (e) {
      rethrow(e);
    }
  }

  /** What a durable driver wrote before reading input (ending with `idle` line 0), as objects. */
  get startup() {
    return parseLines(this.#native.startup);
  }

  /** The startup lines as the exact text the binary writes. */
  get startupRaw() {
    return this.#native.startup;
  }

  /** True once a durable driver's store refused a commit (later sends throw `StoreError`). */
  get closed() {
    return this.#native.closed;
  }

  /** Input lines handled so far. */
  get linesHandled() {
    return this.#native.linesHandled;
  }

  /** `"full"` or `"delta"`. */
  get context() {
    return this.#native.context;
  }

  /** The driven agent's snapshot (JSON text). */
  snapshot() {
    return this.#native.snapshot();
  }
}

/**
 * The commit log (SPEC §7, §7.1) and its read ports, records as plain objects. Every method
 * returns a promise: the call runs on libuv's thread pool, never on the JavaScript thread.
 */
const OPENED = Symbol('runcore.opened');

class Store {
  #native;

  constructor(handle, opened) {
    if (new.target === Store && opened !== OPENED) {
      throw new TypeError('use Store.open(url), MemoryStore, SqliteStore or PostgresStore');
    }
    this.#native = handle;
  }

  /**
   * The store at `url` (`sqlite:PATH`, `postgres://…`) through the one backend registry;
   * `create: false` refuses a place that holds no runcore store.
   */
  static open(url, { create = true } = {}) {
    if (typeof url !== 'string') throw new TypeError('Store.open: url must be a string');
    let handle;
    try {
      checkText(url, 'url');
      handle = native.NativeStore.open(url, create);
    } catch (e) {
      rethrow(e);
    }
    return new Store(handle, OPENED);
  }

  async #call(name, ...args) {
    for (const arg of args) checkText(arg, `an argument of ${name}`);
    let text;
    try {
      text = await this.#native[name](...args);
    } catch (e) {
      rethrow(e);
    }
    return JSON.parse(text);
  }

  /**
   * Applies a `commit` output: fenced and idempotent (SPEC §7.1); resolves to the receipt.
   * With `claim` (from `claimThread`) the commit carries its token and is refused
   * (`StoreError`, code `claim_lost`) unless that claim is the thread's current one at store
   * time `nowMs` (default `Date.now()`); without one it is refused (`claim_held`) while another
   * owner holds the thread (SPEC §7.2).
   */
  async commit(output, { claim, nowMs } = {}) {
    if (claim === undefined) return this.#call('commit', stringified(output, 'output'));
    return this.#call('commit', stringified(output, 'output'), stringified(claim, 'claim'), nowMs ?? Date.now());
  }

  /**
   * Claims a thread for `owner` for `leaseMs` (SPEC §7.2); resolves to the claim
   * (`{thread_id, owner, epoch, expires_at_ms}`), or rejects with `StoreError` code
   * `claim_held` while another owner's claim is live. A retry with the same `requestId` gets
   * the same claim.
   */
  async claimThread({ threadId, owner, requestId, leaseMs }, { nowMs } = {}) {
    const request = { thread_id: threadId, owner, request_id: requestId ?? owner, lease_ms: leaseMs };
    return this.#call('claimThread', stringified(request, 'request'), nowMs ?? Date.now());
  }

  /** Extends the current claim to store time + `leaseMs`; rejects (`claim_lost`) when it is not current. */
  async renewClaim(claim, leaseMs, { nowMs } = {}) {
    return this.#call('renewClaim', stringified(claim, 'claim'), leaseMs, nowMs ?? Date.now());
  }

  /** Ends the claim if it is the thread's current one. */
  async releaseClaim(claim, { nowMs } = {}) {
    await this.#call('releaseClaim', stringified(claim, 'claim'), nowMs ?? Date.now());
  }

  /**
   * Handles the store's due work once (SPEC §7.3, §12.4: `runcore sweep`): each passed
   * deadline expired, each orphaned run left for a worker (`policy` `'replay'`, the default)
   * or sealed (`'seal'`), each under a claim of `owner` released after it. Resolves to the
   * items, as `runcore sweep` prints them (`{thread_id, run_id, reason, action, detail?}`).
   */
  async sweep({ owner, limit = 1000, policy = 'replay', leaseMs = 30000, nowMs } = {}) {
    const who = owner ?? defaultOwner();
    return this.#call('sweep', who, `sweep:${randomUUID()}`, leaseMs, limit, policy, nowMs ?? Date.now());
  }

  /**
   * Allows the call whose permission ticket `runId` awaits (SPEC §12.5: `runcore approve`),
   * committed under a claim of its own; resolves to `{thread_id, version}`. A refused answer
   * rejects with its error (`ResumeError`, …; nothing written), another owner's live claim
   * with `StoreError` code `claim_held`.
   */
  async approve(runId, { note, owner, leaseMs = 30000, nowMs } = {}) {
    const decision = note === undefined ? { decision: 'allow' } : { decision: 'allow', note };
    return this.#answer(runId, decision, owner, leaseMs, nowMs);
  }

  /** Denies the call whose permission ticket `runId` awaits (`runcore deny`): as `approve`. */
  async deny(runId, { reason, owner, leaseMs = 30000, nowMs } = {}) {
    const decision = reason === undefined ? { decision: 'deny' } : { decision: 'deny', reason };
    return this.#answer(runId, decision, owner, leaseMs, nowMs);
  }

  #answer(runId, decision, owner, leaseMs, nowMs) {
    const who = owner ?? defaultOwner();
    return this.#call(
      'answerPermission', runId, stringified(decision, 'decision'), who, `answer:${randomUUID()}`,
      leaseMs, nowMs ?? Date.now(),
    );
  }

  /** The thread's live claim at store time, or `null`. */
  threadClaim(threadId, { nowMs } = {}) {
    return this.#call('threadClaim', threadId, nowMs ?? Date.now());
  }

  /** The thread's committed messages. */
  committedMessages(threadId) { return this.#call('committedMessages', threadId); }

  /** One run's record, or `null`. */
  run(runId) { return this.#call('run', runId); }

  /** The thread's latest run's record, or `null`. */
  latestRun(threadId) { return this.#call('latestRun', threadId); }

  /** The run's resume ticket, or `null`. */
  resumeTicket(runId) { return this.#call('resumeTicket', runId); }

  /** The run's state, or `null`. */
  runState(runId) { return this.#call('runState', runId); }

  /** The thread's committed state commands. */
  committedState(threadId) { return this.#call('committedState', threadId); }

  /** The thread's commit count. */
  threadVersion(threadId) { return this.#call('threadVersion', threadId); }

  /** The thread as of `version` (SPEC §8.10): `{thread_id, version, commit_sequence, messages}`, or `null`. */
  threadAsOf(threadId, version) { return this.#call('threadAsOf', threadId, version); }

  /**
   * Forks `threadId` as of `atVersion` onto the unused `newThreadId` (SPEC §8.10): one fenced
   * commit of the new thread; the parent is only read. Resolves to
   * `{thread_id, version, forked_from: {thread_id, version}}`.
   */
  fork(threadId, atVersion, newThreadId, { nowMs } = {}) {
    return this.#call('fork', threadId, atVersion, newThreadId, nowMs);
  }

  /** The thread's origin when it was forked (`{thread_id, version}`), or `null`. */
  forkedFrom(threadId) { return this.#call('forkedFrom', threadId); }

  /** Threads in id order after `after`, at most `limit` (default 100). */
  async threads({ after, limit } = {}) { return this.#call('threads', after, checkLimit(limit)); }

  /** Pending resume tickets in run-id order after `after`, at most `limit` (default 100). */
  async pendingTickets({ after, limit } = {}) { return this.#call('pendingTickets', after, checkLimit(limit)); }

  /** Audit events of `scope` (`{type: "thread", id}`, `{type: "run", id}`; default all) after `after`. */
  async listEvents({ scope, after, limit } = {}) {
    return this.#call('listEvents', scope === undefined ? undefined : stringified(scope, 'scope'), after, checkLimit(limit));
  }

  /**
   * The thread's spans derived from its commits (SPEC §14), as the OTLP/JSON export body
   * (`{resourceSpans: [...]}`) that `runcore trace THREAD --json` prints; post it to a
   * collector's `/v1/traces`. `content: true` puts message content in the spans.
   */
  trace(threadId, { content = false } = {}) { return this.#call('trace', threadId, content); }

  /** Pins the thread's committed transcript prefix: `{thread_id, end, digest}`. */
  transcriptSnapshot(threadId) { return this.#call('transcriptSnapshot', threadId); }

  /** Checks that a pinned prefix is still committed, unchanged (rejects with `StoreError` if not). */
  async verifyTranscriptSnapshot(snapshot) {
    await this.#call('verifyTranscriptSnapshot', stringified(snapshot, 'snapshot'));
  }

  /** The messages of `ranges` (`[start, end]` pairs) within a pinned prefix. */
  async transcriptSlice(snapshot, ranges) {
    return this.#call('transcriptSlice', stringified(snapshot, 'snapshot'), stringified(ranges, 'ranges'));
  }

  /** @internal */
  get _native() {
    return this.#native;
  }
}

/** The in-memory reference store (nothing survives the process). */
class MemoryStore extends Store {
  constructor() {
    super(native.NativeStore.memory());
  }
}

/** A store in one SQLite file (created if missing; several processes may share it). */
class SqliteStore extends Store {
  constructor(path, { synchronous } = {}) {
    let handle;
    try {
      handle = native.NativeStore.sqlite(checkText(path, 'path'), synchronous);
    } catch (e) {
      rethrow(e);
    }
    super(handle);
    this.path = path;
  }
}

/** A store in a PostgreSQL database at `url` (`postgres://…`), its tables in `schema` if given. */
class PostgresStore extends Store {
  constructor(url, { schema } = {}) {
    let handle;
    try {
      handle = native.NativeStore.postgres(checkText(url, 'url'), checkText(schema, 'schema'));
    } catch (e) {
      rethrow(e);
    }
    super(handle);
    this.schema = schema ?? null;
  }
}

// ----- provider codecs (SPEC §13): runcore-providers, translated -----------------------------

function codecJson(value, what) {
  let text;
  try {
    text = JSON.stringify(value);
  } catch (e) {
    throw new CodecError({ code: what, message: `${what} is not JSON: ${e.message}` });
  }
  return text === undefined ? 'null' : text;
}

/**
 * A response's headers as `[name, value]` string pairs, or null when none are given: a fetch
 * `Headers` or a `Map` (anything iterable of pairs), or a plain object (`res.headers` of
 * `node:http`, where a repeated header is an array of values).
 */
function headerPairs(headers) {
  if (headers === undefined || headers === null) return null;
  if (typeof headers !== 'object') {
    throw new TypeError('headers must be a Headers, a Map, an object or [name, value] pairs');
  }
  const entries =
    typeof headers[Symbol.iterator] === 'function' ? Array.from(headers) : Object.entries(headers);
  const pairs = [];
  for (const entry of entries) {
    if (!Array.isArray(entry) || entry.length !== 2) {
      throw new TypeError('headers must be a Headers, a Map, an object or [name, value] pairs');
    }
    const [name, value] = entry;
    if (value === undefined) continue;
    const text = Array.isArray(value) ? value.join(', ') : value;
    if (typeof name !== 'string' || typeof text !== 'string') {
      throw new TypeError('every header name and value must be a string');
    }
    pairs.push([name, text]);
  }
  return pairs;
}

function codecFor(api) {
  /** Encodes a `call_model` output (full-context mode) as `{ body, left_out }` for this API. */
  function encode(callModel, options) {
    const callText = codecJson(callModel, 'call_model');
    const optionsText = codecJson(options, 'options');
    try {
      return JSON.parse(native.providerEncode(api, callText, optionsText));
    } catch (e) {
      rethrow(e);
    }
  }

  /**
   * A decoder of one response: `feed(bytes)` in chunks split anywhere, then `finish()`; both
   * return driver input lines for `agent.handle` (`model_delta`s, then exactly one
   * `model_done` or `model_failed`). `headers` (a fetch `Headers`, a `Map`, a plain object or
   * `[name, value]` pairs) are the response's: a `model_failed` then carries `retry_after_ms`
   * (`retry-after`, `retry-after-ms`, the rate-limit reset headers); a date in them is a delay
   * from `nowMs`, else the response's `date` header, else now.
   */
  class Decoder {
    #native;

    constructor(runId, step, status, { headers, nowMs } = {}) {
      if (typeof runId !== 'string') throw new TypeError('runId must be a string');
      checkText(runId, 'runId');
      if (typeof step !== 'number') throw new TypeError('step must be a number');
      if (status !== undefined && status !== null && typeof status !== 'number') {
        throw new TypeError('status must be a number');
      }
      if (nowMs !== undefined && nowMs !== null && typeof nowMs !== 'number') {
        throw new TypeError('nowMs must be a number');
      }
      const pairs = headerPairs(headers);
      try {
        this.#native = new native.NativeProviderDecoder(
          api,
          runId,
          step,
          status ?? undefined,
          pairs === null ? undefined : JSON.stringify(pairs),
          nowMs ?? undefined,
        );
      } catch (e) {
        rethrow(e);
      }
    }

    /** The API this decoder reads. */
    get api() {
      return api;
    }

    /** After `finish()`: null, or where a 2xx body stopped being the API's format. */
    get formatError() {
      return this.#native.formatError ?? null;
    }

    /** Feeds the next bytes of the body; returns the inputs they complete. */
    feed(bytes) {
      let data = bytes;
      if (typeof data === 'string') data = Buffer.from(data, 'utf8');
      if (!(data instanceof Uint8Array)) {
        throw new TypeError('feed takes the body bytes as a Uint8Array (or Buffer)');
      }
      try {
        return JSON.parse(this.#native.feed(data));
      } catch (e) {
        rethrow(e);
      }
    }

    /** Ends the body: the last inputs, exactly one `model_done` or `model_failed` last. */
    finish() {
      try {
        return JSON.parse(this.#native.finish());
      } catch (e) {
        rethrow(e);
      }
    }
  }
  Object.defineProperty(Decoder, 'name', { value: 'Decoder' });
  return Object.freeze({ api, encode, Decoder });
}

/** The provider codecs, one per API: `encode(callModel, options)` and `Decoder`. */
const providers = Object.freeze({
  anthropic: codecFor('anthropic'),
  openaiChat: codecFor('openai-chat'),
  openaiResponses: codecFor('openai-responses'),
});

// Each name written out, so that `import { BusyError } from 'runcore'` works from ES modules.
// Named one by one (not `errorClasses.X` inside the object) so that Node's CommonJS lexer sees
// every export: `import { BusyError } from 'runcore'` works from ES modules.
const {
  BusyError,
  NotAcceptingError,
  UnexpectedOutcomeError,
  UnknownCallError,
  DuplicateOutcomeError,
  ResumeError,
  InvalidStateError,
  NotExpiredError,
  InvalidInputError,
  InvalidJsonError,
  InternalError,
} = errorClasses;

module.exports = {
  Agent,
  Driver,
  Store,
  MemoryStore,
  SqliteStore,
  PostgresStore,
  StoreError,
  SnapshotError,
  CodecError,
  providers,
  AgentError,
  BusyError,
  NotAcceptingError,
  UnexpectedOutcomeError,
  UnknownCallError,
  DuplicateOutcomeError,
  ResumeError,
  InvalidStateError,
  NotExpiredError,
  InvalidInputError,
  InvalidJsonError,
  InternalError,
};
