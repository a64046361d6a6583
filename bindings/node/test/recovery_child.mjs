// Child process of sqlite_recovery.test.mjs (not a test itself: it runs only with a path
// argument). Drives an agent up to an executing tool, committing every commit to a SQLite
// file, says "ready" and waits to be killed.
import { runcore } from './helpers.mjs';

const path = process.argv[2];
if (path !== undefined) {
  const { Agent, SqliteStore } = runcore;
  const store = new SqliteStore(path);
  const agent = new Agent({ thread_id: 'killed', tools: { search: { description: 'Search' } } });
  const handleAll = async () => {
    for (const output of agent.drain()) {
      if (output.type === 'commit') await store.commit(output);
      if (output.type === 'call_model' && output.step === 1) {
        agent.modelDone(output.run_id, 1, {
          content: [{ type: 'tool_call', id: 'c1', name: 'search', arguments: { q: 'x' } }],
          stop_reason: 'tool_use',
        });
      }
      if (output.type === 'execute_tools') {
        process.stdout.write('ready\n');
        setInterval(() => {}, 1000);
        return;
      }
    }
  };
  agent.prompt('find x', { nowMs: 1000 });
  await handleAll();
}
