// Shared by the tests: where the repository's files and the `runcore` binary are.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createRequire } from 'node:module';

export const PACKAGE = resolve(dirname(fileURLToPath(import.meta.url)), '..');
export const ROOT = resolve(PACKAGE, '..', '..');
export const SCENARIOS = join(ROOT, 'cli', 'tests', 'scenarios');

/** The package as `require('runcore')` gives it to a host. */
export const runcore = createRequire(import.meta.url)(PACKAGE);

/** The `runcore` binary: RUNCORE_BIN, else cargo's target dir (CARGO_TARGET_DIR respected). */
export function runcoreBinary() {
  if (process.env.RUNCORE_BIN) return process.env.RUNCORE_BIN;
  const target = process.env.CARGO_TARGET_DIR
    ? resolve(ROOT, process.env.CARGO_TARGET_DIR)
    : join(ROOT, 'target');
  const binary = join(target, 'debug', 'runcore');
  if (!existsSync(binary)) {
    throw new Error(`${binary} is missing: run \`cargo build -p runcore-cli\` (or set RUNCORE_BIN)`);
  }
  return binary;
}

/** Scenario files, sorted. */
export function scenarioFiles() {
  return readdirSync(SCENARIOS).filter((f) => f.endsWith('.jsonl')).sort();
}

/** The non-blank lines of a scenario file. */
export function inputLines(file) {
  return readFileSync(join(SCENARIOS, file), 'utf8').split('\n').filter((l) => l.trim() !== '');
}

/** True under CI=true, where a test that needs a missing program or server fails. */
export const IN_CI = process.env.CI === 'true';
