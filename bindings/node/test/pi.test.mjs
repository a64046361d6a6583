// runcore/pi in memory: pi-agent-core's Agent API, every step decided by runcore's native
// agent, the transcript runcore's committed one.
import { test } from 'node:test';
import assert from 'node:assert/strict';

import { runcore } from './helpers.mjs';
import { pi, MODEL, assistant, user, toolCall, scripted, echoTool, record, stream } from './pi_helpers.mjs';

const { Agent, agentLoop, agentLoopContinue, runAgentLoop, runAgentLoopContinue, toCore, fromCore } = pi;

test('runcore/pi is the package subpath export ./pi with its types', async () => {
  const pkg = (await import('node:fs')).readFileSync(new URL('../package.json', import.meta.url), 'utf8');
  const json = JSON.parse(pkg);
  assert.deepEqual(json.exports['./pi'], { types: './pi.d.ts', default: './pi.js' });
  assert.ok(json.files.includes('pi.js') && json.files.includes('pi.d.ts'));
  assert.equal(typeof Agent, 'function');
  assert.equal(typeof agentLoop, 'function');
  assert.equal(typeof agentLoopContinue, 'function');
});

test('a default Agent has pi-agent-core\'s initial state', () => {
  const agent = new Agent();
  assert.equal(agent.state.systemPrompt, '');
  assert.equal(agent.state.thinkingLevel, 'off');
  assert.deepEqual(agent.state.tools, []);
  assert.deepEqual(agent.state.messages, []);
  assert.equal(agent.state.isStreaming, false);
  assert.equal(agent.state.streamingMessage, undefined);
  assert.deepEqual(agent.state.pendingToolCalls, new Set());
  assert.equal(agent.state.errorMessage, undefined);
  assert.equal(agent.steeringMode, 'one-at-a-time');
  assert.equal(agent.toolExecution, 'parallel');
  const tools = [echoTool()];
  agent.state.tools = tools;
  assert.notEqual(agent.state.tools, tools);
  assert.deepEqual(agent.state.tools, tools);
});

test('prompt(text): pi events in order, the transcript is runcore\'s, pi fields ride in meta', async () => {
  const reply = assistant('Hello back', 'stop', { responseId: 'resp-1' });
  const streamFn = scripted([reply]);
  const agent = new Agent({ streamFn, sessionId: 'session-1', initialState: { model: MODEL, systemPrompt: 'Be brief' } });
  const events = record(agent);
  await agent.prompt('Hello');
  assert.deepEqual(events.map((e) => e.type), [
    'agent_start', 'turn_start', 'message_start', 'message_end',
    'message_start', 'message_update', 'message_end', 'turn_end', 'agent_end',
  ]);
  assert.equal(streamFn.calls.length, 1);
  assert.equal(streamFn.calls[0].options.sessionId, 'session-1');
  assert.equal(streamFn.calls[0].model, MODEL);
  assert.deepEqual(streamFn.calls[0].context.map((m) => m.role), ['user']);
  const messages = agent.state.messages;
  assert.equal(messages.length, 2);
  assert.equal(messages[1], reply);
  assert.equal(agent.state.isStreaming, false);
  // The pi messages are runcore's transcript: converting the committed transcript back gives them.
  const end = events.at(-1);
  assert.deepEqual(end.messages, messages);
  assert.deepEqual(toCore(reply), {
    role: 'assistant',
    content: [{ type: 'text', text: 'Hello back' }],
    stop_reason: 'stop',
    model: 'scripted',
    response_id: 'resp-1',
    usage: { input_tokens: 3, output_tokens: 5, cache_read_tokens: 1, cache_write_tokens: 0 },
    meta: { api: 'scripted-api', provider: 'scripted', usage: reply.usage, timestamp: 1700000000000 },
  });
  assert.deepEqual(fromCore(toCore(reply)), reply);
  assert.deepEqual(fromCore(toCore(messages[0])), messages[0]);
});

test('every pi content block survives the round trip through runcore messages', () => {
  const message = assistant([
    { type: 'thinking', thinking: 'hmm', thinkingSignature: 'sig-1' },
    { type: 'thinking', thinking: '[redacted]', thinkingSignature: 'enc', redacted: true },
    { type: 'text', text: 'x', textSignature: 'ts' },
    { type: 'toolCall', id: 'c1', name: 'echo', arguments: { value: 'v' }, thoughtSignature: 'th' },
  ], 'toolUse');
  const core = toCore(message);
  assert.deepEqual(core.content[0], { type: 'thinking', thinking: 'hmm', signature: 'sig-1' });
  assert.deepEqual(core.content[3].meta, { thoughtSignature: 'th' });
  assert.equal(core.stop_reason, 'tool_use');
  assert.deepEqual(fromCore(core), message);
  const image = { role: 'user', content: [{ type: 'text', text: 'see' }, { type: 'image', data: 'AAAA', mimeType: 'image/png' }], timestamp: 5 };
  assert.deepEqual(toCore(image).content[1], { type: 'image', data: 'AAAA', mime_type: 'image/png' });
  assert.deepEqual(fromCore(toCore(image)), image);
  const custom = { role: 'notification', text: 'saved', timestamp: 9 };
  assert.equal(toCore(custom).role, 'user');
  assert.deepEqual(fromCore(toCore(custom)), custom);
  // A tool result's timestamp and any field of an app's own ride in `meta` and come back.
  const result = {
    role: 'toolResult', toolCallId: 'c1', toolName: 'echo', content: [{ type: 'text', text: 'v' }],
    details: { value: 'v' }, isError: false, timestamp: 1700000000042, traceId: 't-1',
  };
  const coreResult = toCore(result);
  assert.deepEqual(coreResult.meta, { timestamp: 1700000000042, traceId: 't-1' });
  assert.deepEqual(fromCore(coreResult), result);
  // A tool result without details reads back without them; pi's `{}` reads back as `{}`.
  const { details: _d, ...noDetails } = result;
  assert.deepEqual(fromCore(toCore(noDetails)), noDetails);
  assert.equal('details' in fromCore(toCore(noDetails)), false);
  assert.deepEqual(fromCore(toCore({ ...noDetails, details: {} })), { ...noDetails, details: {} });
});

test('tools: parallel execution, tool_execution_end in completion order, results in call order', async () => {
  const executed = [];
  const slow = echoTool(executed, { delayMs: 30, name: 'slow' });
  const fast = echoTool(executed, { delayMs: 1, name: 'fast' });
  const streamFn = scripted([
    assistant([toolCall('c1', 'slow', { value: 'a' }), toolCall('c2', 'fast', { value: 'b' })], 'toolUse'),
    assistant('done'),
  ]);
  const agent = new Agent({ streamFn, initialState: { model: MODEL, tools: [slow, fast] } });
  const events = record(agent);
  const pending = [];
  agent.subscribe((event) => {
    if (event.type === 'tool_execution_end') pending.push([...agent.state.pendingToolCalls]);
  });
  await agent.prompt('go');
  assert.deepEqual(executed, ['a', 'b']);
  assert.deepEqual(events.filter((e) => e.type === 'tool_execution_end').map((e) => e.toolCallId), ['c2', 'c1']);
  assert.deepEqual(pending, [['c1'], []]);
  const results = agent.state.messages.filter((m) => m.role === 'toolResult');
  assert.deepEqual(results.map((m) => m.toolCallId), ['c1', 'c2']);
  assert.deepEqual(results[0].content, [{ type: 'text', text: 'echo a' }]);
  assert.deepEqual(agent.state.messages.map((m) => m.role), ['user', 'assistant', 'toolResult', 'toolResult', 'assistant']);
  const turnEnds = events.filter((e) => e.type === 'turn_end');
  assert.equal(turnEnds.length, 2);
  assert.deepEqual(turnEnds[0].toolResults.map((m) => m.toolCallId), ['c1', 'c2']);
  // The second model call saw the results.
  assert.deepEqual(streamFn.calls[1].context.map((m) => m.role), ['user', 'assistant', 'toolResult', 'toolResult']);
});

test('beforeToolCall blocks a call and afterToolCall rewrites a result; a missing tool is an error result', async () => {
  const executed = [];
  const streamFn = scripted([
    assistant([toolCall('c1', 'echo', { value: 'x' }), toolCall('c2', 'echo', { value: 'y' }), toolCall('c3', 'nope', {})], 'toolUse'),
    assistant('ok'),
  ]);
  const agent = new Agent({
    streamFn,
    initialState: { model: MODEL, tools: [echoTool(executed)] },
    beforeToolCall: async ({ toolCall: call }) => (call.id === 'c1' ? { block: true, reason: 'not c1' } : undefined),
    afterToolCall: async ({ result }) => ({ content: [{ type: 'text', text: `${result.content[0].text}!` }] }),
  });
  await agent.prompt('go');
  assert.deepEqual(executed, ['y']);
  const results = agent.state.messages.filter((m) => m.role === 'toolResult');
  assert.deepEqual(results.map((m) => [m.toolCallId, m.isError, m.content[0].text]), [
    ['c1', true, 'not c1'],
    ['c2', false, 'echo y!'],
    ['c3', true, 'Tool nope not found'],
  ]);
});

test('steering during tools enters after the whole batch; follow-ups after the text stop', async () => {
  let agent;
  const tool = {
    ...echoTool(),
    async execute(id, params) {
      agent.steer(user('steer now'));
      agent.followUp(user('and then'));
      return { content: [{ type: 'text', text: 'ok' }], details: {} };
    },
  };
  const streamFn = scripted([
    assistant([toolCall('c1', 'echo', { value: 'a' })], 'toolUse'),
    assistant('steered'),
    assistant('followed'),
  ]);
  agent = new Agent({ streamFn, initialState: { model: MODEL, tools: [tool] } });
  const events = record(agent);
  await agent.prompt('start');
  const texts = agent.state.messages.map((m) => (m.role !== 'user' ? m.role : typeof m.content === 'string' ? m.content : m.content[0].text));
  assert.deepEqual(texts, ['start', 'assistant', 'toolResult', 'steer now', 'assistant', 'and then', 'assistant']);
  assert.equal(events.filter((e) => e.type === 'turn_start').length, 3);
  assert.equal(agent.hasQueuedMessages(), false);
});

test('difference: a tool call in a length answer is answered truncated, never executed', async () => {
  const executed = [];
  const streamFn = scripted([
    assistant([toolCall('c1', 'echo', { value: 'cut' })], 'length'),
    assistant('retried'),
  ]);
  const agent = new Agent({ streamFn, initialState: { model: MODEL, tools: [echoTool(executed)] } });
  const events = record(agent);
  await agent.prompt('go');
  assert.deepEqual(executed, []);
  assert.equal(events.filter((e) => e.type === 'tool_execution_start').length, 0);
  const result = agent.state.messages.find((m) => m.role === 'toolResult');
  assert.equal(result.toolCallId, 'c1');
  assert.equal(result.isError, true);
  assert.match(result.content[0].text, /re-issue|truncat|length/i);
  assert.deepEqual(agent.state.messages.map((m) => m.role), ['user', 'assistant', 'toolResult', 'assistant']);
});

test('difference: abort during tools pairs the batch and ends the run; queued input stays queued', async () => {
  let agent;
  let release;
  const gate = new Promise((resolve) => {
    release = resolve;
  });
  const tool = {
    ...echoTool(),
    async execute() {
      await gate;
      return { content: [{ type: 'text', text: 'late' }], details: {} };
    },
  };
  const streamFn = scripted([assistant([toolCall('c1', 'echo', { value: 'a' }), toolCall('c2', 'echo', { value: 'b' })], 'toolUse'), assistant('never')]);
  agent = new Agent({ streamFn, initialState: { model: MODEL, tools: [tool] } });
  const events = record(agent);
  agent.subscribe((event) => {
    if (event.type === 'tool_execution_start' && event.toolCallId === 'c2') {
      agent.followUp(user('queued'));
      agent.abort();
      release();
    }
  });
  await agent.prompt('go');
  assert.equal(streamFn.calls.length, 1, 'no model call after the abort');
  assert.deepEqual(agent.state.messages.map((m) => m.role), ['user', 'assistant', 'toolResult', 'toolResult']);
  const end = events.at(-1);
  assert.equal(end.type, 'agent_end');
  // The run did not take the follow-up (the abort check comes first): it is queued for the next.
  assert.deepEqual(agent.unconsumed.map((m) => m.content), ['queued']);
  assert.equal(agent.hasQueuedMessages(), true);
  assert.equal(agent.state.isStreaming, false);
});

test('abort while the model streams: the aborted answer stays, errorMessage is set, the run ends', async () => {
  const streamFn = scripted(['wait']);
  const agent = new Agent({ streamFn, initialState: { model: MODEL } });
  let signal;
  agent.subscribe((event, s) => {
    if (event.type === 'agent_start') signal = s;
  });
  const done = agent.prompt('hello');
  await new Promise((resolve) => setTimeout(resolve, 10));
  assert.equal(agent.state.isStreaming, true);
  await assert.rejects(agent.prompt('again'), /already processing a prompt/);
  await assert.rejects(agent.continue(), /already processing/);
  agent.abort();
  await done;
  assert.equal(signal.aborted, true);
  const last = agent.state.messages.at(-1);
  assert.equal(last.stopReason, 'aborted');
  assert.equal(agent.state.errorMessage, last.errorMessage);
});

test('awaited listeners: prompt and waitForIdle resolve after agent_end listeners settle', async () => {
  const agent = new Agent({ streamFn: scripted([assistant('ok')]) });
  let release;
  const barrier = new Promise((resolve) => {
    release = resolve;
  });
  let finished = false;
  agent.subscribe(async (event) => {
    if (event.type === 'agent_end') {
      await barrier;
      finished = true;
    }
  });
  let resolved = false;
  const done = agent.prompt('hi').then(() => {
    resolved = true;
  });
  const idle = agent.waitForIdle();
  await new Promise((resolve) => setTimeout(resolve, 10));
  assert.equal(resolved, false);
  assert.equal(agent.state.isStreaming, true);
  release();
  await Promise.all([done, idle]);
  assert.equal(finished, true);
  assert.equal(agent.state.isStreaming, false);
});

test('prompt(messages) is one multi-message prompt; continue() runs over the transcript', async () => {
  const streamFn = scripted([assistant('one'), assistant('two')]);
  const agent = new Agent({ streamFn, initialState: { model: MODEL } });
  const events = record(agent);
  await agent.prompt([user('first'), user('second', 7)]);
  assert.deepEqual(streamFn.calls[0].context.map((m) => m.content), ['first', 'second']);
  assert.equal(events.filter((e) => e.type === 'agent_start').length, 1);
  await assert.rejects(agent.continue(), /Cannot continue from message role: assistant/);
  agent.state.messages.push(user('appended by the host'));
  await agent.continue();
  assert.deepEqual(agent.state.messages.map((m) => m.role), ['user', 'user', 'assistant', 'user', 'assistant']);
  assert.equal(streamFn.calls[1].context.at(-1).content, 'appended by the host');
  await assert.rejects(new Agent().continue(), /No messages to continue from/);
});

test('state.messages assigned: history is imported into runcore before the next run', async () => {
  const streamFn = scripted([assistant('answer')]);
  const agent = new Agent({ streamFn, initialState: { model: MODEL, messages: [user('old'), assistant('old answer')] } });
  await agent.prompt('new');
  assert.deepEqual(agent.state.messages.map((m) => m.role), ['user', 'assistant', 'user', 'assistant']);
  assert.deepEqual(streamFn.calls[0].context.map((m) => m.role), ['user', 'assistant', 'user']);
  agent.state.messages = [user('replaced')];
  await agent.continue();
  assert.deepEqual(agent.state.messages.map((m) => m.role), ['user', 'assistant']);
  agent.reset();
  assert.deepEqual(agent.state.messages, []);
});

test('difference: the run ends at runcore\'s step budget (maxSteps)', async () => {
  const streamFn = scripted([assistant([toolCall('c', 'echo', { value: 'loop' })], 'toolUse')]);
  const agent = new Agent({ streamFn, maxSteps: 3, initialState: { model: MODEL, tools: [echoTool()] } });
  await agent.prompt('loop forever');
  assert.equal(streamFn.calls.length, 3);
  assert.equal(agent.state.isStreaming, false);
});

test('a stream function that throws ends the run as an error', async () => {
  const agent = new Agent({
    streamFn: () => {
      throw new Error('no network');
    },
    initialState: { model: MODEL },
  });
  await agent.prompt('hi');
  const last = agent.state.messages.at(-1);
  assert.equal(last.role, 'assistant');
  assert.equal(last.stopReason, 'error');
  assert.equal(last.errorMessage, 'no network');
  assert.equal(agent.state.errorMessage, 'no network');
});

test('agentLoop: a stream of events whose result is the new messages; steering from the callback', async () => {
  const executed = [];
  let polls = 0;
  const config = {
    model: MODEL,
    convertToLlm: (messages) => messages,
    toolExecution: 'sequential',
    getSteeringMessages: async () => (polls++ === 1 ? [user('interrupt')] : []),
  };
  const streamFn = scripted([
    assistant([toolCall('c1', 'echo', { value: 'a' }), toolCall('c2', 'echo', { value: 'b' })], 'toolUse'),
    assistant('done'),
  ]);
  const context = { systemPrompt: '', messages: [], tools: [echoTool(executed)] };
  const stream = agentLoop([user('start')], context, config, undefined, streamFn);
  const events = [];
  for await (const event of stream) events.push(event);
  const messages = await stream.result();
  assert.deepEqual(executed, ['a', 'b']);
  assert.deepEqual(messages.map((m) => m.role), ['user', 'assistant', 'toolResult', 'toolResult', 'user', 'assistant']);
  assert.equal(messages[4].content, 'interrupt');
  assert.equal(events[0].type, 'agent_start');
  assert.equal(events.at(-1).type, 'agent_end');
  assert.deepEqual(context.messages, [], 'the caller\'s context is not changed');
});

test('agentLoop: shouldStopAfterTurn and terminate end the run after the batch', async () => {
  const streamFn = scripted([assistant([toolCall('c1', 'echo', { value: 'a' })], 'toolUse'), assistant('never')]);
  const context = { systemPrompt: '', messages: [], tools: [echoTool([], { terminate: true })] };
  const stream = agentLoop([user('go')], context, { model: MODEL, convertToLlm: (m) => m }, undefined, streamFn);
  for await (const event of stream) void event;
  assert.deepEqual((await stream.result()).map((m) => m.role), ['user', 'assistant', 'toolResult']);
  assert.equal(streamFn.calls.length, 1);

  const again = scripted([assistant([toolCall('c1', 'echo', { value: 'a' })], 'toolUse'), assistant('never')]);
  const stopped = agentLoop([user('go')], { ...context, tools: [echoTool()] }, {
    model: MODEL,
    convertToLlm: (m) => m,
    shouldStopAfterTurn: async ({ toolResults }) => toolResults.length === 1,
  }, undefined, again);
  const types = [];
  for await (const event of stopped) types.push(event.type);
  assert.equal(again.calls.length, 1);
  assert.deepEqual(types.slice(-3), ['message_end', 'turn_end', 'agent_end']);
});

test('agentLoopContinue: refuses an empty or assistant-ended context, continues otherwise', async () => {
  const config = { model: MODEL, convertToLlm: (m) => m };
  assert.throws(() => agentLoopContinue({ systemPrompt: '', messages: [] }, config), /no messages/);
  assert.throws(() => agentLoopContinue({ systemPrompt: '', messages: [assistant('x')] }, config), /role: assistant/);
  const stream = agentLoopContinue({ systemPrompt: '', messages: [user('hi')] }, config, undefined, scripted([assistant('hello')]));
  const ends = [];
  for await (const event of stream) if (event.type === 'message_end') ends.push(event.message.role);
  assert.deepEqual(ends, ['assistant']);
  assert.deepEqual((await stream.result()).map((m) => m.role), ['assistant']);
});

test('difference: an aborted answer that holds tool calls gets a skipped result for each', async () => {
  const executed = [];
  const agent = new Agent({
    streamFn: scripted([assistant([toolCall('c1', 'echo', { value: 'a' })], 'aborted', { errorMessage: 'cut off' })]),
    initialState: { model: MODEL, tools: [echoTool(executed)] },
  });
  await agent.prompt('go');
  assert.deepEqual(executed, []);
  assert.deepEqual(agent.state.messages.map((m) => m.role), ['user', 'assistant', 'toolResult']);
  const result = agent.state.messages[2];
  assert.equal(result.toolCallId, 'c1');
  assert.equal(result.isError, true);
  assert.equal(agent.state.errorMessage, 'cut off');
});

test('difference: a listener that throws stops the run; no stand-in message enters the transcript', async () => {
  const streamFn = scripted([assistant([toolCall('c1', 'echo', { value: 'a' })], 'toolUse'), assistant('never')]);
  const agent = new Agent({ streamFn, initialState: { model: MODEL, tools: [echoTool()] } });
  const ends = [];
  agent.subscribe((event) => {
    if (event.type === 'tool_execution_start') throw new Error('listener broke');
    if (event.type === 'agent_end') ends.push(event);
  });
  await agent.prompt('go');
  assert.equal(agent.state.errorMessage, 'listener broke');
  assert.equal(ends.length, 1);
  assert.equal(ends[0].messages[0].errorMessage, 'listener broke');
  assert.equal(streamFn.calls.length, 1);
  // The batch that was out is paired `interrupted` (its outcome unknown), no made-up answer.
  assert.deepEqual(agent.state.messages.map((m) => m.role), ['user', 'assistant', 'toolResult']);
  assert.equal(agent.state.messages[2].isError, true);
  assert.ok(agent.state.messages.every((m) => m.errorMessage !== 'listener broke'));
  assert.equal(agent.state.isStreaming, false);
  // The agent is usable again: the next prompt runs on the same transcript.
  agent.streamFn = scripted([assistant('fine')]);
  const again = [];
  agent.subscribe((event) => {
    if (event.type === 'agent_end') again.push(event);
  });
  await agent.prompt('again');
  assert.equal(agent.state.messages.at(-1).content[0].text, 'fine');
  assert.equal(agent.state.messages.length, 5);
});

test('pi.d.ts declares exactly the runtime members of Agent and the module', async () => {
  const { readFileSync } = await import('node:fs');
  const { createRequire } = await import('node:module');
  const { join } = await import('node:path');
  const { PACKAGE } = await import('./helpers.mjs');
  const ts = createRequire(import.meta.url)(join(PACKAGE, 'node_modules', 'typescript'));
  const path = join(PACKAGE, 'pi.d.ts');
  const source = ts.createSourceFile(path, readFileSync(path, 'utf8'), ts.ScriptTarget.ES2022, true);
  const functions = new Set();
  let members = null;
  for (const statement of source.statements) {
    if (ts.isFunctionDeclaration(statement)) functions.add(statement.name.text);
    if (ts.isClassDeclaration(statement) && statement.name.text === 'Agent') {
      members = new Set(statement.members.filter((m) => !ts.isConstructorDeclaration(m)).map((m) => m.name.getText(source)));
    }
  }
  assert.deepEqual([...functions].sort(), Object.keys(pi).filter((k) => k !== 'Agent').sort());
  const agent = new Agent();
  const runtime = new Set([
    ...Object.getOwnPropertyNames(Agent.prototype).filter((k) => k !== 'constructor'),
    ...Object.keys(agent),
  ]);
  assert.deepEqual([...members].sort(), [...runtime].sort());
});

test('abort right after prompt(): the run is cancelled before any model call', async () => {
  const streamFn = scripted([assistant('never')]);
  const agent = new Agent({ streamFn, initialState: { model: MODEL } });
  const events = record(agent);
  agent.subscribe((event) => {
    if (event.type === 'agent_start') agent.abort();
  });
  await agent.prompt('hi');
  assert.equal(streamFn.calls.length, 0);
  assert.deepEqual(agent.state.messages.map((m) => m.role), ['user']);
  assert.equal(events.at(-1).type, 'agent_end');
});

test('the stream function\'s context.messages is its own: made when first read, never changed by later steps', async () => {
  const executed = [];
  const kept = [];
  let thirdRoles;
  const streamFn = (model, context) => {
    kept.push(context);
    // A stream function may freeze its context: reading it still works.
    if (kept.length === 1) Object.freeze(context);
    // The first call's context is read only after the whole run (after later steps appended).
    if (kept.length === 2) {
      const read = context.messages;
      assert.equal(context.messages, read, 'the same array on every read');
      read.push({ role: 'user', content: 'scribbled by the stream function', timestamp: 0 });
    }
    if (kept.length === 3) {
      thirdRoles = context.messages.map((m) => m.role);
      context.messages = ['assigned'];
      assert.deepEqual(context.messages, ['assigned']);
    }
    const answers = [
      assistant([toolCall('c1', 'echo', { value: 'a' })], 'toolUse'),
      assistant([toolCall('c2', 'echo', { value: 'b' })], 'toolUse'),
      assistant('done'),
    ];
    return stream(answers[kept.length - 1]);
  };
  const agent = new Agent({ streamFn, initialState: { model: MODEL, tools: [echoTool(executed)] } });
  await agent.prompt('go');
  assert.deepEqual(executed, ['a', 'b']);
  assert.deepEqual(Object.keys(kept[0]), ['systemPrompt', 'messages', 'tools']);
  // Read late, the first context still holds only what the first model call saw.
  assert.deepEqual(kept[0].messages.map((m) => m.role), ['user']);
  // What the second stream function pushed onto its copy reached neither the agent nor the third call.
  assert.deepEqual(kept[1].messages.map((m) => m.role), ['user', 'assistant', 'toolResult', 'user']);
  assert.deepEqual(agent.state.messages.map((m) => m.role), ['user', 'assistant', 'toolResult', 'assistant', 'toolResult', 'assistant']);
  assert.deepEqual(thirdRoles, ['user', 'assistant', 'toolResult', 'assistant', 'toolResult']);
  assert.deepEqual(kept[2].messages, ['assigned']);
  assert.equal(kept[0].messages.length, 1);
  assert.deepEqual(kept[0].messages, kept[0].messages, 'a frozen context reads the same messages every time');
});

test('runAgentLoop / runAgentLoopContinue: each event awaited through emit; the new messages', async () => {
  const streamFn = scripted([assistant('one'), assistant('two')]);
  const events = [];
  const config = { model: MODEL, convertToLlm: (messages) => messages };
  const context = { systemPrompt: '', messages: [], tools: [] };
  const emit = async (event) => {
    await new Promise((resolve) => setImmediate(resolve));
    events.push(event.type);
  };
  const messages = await runAgentLoop([user('hi')], context, config, emit, undefined, streamFn);
  assert.deepEqual(messages.map((m) => m.role), ['user', 'assistant']);
  assert.equal(events[0], 'agent_start');
  assert.equal(events.at(-1), 'agent_end');
  await assert.rejects(runAgentLoopContinue({ ...context, messages }, config, emit, undefined, streamFn), /assistant/);
  const more = await runAgentLoopContinue({ ...context, messages: [user('again')] }, config, emit, undefined, streamFn);
  assert.deepEqual(more.map((m) => m.role), ['assistant']);
  assert.equal(more[0].content[0].text, 'two');
});
