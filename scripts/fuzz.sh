#!/usr/bin/env bash
# Builds the libFuzzer harnesses (clang, with AddressSanitizer and UBSan) into
# build-fuzz/ and runs each for SECONDS (default 8) on its seed corpus in fuzz/corpus/.
# New inputs libFuzzer finds go to build-fuzz/corpus/, not into the repository; a crash
# leaves its input in build-fuzz/ and makes this script fail. Run longer on demand:
#   bash scripts/fuzz.sh 600
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-8}
build_dir=${FUZZ_BUILD_DIR:-build-fuzz}
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++ \
  -DDDLSIM_FUZZ=ON -DDDLSIM_TESTS=OFF -DDDLSIM_BENCH=OFF -DDDLSIM_WERROR=OFF >/dev/null
ninja -C "$build_dir" fuzz_scenario fuzz_set fuzz_topology fuzz_catalog fuzz_hf_config fuzz_calibration fuzz_training fuzz_accuracy fuzz_sweep fuzz_graph fuzz_measured
for harness in scenario set topology catalog hf_config calibration training accuracy sweep graph measured; do
  work="$build_dir/corpus/$harness"
  mkdir -p "$work"
  echo "fuzz: $harness for ${seconds}s"
  # -timeout: one input may take at most 10 s; -rss_limit_mb: and 2 GB.
  (cd "$build_dir" && "./fuzz/fuzz_$harness" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
    -dict="../fuzz/$harness.dict" -print_final_stats=1 "corpus/$harness" "../fuzz/corpus/$harness" \
    2>&1 | grep -E "^(stat::number_of_executed_units|stat::peak_rss_mb|==[0-9]+==|SUMMARY|.*(crash|leak|timeout|oom)-)" || true)
  # libFuzzer exits non-zero on a finding; grep above hides it, so look for the artifact.
  if compgen -G "$build_dir/crash-*" >/dev/null || compgen -G "$build_dir/leak-*" >/dev/null ||
     compgen -G "$build_dir/timeout-*" >/dev/null || compgen -G "$build_dir/oom-*" >/dev/null; then
    echo "fuzz: $harness found a problem; the input is in $build_dir/" >&2
    exit 1
  fi
done
echo "fuzz: no crash, leak, timeout or sanitizer report"
