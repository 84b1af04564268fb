#!/usr/bin/env bash
# Packs what scripts/gpu_check.sh needs on a GPU machine that has no build tools or none of
# the project's Debian libraries: the Release build's sd-cli, vulkan_tests and api_tests (the
# family conformance runs on the device), every shared
# library they load (but the C library, which the machine has), the Khronos validation
# layer, and the random-model writers and tokenizers of ../shared. One xz'd tar,
# build/gpu_bundle.tar.xz, about 35 MiB; gpu_check.sh unpacks it when it finds no build.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=build/release/bin
for b in sd-cli vulkan_tests api_tests; do
  [ -x "$bin/$b" ] || { echo "no $bin/$b: build the release preset first" >&2; exit 1; }
done
stage=build/gpu_bundle
rm -rf "$stage" && mkdir -p "$stage/bin" "$stage/lib" "$stage/layers" "$stage/shared"
cp "$bin/sd-cli" "$bin/vulkan_tests" "$bin/api_tests" "$stage/bin/"

layer=/usr/lib/x86_64-linux-gnu/libVkLayer_khronos_validation.so
layer_json=/usr/share/vulkan/explicit_layer.d/VkLayer_khronos_validation.json
libs=$(ldd "$bin/sd-cli" "$bin/vulkan_tests" "$bin/api_tests" $([ -f "$layer" ] && echo "$layer") |
  awk '/=> \// {print $3}' | sort -u |
  grep -v -E '/(libc|libm|libpthread|libdl|librt|ld-linux-x86-64)\.so')
for lib in $libs; do cp -L "$lib" "$stage/lib/"; done
if [ -f "$layer" ]; then
  cp "$layer" "$stage/lib/"
  cp "$layer_json" "$stage/layers/"
fi

if [ -d ../shared ]; then
  mkdir -p "$stage/shared/tools" "$stage/shared/data"
  cp ../shared/tools/make_random_sd.py ../shared/tools/make_random_flux.py "$stage/shared/tools/"
  cp -r ../shared/data/clip ../shared/data/t5 ../shared/data/qwen "$stage/shared/data/"
fi
# The test binaries look for ../shared where the build was configured.
realpath -m ../shared > "$stage/shared_dir.txt"
tar -C build -cJf build/gpu_bundle.tar.xz gpu_bundle
rm -rf "$stage"
echo "wrote build/gpu_bundle.tar.xz ($(du -m build/gpu_bundle.tar.xz | cut -f1) MiB)"
