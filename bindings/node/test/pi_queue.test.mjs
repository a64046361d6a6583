// runcore/pi keeps pi-agent-core's agent-level queue: what is queued while no run can take it,
// and what a run hands back unconsumed, enters the next run as pi delivers it (steering right
// after the prompt, each queue's mode, follow-ups when the run would stop). clearQueue withdraws
// what the run has not taken; queue modes change at any time. runcore's contract holds inside a
// run (SPEC §8.2): the host re-submits the queue as the next run's prompt messages (§8.10).
import { test } from 'node:test';
import assert from 'node:assert/strict';

import { pi, MODEL, assistant, user, toolCall, scripted, echoTool } from './pi_helpers.mjs';

const { Agent } = pi;

/** A message's text (a user message's string content, or its first text block). */
function text(m) {
  if (typeof m.content === 'string') return m.content;
  const block = m.content.find((b) => b.type === 'text');
  return block ? block.text : m.role;
}

const texts = (messages) => messages.map(text);

test('steer / followUp while idle are queued; the next prompt gets them as pi delivers them', async () => {
  const streamFn = scripted([assistant('a1'), assistant('a2'), assistant('a3')]);
  const agent = new Agent({ streamFn, initialState: { model: MODEL } });
  agent.steer(user('s1'));
  agent.steer(user('s2'));
  agent.followUp(user('f1'));
  assert.equal(agent.hasQueuedMessages(), true);
  await agent.prompt('p');
  // one-at-a-time (pi's default): s1 right after the prompt, s2 at the next boundary, then f1.
  assert.deepEqual(texts(agent.state.messages), ['p', 's1', 'a1', 's2', 'a2', 'f1', 'a3']);
  assert.deepEqual(texts(streamFn.calls[0].context), ['p', 's1']);
  assert.equal(agent.hasQueuedMessages(), false);
});

test('a follow-up queued before an abort stays queued and runs with the next prompt', async () => {
  const streamFn = scripted(['wait', assistant('after')]);
  const agent = new Agent({ streamFn, initialState: { model: MODEL } });
  let queued = false;
  agent.subscribe((event) => {
    if (event.type === 'message_start' && event.message.role === 'assistant' && !queued) {
      queued = true;
      agent.followUp(user('later'));
      agent.abort();
    }
  });
  await agent.prompt('first');
  assert.equal(agent.hasQueuedMessages(), true, 'the UI still shows it pending, and it is');
  await agent.prompt('next');
  assert.deepEqual(texts(agent.state.messages).slice(-4), ['next', 'after', 'later', 'after']);
  assert.equal(agent.hasQueuedMessages(), false);
});

test('clearAllQueues before abort (Esc) withdraws what the run has not taken and does not throw', async () => {
  let agent;
  const tool = {
    ...echoTool(),
    async execute() {
      agent.steer(user('steer me'));
      agent.followUp(user('follow me'));
      assert.equal(agent.hasQueuedMessages(), true);
      agent.clearAllQueues();
      assert.equal(agent.hasQueuedMessages(), false);
      agent.abort();
      return { content: [{ type: 'text', text: 'ok' }], details: {} };
    },
  };
  const streamFn = scripted([assistant([toolCall('c1', 'echo', { value: 'a' })], 'toolUse'), assistant('done')]);
  agent = new Agent({ streamFn, initialState: { model: MODEL, tools: [tool] } });
  await agent.prompt('go');
  assert.deepEqual(agent.state.messages.map((m) => m.role), ['user', 'assistant', 'toolResult']);
  assert.deepEqual(agent.unconsumed, []);
  assert.equal(agent.hasQueuedMessages(), false);
  await agent.prompt('again');
  assert.ok(!texts(agent.state.messages).some((t) => t === 'steer me' || t === 'follow me'), 'withdrawn input never enters');
});

test('clearSteeringQueue mid-run keeps the follow-ups; clearFollowUpQueue keeps the steering', async () => {
  let agent;
  let step = 0;
  const tool = {
    ...echoTool(),
    async execute() {
      step += 1;
      agent.steer(user(`steer ${step}`));
      agent.followUp(user(`follow ${step}`));
      if (step === 1) agent.clearSteeringQueue();
      else agent.clearFollowUpQueue();
      return { content: [{ type: 'text', text: 'ok' }], details: {} };
    },
  };
  const streamFn = scripted([
    assistant([toolCall('c1', 'echo', { value: 'a' })], 'toolUse'),
    assistant('text 1'),
    assistant([toolCall('c2', 'echo', { value: 'b' })], 'toolUse'),
    assistant('text 2'),
    assistant('text 3'),
  ]);
  agent = new Agent({ streamFn, initialState: { model: MODEL, tools: [tool] } });
  await agent.prompt('go');
  assert.deepEqual(texts(agent.state.messages), [
    'go', 'toolCall', 'ok', 'text 1',
    // follow 1 survived the steering clear; it enters after the text stop
    'follow 1', 'toolCall', 'ok',
    // steer 2 survived the follow-up clear; it enters after the batch
    'steer 2', 'text 2',
  ].map((t) => (t === 'toolCall' ? 'assistant' : t)));
  assert.equal(agent.hasQueuedMessages(), false);
});

test('queue modes change at any time: after the first prompt, and mid-run from the next boundary', async () => {
  let agent;
  const tool = {
    ...echoTool(),
    async execute() {
      agent.steer(user('s1'));
      agent.steer(user('s2'));
      agent.steeringMode = 'all';
      return { content: [{ type: 'text', text: 'ok' }], details: {} };
    },
  };
  const streamFn = scripted([assistant('first'), assistant([toolCall('c1', 'echo', { value: 'a' })], 'toolUse'), assistant('both')]);
  agent = new Agent({ streamFn, initialState: { model: MODEL, tools: [tool] } });
  await agent.prompt('one');
  assert.equal(agent.steeringMode, 'one-at-a-time');
  agent.followUpMode = 'all';
  assert.equal(agent.followUpMode, 'all');
  await agent.prompt('two');
  assert.equal(agent.steeringMode, 'all');
  // Both steering messages entered at the one boundary after the batch.
  assert.deepEqual(texts(agent.state.messages).slice(-4), ['ok', 's1', 's2', 'both']);
  assert.throws(() => {
    agent.steeringMode = 'sometimes';
  }, TypeError);
});

test('continue() after an assistant message runs what is queued: steering first, then follow-ups', async () => {
  const streamFn = scripted([assistant('a0'), assistant('a1'), assistant('a2')]);
  const agent = new Agent({ streamFn, initialState: { model: MODEL } });
  await agent.prompt('p');
  await assert.rejects(agent.continue(), /Cannot continue from message role: assistant/);
  agent.followUp(user('f1'));
  agent.steer(user('s1'));
  await agent.continue();
  assert.deepEqual(texts(agent.state.messages), ['p', 'a0', 's1', 'a1', 'f1', 'a2']);
  assert.equal(agent.hasQueuedMessages(), false);
});

test('continue() over a user tail takes queued steering before the first model call', async () => {
  const streamFn = scripted([assistant('answer')]);
  const agent = new Agent({ streamFn, initialState: { model: MODEL, messages: [user('u')] } });
  agent.steer(user('s'));
  await agent.continue();
  assert.deepEqual(texts(streamFn.calls[0].context), ['u', 's']);
  assert.deepEqual(texts(agent.state.messages), ['u', 's', 'answer']);
});

test('a follow-up queued in an agent_end listener waits for the next run', async () => {
  const streamFn = scripted([assistant('a1'), assistant('a2'), assistant('a3')]);
  const agent = new Agent({ streamFn, initialState: { model: MODEL } });
  let once = false;
  agent.subscribe((event) => {
    if (event.type === 'agent_end' && !once) {
      once = true;
      agent.followUp(user('from the listener'));
    }
  });
  await agent.prompt('p');
  assert.deepEqual(texts(agent.state.messages), ['p', 'a1']);
  assert.equal(agent.hasQueuedMessages(), true);
  await agent.continue();
  assert.deepEqual(texts(agent.state.messages), ['p', 'a1', 'from the listener', 'a2']);
});
