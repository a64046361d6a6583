'use strict';
// `runcore/pi`: the API of pi-agent-core (`@mariozechner/pi-agent-core` 0.73.1) over runcore's
// native Agent. The JavaScript does the I/O (streams the model, runs the tools, awaits listeners,
// stores commits); the native agent decides every step: when the model is called, what a tool
// batch is, when steering and follow-ups enter, pairing, abort, the step budget. pi's messages
// are runcore's transcript: what runcore has no field for rides in `meta` (SPEC §2.1), history
// enters by `import` and a prompt of several messages is one multi-message prompt (SPEC §8.10).
// pi/agent.js is the Agent, pi/loop.js agentLoop, pi/host.js one run's I/O, pi/messages.js the
// message conversion. See README.md, "For pi-agent-core users", for every place where runcore's rule wins.

const { Agent } = require('./pi/agent.js');
const { agentLoop, agentLoopContinue, runAgentLoop, runAgentLoopContinue } = require('./pi/loop.js');
const { toCore, fromCore } = require('./pi/messages.js');

module.exports = {
  Agent,
  agentLoop,
  agentLoopContinue,
  runAgentLoop,
  runAgentLoopContinue,
  toCore,
  fromCore,
};
