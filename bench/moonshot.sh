#!/usr/bin/env bash
# The whole 20-step 512x512 SD 1.5 image, one process per row, in one go on the same model:
# the f16 file as stored, bf16 mode (the fastest without opt-ins that change the image
# more than bf16 rounding), and the fastest documented settings: int8 convolutions and
# linear layers (--quantize-convs --type q8_0), bf16 attention (--diffusion-fa), the VAE in
# bf16 (--tensor-type-rules), with and without the ucache step cache. Each image's PSNR is
# against the f16 file's (same seed); the day's GEMM peak comes first, since the same
# machine class has measured 2x apart on different days.
#
#   bench/moonshot.sh BUILD_DIR SD15_F16_MODEL [STEPS] [SIZE]
set -euo pipefail
build=$1 model=$2 steps=${3:-20} size=${4:-512}
cli=$build/bin/sd-cli
prompt="a photograph of an astronaut riding a horse"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
here=$(dirname "$0")
. "$here/cli_run.sh"

echo "GEMM peak today (sd-bench, 2 threads):"
OMP_NUM_THREADS=2 "$build/bin/sd-bench" --benchmark_filter='BM_PeakGemm' 2>/dev/null |
  grep -oE 'FLOPS=[0-9.]+G/s (f32|bf16)' | sed 's/^/  /'
echo
echo "${size}x${size}, $steps steps, euler_a, 2 threads, whole process"
echo
echo "| run | wall s | first step s | s/step | VAE s | peak RSS GB | image vs f16 |"
echo "|---|---|---|---|---|---|---|"
row() {
  local label=$1 name=$2
  shift 2
  read -r step decode wall peak first < <(cli_run "$cli" "$out" "$name" -m "$model" \
    -p "$prompt" -s 42 -t 2 -W "$size" -H "$size" --steps "$steps" "$@")
  local psnr="(reference)"
  [ "$name" != f16 ] && psnr=$(/usr/bin/python3 "$here/png_psnr.py" "$out/f16.png" "$out/$name.png")
  psnr=${psnr#PSNR }
  echo "| $label | $wall | $first | $step | $decode | $peak | $psnr |"
}
fast=(--quantize-convs --type q8_0 --diffusion-fa --tensor-type-rules '^first_stage_model\.=bf16')
row "f16 file" f16
row "--type bf16" bf16 --type bf16
row "--type bf16, ucache" bf16_cache --type bf16 --cache-mode ucache
row "int8 + bf16 attention + bf16 VAE" fast "${fast[@]}"
row "the same, ucache" fast_cache "${fast[@]}" --cache-mode ucache
