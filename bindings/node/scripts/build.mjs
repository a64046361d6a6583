// `npm run build`: builds the native module with cargo (release) and copies it beside
// index.js as `runcore.node`. Nothing is downloaded: cargo builds from crates.io sources.
// Respects CARGO_TARGET_DIR (cargo reports where it wrote the library).
import { spawnSync } from 'node:child_process';
import { copyFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(dirname(fileURLToPath(import.meta.url)));
const profile = process.env.RUNCORE_NODE_PROFILE === 'debug' ? [] : ['--release'];
const built = spawnSync(
  'cargo',
  ['build', ...profile, '-p', 'runcore-node', '--message-format=json-render-diagnostics'],
  { cwd: here, stdio: ['ignore', 'pipe', 'inherit'], encoding: 'utf8', maxBuffer: 1 << 28 },
);
if (built.error) {
  console.error(`runcore build: cannot run cargo: ${built.error.message}`);
  process.exit(1);
}
if (built.status !== 0) process.exit(built.status ?? 1);
let library = null;
for (const line of built.stdout.split('\n')) {
  if (!line.startsWith('{')) continue;
  const message = JSON.parse(line);
  if (message.reason === 'compiler-artifact' && message.target?.name === 'runcore_node') {
    library = message.filenames.find((f) => /\.(so|dylib|dll)$/.test(f)) ?? library;
  }
}
if (library === null) {
  console.error('runcore build: cargo did not report the runcore_node library');
  process.exit(1);
}
copyFileSync(library, join(here, 'runcore.node'));
console.log(`runcore build: ${library} -> runcore.node`);
