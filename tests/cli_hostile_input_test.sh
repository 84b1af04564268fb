#!/usr/bin/env bash
# sd-cli given hostile or mistaken input: each case must end with one clear error and a
# non-zero exit (or, for legal input, succeed), write nothing half-done, and never send a
# file's control characters to the terminal.
# Usage: cli_hostile_input_test.sh SD_CLI
set -uo pipefail
cli=$1
source "$(dirname "$0")/script_checks.sh"
# run NAME EXPECTED_STATUS(0|nonzero) ARGS...: output in $work/NAME.out
run() {
  local name=$1 expect=$2
  shift 2
  timeout 120 "$cli" "$@" >"$work/$name.out" 2>&1
  local rc=$?
  if [ "$expect" = 0 ] && [ $rc -ne 0 ]; then fail "$name: exit $rc"; fi
  if [ "$expect" != 0 ] && { [ $rc -eq 0 ] || [ $rc -ge 124 ]; }; then fail "$name: exit $rc"; fi
}
expect_text() {  # NAME TEXT
  grep -qF -- "$2" "$work/$1.out" || { fail "$1: no '$2' in:"; cat "$work/$1.out"; }
}
expect_no_escape() {  # NAME: no ESC, BEL or CR byte reached the output
  if LC_ALL=C grep -q $'[\x1b\x07\r]' "$work/$1.out"; then fail "$1: raw control characters"; fi
}

# A text file under a model's name: called what it is, its bytes not echoed.
printf '# Model card\nsecret words\x1b[2J of a text file\n' >"$work/readme.safetensors"
run text_as_model nonzero -m "$work/readme.safetensors" -p x -o "$work/out.png"
expect_text text_as_model "not a safetensors file"
grep -q secret "$work/text_as_model.out" && fail "text_as_model: file contents echoed"
expect_no_escape text_as_model

# A tensor name holding a terminal escape, in a load error.
/usr/bin/python3 - "$work/escape.safetensors" <<'PY'
import json, struct, sys
header = json.dumps({"\x1b[2Jevil\nname": {"dtype": "Q9", "shape": [1], "data_offsets": [0, 4]}})
open(sys.argv[1], "wb").write(struct.pack("<Q", len(header)) + header.encode() + b"\0" * 4)
PY
run escape_in_name nonzero -m "$work/escape.safetensors" -p x -o "$work/out.png"
expect_text escape_in_name '\e[2Jevil\nname'
expect_no_escape escape_in_name

# An unwritable output is found before the model is even read (the model here is junk).
run proc_output nonzero -m "$work/readme.safetensors" -p x -o /proc/sd-cli-test.png
expect_text proc_output "/proc/sd-cli-test.png"
expect_text proc_output "choose another -o"
grep -q "not a safetensors" "$work/proc_output.out" && fail "proc_output: model read first"
run numbered_output nonzero -m "$work/readme.safetensors" -p x -b 2 -o "/proc/sd-%d.png"
expect_text numbered_output "/proc/sd-0.png"
# A missing output folder is created, and the log says so.
run new_folder nonzero -m "$work/readme.safetensors" -p x -o "$work/new/dir/out.png"
expect_text new_folder "created the output folder"
[ -d "$work/new/dir" ] || fail "new_folder: folder not created"
[ -z "$(ls -A "$work/new/dir")" ] || fail "new_folder: something was written"

# Numbers near the limits are named as they are (INT_MAX has no multiple of 8 above it; a
# double beyond a float's range is out of range, not "not a number").
run width_int_max nonzero -m "$work/readme.safetensors" -p x -W 2147483647
expect_text width_int_max "use 2147483640"
grep -q -- "-2147483648" "$work/width_int_max.out" && fail "width_int_max: a negative width suggested"
run cfg_out_of_range nonzero -m "$work/readme.safetensors" -p x --cfg-scale -1e308
expect_text cfg_out_of_range "--cfg-scale -1e308 is out of range"

# Image sides must be positive.
run width_zero nonzero -m "$work/readme.safetensors" -p x -W 0
expect_text width_zero "--width must be a positive number"
run height_negative nonzero -m "$work/readme.safetensors" -p x -H -64
expect_text height_negative "--height must be a positive number"

# A skip-layer window that is inverted or past the steps is refused before the model is read:
# the text file given as the model would be named otherwise.
run slg_inverted nonzero -m "$work/readme.safetensors" -p x --skip-layer-start 0.8 \
  --skip-layer-end 0.2 -o "$work/out.png"
expect_text slg_inverted "--skip-layer-start 0.8 / --skip-layer-end 0.2"
run slg_past_the_end nonzero -m "$work/readme.safetensors" -p x --skip-layer-end 1.5 \
  -o "$work/out.png"
expect_text slg_past_the_end "0 <= start <= end <= 1"

# -M metadata on an image whose text chunk holds escapes.
/usr/bin/python3 - "$work/meta.png" <<'PY'
import struct, sys, zlib
def chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
raw = b"".join(b"\0" + b"\x80" * 3 for _ in range(1))
png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0))
png += chunk(b"tEXt", b"parameters\0a \x1b]0;title\x07 prompt\rSteps: 2\x1b[31m")
png += chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")
open(sys.argv[1], "wb").write(png)
PY
run metadata_escapes 0 -M metadata --image "$work/meta.png"
expect_text metadata_escapes '\e]0;title\x07 prompt\rSteps'
expect_no_escape metadata_escapes

# A legal zero-size tensor converts (it used to divide by zero).
/usr/bin/python3 - "$work/empty.safetensors" <<'PY'
import json, struct, sys
header = json.dumps({"empty.weight": {"dtype": "F32", "shape": [0], "data_offsets": [0, 0]},
                     "w.weight": {"dtype": "F32", "shape": [1, 32], "data_offsets": [0, 128]}})
open(sys.argv[1], "wb").write(struct.pack("<Q", len(header)) + header.encode() + b"\0" * 128)
PY
run convert_empty 0 -M convert -m "$work/empty.safetensors" -o "$work/empty.gguf" --type q8_0
[ -s "$work/empty.gguf" ] || fail "convert_empty: no output"

# Highres-fix options are checked before the model is read (the model here is junk), each
# in one line, and nothing is written.
hires() {  # NAME TEXT ARGS...
  local name=$1 text=$2
  shift 2
  run "$name" nonzero -m "$work/readme.safetensors" -p x -o "$work/hires.png" --hires "$@"
  expect_text "$name" "$text"
  grep -q "not a safetensors" "$work/$name.out" && fail "$name: model read first"
  [ "$(grep -c . "$work/$name.out")" -le 1 ] || { fail "$name: more than one line:"; cat "$work/$name.out"; }
  [ -e "$work/hires.png" ] && fail "$name: wrote an image"
}
mkdir -p "$work/upscalers"
hires hires_unknown_upscaler "neither a built-in upscaler (None, Latent, Latent (nearest)" \
  --hires-upscaler Bilinear --hires-upscalers-dir "$work/upscalers"
hires hires_model_missing "nor a model file (.gguf, .safetensors, .pt, .pth) in --hires-upscalers-dir" \
  --hires-upscaler RealESRGAN_x4plus --hires-upscalers-dir "$work/upscalers"
hires hires_model_word "--hires-upscaler Model: give the model's file name" --hires-upscaler Model
hires hires_scale_zero "--hires-scale must be positive" --hires-scale 0
hires hires_scale_negative "--hires-scale must be positive" --hires-scale -2
hires hires_strength_high "--hires-denoising-strength must be in [0, 1], got 1.5" \
  --hires-denoising-strength 1.5
hires hires_strength_negative "--hires-denoising-strength must be in [0, 1]" \
  --hires-denoising-strength -0.1
hires hires_width_odd "must be multiples of 8" --hires-width 500
hires hires_height_negative "must be multiples of 8" --hires-height -64
hires hires_steps_negative "--hires-steps must not be negative" --hires-steps -1
hires hires_one_sigma "--hires-sigmas needs at least two values" --hires-sigmas 1.0
hires hires_tile_zero "--hires-upscale-tile-size must be at least 1" --hires-upscale-tile-size 0

# Reference images (-r): a missing or unreadable one is named in one error line before the
# model is read, and nothing is written.
printf 'not an image' >"$work/ref.png"
run bad_ref_image nonzero -m "$work/readme.safetensors" -p x -r "$work/ref.png" -o "$work/ref_out.png"
expect_text bad_ref_image "$work/ref.png"
grep -q "not a safetensors" "$work/bad_ref_image.out" && fail "bad_ref_image: model read first"
[ "$(grep -ci error "$work/bad_ref_image.out")" = 1 ] || fail "bad_ref_image: not one error line"
[ -e "$work/ref_out.png" ] && fail "bad_ref_image: an image was written"
run missing_ref_image nonzero -m "$work/readme.safetensors" -p x -r "$work/no_such.png" -o "$work/ref_out.png"
expect_text missing_ref_image "--ref-image: '$work/no_such.png' does not exist"
[ -e "$work/ref_out.png" ] && fail "missing_ref_image: an image was written"

# A FIFO (or any non-file) as a model or upscaler waited forever for a writer: refused.
mkfifo "$work/pipe.safetensors"
run fifo_model nonzero -m "$work/pipe.safetensors" -p x -o "$work/fifo_out.png"
expect_text fifo_model "is not a regular file"
run fifo_upscaler nonzero -M upscale --upscale-model "$work/pipe.safetensors" \
  -i "$(dirname "$0")/golden/flux2_tiny/euler_128.png" -o "$work/fifo_out.png"
expect_text fifo_upscaler "is not a regular file"
[ -e "$work/fifo_out.png" ] && fail "fifo: an image was written"

finish "all hostile-input cases passed"
