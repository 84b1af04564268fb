#!/usr/bin/env bash
# Runs the whole test suite: sets up and builds first when needed (scripts/setup.sh is
# idempotent), runs every test on the Release build, then again under AddressSanitizer
# and UndefinedBehaviorSanitizer, because hostile model files must never crash us.
# `--release-only` skips the sanitizer pass; other arguments go to ctest.
set -euo pipefail
cd "$(dirname "$0")/.."

sanitize=1
args=()
for a in "$@"; do
  if [ "$a" = "--release-only" ]; then sanitize=0; else args+=("$a"); fi
done

./scripts/setup.sh
jobs=$(nproc)
ctest --preset release -j "$jobs" "${args[@]}"

if [ "$sanitize" = 1 ]; then
  cmake --preset debug-sanitize >/dev/null
  cmake --build --preset debug-sanitize
  ASAN_OPTIONS=detect_leaks=1 ctest --preset debug-sanitize -j "$jobs" "${args[@]}"
fi
