#!/usr/bin/env bash
# On a machine with a GPU: the Vulkan op tests and the families' end-to-end conformance on
# the GPU with the validation layer, the kernels beside the CPU's and PyTorch's, then
# generations with full-size random models written on the spot: SD 1.5 512x512 (f16 and
# q8_0, and the CPU beside it), SDXL 1024x1024, and FLUX.1's real blocks at 1024x1024 (2
# double + 4 single blocks of 19 + 38). Prints s/step, VAE time and peak device memory,
# and PyTorch's time and memory for the same UNets where PyTorch is installed.
#
# Binaries: the Release build, else build/gpu_bundle.tar.xz (scripts/gpu_bundle.sh, for a
# machine without the project's libraries), else a build made here. Everything goes to
# ${OUT:-build/gpu_check}; summary.txt is the short form. Each part has a time limit and
# the whole stays under about 8 minutes on an H200. Safe where there is no GPU: it says so
# and stops. `--quick`: the op tests, the kernels, and SD 1.5 and FLUX on the GPU only
# (about 3 minutes).
set -uo pipefail
quick=0
[ "${1:-}" = "--quick" ] && quick=1
cd "$(dirname "$0")/.."
out=${OUT:-build/gpu_check}
mkdir -p "$out"
start=$SECONDS
log() { echo "$@" | tee -a "$out/summary.txt"; }
elapsed() { echo $((SECONDS - start)); }

bin=build/release/bin shared=../shared
if [ ! -x "$bin/sd-cli" ] && [ -f build/gpu_bundle.tar.xz ]; then
  python3 -c "import tarfile; tarfile.open('build/gpu_bundle.tar.xz').extractall('build')"
  bin=build/gpu_bundle/bin shared=build/gpu_bundle/shared
  export LD_LIBRARY_PATH=$PWD/build/gpu_bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  export VK_LAYER_PATH=$PWD/build/gpu_bundle/layers
  # The test binaries read ../shared where the build was configured.
  built_shared=$(cat build/gpu_bundle/shared_dir.txt)
  if [ ! -d "$built_shared" ]; then
    mkdir -p "$(dirname "$built_shared")" && ln -sfn "$PWD/$shared" "$built_shared"
  fi
fi
if [ ! -x "$bin/sd-cli" ]; then
  cmake --preset release > "$out/configure.txt" 2>&1 &&
    cmake --build --preset release -j "$(nproc)" > "$out/build.txt" 2>&1 ||
    { log "build failed: see $out/configure.txt and $out/build.txt"; exit 1; }
fi
cli=$bin/sd-cli
command -v nvidia-smi > /dev/null && nvidia-smi > "$out/nvidia-smi.txt" 2>&1

# Headless NVIDIA machines: the loader may find no driver through the GLX entry of
# nvidia_icd.json; the EGL library serves Vulkan too.
gpu_index() { "$cli" -v --list-devices 2> /dev/null | awk '$2 == "gpu" && $1 ~ /^Vulkan/ {sub("Vulkan", "", $1); print $1; exit}'; }
index=$(gpu_index)
if [ -z "$index" ]; then
  for icd in /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json /usr/share/vulkan/icd.d/nvidia_icd.json \
    /etc/vulkan/icd.d/nvidia_icd.json; do
    [ -f "$icd" ] && export VK_DRIVER_FILES=$icd VK_ICD_FILENAMES=$icd && index=$(gpu_index)
    [ -n "$index" ] && break
  done
fi
if [ -z "$index" ]; then
  egl_icd=$(realpath -m "$out")/nvidia_egl_icd.json
  echo '{"file_format_version": "1.0.0", "ICD": {"library_path": "libEGL_nvidia.so.0", "api_version": "1.3.0"}}' > "$egl_icd"
  export VK_DRIVER_FILES=$egl_icd VK_ICD_FILENAMES=$egl_icd
  index=$(gpu_index)
fi
"$cli" -v --list-devices > "$out/devices.txt" 2>&1
if [ -z "$index" ]; then
  log "no Vulkan GPU here (see $out/devices.txt)"
  exit 0
fi
gpu=vulkan$index
log "GPU: $(grep -E "^Vulkan$index +gpu" "$out/devices.txt")"
export SD_VULKAN_DEVICES=$index

# Full-size random models, written on the CPU while the GPU runs the tests.
models=build/gpu_models
mkdir -p "$models"
make_model() {  # name, command...
  local name=$1
  shift
  [ -e "$models/$name" ] || "$@" > "$out/make_$name.txt" 2>&1 || log "writing $name failed"
}
make_model sd15.safetensors python3 "$shared/tools/make_random_sd.py" --arch sd15 --dtype f16 \
  --seed 1 --out "$models/sd15.safetensors" &
[ $quick = 1 ] || make_model sdxl.safetensors python3 "$shared/tools/make_random_sd.py" --arch sdxl --dtype f16 \
  --seed 1 --out "$models/sdxl.safetensors" &
make_model flux python3 "$shared/tools/make_random_flux.py" --out "$models/flux" --hidden 3072 \
  --double 2 --single 4 --seed 1 &

# name, limit in seconds, command...: a gtest binary's pass/fail line logged.
gtest() {
  local name=$1 limit=$2
  shift 2
  SD_VULKAN_VALIDATION=1 timeout "$limit" "$@" > "$out/$name.txt" 2>&1
  local rc=$?
  log "$name (validation on): rc $rc, $(grep -E '^\[  (PASSED|FAILED)  \]' "$out/$name.txt" | tr '\n' ' ')"
}
gtest vulkan_tests 120 "$bin/vulkan_tests"
if [ $quick = 0 ]; then
  gtest conformance_on_$gpu 120 "$bin/api_tests" --gtest_filter='*OnAVulkanDevice*'
  grep -E "dB against the CPU" "$out/conformance_on_$gpu.txt" >> "$out/summary.txt"
fi
timeout 60 "$bin/vulkan_tests" --gtest_also_run_disabled_tests --gtest_filter='*VulkanBench*' \
  > "$out/vulkan_bench.txt" 2>&1
grep GFLOP "$out/vulkan_bench.txt" | tee -a "$out/summary.txt"
if python3 -c "import torch; assert torch.cuda.is_available()" 2> /dev/null; then
  timeout 60 python3 bench/torch_kernels.py 2>&1 | tee -a "$out/summary.txt"
  if [ $quick = 0 ]; then
    timeout 60 python3 bench/torch_unet.py --arch sd15 --size 512 2>&1 | tee -a "$out/summary.txt"
    timeout 60 python3 bench/torch_unet.py --arch sdxl --size 1024 2>&1 | tee -a "$out/summary.txt"
  fi
else
  log "no PyTorch with CUDA here: no PyTorch figures"
fi
log "tests and kernels done at $(elapsed) s; waiting for the models"
wait

export SD_CLIP_VOCAB=$shared/data/clip/bpe_simple_vocab_16e6.txt.gz
export SD_T5_TOKENIZER=$shared/data/t5/tokenizer.json
# name, steps, limit in seconds, sd-cli arguments...: one generation, its figures logged.
generate() {
  local name=$1 steps=$2 limit=$3
  shift 3
  local t0=$SECONDS
  timeout "$limit" "$cli" "$@" --steps "$steps" --seed 1 -p "a lighthouse at dusk" \
    -o "$out/$name.png" -v > "$out/run_$name.txt" 2>&1
  local rc=$? wall=$((SECONDS - t0))
  local sampling decoding per_step memory
  sampling=$(grep -oE 'sampling image 1/1 completed, taking [0-9.]+s' "$out/run_$name.txt" | grep -oE '[0-9.]+s$')
  decoding=$(grep -oE 'decoding completed, taking [0-9.]+s' "$out/run_$name.txt" | grep -oE '[0-9.]+s$')
  per_step=$(tr '\r' '\n' < "$out/run_$name.txt" | grep -oE '[0-9.]+(s/it|it/s)' | tail -1)
  memory=$(grep -oE 'device memory at most: .*' "$out/run_$name.txt")
  log "$name: rc $rc, ${wall} s wall, sampling ${sampling:-?} ($steps steps, last ${per_step:-?}), VAE ${decoding:-?}, ${memory:-no device memory figure}"
}
if [ -f "$models/sd15.safetensors" ]; then
  generate sd15_512_f16_$gpu 20 90 -m "$models/sd15.safetensors" -W 512 -H 512 --backend "$gpu"
  [ $quick = 1 ] || generate sd15_512_f16_cpu 3 90 -m "$models/sd15.safetensors" -W 512 -H 512 --backend cpu
  if [ $quick = 0 ] && timeout 60 "$cli" -M convert -m "$models/sd15.safetensors" --type q8_0 \
    -o "$models/sd15_q8_0.gguf" > "$out/convert_q8_0.txt" 2>&1; then
    generate sd15_512_q8_0_$gpu 20 90 -m "$models/sd15_q8_0.gguf" -W 512 -H 512 --backend "$gpu"
  fi
fi
[ -f "$models/sdxl.safetensors" ] &&
  generate sdxl_1024_f16_$gpu 8 120 -m "$models/sdxl.safetensors" -W 1024 -H 1024 --backend "$gpu"
[ -f "$models/flux/ae.safetensors" ] &&
  generate flux_2x4_blocks_1024_f16_$gpu 6 100 --diffusion-model "$models/flux/flux_dit.safetensors" \
    --vae "$models/flux/ae.safetensors" --clip_l "$models/flux/clip_l.safetensors" \
    --t5xxl "$models/flux/t5xxl.safetensors" --cfg-scale 1 --sampling-method euler \
    -W 1024 -H 1024 --backend "$gpu"
log "done in $(elapsed) s"
