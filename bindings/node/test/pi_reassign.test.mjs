// runcore/pi: `state.messages` reassigned at any time — by a listener mid-run, or from another
// promise chain before the run settles — is what the next prompt / continue runs over, and what
// the run appends after the reassignment lands in the new array (as pi-agent-core does).
import { test } from 'node:test';
import assert from 'node:assert/strict';

import { pi, MODEL, assistant, user, toolCall, scripted, echoTool } from './pi_helpers.mjs';

const { Agent } = pi;

const roles = (messages) => messages.map((m) => m.role);

function errorAnswer() {
  return assistant([], 'error', { errorMessage: '429 rate limited' });
}

test('retry: the error answer removed in agent_end (before the run settles), then continue() runs', async () => {
  const streamFn = scripted([errorAnswer(), assistant('second try')]);
  const agent = new Agent({ streamFn, initialState: { model: MODEL } });
  agent.subscribe((event) => {
    // pi-coding-agent's AgentSession does this for an error answer, then calls continue().
    if (event.type === 'agent_end' && event.messages.at(-1)?.stopReason === 'error') {
      agent.state.messages = agent.state.messages.slice(0, -1);
    }
  });
  await agent.prompt('hello');
  assert.deepEqual(roles(agent.state.messages), ['user']);
  await agent.continue();
  assert.deepEqual(roles(agent.state.messages), ['user', 'assistant']);
  assert.equal(agent.state.messages[1].content[0].text, 'second try');
  // The second call saw the transcript without the error answer.
  assert.deepEqual(streamFn.calls[1].context.map((m) => m.role), ['user']);
});

test('retry: the error answer removed from another promise chain before the run settles', async () => {
  const streamFn = scripted([errorAnswer(), assistant('second try')]);
  const agent = new Agent({ streamFn, initialState: { model: MODEL } });
  let removed;
  agent.subscribe((event) => {
    if (event.type === 'agent_end' && event.messages.at(-1)?.stopReason === 'error') {
      removed = Promise.resolve().then(() => {
        assert.equal(agent.state.isStreaming, true, 'the run has not settled yet');
        agent.state.messages = agent.state.messages.slice(0, -1);
      });
    }
  });
  await agent.prompt('hello');
  await removed;
  await agent.continue();
  assert.deepEqual(roles(agent.state.messages), ['user', 'assistant']);
  assert.deepEqual(streamFn.calls[1].context.map((m) => m.role), ['user']);
});

test('a listener that reassigns state.messages mid-run: later messages land in the new array', async () => {
  const streamFn = scripted([
    assistant([toolCall('c1', 'echo', { value: 'a' })], 'toolUse'),
    assistant('done'),
    assistant('next'),
  ]);
  const agent = new Agent({ streamFn, initialState: { model: MODEL, tools: [echoTool()] } });
  let before;
  agent.subscribe((event) => {
    if (event.type === 'message_end' && event.message.role === 'assistant' && before === undefined) {
      before = agent.state.messages;
      agent.state.messages = agent.state.messages.slice();
    }
  });
  await agent.prompt('go');
  assert.deepEqual(roles(agent.state.messages), ['user', 'assistant', 'toolResult', 'assistant']);
  // The array the caller held before the reassignment received nothing more (as in pi).
  assert.deepEqual(roles(before), ['user', 'assistant']);
  // The run itself went on over its own context: the second call saw the tool result.
  assert.deepEqual(streamFn.calls[1].context.map((m) => m.role), ['user', 'assistant', 'toolResult']);
  await agent.prompt('again');
  // The next prompt sends every call with its result.
  assert.deepEqual(streamFn.calls[2].context.map((m) => m.role), ['user', 'assistant', 'toolResult', 'assistant', 'user']);
  assert.deepEqual(roles(agent.state.messages), ['user', 'assistant', 'toolResult', 'assistant', 'user', 'assistant']);
});

test('a listener that drops a message mid-run: the next prompt runs over what the user now holds', async () => {
  const streamFn = scripted([assistant('first'), assistant('second')]);
  const agent = new Agent({ streamFn, initialState: { model: MODEL, messages: [user('old'), assistant('old answer')] } });
  agent.subscribe((event) => {
    if (event.type === 'agent_start') agent.state.messages = agent.state.messages.slice(2);
  });
  await agent.prompt('new');
  assert.deepEqual(roles(agent.state.messages), ['user', 'assistant']);
  await agent.prompt('more');
  assert.deepEqual(streamFn.calls[1].context.map((m) => m.role), ['user', 'assistant', 'user']);
});
