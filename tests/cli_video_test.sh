#!/usr/bin/env bash
# sd-cli -M vid_gen end to end on a tiny random Wan text-to-video model written by the
# project's own tools/make_random_wan.py: each container (-o .mp4, .webm, .avi, .webp and a
# PNG frame pattern) decodes with ffprobe to the frame count, size and frame rate asked
# for; a frame count the VAE cannot make is rounded down with a warning; an -o naming no
# video format becomes .avi as in sd.cpp; and the refusals (--video-frames 0, a folder that
# cannot be written, an image model) are one error line, a non-zero exit and no file; image
# to video (a tiny FLF2V) takes -i and --end-img, and refuses to run without them or CLIP
# vision; a Wan 2.2 A14B pair of experts splits the steps.
# Skips (77) without python3-numpy or ffprobe.
# Usage: cli_video_test.sh SD_CLI REPOSITORY_ROOT
set -uo pipefail
cli=$1
root=$2
python=/usr/bin/python3
if ! "$python" -c 'import numpy' 2>/dev/null || ! command -v ffprobe >/dev/null; then
  echo "skipped: python3-numpy or ffprobe (Debian's ffmpeg) is not installed"
  exit 77
fi
source "$(dirname "$0")/script_checks.sh"

model="$work/wan"
"$python" "$root/tools/make_random_wan.py" --out "$model" --dim 128 --layers 1 --ffn 64 \
  --t5-dim 64 --t5-layers 1 --t5-ff 64 --t5-heads 2 --vae-dim 32 >/dev/null || exit 1
# A T5-style unigram tokenizer beside the umT5 file, where sd-cli looks for it.
cat >"$model/tokenizer.json" <<'JSON'
{"pre_tokenizer": {"type": "Metaspace", "replacement": "\u2581", "add_prefix_space": true},
 "model": {"type": "Unigram", "unk_id": 2, "vocab": [["<pad>", 0.0], ["</s>", 0.0],
  ["<unk>", 0.0], ["\u2581", -2.0], ["a", -3.0], ["\u2581a", -1.0], ["\u2581cat", -1.5]]}}
JSON
unset SD_UMT5_TOKENIZER
wan=(--diffusion-model "$model/wan.safetensors" --t5xxl "$model/umt5.safetensors"
  --vae "$model/wan_vae.safetensors" -p "a cat" -W 32 -H 32 --steps 2 -t 2)

run() {  # NAME EXPECTED_STATUS(0|nonzero) ARGS...: output in $work/NAME.out
  local name=$1 expect=$2
  shift 2
  timeout 300 "$cli" -M vid_gen "$@" >"$work/$name.out" 2>&1
  local rc=$?
  if [ "$expect" = 0 ] && [ $rc -ne 0 ]; then fail "$name: exit $rc"; cat "$work/$name.out"; fi
  if [ "$expect" != 0 ] && { [ $rc -eq 0 ] || [ $rc -ge 124 ]; }; then fail "$name: exit $rc"; fi
}
expect_video() {  # FILE FRAMES WIDTH HEIGHT FPS
  local got
  got=$(ffprobe -v error -count_frames -select_streams v:0 \
    -show_entries stream=nb_read_frames,width,height,r_frame_rate -of csv=p=0 "$1" 2>&1)
  # csv order: width,height,r_frame_rate,nb_read_frames
  [ "$got" = "$3,$4,$5/1,$2" ] || fail "$1: ffprobe says '$got', expected '$3,$4,$5/1,$2'"
}

for ext in mp4 webm avi; do
  run "$ext" 0 "${wan[@]}" --video-frames 9 --fps 12 -o "$work/out/clip.$ext"
  expect_video "$work/out/clip.$ext" 9 32 32 12
done
# Animated WebP: ffprobe reads its size; the frame count is read from its ANMF chunks.
run webp 0 "${wan[@]}" --video-frames 5 -o "$work/clip.webp"
frames=$("$python" -c 'import sys; print(open(sys.argv[1], "rb").read().count(b"ANMF"))' \
  "$work/clip.webp")
[ "$frames" = 5 ] || fail "clip.webp has $frames frames, expected 5"
run pngs 0 "${wan[@]}" --video-frames 5 -o "$work/frames/f_%03d.png"
[ "$(ls "$work/frames" | wc -l)" = 5 ] || fail "the frame pattern wrote $(ls "$work/frames")"
[ -f "$work/frames/f_004.png" ] || fail "no f_004.png"

# 7 frames: Wan makes 1 + 4k, so 5, with a warning.
run round 0 "${wan[@]}" --video-frames 7 -o "$work/round.mp4"
grep -q "generating 5" "$work/round.out" || fail "no rounding warning in: $(cat "$work/round.out")"
expect_video "$work/round.mp4" 5 32 32 16
# An -o that names no video format is written as .avi, as sd.cpp does.
run avi_default 0 "${wan[@]}" --video-frames 5 -o "$work/plain.png"
expect_video "$work/plain.avi" 5 32 32 16
[ ! -e "$work/plain.png" ] || fail "plain.png written"
# The parameters are in the container's metadata.
ffprobe -v error -show_entries format_tags=comment -of default=nw=1 "$work/round.mp4" |
  grep -q "a cat" || fail "round.mp4 has no generation parameters"

# A clip's previews are clips: --preview-path preview.png becomes .avi (as the reference),
# proj's frames are the latent frames at a quarter of --fps.
run preview 0 "${wan[@]}" --video-frames 9 --fps 12 --preview proj --preview-path "$work/prev.png" \
  -o "$work/prev_clip.mp4"
expect_video "$work/prev.avi" 3 4 4 3
[ ! -e "$work/prev.png" ] || fail "prev.png written for a clip's preview"

# Refusals: one error line, no file.
run zero nonzero "${wan[@]}" --video-frames 0 -o "$work/zero.mp4"
grep -q -- "--video-frames" "$work/zero.out" || fail "zero: $(cat "$work/zero.out")"
[ ! -e "$work/zero.mp4" ] || fail "zero.mp4 written"
mkdir "$work/ro" && chmod 555 "$work/ro"
if [ ! -w "$work/ro" ]; then  # root writes anywhere
  run readonly nonzero "${wan[@]}" --video-frames 5 -o "$work/ro/clip.mp4"
  [ -z "$(ls "$work/ro")" ] || fail "a file was left in the read-only folder"
fi
# A batch count makes one clip all the same (sd.cpp's vid_gen has none), with a warning.
run batch 0 "${wan[@]}" --video-frames 5 -b 2 -o "$work/batch.mp4"
grep -q -- "-b 2" "$work/batch.out" || fail "batch: $(cat "$work/batch.out")"
expect_video "$work/batch.mp4" 5 32 32 16

# Image to video: a tiny Wan 2.1 FLF2V (image attention, CLIP vision) beside the same umT5
# and autoencoder; -i and --end-img of another size are resized to the clip's.
i2v="$work/wan_i2v"
"$python" "$root/tools/make_random_wan.py" --out "$i2v" --variant flf2v --dim 128 --layers 1 \
  --ffn 64 --t5-dim 64 --clip-dim 32 --clip-layers 1 --clip-ff 64 --parts wan,clip_vision \
  >/dev/null || exit 1
ffmpeg -loglevel error -y -f lavfi -i testsrc=size=48x40 -frames:v 1 "$work/first.png" &&
  ffmpeg -loglevel error -y -f lavfi -i smptebars=size=32x32 -frames:v 1 "$work/last.png" ||
  exit 1
flf=(--diffusion-model "$i2v/wan.safetensors" --clip_vision "$i2v/clip_vision.safetensors"
  --t5xxl "$model/umt5.safetensors" --vae "$model/wan_vae.safetensors" -p "a cat" -W 32 -H 32
  --steps 2 -t 2)
run i2v 0 "${flf[@]}" -i "$work/first.png" --end-img "$work/last.png" --video-frames 5 \
  -o "$work/i2v.mp4"
expect_video "$work/i2v.mp4" 5 32 32 16
# Without its first frame, or without CLIP vision: one line naming the flag, no file.
run no_first nonzero "${flf[@]}" --video-frames 5 -o "$work/no_first.mp4"
grep -q -- "-i IMAGE" "$work/no_first.out" || fail "no_first: $(cat "$work/no_first.out")"
[ ! -e "$work/no_first.mp4" ] || fail "no_first.mp4 written"
run no_clip nonzero "${flf[@]:0:2}" "${flf[@]:4}" -i "$work/first.png" --video-frames 5 -o "$work/no_clip.mp4"
grep -q -- "--clip_vision" "$work/no_clip.out" || fail "no_clip: $(cat "$work/no_clip.out")"
[ ! -e "$work/no_clip.mp4" ] || fail "no_clip.mp4 written"
# A text-to-video model given frames says what it needs.
run t2v_first nonzero "${wan[@]}" -i "$work/first.png" --video-frames 5 -o "$work/t2v.mp4"
grep -q "image-to-video" "$work/t2v_first.out" || fail "t2v_first: $(cat "$work/t2v_first.out")"

# Wan 2.2 A14B: a second transformer (another seed) as the high-noise expert; its steps come
# on top of --steps, and the log says how the steps were split.
"$python" "$root/tools/make_random_wan.py" --out "$work/expert" --seed 5 --dim 128 --layers 1 \
  --ffn 64 --t5-dim 64 --parts wan >/dev/null || exit 1
run a14b 0 "${wan[@]}" --high-noise-diffusion-model "$work/expert/wan.safetensors" \
  --high-noise-steps 1 --high-noise-cfg-scale 2 --video-frames 5 -o "$work/a14b.mp4"
expect_video "$work/a14b.mp4" 5 32 32 16
grep -q "high-noise expert: 1 of 3 steps" "$work/a14b.out" || fail "a14b: $(cat "$work/a14b.out")"
# The expert beside an image model, and a |high_noise| LoRA without an expert: refused.
run a14b_i2v nonzero "${flf[@]}" --high-noise-diffusion-model "$work/expert/wan.safetensors" \
  -i "$work/first.png" --video-frames 5 -o "$work/a14b_i2v.mp4"
grep -q "does not match" "$work/a14b_i2v.out" || fail "a14b_i2v: $(cat "$work/a14b_i2v.out")"
[ ! -e "$work/a14b_i2v.mp4" ] || fail "a14b_i2v.mp4 written"
cp "$work/expert/wan.safetensors" "$work/expert_lora.safetensors"
run a14b_lora nonzero "${wan[@]/a cat/a cat<lora:|high_noise|expert_lora:1>}" \
  --lora-model-dir "$work" --video-frames 5 -o "$work/a14b_lora.mp4"
grep -q -- "--high-noise-diffusion-model" "$work/a14b_lora.out" ||
  fail "a14b_lora: $(cat "$work/a14b_lora.out")"
[ ! -e "$work/a14b_lora.mp4" ] || fail "a14b_lora.mp4 written"
finish "sd-cli -M vid_gen: every container, image to video, two experts and refusals as expected"
