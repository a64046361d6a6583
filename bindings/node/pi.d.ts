// Types of `runcore/pi` (pi.js): the API of pi-agent-core 0.73.1 (`@mariozechner/pi-agent-core`)
// over runcore's native Agent. The message, model and stream types are pi-ai's own
// (`@mariozechner/pi-ai`, re-exported here, as pi-agent-core takes them), so values and
// signatures of a pi app type-check unchanged. pi-ai is an optional peer of the package (every
// pi-agent-core user has it); a project without it needs `skipLibCheck`.

import type {
  AssistantMessage,
  AssistantMessageEvent,
  AssistantMessageEventStream,
  Context,
  ImageContent,
  Message,
  Model,
  SimpleStreamOptions,
  StopReason,
  TextContent,
  ThinkingBudgets,
  ThinkingContent,
  ToolCall,
  ToolResultMessage,
  Transport,
  Usage,
  UserMessage,
} from '@mariozechner/pi-ai';
import type { Store } from './index.js';

export type {
  AssistantMessage,
  AssistantMessageEvent,
  AssistantMessageEventStream,
  Context,
  ImageContent,
  Message,
  Model,
  SimpleStreamOptions,
  StopReason,
  TextContent,
  ThinkingBudgets,
  ThinkingContent,
  ToolCall,
  ToolResultMessage,
  Transport,
  Usage,
  UserMessage,
};

/** Apps extend this by declaration merging (pi's `CustomAgentMessages`). */
export interface CustomAgentMessages {}
/** A message of the transcript: pi-ai's, or an app's own. */
export type AgentMessage = Message | CustomAgentMessages[keyof CustomAgentMessages];

/** Options a stream function gets (pi-ai's `SimpleStreamOptions`). */
export type StreamOptions = SimpleStreamOptions;

/** pi-agent-core's stream function: pi-ai's `streamSimple` shape, or a promise of its stream. */
export type StreamFn = (
  model: Model<any>,
  context: Context,
  options?: SimpleStreamOptions,
) => AssistantMessageEventStream | Promise<AssistantMessageEventStream>;

export type ToolExecutionMode = 'sequential' | 'parallel';
export type ThinkingLevel = 'off' | 'minimal' | 'low' | 'medium' | 'high' | 'xhigh';
export type QueueMode = 'all' | 'one-at-a-time';
export type AgentToolCall = ToolCall;

export interface AgentToolResult<T> {
  content: (TextContent | ImageContent)[];
  details: T;
  terminate?: boolean;
}
export type AgentToolUpdateCallback<T = any> = (partialResult: AgentToolResult<T>) => void;

export interface AgentTool<TParameters = any, TDetails = any> {
  name: string;
  description: string;
  parameters: TParameters;
  label: string;
  prepareArguments?: (args: unknown) => any;
  execute: (
    toolCallId: string,
    params: any,
    signal?: AbortSignal,
    onUpdate?: AgentToolUpdateCallback<TDetails>,
  ) => Promise<AgentToolResult<TDetails>>;
  executionMode?: ToolExecutionMode;
}

export interface AgentContext {
  systemPrompt: string;
  messages: AgentMessage[];
  tools?: AgentTool<any>[];
}

export interface BeforeToolCallResult {
  block?: boolean;
  reason?: string;
}
export interface AfterToolCallResult {
  content?: (TextContent | ImageContent)[];
  details?: unknown;
  isError?: boolean;
  terminate?: boolean;
}
export interface BeforeToolCallContext {
  assistantMessage: AssistantMessage;
  toolCall: AgentToolCall;
  args: unknown;
  context: AgentContext;
}
export interface AfterToolCallContext {
  assistantMessage: AssistantMessage;
  toolCall: AgentToolCall;
  args: unknown;
  result: AgentToolResult<any>;
  isError: boolean;
  context: AgentContext;
}
export interface ShouldStopAfterTurnContext {
  message: AssistantMessage;
  toolResults: ToolResultMessage[];
  context: AgentContext;
  newMessages: AgentMessage[];
}

export interface AgentLoopConfig extends StreamOptions {
  model: Model<any>;
  convertToLlm: (messages: AgentMessage[]) => Message[] | Promise<Message[]>;
  transformContext?: (messages: AgentMessage[], signal?: AbortSignal) => Promise<AgentMessage[]>;
  getApiKey?: (provider: string) => Promise<string | undefined> | string | undefined;
  shouldStopAfterTurn?: (context: ShouldStopAfterTurnContext) => boolean | Promise<boolean>;
  getSteeringMessages?: () => Promise<AgentMessage[]>;
  getFollowUpMessages?: () => Promise<AgentMessage[]>;
  toolExecution?: ToolExecutionMode;
  beforeToolCall?: (context: BeforeToolCallContext, signal?: AbortSignal) => Promise<BeforeToolCallResult | undefined>;
  afterToolCall?: (context: AfterToolCallContext, signal?: AbortSignal) => Promise<AfterToolCallResult | undefined>;
  /** runcore's step budget (model calls per run); default 32. */
  maxSteps?: number;
}

export interface AgentState {
  systemPrompt: string;
  model: Model<any>;
  thinkingLevel: ThinkingLevel;
  set tools(tools: AgentTool<any>[]);
  get tools(): AgentTool<any>[];
  /** The transcript: runcore's committed one. Assigning copies the array (in memory: imported before the next run). */
  set messages(messages: AgentMessage[]);
  get messages(): AgentMessage[];
  readonly isStreaming: boolean;
  readonly streamingMessage?: AgentMessage;
  readonly pendingToolCalls: ReadonlySet<string>;
  readonly errorMessage?: string;
}

export type AgentEvent =
  | { type: 'agent_start' }
  | { type: 'agent_end'; messages: AgentMessage[] }
  | { type: 'turn_start' }
  | { type: 'turn_end'; message: AgentMessage; toolResults: ToolResultMessage[] }
  | { type: 'message_start'; message: AgentMessage }
  | { type: 'message_update'; message: AgentMessage; assistantMessageEvent: AssistantMessageEvent }
  | { type: 'message_end'; message: AgentMessage }
  | { type: 'tool_execution_start'; toolCallId: string; toolName: string; args: any }
  | { type: 'tool_execution_update'; toolCallId: string; toolName: string; args: any; partialResult: any }
  | { type: 'tool_execution_end'; toolCallId: string; toolName: string; result: any; isError: boolean };

export interface AgentOptions {
  initialState?: Partial<Omit<AgentState, 'pendingToolCalls' | 'isStreaming' | 'streamingMessage' | 'errorMessage'>>;
  convertToLlm?: (messages: AgentMessage[]) => Message[] | Promise<Message[]>;
  transformContext?: (messages: AgentMessage[], signal?: AbortSignal) => Promise<AgentMessage[]>;
  streamFn?: StreamFn;
  getApiKey?: (provider: string) => Promise<string | undefined> | string | undefined;
  onPayload?: SimpleStreamOptions['onPayload'];
  onResponse?: SimpleStreamOptions['onResponse'];
  beforeToolCall?: (context: BeforeToolCallContext, signal?: AbortSignal) => Promise<BeforeToolCallResult | undefined>;
  afterToolCall?: (context: AfterToolCallContext, signal?: AbortSignal) => Promise<AfterToolCallResult | undefined>;
  steeringMode?: QueueMode;
  followUpMode?: QueueMode;
  sessionId?: string;
  thinkingBudgets?: ThinkingBudgets;
  transport?: Transport;
  maxRetryDelayMs?: number;
  toolExecution?: ToolExecutionMode;
  /** runcore's step budget (model calls per run); default 32. */
  maxSteps?: number;
  /** Durable mode: every commit is stored before anything after it; the thread is recovered at construction. */
  store?: Store;
  /** The thread (required with `store`; default `"pi"`). */
  threadId?: string;
  /** Durable mode: the claim's owner (default: host name, pid and a random id, unique per agent). */
  owner?: string;
  /** Durable mode: the claim's lease in milliseconds, renewed every third of it (default 30000). */
  leaseMs?: number;
}

/** An event stream that ends with `agent_end`; `result()` resolves to the run's new messages. */
export interface AgentEventStream extends AsyncIterable<AgentEvent> {
  result(): Promise<AgentMessage[]>;
}

export class Agent {
  constructor(options?: AgentOptions);
  readonly state: AgentState;
  /**
   * Queued messages the last run did not take (runcore's `run_end.unconsumed`); they stay
   * queued for the next run, as in pi.
   */
  readonly unconsumed: AgentMessage[];
  readonly signal: AbortSignal | undefined;
  /** Durable mode: the thread's claim once granted, else `null`. */
  readonly claim: import('./index.js').Claim | null;
  /** Durable mode: waits for the active run, stops renewing and releases the claim. */
  close(): Promise<void>;
  steeringMode: QueueMode;
  followUpMode: QueueMode;
  convertToLlm: (messages: AgentMessage[]) => Message[] | Promise<Message[]>;
  transformContext?: (messages: AgentMessage[], signal?: AbortSignal) => Promise<AgentMessage[]>;
  streamFn?: StreamFn;
  getApiKey?: (provider: string) => Promise<string | undefined> | string | undefined;
  onPayload?: SimpleStreamOptions['onPayload'];
  onResponse?: SimpleStreamOptions['onResponse'];
  beforeToolCall?: (context: BeforeToolCallContext, signal?: AbortSignal) => Promise<BeforeToolCallResult | undefined>;
  afterToolCall?: (context: AfterToolCallContext, signal?: AbortSignal) => Promise<AfterToolCallResult | undefined>;
  sessionId?: string;
  thinkingBudgets?: ThinkingBudgets;
  transport: Transport;
  maxRetryDelayMs?: number;
  toolExecution: ToolExecutionMode;
  subscribe(listener: (event: AgentEvent, signal: AbortSignal) => Promise<void> | void): () => void;
  /** Queues steering: the active run takes it at its next boundary; while idle, the next run. */
  steer(message: AgentMessage): void;
  /** Queues a follow-up: for when the active run would stop; while idle, for the next run. */
  followUp(message: AgentMessage): void;
  /** Withdraws queued steering the active run has not taken, and pi's queued steering. */
  clearSteeringQueue(): void;
  /** Withdraws queued follow-ups the active run has not taken, and pi's queued follow-ups. */
  clearFollowUpQueue(): void;
  clearAllQueues(): void;
  hasQueuedMessages(): boolean;
  abort(): void;
  waitForIdle(): Promise<void>;
  /** In memory: a fresh transcript; refused for a durable thread. */
  reset(): void;
  prompt(message: AgentMessage | AgentMessage[]): Promise<void>;
  prompt(input: string, images?: ImageContent[]): Promise<void>;
  continue(): Promise<void>;
}

export function agentLoop(
  prompts: AgentMessage[],
  context: AgentContext,
  config: AgentLoopConfig,
  signal?: AbortSignal,
  streamFn?: StreamFn,
): AgentEventStream;

export function agentLoopContinue(
  context: AgentContext,
  config: AgentLoopConfig,
  signal?: AbortSignal,
  streamFn?: StreamFn,
): AgentEventStream;

/** pi's `runAgentLoop`: a run that starts with `prompts`, each event awaited through `emit`. */
export function runAgentLoop(
  prompts: AgentMessage[],
  context: AgentContext,
  config: AgentLoopConfig,
  emit: (event: AgentEvent) => Promise<void> | void,
  signal?: AbortSignal,
  streamFn?: StreamFn,
): Promise<AgentMessage[]>;

/** pi's `runAgentLoopContinue`: a run over the context as it is, each event awaited through `emit`. */
export function runAgentLoopContinue(
  context: AgentContext,
  config: AgentLoopConfig,
  emit: (event: AgentEvent) => Promise<void> | void,
  signal?: AbortSignal,
  streamFn?: StreamFn,
): Promise<AgentMessage[]>;

/** A pi message as the runcore message the transcript holds (extra fields in `meta`). */
export function toCore(message: AgentMessage): { role: string; [key: string]: any };
/** A runcore transcript message as pi's message. */
export function fromCore(message: { role: string; [key: string]: any }, model?: Model<any>): AgentMessage;
