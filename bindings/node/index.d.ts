// Types of the package `runcore` (index.js). test/types.test.mjs checks that every class and
// member here exists at run time and the other way round.

/** A JSON value. */
export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

/** A content block of a message or tool result. */
export type ContentBlock = { type: 'text'; text: string } | { [key: string]: Json };

/** A message of the transcript (`role`: `user`, `assistant`, `tool_result`, `system`). */
export interface Message {
  role: string;
  [key: string]: Json | undefined;
}

/**
 * An assistant content block: `text`, `thinking` (with the provider's `signature`),
 * `redacted_thinking` or `tool_call`; each may carry `meta`, a JSON object the core keeps and
 * returns exactly (SPEC §2.1).
 */
export type AssistantBlock =
  | { type: 'text'; text: string; meta?: { [key: string]: Json } }
  | { type: 'thinking'; thinking: string; signature?: string; meta?: { [key: string]: Json } }
  | { type: 'redacted_thinking'; data: string; meta?: { [key: string]: Json } }
  | { type: 'tool_call'; id: string; name: string; arguments: Json; meta?: { [key: string]: Json } };

/** Token usage (SPEC §2.1): `input_tokens` counts every prompt token, cached ones included. */
export type Usage = {
  input_tokens: number;
  output_tokens: number;
  cache_read_tokens?: number;
  cache_write_tokens?: number;
  reasoning_tokens?: number;
};

/** An assistant message as `modelDone` takes it (`role` optional). */
export interface AssistantMessage {
  role?: 'assistant';
  content: Array<AssistantBlock | { [key: string]: Json }>;
  stop_reason: string;
  error_message?: string;
  usage?: Usage;
  id?: string;
  model?: string;
  response_id?: string;
  provider_stop_reason?: string;
  meta?: { [key: string]: Json };
  [key: string]: Json | undefined;
}

/** A tool call of an `execute_tools` output. */
export interface ToolCall {
  id: string;
  name: string;
  arguments: Json;
  [key: string]: Json | undefined;
}

/** `call_model`: call the model with this context. */
export interface CallModelOutput {
  type: 'call_model';
  run_id: string;
  step: number;
  final_step: boolean;
  system_prompt?: string;
  base?: number;
  messages: Message[];
  tools: Array<{ name: string; description?: string; parameters?: Json }>;
}

/** `execute_tools`: execute these calls. */
export interface ExecuteToolsOutput {
  type: 'execute_tools';
  run_id: string;
  step: number;
  calls: ToolCall[];
}

/** `commit`: persist this commit before acting on later outputs (SPEC §7.1). */
export interface CommitOutput {
  type: 'commit';
  commit: { [key: string]: Json };
  ordinal: number;
  expected_thread_version: number;
  payload_hash: string;
}

/** `event`: a notification. */
export interface EventOutput {
  type: 'event';
  event: { type: string; [key: string]: Json };
}

/** An output of `Agent.poll()`. */
export type Output = CallModelOutput | ExecuteToolsOutput | CommitOutput | EventOutput;

/** `error`: the driver rejected an input line; nothing changed. */
export interface ErrorLine {
  type: 'error';
  line: number;
  error: { kind: string; message: string; [key: string]: Json };
}

/** `idle`: the last line written for input line `line`. */
export interface IdleLine {
  type: 'idle';
  line: number;
  timeout_ms?: number;
}

/** A line `runcore drive` writes. */
export type DriverLine = Output | ErrorLine | IdleLine;

/** A configuration: the fields of the driver's `config` line. */
export interface AgentConfig {
  thread_id?: string;
  max_steps?: number;
  system_prompt?: string;
  context?: 'full' | 'delta';
  tools?: { [name: string]: Json };
  [key: string]: Json | undefined;
}

/** A driver input line, as an object. */
export interface InputLine {
  type: string;
  now_ms?: number;
  [key: string]: Json | undefined;
}

/** `{ nowMs }`: the host's clock for an input (SPEC §8.5). */
export interface At {
  nowMs?: number;
}

/** A recovery policy (SPEC §8.7). */
export type RecoveryPolicy = 'replay' | 'seal';

/** An input the agent rejected (SPEC §10); the agent is unchanged. */
/** A thread as of one of its versions (SPEC §8.10). */
export interface ThreadAsOf {
  thread_id: string;
  version: number;
  commit_sequence: number;
  messages: Message[];
}

/** The parent a thread was forked from, and at which version. */
export interface ForkOrigin {
  thread_id: string;
  version: number;
}

/** What `Store.fork` committed. */
export interface Forked {
  thread_id: string;
  version: number;
  forked_from: ForkOrigin;
}

export class AgentError extends Error {
  /** The driver's error kind (`busy`, `not_accepting`, …). */
  readonly kind: string;
  /** The error's own fields, as the driver's `error` line writes them. */
  readonly details: { [key: string]: Json };
  [field: string]: unknown;
}
/** `prompt` while a run is active (`busy`). */
export class BusyError extends AgentError {}
/** `steer` / `followUp` while idle or after the run's input closed (`not_accepting`). */
export class NotAcceptingError extends AgentError {}
/** An outcome for another run, step, or no outstanding action (`unexpected_outcome`). */
export class UnexpectedOutcomeError extends AgentError {}
/** `toolDone` for a call not in the executing batch (`unknown_call`). */
export class UnknownCallError extends AgentError {}
/** A second `toolDone` for the same call (`duplicate_outcome`). */
export class DuplicateOutcomeError extends AgentError {}
/** A resume that fails SPEC §4 (`resume`); `.resume_error` says which check. */
export class ResumeError extends AgentError {}
/** An input that means nothing in the current state (`invalid_state`). */
export class InvalidStateError extends AgentError {}
/** `expireWait` before the deadline (`not_expired`). */
export class NotExpiredError extends AgentError {}
/** A structurally bad input (`invalid_input`). */
export class InvalidInputError extends AgentError {}
/** Arguments that do not make a valid input line (`invalid_json`). */
export class InvalidJsonError extends AgentError {}
/** A broken invariant of runcore itself, a Rust panic included (`internal`). */
export class InternalError extends AgentError {}

/** A store call failed. */
export class StoreError extends Error {
  readonly kind: 'store';
  /** The rejection's code, `transcript`, `unavailable` or `open` (the store error body's `reason`). */
  readonly reason: string;
  /** The same as `reason` (its older name). */
  readonly code: string;
}

/** A snapshot that cannot be restored. */
export class SnapshotError extends Error {
  readonly kind: 'snapshot';
  /** `newer_version`, `unsupported_version`, `malformed` or `inconsistent`. */
  readonly code: string;
}

/** One agent per thread (SPEC §8). */
export class Agent {
  constructor(config?: AgentConfig);
  /** One input line: an object (a codec decoder's inputs as they are), or its JSON text. */
  handle(line: InputLine | (DecodedInput & { now_ms?: number }) | string): void;
  /** One user message (a string), or several (SPEC §8.10: user message objects, in order). */
  prompt(
    text: string | Array<{ content: ContentBlock[]; id?: string; meta?: { [key: string]: Json } }>,
    options?: { runId?: string; nowMs?: number },
  ): string;
  /** Appends existing messages as one committed, ended run (SPEC §8.10); returns its run id. */
  import(messages: Message[], options?: At): string;
  steer(text: string, options?: At): void;
  followUp(text: string, options?: At): void;
  abort(options?: At): void;
  pause(options?: At): void;
  /** Withdraws the active run's queued input into a `queues_cleared` event (SPEC §8.2). */
  clearQueues(options?: At): void;
  /** Changes the queue modes at any time, from the next boundary on (SPEC §8.2). */
  setQueueModes(
    options: { steeringMode?: 'all' | 'one_at_a_time'; followUpMode?: 'all' | 'one_at_a_time'; nowMs?: number },
  ): void;
  modelDelta(
    runId: string,
    step: number,
    text: string,
    options?: At & { kind?: 'text' | 'thinking' },
  ): void;
  modelDone(runId: string, step: number, message: AssistantMessage, options?: At): void;
  modelFailed(
    runId: string,
    step: number,
    code: string,
    message: string,
    options?: At & { retryAfterMs?: number },
  ): void;
  toolProgress(runId: string, callId: string, content: string | ContentBlock[], options?: At): void;
  toolDone(
    runId: string,
    callId: string,
    content: string | ContentBlock[],
    options?: { isError?: boolean; details?: Json; meta?: { [key: string]: Json }; nowMs?: number },
  ): void;
  resume(command: { [key: string]: Json }, options?: At): void;
  resumeTicket(result: { type: string; [key: string]: Json }, options?: At): void;
  cancelWait(options?: At): void;
  stop(reason: string, options?: At): void;
  expireWait(nowMs: number): void;
  handleTimeout(nowMs: number): void;
  continueRun(options?: At): string;
  abandonTools(options?: At): void;
  /** Compacts the model context instead of answering the outstanding model call (SPEC §8.9). */
  compact(
    summary: string | ContentBlock[] | { role: 'user'; content: ContentBlock[] },
    keepFrom: number,
    options?: At,
  ): void;
  poll(): Output | null;
  pollLine(): string | null;
  pollAll(): Output[];
  drain(): Generator<Output, void, undefined>;
  modelRequest(): CallModelOutput | null;
  pollTimeout(): number | null;
  snapshot(): string;
  static restore(snapshot: string, options?: { context?: 'full' | 'delta' }): Agent;
  static recover(
    store: Store,
    threadId: string,
    policy?: RecoveryPolicy,
    options?: { config?: AgentConfig },
  ): Agent;
  readonly threadId: string;
  readonly activeRunId: string | null;
  readonly clockMs: number;
  readonly isIdle: boolean;
  readonly context: 'full' | 'delta';
  currentTicket(): { [key: string]: Json } | null;
  transcript(): Message[];
}

/** `runcore drive` in process (SPEC §12; with a store, §12.2). */
export class Driver {
  constructor(config?: AgentConfig, options?: { store?: Store; policy?: RecoveryPolicy });
  static fromAgent(agent: Agent): Driver;
  send(line: string | Uint8Array | InputLine): DriverLine[];
  sendRaw(line: string | Uint8Array | InputLine): string;
  readonly startup: DriverLine[];
  readonly startupRaw: string;
  readonly closed: boolean;
  readonly linesHandled: number;
  readonly context: 'full' | 'delta';
  snapshot(): string;
}

/** A thread claim (SPEC §7.2): one owner at a time, with an epoch that grows with every grant. */
export interface Claim {
  thread_id: string;
  owner: string;
  epoch: number;
  expires_at_ms: number;
}

/** An event scope of `listEvents`. */
export type EventScope = { type: 'all' } | { type: 'thread'; id: string } | { type: 'run'; id: string };

/** A pinned transcript prefix. */
export interface TranscriptSnapshot {
  thread_id: string;
  end: number;
  digest: string;
}

/**
 * The commit log (SPEC §7, §7.1) and its read ports. Every method returns a promise: the call
 * runs on libuv's thread pool, never on the JavaScript thread; a failure rejects with
 * `StoreError` (a malformed argument with `InvalidJsonError` or `TypeError`).
 */
export abstract class Store {
  /**
   * The store at `url` (`sqlite:PATH`, `postgres://…`) through the one backend registry;
   * `create: false` refuses a place that holds no runcore store (`StoreError`, code `open`).
   */
  static open(url: string, options?: { create?: boolean }): Store;
  commit(output: CommitOutput, options?: { claim?: Claim; nowMs?: number }): Promise<{ [key: string]: Json }>;
  claimThread(
    request: { threadId: string; owner: string; requestId?: string; leaseMs: number },
    options?: { nowMs?: number },
  ): Promise<Claim>;
  renewClaim(claim: Claim, leaseMs: number, options?: { nowMs?: number }): Promise<Claim>;
  releaseClaim(claim: Claim, options?: { nowMs?: number }): Promise<void>;
  /** Handles the store's due work once (SPEC §7.3, §12.4: `runcore sweep`). */
  sweep(options?: {
    owner?: string;
    limit?: number;
    policy?: 'replay' | 'seal';
    leaseMs?: number;
    nowMs?: number;
  }): Promise<Array<{ thread_id: string; run_id: string; reason: string; action: string; detail?: string }>>;
  /** Allows the call whose permission ticket `runId` awaits (SPEC §12.5: `runcore approve`). */
  approve(
    runId: string,
    options?: { note?: string; owner?: string; leaseMs?: number; nowMs?: number },
  ): Promise<{ thread_id: string; version: number }>;
  /** Denies the call whose permission ticket `runId` awaits (SPEC §12.5: `runcore deny`). */
  deny(
    runId: string,
    options?: { reason?: string; owner?: string; leaseMs?: number; nowMs?: number },
  ): Promise<{ thread_id: string; version: number }>;
  threadClaim(threadId: string, options?: { nowMs?: number }): Promise<Claim | null>;
  committedMessages(threadId: string): Promise<Message[]>;
  run(runId: string): Promise<{ [key: string]: Json } | null>;
  latestRun(threadId: string): Promise<{ [key: string]: Json } | null>;
  resumeTicket(runId: string): Promise<{ [key: string]: Json } | null>;
  runState(runId: string): Promise<Json>;
  committedState(threadId: string): Promise<Array<{ [key: string]: Json }>>;
  threadVersion(threadId: string): Promise<number>;
  /** The thread as of `version` (SPEC §8.10), or `null`. */
  threadAsOf(threadId: string, version: number): Promise<ThreadAsOf | null>;
  /** Forks `threadId` as of `atVersion` onto the unused `newThreadId` (SPEC §8.10). */
  fork(threadId: string, atVersion: number, newThreadId: string, options?: At): Promise<Forked>;
  /** The thread's origin when it was forked, or `null`. */
  forkedFrom(threadId: string): Promise<ForkOrigin | null>;
  threads(options?: { after?: string; limit?: number }): Promise<Array<{ [key: string]: Json }>>;
  pendingTickets(options?: { after?: string; limit?: number }): Promise<Array<{ [key: string]: Json }>>;
  listEvents(options?: { scope?: EventScope; after?: number; limit?: number }): Promise<Array<{ [key: string]: Json }>>;
  /** The thread's spans (SPEC §14) as the OTLP/JSON export body. */
  trace(threadId: string, options?: { content?: boolean }): Promise<{ [key: string]: Json }>;
  transcriptSnapshot(threadId: string): Promise<TranscriptSnapshot>;
  verifyTranscriptSnapshot(snapshot: TranscriptSnapshot): Promise<void>;
  transcriptSlice(snapshot: TranscriptSnapshot, ranges: Array<[number, number]>): Promise<Message[]>;
}

/** The in-memory reference store. */
export class MemoryStore extends Store {
  constructor();
}

/** A store in one SQLite file. */
export class SqliteStore extends Store {
  constructor(path: string, options?: { synchronous?: 'full' | 'normal' });
  readonly path: string;
}

/** A store in a PostgreSQL database. */
export class PostgresStore extends Store {
  constructor(url: string, options?: { schema?: string });
  readonly schema: string | null;
}

/**
 * A provider codec refused its arguments: `code` is `options` (bad options), `call_model` (not
 * a full-context `call_model` output), `api` (unknown API) or `finished` (a decoder used after
 * `finish()`).
 */
export class CodecError extends Error {
  readonly kind: 'codec';
  readonly code: 'options' | 'call_model' | 'api' | 'finished';
}

/** Request options of a provider codec (SPEC §13); `model` is required. */
export interface CodecOptions {
  model: string;
  max_tokens?: number;
  stream?: boolean;
  /** The API's reasoning setting, sent as given. */
  reasoning?: Json;
  tool_choice?: Json;
  /** Merged into the body last (not the transcript key). */
  extra?: { [key: string]: Json };
}

/** What the context held that the body does not carry, and why. */
export interface LeftOut {
  message: number;
  block?: number;
  what: string;
  reason: string;
}

/** An encoded request: the body to POST and what was left out of it. */
export interface Encoded {
  body: { [key: string]: Json };
  left_out: LeftOut[];
}

/** An input a decoder yields: a driver input line `agent.handle` takes as it is. */
export type DecodedInput =
  | { type: 'model_delta'; run_id: string; step: number; text: string; kind?: 'text' | 'thinking' }
  | { type: 'model_done'; run_id: string; step: number; message: AssistantMessage }
  | {
      type: 'model_failed';
      run_id: string;
      step: number;
      code: string;
      message: string;
      retry_after_ms?: number;
    };

/**
 * A response's headers: a fetch `Headers`, a `Map`, a plain object (`node:http` headers) or
 * `[name, value]` pairs.
 */
export type ResponseHeaders =
  | Iterable<[string, string]>
  | Record<string, string | string[] | undefined>;

/** A stream decoder of one model call's response. */
export interface ProviderDecoder {
  /** The API it reads. */
  readonly api: string;
  /** After `finish()`: null, or where a 2xx body stopped being the API's format. */
  readonly formatError: string | null;
  /** The next bytes of the body (split anywhere); the inputs they complete. */
  feed(bytes: Uint8Array | string): DecodedInput[];
  /** Ends the body: the last inputs, exactly one `model_done` or `model_failed` last. */
  finish(): DecodedInput[];
}

/** One API's codec. */
export interface ProviderCodec<Api extends string> {
  readonly api: Api;
  /** The request body for a `call_model` output (full-context mode). */
  encode(callModel: CallModelOutput, options: CodecOptions): Encoded;
  /** A decoder for the response to call `step` of run `runId` (HTTP `status`, default 200). */
  Decoder: new (
    runId: string,
    step: number,
    status?: number,
    options?: { headers?: ResponseHeaders; nowMs?: number },
  ) => ProviderDecoder;
}

/** The provider codecs (SPEC §13): pure translation, no I/O. */
export const providers: {
  readonly anthropic: ProviderCodec<'anthropic'>;
  readonly openaiChat: ProviderCodec<'openai-chat'>;
  readonly openaiResponses: ProviderCodec<'openai-responses'>;
};
