#!/usr/bin/env bash
# Installs ddlsim's build and test dependencies from Debian 12 packages.
# Idempotent and non-interactive: installs only what is missing, and says so in one
# line when nothing is. Needs root (or sudo).
set -euo pipefail

packages=(
  g++ cmake ninja-build ccache
  libboost-graph-dev libboost-program-options-dev
  nlohmann-json3-dev doctest-dev libbenchmark-dev
  python3-matplotlib
  clang libclang-rt-14-dev
  libsimgrid-dev  # tests only: cross-checks the flow network model against SimGrid
)

missing=()
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$p")
done

if [[ ${#missing[@]} -eq 0 ]]; then
  echo "setup: all ${#packages[@]} dependencies already installed"
  exit 0
fi

if [[ $(id -u) -eq 0 ]]; then
  as_root=()
elif command -v sudo >/dev/null 2>&1; then
  as_root=(sudo)
else
  echo "setup: missing packages: ${missing[*]}" >&2
  echo "setup: installing them needs root, and sudo is not available; run this script as root" >&2
  exit 1
fi

echo "setup: installing ${missing[*]}"
"${as_root[@]}" apt-get update
"${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"
