#!/usr/bin/env bash
# Configures (Release, Ninja) and builds everything: the ddlsim command, the tests and
# the benchmarks. The build directory is build/ unless BUILD_DIR says otherwise.
# CMake uses ccache by itself when it is installed.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${BUILD_DIR:-build}
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release
ninja -C "$build_dir"
