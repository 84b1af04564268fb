#!/usr/bin/env bash
# Checks that every layer under src/ includes only itself and the layers below it, in the
# order the README's "Layers, bottom up" gives. Tests (*_test.cpp, *test_util.h) may
# reach further and are not checked. Usage: check_layers.sh [repository root]
set -euo pipefail
root="${1:-$(dirname "$0")/..}"
cd "$root/src"

declare -A allowed=(
  [tensor]="tensor"
  [backend]="backend tensor"
  [io]="io tensor"
  # nn owns the Weights interface model code reads parameters through; the weights
  # layer implements it (ModelManager), so weights sits above nn.
  [nn]="nn backend tensor"
  [weights]="weights nn io backend tensor"
  [models]="models nn tensor"
  [sampling]="sampling tensor"
  [pipeline]="pipeline models sampling weights nn io backend tensor"
  [api]="api pipeline models sampling weights nn io backend tensor"
)

status=0
for layer in "${!allowed[@]}"; do
  while IFS= read -r hit; do
    file="${hit%%:*}"
    used="$(sed -E 's/.*#include "([a-z_]+)\/.*/\1/' <<<"$hit")"
    [[ -d "$used" ]] || continue  # a library's header (hwy/...), not a layer
    if [[ " ${allowed[$layer]} " != *" $used "* ]]; then
      echo "layer violation: $file includes from src/$used (src/$layer may use: ${allowed[$layer]})"
      status=1
    fi
  done < <(find "$layer" \( -name '*.cpp' -o -name '*.h' \) ! -name '*_test.cpp' \
             ! -name '*test_util.h' -print0 |
           xargs -0 grep -HE '^#include "[a-z_]+/' || true)
done
[[ $status -eq 0 ]] && echo "layers: every include points down"
exit $status
