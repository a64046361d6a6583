// Child process of pi_durable.test.mjs (not a test itself: it runs only with a path argument).
// A durable runcore/pi Agent on a SQLite file, prompted; its tool says "ready" and never
// returns, so the parent SIGKILLs the process while the tool runs.
import { pi, MODEL, assistant, user, toolCall, scripted } from './pi_helpers.mjs';
import { runcore } from './helpers.mjs';

const path = process.argv[2];
if (path !== undefined) {
  const store = new runcore.SqliteStore(path);
  const hang = {
    name: 'search',
    label: 'search',
    description: 'Search',
    parameters: { type: 'object', properties: {} },
    async execute() {
      process.stdout.write('ready\n');
      await new Promise(() => setInterval(() => {}, 1000));
    },
  };
  const agent = new pi.Agent({
    store,
    threadId: 'pi-killed',
    leaseMs: 400,
    streamFn: scripted([assistant([toolCall('c1', 'search', { value: 'x' })], 'toolUse')]),
    initialState: { model: MODEL, tools: [hang] },
  });
  await agent.prompt(user('find x', 1234));
}
