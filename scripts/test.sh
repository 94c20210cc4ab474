#!/usr/bin/env bash
# Sets up, builds, runs the whole test suite (CTest), then runs the replay benchmark once
# on its smallest graphs to prove it runs (a smoke test, not a measurement).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh
build_dir=${BUILD_DIR:-build}
ctest --test-dir "$build_dir" --output-on-failure
echo "benchmark smoke run (100000-task graphs only):"
"$build_dir/bench/replay_bench" --benchmark_filter='/100000$' --benchmark_min_time=0.01
