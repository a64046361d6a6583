#!/usr/bin/env bash
# Runs pi's own test suites against runcore/pi (issue 45), beside the real pi-agent-core:
#   1. pi-agent-core 0.73.1's 43 tests (packages/agent/test) with `../src/` pointed at runcore/pi;
#   2. pi-coding-agent 0.73.1's suite (packages/coding-agent/test) twice, once on the real
#      @mariozechner/pi-agent-core 0.73.1 and once with that package replaced by a shim that
#      re-exports runcore/pi, and prints every test that passes on pi and not on runcore/pi;
#   3. `tsc --noEmit` of pi-coding-agent's src/ against runcore/pi's pi.d.ts.
# Needs the network (npm registry, and GitHub unless PI_MONO is given) and a built package
# (`npm run build`). Not part of `npm test`.
#
#   bindings/node/scripts/pi-suites.sh [WORKDIR]
#   PI_MONO=/path/to/pi-mono checkout (any commit holding tag v0.73.1 = 781152fc); else cloned.
set -euo pipefail

HERE="$(cd "$(dirname "$0")/.." && pwd)"
WORK="${1:-$(mktemp -d -t runcore-pi-suites.XXXXXX)}"
REV=781152fc
mkdir -p "$WORK"
if [ -z "${PI_MONO:-}" ]; then
  PI_MONO="$WORK/pi-mono"
  [ -d "$PI_MONO" ] || git clone --quiet https://github.com/zintus/pi-mono "$PI_MONO"
fi
export_tree() { git -C "$PI_MONO" archive "$REV" "$1" | tar -x -C "$2" --strip-components=2; }

# runcore/pi as an installed package (copied, so that it resolves pi-ai from the app's node_modules).
install_runcore() {
  local dir="$1/node_modules/runcore"
  rm -rf "$dir" && mkdir -p "$dir"
  cp -r "$HERE"/{index.js,index.d.ts,pi.js,pi.d.ts,pi,runcore.node,package.json} "$dir"/
}

# --- 1. pi-agent-core's own tests --------------------------------------------------------------
AGENT="$WORK/agent"
rm -rf "$AGENT" && mkdir -p "$AGENT"
export_tree packages/agent "$AGENT"
(
  cd "$AGENT"
  rm -rf src && mkdir src
  echo "export { Agent, agentLoop, agentLoopContinue, runAgentLoop, runAgentLoopContinue } from 'runcore/pi';" > src/index.js
  cp src/index.js src/agent-loop.js
  echo 'export {};' > src/types.js
  node -e '
    const p = require("./package.json");
    p.dependencies = { "@mariozechner/pi-ai": "0.73.1", typebox: p.dependencies.typebox };
    p.devDependencies = { vitest: p.devDependencies.vitest };
    delete p.scripts;
    require("fs").writeFileSync("package.json", JSON.stringify(p, null, 2));'
  npm install --no-audit --no-fund --silent
  install_runcore "$AGENT"
  npx vitest --run --reporter=json --outputFile="$WORK/agent.json" > "$WORK/agent.log" 2>&1 || true
)

# --- 2. pi-coding-agent's suite on pi and on runcore/pi --------------------------------------
REAL="$WORK/coding-agent-pi"
RC="$WORK/coding-agent-runcore"
rm -rf "$REAL" "$RC" && mkdir -p "$REAL"
export_tree packages/coding-agent "$REAL"
(
  cd "$REAL"
  node -e '
    const p = require("./package.json");
    for (const n of ["pi-agent-core", "pi-ai", "pi-tui"]) p.dependencies["@mariozechner/" + n] = "0.73.1";
    require("fs").writeFileSync("package.json", JSON.stringify(p, null, 2));'
  # The monorepo config points pi-ai and pi-agent-core at their sources; here they are the
  # published packages.
  cat > vitest.config.ts <<'CONFIG'
import { defineConfig } from "vitest/config";
export default defineConfig({
  test: { globals: true, environment: "node", testTimeout: 30000,
    server: { deps: { external: [/@silvia-odwyer\/photon-node/] } } },
});
CONFIG
  cat > tsconfig.check.json <<'CONFIG'
{ "compilerOptions": { "target": "ES2022", "module": "Node16", "lib": ["ES2022"], "strict": true,
    "esModuleInterop": true, "skipLibCheck": true, "moduleResolution": "Node16",
    "resolveJsonModule": true, "experimentalDecorators": true, "emitDecoratorMetadata": true,
    "useDefineForClassFields": false, "types": ["node"], "noEmit": true },
  "include": ["src/**/*.ts"], "exclude": ["node_modules", "dist", "**/*.d.ts"] }
CONFIG
  npm install --no-audit --no-fund --silent
)
cp -a "$REAL" "$RC"
SHIM="$RC/node_modules/@mariozechner/pi-agent-core"
rm -rf "$SHIM" && mkdir -p "$SHIM"
echo '{"name":"@mariozechner/pi-agent-core","version":"0.73.1","type":"module","exports":{".":{"types":"./index.d.ts","import":"./index.js"}}}' > "$SHIM/package.json"
echo "export * from 'runcore/pi';" > "$SHIM/index.js"
echo "export * from 'runcore/pi';" > "$SHIM/index.d.ts"
install_runcore "$RC"
(cd "$REAL" && npx vitest --run --reporter=json --outputFile="$WORK/coding-agent-pi.json" > "$WORK/coding-agent-pi.log" 2>&1 || true)
(cd "$RC" && npx vitest --run --reporter=json --outputFile="$WORK/coding-agent-runcore.json" > "$WORK/coding-agent-runcore.log" 2>&1 || true)

# --- 3. the type check -------------------------------------------------------------------------
(cd "$RC" && npx tsc -p tsconfig.check.json > "$WORK/tsc-runcore.log" 2>&1 || true)

node - "$WORK" <<'REPORT'
const { readFileSync, existsSync } = require('node:fs');
const work = process.argv[2];
function load(name) {
  const report = JSON.parse(readFileSync(`${work}/${name}.json`, 'utf8'));
  const status = new Map();
  for (const file of report.testResults) {
    for (const t of file.assertionResults) status.set(`${file.name.split('/test/').pop()} > ${t.fullName}`, t.status);
  }
  return { report, status };
}
const agent = load('agent');
console.log(`pi-agent-core's tests on runcore/pi: ${agent.report.numPassedTests} passed, ${agent.report.numFailedTests} failed of ${agent.report.numTotalTests}`);
const pi = load('coding-agent-pi');
const rc = load('coding-agent-runcore');
for (const [name, { report }] of [['pi-agent-core', pi], ['runcore/pi', rc]]) {
  console.log(`pi-coding-agent on ${name}: ${report.numPassedTests} passed, ${report.numFailedTests} failed, ${report.numPendingTests} skipped of ${report.numTotalTests}`);
}
for (const [test, status] of pi.status) {
  if (status === 'passed' && rc.status.get(test) !== 'passed') console.log(`passes on pi, not on runcore/pi: ${test}`);
}
const tsc = existsSync(`${work}/tsc-runcore.log`) ? readFileSync(`${work}/tsc-runcore.log`, 'utf8') : '';
console.log(`tsc of pi-coding-agent's src against runcore/pi: ${(tsc.match(/error TS/g) ?? []).length} errors`);
REPORT
