// w1 and w2 (as in examples/workloads.rs) from Node, side by side in one run, through:
//   agent       runcore's Agent (this package, in process), every output parsed (poll())
//   agent-lines the same through pollLine(): every output as its JSON line, only the actions
//               parsed (a host that forwards lines elsewhere)
//   driver      runcore's Driver (this package: JSON lines in process)
//   subprocess  a `runcore drive` child process through pipes
//   pi          pi-agent-core 0.73.1 (@mariozechner/pi-agent-core, a dependency of this
//               benchmark only: `npm ci` in bindings/node/benches)
//   runcore-pi  runcore/pi (this package's pi-agent-core-compatible Agent), the same host
//               code as `pi` (same stream function, same tool), in memory
//   runcore-pi-sqlite  the same, durable: `store` a SqliteStore in a temporary file (every
//               commit stored, the thread claimed)
//
//   node bindings/node/benches/workloads.mjs [--n 1000,10000] [--repeat 3] [--ways agent,driver,subprocess,pi]
//     [--read-context 1] [--workloads w1,w2]
//
// `--read-context 1`: the pi ways' stream function reads `context.messages` on every call (as
// a real provider does before converting them); without it, it never looks at them (runcore/pi
// then never copies them: the copy is made on the stream function's first read).
//
// - w1 (long run): one prompt; the scripted model answers N-1 times with 20 text deltas of 50
//   bytes, then an assistant message with that text and one `echo` tool call {"i": step}; the
//   tool returns a 100-byte text; then a final text-only answer. Items are steps.
// - w2 (many runs): N sequential prompts on one agent, each answered by one text-only message
//   of 1000 bytes. Items are runs.
//
// runcore's ways run in context `delta` (each call_model carries only the new messages, as the
// Rust workload borrows model_request() and pi-agent-core hands its stream function the
// transcript array by reference). Every output is parsed into an object, as a host would
// consume it. Prints one JSON line per figure and a table; each figure is the best of --repeat.
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createInterface } from 'node:readline';

const HERE = dirname(fileURLToPath(import.meta.url));
const ROOT = resolve(HERE, '..', '..', '..');
const require = createRequire(import.meta.url);
// RUNCORE_NODE_PACKAGE=DIR measures another build of the package (a directory holding its
// index.js and runcore.node), e.g. the one before a change, beside this one in the same session.
const runcore = require(process.env.RUNCORE_NODE_PACKAGE ? resolve(process.env.RUNCORE_NODE_PACKAGE) : resolve(HERE, '..'));

const DELTA = 'd'.repeat(50);
const TEXT = DELTA.repeat(20);
const TOOL_TEXT = 't'.repeat(100);
const ANSWER = 'a'.repeat(1000);

function args() {
  const options = { n: [1000, 10000], repeat: 3, ways: ['agent', 'agent-lines', 'driver', 'subprocess', 'pi'], workloads: ['w1', 'w2'] };
  const argv = process.argv.slice(2);
  for (let i = 0; i < argv.length; i += 2) {
    const [key, value] = [argv[i], argv[i + 1]];
    if (key === '--n') options.n = value.split(',').map(Number);
    else if (key === '--repeat') options.repeat = Number(value);
    else if (key === '--ways') options.ways = value.split(',');
    else if (key === '--read-context') options.readContext = value === '1';
    else if (key === '--workloads') options.workloads = value.split(',');
    else throw new Error(`unknown option ${key}`);
  }
  return options;
}

function w1Message(n, step) {
  if (step < n) {
    return {
      content: [
        { type: 'text', text: TEXT },
        { type: 'tool_call', id: `call-${step}`, name: 'echo', arguments: { i: step } },
      ],
      stop_reason: 'tool_use',
    };
  }
  return { content: [{ type: 'text', text: 'done' }], stop_reason: 'stop' };
}

function answer() {
  return { content: [{ type: 'text', text: ANSWER }], stop_reason: 'stop' };
}

// ----- runcore Agent ------------------------------------------------------------------------

function agentW1(n) {
  const agent = new runcore.Agent({ max_steps: n, context: 'delta' });
  agent.prompt('go', { nowMs: 0 });
  let steps = 0;
  for (let out = agent.poll(); out !== null; out = agent.poll()) {
    if (out.type === 'call_model') {
      const { run_id: run, step } = out;
      steps = step;
      if (step < n) for (let k = 0; k < 20; k++) agent.modelDelta(run, step, DELTA);
      agent.modelDone(run, step, w1Message(n, step));
    } else if (out.type === 'execute_tools') {
      for (const call of out.calls) agent.toolDone(out.run_id, call.id, TOOL_TEXT);
    }
  }
  return steps;
}

/** w1 through `pollLine()`: a host that forwards every line and parses only the actions. */
function isAction(line) {
  return line.startsWith('{"type":"call_model"') || line.startsWith('{"type":"execute_tools"');
}

function agentLinesW1(n) {
  const agent = new runcore.Agent({ max_steps: n, context: 'delta' });
  agent.prompt('go', { nowMs: 0 });
  let steps = 0;
  for (let line = agent.pollLine(); line !== null; line = agent.pollLine()) {
    if (!isAction(line)) continue;
    const out = JSON.parse(line);
    if (out.type === 'call_model') {
      const { run_id: run, step } = out;
      steps = step;
      if (step < n) for (let k = 0; k < 20; k++) agent.modelDelta(run, step, DELTA);
      agent.modelDone(run, step, w1Message(n, step));
    } else {
      for (const call of out.calls) agent.toolDone(out.run_id, call.id, TOOL_TEXT);
    }
  }
  return steps;
}

function agentLinesW2(n) {
  const agent = new runcore.Agent({ context: 'delta' });
  for (let i = 0; i < n; i++) {
    agent.prompt(`q${i}`, { nowMs: i });
    for (let line = agent.pollLine(); line !== null; line = agent.pollLine()) {
      if (!isAction(line)) continue;
      const out = JSON.parse(line);
      agent.modelDone(out.run_id, out.step, answer());
    }
  }
  return n;
}

function agentW2(n) {
  const agent = new runcore.Agent({ context: 'delta' });
  for (let i = 0; i < n; i++) {
    agent.prompt(`q${i}`, { nowMs: i });
    for (let out = agent.poll(); out !== null; out = agent.poll()) {
      if (out.type === 'call_model') agent.modelDone(out.run_id, out.step, answer());
    }
  }
  return n;
}

// ----- JSON lines: in process (Driver) or a subprocess --------------------------------------

async function linesW1(send, n) {
  await send({ type: 'config', max_steps: n, context: 'delta' });
  let pending = await send({ type: 'prompt', text: 'go', now_ms: 0 });
  let steps = 0;
  while (pending.length > 0) {
    const out = pending.shift();
    if (out.type === 'call_model') {
      const { run_id: run, step } = out;
      steps = step;
      if (step < n) {
        for (let k = 0; k < 20; k++) {
          pending.push(...await send({ type: 'model_delta', run_id: run, step, text: DELTA }));
        }
      }
      pending.push(...await send({ type: 'model_done', run_id: run, step, message: w1Message(n, step) }));
    } else if (out.type === 'execute_tools') {
      for (const call of out.calls) {
        pending.push(...await send({ type: 'tool_done', run_id: out.run_id, call_id: call.id, content: TOOL_TEXT }));
      }
    }
  }
  return steps;
}

async function linesW2(send, n) {
  await send({ type: 'config', context: 'delta' });
  for (let i = 0; i < n; i++) {
    const pending = await send({ type: 'prompt', text: `q${i}`, now_ms: i });
    while (pending.length > 0) {
      const out = pending.shift();
      if (out.type === 'call_model') {
        pending.push(...await send({ type: 'model_done', run_id: out.run_id, step: out.step, message: answer() }));
      }
    }
  }
  return n;
}

/** A Driver's `send`, the `idle` line left out (as the subprocess reader does). */
function driverSend() {
  const driver = new runcore.Driver();
  return (line) => {
    const out = driver.send(line);
    out.pop();
    return out;
  };
}

function binary() {
  if (process.env.RUNCORE_BIN) return process.env.RUNCORE_BIN;
  const target = process.env.CARGO_TARGET_DIR ? resolve(ROOT, process.env.CARGO_TARGET_DIR) : join(ROOT, 'target');
  const release = join(target, 'release', 'runcore');
  if (!existsSync(release)) throw new Error(`${release} is missing: cargo build --release -p runcore-cli`);
  return release;
}

/** `runcore drive` through pipes: one JSON line out, lines back up to its `idle`. */
function subprocessSend() {
  const child = spawn(binary(), ['drive'], { stdio: ['pipe', 'pipe', 'inherit'] });
  const lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]();
  const send = async (line) => {
    child.stdin.write(JSON.stringify(line) + '\n');
    const out = [];
    for (;;) {
      const { value } = await lines.next();
      const parsed = JSON.parse(value);
      if (parsed.type === 'idle') return out;
      out.push(parsed);
    }
  };
  send.pid = child.pid;
  send.close = () => {
    child.stdin.end();
    return new Promise((done) => child.once('exit', done));
  };
  return send;
}

// ----- pi-agent-core ------------------------------------------------------------------------

async function piAgent(reply, { runcorePi = false, store, n } = {}) {
  const pi = runcorePi ? require(resolve(HERE, '..', 'pi.js')) : await import('@mariozechner/pi-agent-core');
  const ai = await import('@mariozechner/pi-ai');
  const { Type } = await import('typebox');
  const model = {
    id: 'scripted', name: 'scripted', api: 'scripted', provider: 'scripted', baseUrl: '',
    reasoning: false, input: ['text'], cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 },
    contextWindow: 1e9, maxTokens: 1e9,
  };
  const usage = { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, totalTokens: 0, cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 } };
  let calls = 0;
  const streamFn = (_model, context) => {
    calls += 1;
    if (READ_CONTEXT) contextRead += context.messages.length;
    const stream = ai.createAssistantMessageEventStream();
    const message = { role: 'assistant', content: [], api: 'scripted', provider: 'scripted', model: 'scripted', usage, stopReason: 'stop', timestamp: 0 };
    reply(calls, context, message, stream);
    return stream;
  };
  const echo = {
    name: 'echo', label: 'echo', description: 'Echo', parameters: Type.Object({ i: Type.Number() }),
    execute: async () => ({ content: [{ type: 'text', text: TOOL_TEXT }], details: {} }),
  };
  const options = { initialState: { model, tools: [echo], systemPrompt: '' }, streamFn };
  if (runcorePi) {
    options.maxSteps = n;
    if (store) Object.assign(options, { store, threadId: `bench-${++benchThreads}` });
  }
  return new pi.Agent(options);
}

let benchThreads = 0;
// `--read-context 1`, and what the stream functions read (so the read is not optimized away).
let READ_CONTEXT = false;
let contextRead = 0;

async function piW1(n, options = {}) {
  let steps = 0;
  const agent = await piAgent((call, _context, message, stream) => {
    steps = call;
    queueMicrotask(() => {
      stream.push({ type: 'start', partial: message });
      if (call < n) {
        message.content.push({ type: 'text', text: '' });
        stream.push({ type: 'text_start', contentIndex: 0, partial: message });
        for (let k = 0; k < 20; k++) {
          message.content[0].text += DELTA;
          stream.push({ type: 'text_delta', contentIndex: 0, delta: DELTA, partial: message });
        }
        stream.push({ type: 'text_end', contentIndex: 0, content: TEXT, partial: message });
        const toolCall = { type: 'toolCall', id: `call-${call}`, name: 'echo', arguments: { i: call } };
        message.content.push(toolCall);
        stream.push({ type: 'toolcall_start', contentIndex: 1, partial: message });
        stream.push({ type: 'toolcall_end', contentIndex: 1, toolCall, partial: message });
        message.stopReason = 'toolUse';
        stream.push({ type: 'done', reason: 'toolUse', message });
      } else {
        message.content.push({ type: 'text', text: 'done' });
        stream.push({ type: 'done', reason: 'stop', message });
      }
      stream.end(message);
    });
  }, { ...options, n });
  await agent.prompt('go');
  return steps;
}

async function piW2(n, options = {}) {
  const agent = await piAgent((_call, _context, message, stream) => {
    queueMicrotask(() => {
      message.content.push({ type: 'text', text: ANSWER });
      stream.push({ type: 'start', partial: message });
      stream.push({ type: 'done', reason: 'stop', message });
      stream.end(message);
    });
  }, { ...options, n });
  for (let i = 0; i < n; i++) await agent.prompt(`q${i}`);
  return n;
}

// ----- measuring ----------------------------------------------------------------------------

/** CPU time (user + system, µs) of a live process, from /proc (0 where there is none). */
function childCpuUs(pid) {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
    // utime and stime (fields 14 and 15 of the whole line) in clock ticks of 10 ms.
    return (Number(fields[11]) + Number(fields[12])) * 10_000;
  } catch {
    return 0;
  }
}

async function once(way, workload, n) {
  let send;
  if (way === 'subprocess') send = subprocessSend();
  const childBefore = send ? childCpuUs(send.pid) : 0;
  const cpuBefore = process.cpuUsage();
  const start = performance.now();
  let items;
  if (way === 'agent') items = workload === 'w1' ? agentW1(n) : agentW2(n);
  else if (way === 'agent-lines') items = workload === 'w1' ? agentLinesW1(n) : agentLinesW2(n);
  else if (way === 'driver') items = await (workload === 'w1' ? linesW1 : linesW2)(driverSend(), n);
  else if (way === 'subprocess') items = await (workload === 'w1' ? linesW1 : linesW2)(send, n);
  else if (way === 'pi') items = await (workload === 'w1' ? piW1 : piW2)(n);
  else if (way === 'runcore-pi') items = await (workload === 'w1' ? piW1 : piW2)(n, { runcorePi: true });
  else if (way === 'runcore-pi-sqlite') {
    const dir = mkdtempSync(join(tmpdir(), 'runcore-pi-bench-'));
    const store = new runcore.SqliteStore(join(dir, 'bench.db'));
    try {
      items = await (workload === 'w1' ? piW1 : piW2)(n, { runcorePi: true, store });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }
  else throw new Error(`unknown way ${way}`);
  const wall = performance.now() - start;
  const used = process.cpuUsage(cpuBefore);
  const cpu = (used.user + used.system) / 1000 + (send ? (childCpuUs(send.pid) - childBefore) / 1000 : 0);
  if (send) await send.close();
  if (items !== n) throw new Error(`${way} ${workload} made ${items} items, not ${n}`);
  return { wall, cpu };
}

async function main() {
  const options = args();
  READ_CONTEXT = options.readContext === true;
  const results = [];
  for (const workload of options.workloads) {
    for (const n of options.n) {
      for (const way of options.ways) {
        let best = Infinity;
        let bestCpu = Infinity;
        for (let r = 0; r < options.repeat; r++) {
          const { wall, cpu } = await once(way, workload, n);
          best = Math.min(best, wall);
          bestCpu = Math.min(bestCpu, cpu);
        }
        const figure = {
          way, workload, param: n, wall_ms: +best.toFixed(3), per_item_us: +((best * 1000) / n).toFixed(2),
          cpu_per_item_us: +((bestCpu * 1000) / n).toFixed(2),
        };
        results.push(figure);
        console.log(JSON.stringify(figure));
      }
    }
  }
  for (const [title, key] of [['wall-clock', 'per_item_us'], ['CPU time (this process and the child)', 'cpu_per_item_us']]) {
    console.log(`\nNode ${process.version}, best of ${options.repeat}, µs per item, ${title}\n`);
    console.log(`| workload | N | ${options.ways.join(' | ')} | pi / agent | subprocess / agent | pi / runcore-pi |`);
    console.log('|' + ' --- |'.repeat(options.ways.length + 5));
    for (const workload of ['w1', 'w2']) {
      for (const n of options.n) {
        const row = Object.fromEntries(results.filter((r) => r.workload === workload && r.param === n).map((r) => [r.way, r[key]]));
        const ratio = (a, b) => (row[a] && row[b] ? `${(row[a] / row[b]).toFixed(1)}×` : '–');
        console.log(`| ${workload} | ${n.toLocaleString('en')} | ${options.ways.map((w) => row[w]).join(' | ')} | ${ratio('pi', 'agent')} | ${ratio('subprocess', 'agent')} | ${ratio('pi', 'runcore-pi')} |`);
      }
    }
  }
  if (READ_CONTEXT) console.log(`\n(--read-context 1: the stream functions read ${contextRead} context messages in all)`);
}

await main();
