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

# Prints "s_per_step decode_s wall_s peak_gb" for one run; the image goes to $out/$1.png.
run() {
  local name=$1
  shift
  /usr/bin/time -f "%M %e" -o "$out/time" "$cli" -p "$prompt" -s 42 -t 2 -W "$size" -H "$size" \
    --steps "$steps" -o "$out/$name.png" "$@" >"$out/log" 2>&1 || {
    echo "run failed: $cli $*" >&2
    tail -5 "$out/log" >&2
    exit 1
  }
  local rate decode
  # The median of the steps after the first (which loads the weights), in seconds.
  rate=$(tr '\r' '\n' <"$out/log" | grep -oE '[0-9.]+(s/it|it/s)' | tail -n +2 |
    awk '/s\/it/ { sub("s/it", ""); print $0 + 0; next } { sub("it/s", ""); print 1 / $0 }' |
    sort -g | awk '{ v[NR] = $1 } END { printf "%.2f", NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }')
  decode=$(grep -oE 'decoding completed, taking [0-9.]+s' "$out/log" | grep -oE '[0-9.]+' | tail -1)
  read -r kb wall <"$out/time"
  awk -v kb="$kb" -v r="$rate" -v d="$decode" -v w="$wall" \
    'BEGIN { printf "%s %s %.1f %.2f\n", r, d, w, kb / 1e6 }'
}

base_step=
row() {
  local label=$1 name=$2
  shift 2
  read -r step decode wall peak < <(run "$name" "$@")
  [ -z "$base_step" ] && base_step=$step
  local psnr="(reference)"
  [ "$name" != f16 ] && psnr=$(/usr/bin/python3 "$here/png_psnr.py" "$out/f16.png" "$out/$name.png")
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
if [ -n "$q8" ]; then
  row "q8_0 file" q8 -m "$q8"
  row "q8_0 file, --quantize-convs" q8_qc -m "$q8" --quantize-convs
fi
