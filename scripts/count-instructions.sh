#!/usr/bin/env bash
# Instruction counts of the comparison workloads (examples/workloads.rs) under callgrind:
# deterministic, so they compare well on a shared, noisy machine where seconds do not.
#
#   scripts/count-instructions.sh [N]        (N defaults to 10000)
#
# Only the workload function is counted (`--toggle-collect`), not process start-up or the
# example's own reporting. Prints instructions in total and per item for w1, floor-w1, w2 and
# floor-w2, and each workload's ratio to its floor. Needs valgrind.
set -euo pipefail
cd "$(dirname "$0")/.."

n=${1:-10000}
cargo build --quiet --release --example workloads
bin=${CARGO_TARGET_DIR:-target}/release/examples/workloads
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

count() {
    local workload=$1 function=$2
    valgrind --tool=callgrind --callgrind-out-file="$out/$workload.out" \
        "--toggle-collect=*workloads::workloads::$function" "$bin" "$workload" "$n" 2>&1 \
        | awk '/Collected/ {print $NF}'
}

printf '%-9s %15s %10s %7s\n' workload instructions per-item ratio
for pair in "w1 long_run floor-w1 floor_long_run" "w2 many_runs floor-w2 floor_many_runs"; do
    read -r workload function floor floor_function <<<"$pair"
    core=$(count "$workload" "$function")
    base=$(count "$floor" "$floor_function")
    printf '%-9s %15d %10d %6.2fx\n' "$workload" "$core" $((core / n)) "$(awk -v a="$core" -v b="$base" 'BEGIN {print a / b}')"
    printf '%-9s %15d %10d %7s\n' "$floor" "$base" $((base / n)) "-"
done
