#!/usr/bin/env bash
# Sets up, builds, and runs `ddlsim run` with the given arguments: with none, the
# embedded default scenario (scenarios/default.json).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh
exec "${BUILD_DIR:-build}/cli/ddlsim" run "$@"
