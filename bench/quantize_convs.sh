#!/usr/bin/env bash
# --quantize-convs side by side with the modes it competes with, one process each, in one
# go on the same model: seconds per sampling step (the median of the steps after the first,
# which loads the weights), VAE decode,
# whole run and peak RSS, and each image's PSNR against the f16 image (same seed).
#
#   bench/quantize_convs.sh SD_CLI F16_MODEL [Q8_0_MODEL] [SIZE] [STEPS]
#
# Q8_0_MODEL: the same checkpoint through `sd-cli -M convert --type q8_0` (its 3x3 kernels
# stay f16, as in the reference's files); rows for it are skipped without one.
set -euo pipefail
cli=$1 f16=$2 q8=${3:-} size=${4:-512} steps=${5:-6}
prompt="a photograph of an astronaut riding a horse"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
here=$(dirname "$0")

. "$here/cli_run.sh"

# "s_per_step decode_s wall_s peak_gb first_step_s" for one run; the image goes to
# $out/$1.png.
run() {
  local name=$1
  shift
  cli_run "$cli" "$out" "$name" -p "$prompt" -s 42 -t 2 -W "$size" -H "$size" --steps "$steps" "$@"
}

base_step=
row() {
  local label=$1 name=$2
  shift 2
  read -r step decode wall peak _ < <(run "$name" "$@")
  [ -z "$base_step" ] && base_step=$step
  local psnr="(reference)"
  [ "$name" != f16 ] && psnr=$(/usr/bin/python3 "$here/png_psnr.py" "$out/f16.png" "$out/$name.png")
  psnr=${psnr#PSNR }
  awk -v l="$label" -v s="$step" -v b="$base_step" -v d="$decode" -v w="$wall" -v p="$peak" \
    -v q="$psnr" 'BEGIN { printf "| %s | %s | %.2fx | %s | %s | %s | %s |\n", l, s, s / b, d, w, p, q }'
}

echo "${size}x${size}, $steps steps, 2 threads"
echo
echo "| run | s/step | vs f16 | decode s | run s | peak RSS GB | image vs f16 |"
echo "|---|---|---|---|---|---|---|"
row "f16 file" f16 -m "$f16"
row "f16 file, --type bf16" bf16 -m "$f16" --type bf16
row "f16 file, --quantize-convs" qc -m "$f16" --quantize-convs
row "f16 file, --quantize-convs --type bf16" qc_bf16 -m "$f16" --quantize-convs --type bf16
row "f16 file, --quantize-convs --type q8_0" qc_q8 -m "$f16" --quantize-convs --type q8_0
row "f16 file, --quantize-convs --type q8_0 --diffusion-fa" qc_q8_fa -m "$f16" --quantize-convs \
  --type q8_0 --diffusion-fa
if [ -n "$q8" ]; then
  row "q8_0 file" q8 -m "$q8"
  row "q8_0 file, --quantize-convs" q8_qc -m "$q8" --quantize-convs
fi
