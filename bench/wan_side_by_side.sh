#!/usr/bin/env bash
# Wan text to video (and image to video) through two command lines that take sd-cli's flags
# (ours and a reference build), one after the other, on the same files: a Markdown table of
# peak RSS (GB, from /usr/bin/time), seconds per sampling step (the last step's rate), VAE
# decoding seconds (as each program logs it) and whole-run seconds, with ours / reference
# ratios; for image to video also the seconds of CLIP vision and of the VAE's encoding.
#
#   bench/wan_side_by_side.sh OUR_CLI REF_CLI MODEL_DIR [I2V_DIR|-] [EXPERT]
#
# MODEL_DIR holds wan.safetensors, umt5.safetensors and wan_vae.safetensors
# (tools/make_random_wan.py --out MODEL_DIR --t5-layers 2 --t5-ff 128 writes a 1.3B-shaped
# one both read). I2V_DIR, when given, holds an image-to-video wan.safetensors and
# clip_vision.safetensors (make_random_wan.py --out I2V_DIR --variant i2v --t5-layers 2
# --t5-ff 128 --parts wan,clip_vision). Ours needs umT5's tokenizer (SD_UMT5_TOKENIZER or a
# tokenizer.json in MODEL_DIR); the reference its built-in vocabulary. The first frame is
# FFmpeg's test pattern. EXPERT, when given, is a second transformer of MODEL_DIR's shape
# (make_random_wan.py --out X --seed 3 --parts wan) run as Wan 2.2 A14B's high-noise expert,
# with the weights in memory and kept on disk (--params-backend disk). SKIP_T2V=1 leaves
# out the text-to-video rows; LARGE=1 adds 832x480 (5 frames, 1 step, with and without
# --vae-tiling), where the autoencoder's memory is the run's peak; DECODE=1 the untiled
# 832x480 row alone without guidance (one pass of the transformer); TAE=1 adds 832x480
# decoded by MODEL_DIR/taehv.safetensors (--tae; make_random_wan.py writes it), 5 and 17
# frames, one step without guidance (the decoding is what these rows measure). QUANT=FILE
# adds MODEL_DIR's transformer converted (`sd-cli -M convert --diffusion-model
# MODEL_DIR/wan.safetensors --type q8_0 -o FILE`) at 832x480, 5 and 33 frames, one step
# without guidance, decoded by the TAEHV (the step is what these rows measure). VACE=DIR adds
# Wan 2.1 VACE: DIR/wan.safetensors (make_random_wan.py --out DIR --variant vace --parts wan,
# 1.3B-shaped with 15 VACE blocks) following a 9-frame control video of FFmpeg's test pattern
# with a reference image (-i).
set -euo pipefail
ours=$1 ref=$2 dir=$3 i2v_dir=${4:-} expert=${5:-}
[ "$i2v_dir" = - ] && i2v_dir=
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
files=(--diffusion-model "$dir/wan.safetensors" --t5xxl "$dir/umt5.safetensors"
  --vae "$dir/wan_vae.safetensors")

# Seconds of the last log line matching PATTERN, whether it says "taking Xs" or "X ms".
seconds_of() {
  { grep -E "$1" "$out/log" || true; } | tail -1 | { grep -oE 'taking [0-9.]+ ?m?s' || true; } |
    awk '{ v = $2; if ($3 == "ms" || $2 ~ /ms$/) v = v / 1000; sub(/s$/, "", v); print v }'
}

# Prints "peak_gb s_per_step vae_s wall_s clip_s encode_s" for one run of CLI with the given
# flags.
run() {
  local cli=$1
  shift
  /usr/bin/time -f "%M %e" -o "$out/time" "$cli" -M vid_gen "${files[@]}" -p "a lovely cat" \
    --sampling-method euler --cfg-scale 6 -s 42 -t 2 -o "$out/frame_%03d.png" "$@" \
    >"$out/log" 2>&1 || {
    echo "run failed: $cli $*" >&2
    tail -5 "$out/log" >&2
    echo "- - - - - -"
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
  local clip encode
  clip=$(seconds_of "CLIP vision completed|get_clip_vision_output completed")
  encode=$(seconds_of "encoding [0-9]+ frames completed|encode_first_stage completed")
  read -r kb wall <"$out/time"
  awk -v kb="$kb" -v r="$rate" -v v="${vae:--}" -v w="$wall" -v c="${clip:--}" \
    -v e="${encode:--}" 'BEGIN { printf "%.2f %s %s %.1f %s %s\n", kb / 1e6, r, v, w, c, e }'
}

row() {
  local name=$1
  shift
  read -r op os ov ow oc oe < <(run "$ours" "$@")
  read -r rp rs rv rw rc re < <(run "$ref" "$@")
  if [ "$oc" != - ] || [ "$rc" != - ]; then
    i2v_rows+=("| $name | $oc | $rc | $oe | $re |")
  fi
  awk -v n="$name" -v op="$op" -v rp="$rp" -v os="$os" -v rs="$rs" -v ov="$ov" -v rv="$rv" \
    -v ow="$ow" -v rw="$rw" 'BEGIN {
      printf "| %s | %s | %s | %.2f | %s | %s | %.1fx | %s | %s | %.1fx | %s | %s |\n",
        n, op, rp, op / rp, os, rs, rs / os, ov, rv, rv / ov, ow, rw }'
}

echo "| run | peak RSS GB ours | reference | ratio | s/step ours | reference | speed-up |" \
  "VAE s ours | reference | speed-up | run s ours | reference |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
i2v_rows=()
if [ "${SKIP_T2V:-0}" != 1 ]; then
  row "160x96, 9 frames, 2 steps" -W 160 -H 96 --video-frames 9 --steps 2
  row "320x192, 5 frames, 1 step" -W 320 -H 192 --video-frames 5 --steps 1
fi
if [ "${LARGE:-0}" = 1 ]; then
  row "832x480, 5 frames, 1 step" -W 832 -H 480 --video-frames 5 --steps 1
  row "the same, --vae-tiling" -W 832 -H 480 --video-frames 5 --steps 1 --vae-tiling
fi
if [ "${DECODE:-0}" = 1 ]; then
  row "832x480, 5 frames, 1 step, CFG 1" -W 832 -H 480 --video-frames 5 --steps 1 --cfg-scale 1
fi
if [ "${TAE:-0}" = 1 ]; then
  tae=(-W 832 -H 480 --steps 1 --cfg-scale 1 --tae "$dir/taehv.safetensors")
  row "--tae, 832x480, 5 frames, 1 step, CFG 1" "${tae[@]}" --video-frames 5
  row "--tae, 832x480, 17 frames, 1 step, CFG 1" "${tae[@]}" --video-frames 17
fi
if [ -n "${QUANT:-}" ]; then
  saved=("${files[@]}")
  files=(--diffusion-model "$QUANT" --t5xxl "$dir/umt5.safetensors"
    --vae "$dir/wan_vae.safetensors")
  tae=(-W 832 -H 480 --steps 1 --cfg-scale 1 --tae "$dir/taehv.safetensors")
  row "$(basename "$QUANT"), --tae, 832x480, 5 frames, 1 step, CFG 1" "${tae[@]}" --video-frames 5
  row "$(basename "$QUANT"), --tae, 832x480, 33 frames, 1 step, CFG 1" "${tae[@]}" \
    --video-frames 33
  files=("${saved[@]}")
fi
if [ -n "$expert" ]; then
  a14b=(--high-noise-diffusion-model "$expert" --high-noise-steps 2 --high-noise-cfg-scale 6
    --high-noise-sampling-method euler -W 160 -H 96 --video-frames 9 --steps 2)
  row "A14B pair, 160x96, 9 frames, 2 + 2 steps" "${a14b[@]}"
  row "A14B pair, the same, --params-backend disk" "${a14b[@]}" --params-backend disk
fi
if [ -n "${VACE:-}" ]; then
  mkdir -p "$out/control"
  ffmpeg -loglevel error -y -f lavfi -i testsrc2=size=320x192:rate=8 -frames:v 9 \
    "$out/control/%02d.png"
  ffmpeg -loglevel error -y -f lavfi -i rgbtestsrc=size=320x192 -frames:v 1 "$out/reference.png"
  saved=("${files[@]}")
  files=(--diffusion-model "$VACE/wan.safetensors" --t5xxl "$dir/umt5.safetensors"
    --vae "$dir/wan_vae.safetensors")
  row "VACE 320x192, 9 frames, 2 steps" --control-video "$out/control" -i "$out/reference.png" \
    -W 320 -H 192 --video-frames 9 --steps 2
  files=("${saved[@]}")
fi
if [ -n "$i2v_dir" ]; then
  ffmpeg -loglevel error -y -f lavfi -i testsrc2=size=160x96 -frames:v 1 "$out/first.png"
  files=(--diffusion-model "$i2v_dir/wan.safetensors" --clip_vision
    "$i2v_dir/clip_vision.safetensors" --t5xxl "$dir/umt5.safetensors"
    --vae "$dir/wan_vae.safetensors")
  row "I2V 160x96, 9 frames, 2 steps" -i "$out/first.png" -W 160 -H 96 --video-frames 9 \
    --steps 2
  row "I2V 320x192, 9 frames, 1 step" -i "$out/first.png" -W 320 -H 192 --video-frames 9 \
    --steps 1
  echo
  echo "| image to video | CLIP vision s ours | reference | VAE encoding s ours | reference |"
  echo "|---|---|---|---|---|"
  printf '%s\n' "${i2v_rows[@]}"
fi
exit 0
