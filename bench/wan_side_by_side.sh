#!/usr/bin/env bash
# Wan text to video through two command lines that take sd-cli's flags (ours and a reference
# build), one after the other, on the same files: a Markdown table of peak RSS (GB, from
# /usr/bin/time), seconds per sampling step (the last step's rate), VAE decoding seconds (as
# each program logs it) and whole-run seconds, with ours / reference ratios.
#
#   bench/wan_side_by_side.sh OUR_CLI REF_CLI MODEL_DIR
#
# MODEL_DIR holds wan.safetensors, umt5.safetensors and wan_vae.safetensors
# (tools/make_random_wan.py --out MODEL_DIR --t5-layers 2 --t5-ff 128 writes a 1.3B-shaped
# one both read). Ours needs umT5's tokenizer (SD_UMT5_TOKENIZER or a tokenizer.json in
# MODEL_DIR); the reference its built-in vocabulary.
set -euo pipefail
ours=$1 ref=$2 dir=$3
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
files=(--diffusion-model "$dir/wan.safetensors" --t5xxl "$dir/umt5.safetensors"
  --vae "$dir/wan_vae.safetensors")

# Prints "peak_gb s_per_step vae_s wall_s" for one run of CLI with the given flags.
run() {
  local cli=$1
  shift
  /usr/bin/time -f "%M %e" -o "$out/time" "$cli" -M vid_gen "${files[@]}" -p "a lovely cat" \
    --sampling-method euler --cfg-scale 6 -s 42 -t 2 -o "$out/frame_%03d.png" "$@" \
    >"$out/log" 2>&1 || {
    echo "run failed: $cli $*" >&2
    tail -5 "$out/log" >&2
    echo "- - - -"
    return
  }
  local rate vae
  rate=$(tr '\r' '\n' <"$out/log" | grep -oE '[0-9.]+(s/it|it/s)' | tail -1)
  case $rate in
    *s/it) rate=${rate%s/it} ;;
    *it/s) rate=$(awk -v r="${rate%it/s}" 'BEGIN { printf "%.2f", 1 / r }') ;;
  esac
  # Ours: "decoding N frames completed, taking Xs"; the reference: "decode_first_stage
  # completed, taking Xs".
  vae=$(grep -E "decoding [0-9]+ frames completed|decode_first_stage completed" "$out/log" |
    grep -oE 'taking [0-9.]+' | tail -1 | cut -d' ' -f2)
  read -r kb wall <"$out/time"
  awk -v kb="$kb" -v r="$rate" -v v="${vae:--}" -v w="$wall" \
    'BEGIN { printf "%.2f %s %s %.1f\n", kb / 1e6, r, v, w }'
}

row() {
  local name=$1
  shift
  read -r op os ov ow < <(run "$ours" "$@")
  read -r rp rs rv rw < <(run "$ref" "$@")
  awk -v n="$name" -v op="$op" -v rp="$rp" -v os="$os" -v rs="$rs" -v ov="$ov" -v rv="$rv" \
    -v ow="$ow" -v rw="$rw" 'BEGIN {
      printf "| %s | %s | %s | %.2f | %s | %s | %.1fx | %s | %s | %.1fx | %s | %s |\n",
        n, op, rp, op / rp, os, rs, rs / os, ov, rv, rv / ov, ow, rw }'
}

echo "| run | peak RSS GB ours | reference | ratio | s/step ours | reference | speed-up |" \
  "VAE s ours | reference | speed-up | run s ours | reference |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
row "160x96, 9 frames, 2 steps" -W 160 -H 96 --video-frames 9 --steps 2
row "320x192, 5 frames, 1 step" -W 320 -H 192 --video-frames 5 --steps 1
exit 0
