#!/usr/bin/env bash
# Runs the same generations through two command lines that take sd-cli's flags (ours and a
# reference build), one after the other, and prints a Markdown table: peak RSS (GB, from
# /usr/bin/time), seconds per sampling step (the last step's rate from the progress bar)
# and whole-run seconds, with ours / reference ratios.
#
#   bench/side_by_side.sh OUR_CLI REF_CLI F16_MODEL [Q8_0_MODEL] [Q4_K_MODEL]
#
# Needs SD_CLIP_VOCAB for ours. Each row is one process per CLI; rows whose model is not
# given are skipped. Rows: 512x512 2 steps (default, --params-backend disk, --type bf16),
# 256x256 4 steps, 256x256 3 steps from the quantized files.
set -euo pipefail
ours=$1 ref=$2 f16=$3 q8=${4:-} q4=${5:-}
prompt="a photograph of an astronaut riding a horse"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# Prints "peak_gb s_per_step wall_s" for one run of CLI with the given flags.
run() {
  local cli=$1
  shift
  /usr/bin/time -f "%M %e" -o "$out/time" "$cli" -p "$prompt" -s 42 -t 2 -o "$out/img.png" "$@" \
    >"$out/log" 2>&1 || {
    echo "run failed: $cli $*" >&2
    tail -5 "$out/log" >&2
    echo "- - -"
    return
  }
  local rate
  rate=$(tr '\r' '\n' <"$out/log" | grep -oE '[0-9.]+(s/it|it/s)' | tail -1)
  case $rate in
    *s/it) rate=${rate%s/it} ;;
    *it/s) rate=$(awk -v r="${rate%it/s}" 'BEGIN { printf "%.2f", 1 / r }') ;;
  esac
  read -r kb wall <"$out/time"
  awk -v kb="$kb" -v r="$rate" -v w="$wall" 'BEGIN { printf "%.2f %s %.1f\n", kb / 1e6, r, w }'
}

row() {
  local name=$1
  shift
  read -r op os ow < <(run "$ours" "$@")
  read -r rp rs rw < <(run "$ref" "$@")
  awk -v n="$name" -v op="$op" -v rp="$rp" -v os="$os" -v rs="$rs" -v ow="$ow" -v rw="$rw" \
    'BEGIN { printf "| %s | %s | %s | %.2f | %s | %s | %.1fx | %s | %s |\n", n, op, rp, op / rp, os, rs, rs / os, ow, rw }'
}

echo "| run | peak RSS GB ours | reference | ratio | s/step ours | reference | speed-up | run s ours | reference |"
echo "|---|---|---|---|---|---|---|---|---|"
row "512x512, 2 steps, default" -m "$f16" -W 512 -H 512 --steps 2
row "512x512, 2 steps, --params-backend disk" -m "$f16" -W 512 -H 512 --steps 2 --params-backend disk
row "512x512, 2 steps, --type bf16" -m "$f16" -W 512 -H 512 --steps 2 --type bf16
row "256x256, 4 steps, default" -m "$f16" -W 256 -H 256 --steps 4
[ -n "$q8" ] && row "256x256, 3 steps, q8_0 file" -m "$q8" -W 256 -H 256 --steps 3
[ -n "$q4" ] && row "256x256, 3 steps, q4_K file" -m "$q4" -W 256 -H 256 --steps 3
exit 0
