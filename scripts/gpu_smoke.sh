#!/usr/bin/env bash
# On a machine with a GPU: builds the Release preset (when its dependencies are installed),
# lists the devices, runs the Vulkan op tests on the first GPU with the validation layer,
# and times a small generation on the GPU against the CPU with a full-size random SD 1.5
# (written by ../shared/tools/make_random_sd.py when that is beside the project).
# Writes what it finds to ${OUT:-build/gpu_smoke}. Safe to run where there is no GPU: it
# says so and stops.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-build/gpu_smoke}
mkdir -p "$out"
log() { echo "$@" | tee -a "$out/summary.txt"; }

command -v nvidia-smi >/dev/null && nvidia-smi > "$out/nvidia-smi.txt" 2>&1
ls /usr/share/vulkan/icd.d /etc/vulkan/icd.d 2>/dev/null > "$out/vulkan_icds.txt"
if [ ! -x build/release/bin/sd-cli ]; then
  cmake --preset release > "$out/configure.txt" 2>&1 &&
    cmake --build --preset release -j "$(nproc)" > "$out/build.txt" 2>&1 ||
    { log "build failed: see $out/configure.txt and $out/build.txt"; exit 1; }
fi
cli=build/release/bin/sd-cli
$cli --list-devices | tee "$out/devices.txt"
index=$(awk '$2 == "gpu" && $1 ~ /^Vulkan/ {sub("Vulkan", "", $1); print $1; exit}' "$out/devices.txt")
if [ -z "$index" ]; then
  log "no Vulkan GPU here (see $out/vulkan_icds.txt)"
  exit 0
fi
log "GPU: Vulkan$index"

SD_VULKAN_DEVICES=$index SD_VULKAN_VALIDATION=1 build/release/bin/vulkan_tests \
  > "$out/vulkan_tests.txt" 2>&1
log "vulkan_tests: $(grep -E 'PASSED|FAILED' "$out/vulkan_tests.txt" | head -3)"
SD_VULKAN_DEVICES=$index build/release/bin/vulkan_tests --gtest_also_run_disabled_tests \
  --gtest_filter='*VulkanBench*' > "$out/vulkan_bench.txt" 2>&1
grep GFLOP "$out/vulkan_bench.txt" | tee -a "$out/summary.txt"

model=build/fidelity/sd15_rand_f16.safetensors
if [ ! -f "$model" ] && [ -f ../shared/tools/make_random_sd.py ]; then
  mkdir -p build/fidelity
  python3 ../shared/tools/make_random_sd.py --arch sd15 --dtype f16 --seed 1 --out "$model" \
    > "$out/make_model.txt" 2>&1
fi
if [ -f "$model" ]; then
  export SD_CLIP_VOCAB=${SD_CLIP_VOCAB:-../shared/data/clip/bpe_simple_vocab_16e6.txt.gz}
  for backend in "vulkan$index" cpu; do
    /usr/bin/time -f "%e s wall, %M KB peak RSS" -o "$out/time_$backend.txt" \
      $cli -m "$model" -p "a lighthouse at dusk" -W 512 -H 512 --steps 20 --seed 1 \
      --backend "$backend" -o "$out/$backend.png" -v > "$out/run_$backend.txt" 2>&1
    log "512x512, 20 steps on $backend: $(cat "$out/time_$backend.txt"); $(grep -E 'sampling .* completed' "$out/run_$backend.txt" | tail -1)"
  done
fi
