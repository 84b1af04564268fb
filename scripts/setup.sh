#!/usr/bin/env bash
# Installs every build and test dependency from Debian packages, then configures and
# builds the Release preset. Idempotent and non-interactive; run as root or with sudo.
# `--no-build` stops after the dependencies (scripts/test.sh builds while it makes models).
set -euo pipefail
build=1
[ "${1:-}" = "--no-build" ] && build=0

# Clang (with its OpenMP and sanitizer runtimes) builds the sanitizer pass of scripts/test.sh:
# it compiles instrumented code in about half GCC's time. lld links both builds.
packages=(
  build-essential cmake ninja-build pkg-config git lld
  clang libomp-dev libclang-rt-dev
  libdnnl-dev libhwy-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  clang-format
  python3 python3-numpy
  nlohmann-json3-dev libboost-dev
  libpq-dev postgresql
  libpng-dev libjpeg-dev libwebp-dev zlib1g-dev
  libavformat-dev libavcodec-dev libavutil-dev libswscale-dev ffmpeg
  libpcre2-dev libicu-dev
  libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc libxxhash-dev
  libvulkan-dev glslc mesa-vulkan-drivers vulkan-validationlayers
  chromium
)
# Node.js drives the web page test; a Node.js installed another way is kept.
command -v npm >/dev/null || packages+=(nodejs npm)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -gt 0 ]; then
  sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  export DEBIAN_FRONTEND=noninteractive
  "${sudo_cmd[@]}" apt-get update -q
  "${sudo_cmd[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

cd "$(dirname "$0")/.."
# puppeteer-core for the browser test, at the locked version, without a browser download
# (it drives Debian's chromium).
browser_test=tests/server/browser
if [ ! -f "$browser_test/node_modules/.package-lock.json" ] ||
   [ "$browser_test/package-lock.json" -nt "$browser_test/node_modules/.package-lock.json" ]; then
  PUPPETEER_SKIP_DOWNLOAD=1 npm ci --prefix "$browser_test" --no-audit --no-fund --loglevel=error
fi
if [ "$build" = 1 ]; then
  cmake --preset release
  cmake --build --preset release
fi
