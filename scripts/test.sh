#!/usr/bin/env bash
# Runs the whole test suite: sets up and builds first when needed (scripts/setup.sh is
# idempotent), runs every test on the Release build, then again under AddressSanitizer
# and UndefinedBehaviorSanitizer, because hostile model files must never crash us.
# `--release-only` skips the sanitizer pass; other arguments go to ctest.
#
# On two cores the random models are written (one Python process, mostly I/O) while the
# Release build compiles. (Compiling the sanitizer build at the lowest priority beside the
# Release tests was tried: the tests keep both cores busy enough that it gained nothing.)
set -euo pipefail
cd "$(dirname "$0")/.."

sanitize=1
args=()
for a in "$@"; do
  if [ "$a" = "--release-only" ]; then sanitize=0; else args+=("$a"); fi
done

# Each phase's wall time, printed at the end: where the CI budget goes.
timings=()
phase_start=$SECONDS
phase_done() {
  timings+=("$1: $((SECONDS - phase_start)) s")
  phase_start=$SECONDS
}
print_timings() {
  echo "phase times:"
  printf '  %s\n' "${timings[@]}" "total: $SECONDS s"
}

./scripts/setup.sh --no-build
phase_done "set-up check"
jobs=$(nproc)
mkdir -p build/fidelity

# Fidelity: full-size random-weight checkpoints made by ../shared/tools (the reference
# implementation reads the same files; ../shared/golden holds its outputs) switch on the
# tests that compare whole generations and real tensor names with it. Without ../shared
# those tests skip. A tiny random FLUX.1 dev (four files) comes from ../shared/tools too, and
# a tiny Z-Image, a tiny FLUX.2 klein and dev (three files each) from our own writers;
# tests/golden/z_image_tiny and tests/golden/flux2_tiny hold the reference implementation's
# images of them. Each is written once and kept.
make_models() {
  local generator=../shared/tools/make_random_sd.py
  if [ -f "$generator" ]; then
    for arch in sd15 sd2 sdxl; do
      local model=build/fidelity/${arch}_rand_f16.safetensors
      if [ ! -f "$model" ]; then
        echo "making $model (random weights)"
        /usr/bin/python3 "$generator" --arch "$arch" --dtype f16 --seed 1 --out "$model.tmp"
        mv "$model.tmp" "$model"
      fi
    done
  fi
  local flux_generator=../shared/tools/make_random_flux.py flux_dir=build/fidelity/flux_tiny
  if [ -f "$flux_generator" ] && [ ! -f "$flux_dir/ae.safetensors" ]; then
    echo "making $flux_dir (random weights)"
    /usr/bin/python3 "$flux_generator" --out "$flux_dir.tmp" --seed 1
    rm -rf "$flux_dir" && mv "$flux_dir.tmp" "$flux_dir"
  fi
  local z_dir=build/fidelity/z_image_tiny
  if [ ! -f "$z_dir/ae.safetensors" ]; then
    echo "making $z_dir (random weights)"
    /usr/bin/python3 tools/make_random_z_image.py --out "$z_dir.tmp" --seed 0 --dtype f32
    rm -rf "$z_dir" && mv "$z_dir.tmp" "$z_dir"
  fi
  # Qwen-Image: the reference fixes its widths, so even this model is 5.4 GB (f32).
  local qwen_dir=build/fidelity/qwen_image_tiny
  if [ ! -f "$qwen_dir/qwen2_5_vl_visual.safetensors" ]; then
    echo "making $qwen_dir (random weights)"
    /usr/bin/python3 tools/make_random_qwen_image.py --out "$qwen_dir.tmp" --seed 0 --dtype f32 \
      --vision-layers 8 --vision-hf
    rm -rf "$qwen_dir" && mv "$qwen_dir.tmp" "$qwen_dir"
  fi
  local flux2_dev_dir=build/fidelity/flux2_dev_tiny
  if [ ! -f "$flux2_dev_dir/ae.safetensors" ]; then
    echo "making $flux2_dev_dir (random weights)"
    /usr/bin/python3 tools/make_random_flux2_dev.py --out "$flux2_dev_dir.tmp" --seed 0 --dtype f32
    rm -rf "$flux2_dev_dir" && mv "$flux2_dev_dir.tmp" "$flux2_dev_dir"
  fi
  local wan_dir=build/fidelity/wan_tiny
  if [ ! -f "$wan_dir/wan_vae.safetensors" ]; then
    echo "making $wan_dir (random weights)"
    /usr/bin/python3 tools/make_random_wan.py --out "$wan_dir.tmp" --t5-layers 2 --t5-ff 128
    rm -rf "$wan_dir" && mv "$wan_dir.tmp" "$wan_dir"
  elif [ ! -f "$wan_dir/taehv.safetensors" ]; then  # a folder made before TAEHV was
    /usr/bin/python3 tools/make_random_wan.py --out "$wan_dir" --parts taehv
  fi
  local wan_i2v_dir=build/fidelity/wan_i2v_tiny
  if [ ! -f "$wan_i2v_dir/clip_vision.safetensors" ]; then
    echo "making $wan_i2v_dir (random weights)"
    /usr/bin/python3 tools/make_random_wan.py --out "$wan_i2v_dir.tmp" --variant i2v \
      --t5-layers 2 --t5-ff 128 --parts wan,clip_vision
    rm -rf "$wan_i2v_dir" && mv "$wan_i2v_dir.tmp" "$wan_i2v_dir"
  fi
  # Wan 2.2 TI2V-5B's transformer layout, its blocks zero and stored as holes (2.8 GB as
  # mapped, next to nothing on disk), Wan 2.2's autoencoder (1.4 GB) and its TAEHV; umT5 is
  # wan_tiny's.
  local wan_ti2v_dir=build/fidelity/wan_ti2v_tiny
  if [ ! -f "$wan_ti2v_dir/wan_vae.safetensors" ]; then
    echo "making $wan_ti2v_dir (random weights)"
    /usr/bin/python3 tools/make_random_wan.py --out "$wan_ti2v_dir.tmp" --variant ti2v \
      --parts wan,wan_vae,taehv
    rm -rf "$wan_ti2v_dir" && mv "$wan_ti2v_dir.tmp" "$wan_ti2v_dir"
  elif [ ! -f "$wan_ti2v_dir/taehv.safetensors" ]; then
    /usr/bin/python3 tools/make_random_wan.py --out "$wan_ti2v_dir" --variant ti2v --parts taehv
  fi
  # Wan 2.1 VACE: the 1.3B-shaped transformer with two VACE blocks, its main blocks zero
  # (q4_0 holes); umT5 and the autoencoder are wan_tiny's.
  local wan_vace_dir=build/fidelity/wan_vace_tiny
  if [ ! -f "$wan_vace_dir/wan.gguf" ]; then
    echo "making $wan_vace_dir (random weights)"
    /usr/bin/python3 tools/make_random_wan.py --out "$wan_vace_dir.tmp" --variant vace \
      --vace-layers 2 --zero-blocks --parts wan
    rm -rf "$wan_vace_dir" && mv "$wan_vace_dir.tmp" "$wan_vace_dir"
  fi
  local flux2_dir=build/fidelity/flux2_tiny
  if [ ! -f "$flux2_dir/ae.safetensors" ]; then
    echo "making $flux2_dir (random weights)"
    /usr/bin/python3 tools/make_random_flux2.py --out "$flux2_dir.tmp" --seed 0 --dtype f32
    rm -rf "$flux2_dir" && mv "$flux2_dir.tmp" "$flux2_dir"
  fi
}
make_models > build/fidelity/make.log 2>&1 &
models_pid=$!

cmake --preset release
cmake --build --preset release
phase_done "Release build"
if ! wait "$models_pid"; then
  cat build/fidelity/make.log
  echo "error: writing the random test models failed (build/fidelity/make.log)" >&2
  exit 1
fi
cat build/fidelity/make.log
phase_done "random models (after the build)"
if [ -f build/fidelity/sd15_rand_f16.safetensors ]; then
  export SD_TEST_SD15_MODEL=$PWD/build/fidelity/sd15_rand_f16.safetensors
  export SD_TEST_SD2_MODEL=$PWD/build/fidelity/sd2_rand_f16.safetensors
  export SD_TEST_SDXL_MODEL=$PWD/build/fidelity/sdxl_rand_f16.safetensors
fi
[ -f build/fidelity/flux_tiny/ae.safetensors ] && export SD_TEST_FLUX_DIR=$PWD/build/fidelity/flux_tiny
export SD_TEST_Z_IMAGE_DIR=$PWD/build/fidelity/z_image_tiny
export SD_TEST_FLUX2_DIR=$PWD/build/fidelity/flux2_tiny
export SD_TEST_FLUX2_DEV_DIR=$PWD/build/fidelity/flux2_dev_tiny
export SD_TEST_QWEN_IMAGE_DIR=$PWD/build/fidelity/qwen_image_tiny
export SD_TEST_WAN_DIR=$PWD/build/fidelity/wan_tiny
export SD_TEST_WAN_I2V_DIR=$PWD/build/fidelity/wan_i2v_tiny
export SD_TEST_WAN_TI2V_DIR=$PWD/build/fidelity/wan_ti2v_tiny
export SD_TEST_WAN_VACE_DIR=$PWD/build/fidelity/wan_vace_tiny

# Tests run side by side, each with two OpenMP threads, on as few cores: threads that wait
# sleep instead of spinning while the thread they wait for is preempted (the programs of
# tools/ do the same by default, see tools/omp_wait_policy.cpp).
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
# A fresh build has no record of how long each test takes, so ctest would run them in
# order and leave the longest ones running alone at the end: seed its record
# (tests/test_costs.txt) so that they start first.
seed_test_costs() {
  local costs=build/$1/Testing/Temporary/CTestCostData.txt
  [ -f "$costs" ] && return
  mkdir -p "$(dirname "$costs")"
  { grep -v '^#' tests/test_costs.txt; echo "---"; } > "$costs"
}
seed_test_costs release
ctest --preset release -j "$jobs" "${args[@]}"
phase_done "Release tests"
# The sanitizer pass runs the small tests only: full-size models there would take hours.
unset SD_TEST_SD15_MODEL SD_TEST_SD2_MODEL SD_TEST_SDXL_MODEL SD_TEST_FLUX_DIR SD_TEST_Z_IMAGE_DIR \
  SD_TEST_FLUX2_DIR SD_TEST_FLUX2_DEV_DIR SD_TEST_QWEN_IMAGE_DIR SD_TEST_WAN_DIR \
  SD_TEST_WAN_I2V_DIR SD_TEST_WAN_TI2V_DIR SD_TEST_WAN_VACE_DIR

if [ "$sanitize" = 1 ]; then
  cmake --preset debug-sanitize >/dev/null
  cmake --build --preset debug-sanitize
  phase_done "sanitizer build"
  # This build has no Vulkan backend (the preset's SD_VULKAN=OFF), so no test meets a
  # Vulkan device here: the drivers keep memory to the end of the process, and lavapipe
  # under ASan was seen to hang two processes at once. vulkan_tests' sanitizer settings in
  # tests/CMakeLists.txt are ready for a build with -DSD_VULKAN=ON.
  seed_test_costs debug-sanitize
  # Undefined behaviour fails the test that meets it (the preset sets UBSAN_OPTIONS to halt),
  # in the test binaries and in every program they start. The `slow` multi-process runs
  # (the shared job queue's several servers, 70 s under the sanitizers) run in the Release
  # pass only; the server's and the queue's code meet the sanitizers in their own tests.
  ASAN_OPTIONS=detect_leaks=1 ctest --preset debug-sanitize -j "$jobs" -LE slow "${args[@]}"
  phase_done "sanitizer tests"
fi
print_timings
