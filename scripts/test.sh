#!/usr/bin/env bash
# Runs the whole test suite: sets up and builds first when needed (scripts/setup.sh is
# idempotent), then runs every test with CTest. Extra arguments go to ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
ctest --preset release -j "$(nproc)" "$@"
