#!/usr/bin/env bash
# Sets up, builds and runs every test:
#   1. the whole test suite (CTest, as many tests at once as there are cores) on the
#      Release build in build/;
#   2. the same suite built with AddressSanitizer and UndefinedBehaviorSanitizer
#      (Debug, in build-asan/), so memory errors and undefined behaviour fail the run;
#   3. each libFuzzer harness for a short, bounded time (scripts/fuzz.sh; FUZZ_SECONDS,
#      default 8 per harness);
#   4. the benchmarks once (the replay benchmark on its smallest graphs), to prove they
#      run (a smoke test, not a measurement).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh
build_dir=${BUILD_DIR:-build}
log=$(mktemp)
trap 'rm -f "$log"' EXIT
ctest --test-dir "$build_dir" --output-on-failure -j "$(nproc)" | tee "$log"

echo "sanitizer build (AddressSanitizer + UBSan):"
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DDDLSIM_SANITIZE=ON -DDDLSIM_BENCH=OFF >/dev/null
ninja -C build-asan
ctest --test-dir build-asan --output-on-failure -j "$(nproc)" | tee -a "$log"

bash scripts/fuzz.sh "${FUZZ_SECONDS:-8}"

echo "benchmark smoke run (100000-task graphs only):"
"$build_dir/bench/replay_bench" --benchmark_filter='/100000$' --benchmark_min_time=0.01
"$build_dir/bench/topology_bench" --benchmark_min_time=0.01
"$build_dir/bench/network_bench" --benchmark_min_time=0.01
"$build_dir/bench/training_bench" --benchmark_filter='Gpt3.*analytical'

# One closing line for both CTest runs (reached only if every step above succeeded).
passed=$(grep -oE "tests passed, 0 tests failed out of [0-9]+" "$log" | awk '{s += $NF} END {print s + 0}')
echo "all steps: ${passed} passed, 0 failed"
