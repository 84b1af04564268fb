#!/usr/bin/env bash
# Checks that every include points down the layer order of ARCHITECTURE.md, in one pass:
# each layer under src/ includes only itself and the layers below it, and the programs of
# tools/ include only the C++ API (src/api), their own folders and the helpers listed
# below. Tests (*_test.cpp, *test_util.h) may reach further and are not checked.
# Usage: check_layers.sh [repository root]
set -euo pipefail
root="${1:-$(dirname "$0")/..}"
cd "$root"

grep -rHE --include='*.cpp' --include='*.h' '^#include "[a-z_]+/' src tools |
  grep -vE '(_test\.cpp|test_util\.h):' |
  awk '
BEGIN {
  # src/: the layers each layer may use (itself first).
  allowed["tensor"] = "tensor"
  allowed["backend"] = "backend tensor"
  allowed["io"] = "io tensor"
  # nn owns the Weights interface model code reads parameters through; the weights layer
  # implements it (ModelManager), so weights sits above nn.
  allowed["nn"] = "nn backend tensor"
  allowed["weights"] = "weights nn io backend tensor"
  allowed["models"] = "models nn tensor"
  allowed["sampling"] = "sampling tensor"
  allowed["pipeline"] = "pipeline models sampling weights nn io backend tensor"
  allowed["api"] = "api pipeline models sampling weights nn io backend tensor"
  # tools/: the documented helpers a program may use besides src/api.
  split("tensor/error.h tensor/dtype.h tensor/text.h tensor/base64.h io/image.h io/video.h io/image_metadata.h io/folder_lookup.h " \
        "sampling/step_cache.h sampling/guidance_extras.h backend/registry.h backend/rpc/access.h " \
        "backend/rpc/client/rpc_device.h", h, " ")
  for (i in h) helper[h[i]] = 1
  # sd-rpc-server is the RPC server program itself.
  rpc_server["backend/rpc/server/server.h"] = 1
  rpc_server["backend/rpc/server/descriptor_guard.h"] = 1
  status = 0
}
{
  file = substr($0, 1, index($0, ":") - 1)
  match($0, /#include "[^"]+"/)
  inc = substr($0, RSTART + 10, RLENGTH - 11)
  used = inc
  sub(/\/.*/, "", used)
  n = split(file, part, "/")
  if (part[1] == "src") {
    layer = part[2]
    if (!(used in allowed)) next  # a library header (hwy/...), not a layer
    if ((" " allowed[layer] " ") !~ (" " used " ")) {
      printf "layer violation: %s includes from src/%s (src/%s may use: %s)\n", file, used, layer, allowed[layer]
      status = 1
    }
  } else {
    if (used == "api" || used == "cli" || used == "server" || inc in helper) next
    if (part[2] == "rpc-server" && inc in rpc_server) next
    printf "layer violation: %s includes %s (tools/ may use src/api and the helpers in scripts/check_layers.sh)\n", file, inc
    status = 1
  }
}
END { exit status }
' && echo "layers: every include points down"
