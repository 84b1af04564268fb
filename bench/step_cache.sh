#!/usr/bin/env bash
# Step caching against the uncached run, one process per row: network evaluations run
# (from the log), seconds for the whole image, and the image's PSNR against the uncached
# one, for each mode and step count. Prints a Markdown table.
#
#   bench/step_cache.sh SD_CLI MODEL [SIZE] [STEPS...]      (default: 512, 20 30)
#
# Needs SD_CLIP_VOCAB. Rows: no cache, ucache at its defaults and at threshold 2
# (aggressive), spectrum at its defaults; euler sampler, seed 42.
set -euo pipefail
cli=$1 model=$2 size=${3:-512}
shift $(($# < 3 ? $# : 3))
steps_list=("$@")
[ ${#steps_list[@]} -gt 0 ] || steps_list=(20 30)
here=$(dirname "$0")
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

echo "| steps | mode | network evaluations | s per image | PSNR vs uncached |"
echo "|---|---|---|---|---|"
for steps in "${steps_list[@]}"; do
  for mode in none "ucache" "ucache threshold=2" "spectrum"; do
    read -r name option <<<"$mode"
    flags=()
    [ "$name" != none ] && flags+=(--cache-mode "$name")
    [ -n "${option:-}" ] && flags+=(--cache-option "$option")
    start=$(date +%s.%N)
    "$cli" -m "$model" -p "a lighthouse on a cliff at dusk" -s 42 -t 2 -W "$size" -H "$size" \
      --steps "$steps" --sampling-method euler "${flags[@]}" -o "$out/$name.png" >"$out/log" 2>&1
    seconds=$(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN { printf "%.1f", e - s }')
    evaluations=$(grep -oE '[0-9]+ of [0-9]+ network evaluations' "$out/log" | cut -d' ' -f1 || true)
    [ -n "$evaluations" ] || evaluations=$steps
    if [ "$name" = none ]; then
      cp "$out/$name.png" "$out/plain.png"
      psnr="-"
    else
      psnr=$(/usr/bin/python3 "$here/png_psnr.py" "$out/plain.png" "$out/$name.png")
    fi
    echo "| $steps | $mode | $evaluations | $seconds | $psnr |"
  done
done
