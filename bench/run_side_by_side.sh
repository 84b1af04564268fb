#!/usr/bin/env bash
# One generation through two command lines that take sd-cli's flags (ours and a reference
# build), one after the other, as one Markdown row: peak RSS (GB, /usr/bin/time), text
# encoding, the last sampling step and VAE decode (s, each program's own log lines), whole
# run (s) and the PSNR between the two images.
#
#   bench/run_side_by_side.sh OUR_CLI REF_CLI LABEL FLAGS...
#   e.g. bench/run_side_by_side.sh build/release/bin/sd-cli ref/sd-cli "Flux q4_K 512" \
#          --diffusion-model flux-q4_K.gguf --clip_l clip_l.safetensors \
#          --t5xxl t5xxl-q8_0.gguf --vae ae.safetensors --cfg-scale 1 -W 512 -H 512 --steps 2
#
# Adds -p, -s 42, -t 2 and -o. Ours needs SD_CLIP_VOCAB (and SD_T5_TOKENIZER for T5).
# Print the header with LABEL "--header".
set -euo pipefail
if [ "${3:-}" = "--header" ]; then
  echo "| run | peak RSS GB ours | ref | ratio | text s ours | ref | step s ours | ref | speed-up | decode s ours | ref | run s ours | ref | PSNR dB |"
  echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
  exit 0
fi
ours=$1 ref=$2 label=$3
shift 3
prompt="a photograph of an astronaut riding a horse"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# Prints "peak_gb text_s step_s decode_s wall_s" for one run; the image goes to $out/$2.png.
run() {
  local cli=$1 name=$2
  shift 2
  if ! /usr/bin/time -f "%M %e" -o "$out/time" "$cli" -p "$prompt" -s 42 -t 2 \
    -o "$out/$name.png" "$@" >"$out/$name.log" 2>&1; then
    echo "run failed: $cli $*" >&2
    tail -5 "$out/$name.log" >&2
    echo "- - - - -"
    return
  fi
  tr '\r' '\n' <"$out/$name.log" >"$out/$name.lines"
  local rate text decode
  rate=$(grep -oE '[0-9.]+(s/it|it/s)' "$out/$name.lines" | tail -1 || true)
  case $rate in
    *s/it) rate=${rate%s/it} ;;
    *it/s) rate=$(awk -v r="${rate%it/s}" 'BEGIN { printf "%.2f", 1 / r }') ;;
    *) rate=- ;;
  esac
  # "text encoding completed, taking 3.2s" (ours), "get_learned_condition completed,
  # taking 9.7s" (sd.cpp); likewise "decoding completed" / "decode_first_stage completed".
  text=$(grep -E '(text encoding|get_learned_condition) completed' "$out/$name.lines" |
    grep -oE 'taking [0-9.]+m?s' | awk '{ v = $2; if (v ~ /ms$/) { sub(/ms/, "", v); v /= 1000 } else sub(/s/, "", v); t += v } END { printf "%.1f", t }')
  decode=$(grep -E '(decoding|decode_first_stage) completed' "$out/$name.lines" |
    grep -oE 'taking [0-9.]+m?s' | awk '{ v = $2; if (v ~ /ms$/) { sub(/ms/, "", v); v /= 1000 } else sub(/s/, "", v); t += v } END { printf "%.1f", t }')
  read -r kb wall <"$out/time"
  awk -v kb="$kb" -v t="$text" -v r="$rate" -v d="$decode" -v w="$wall" \
    'BEGIN { printf "%.2f %s %s %s %.1f\n", kb / 1e6, t, r, d, w }'
}

read -r op ot os od ow < <(run "$ours" ours "$@")
read -r rp rt rs rd rw < <(run "$ref" ref "$@")
psnr=$(/usr/bin/python3 "$(dirname "$0")/png_psnr.py" "$out/ours.png" "$out/ref.png" 2>/dev/null | sed "s/PSNR //; s/ dB//" || echo -)
awk -v n="$label" -v op="$op" -v rp="$rp" -v ot="$ot" -v rt="$rt" -v os="$os" -v rs="$rs" \
  -v od="$od" -v rd="$rd" -v ow="$ow" -v rw="$rw" -v p="$psnr" \
  'function ratio(a, b) { return (a + 0 > 0 && b + 0 > 0) ? sprintf("%.2f", a / b) : "-" }
   BEGIN { printf "| %s | %s | %s | %s | %s | %s | %s | %s | %sx | %s | %s | %s | %s | %s |\n",
           n, op, rp, ratio(op, rp), ot, rt, os, rs, ratio(rs, os), od, rd, ow, rw, p }'
