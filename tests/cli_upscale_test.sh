#!/usr/bin/env bash
# sd-cli -M upscale end to end on small random ESRGAN files written by the shared
# generator: output sizes for x4 and x2 models, repeats, tiles, and the refusals (a file
# that is not an ESRGAN model, a missing image): one error line, a non-zero exit and no
# output file. Skips (77) when ../shared/tools is absent.
# Usage: cli_upscale_test.sh SD_CLI SHARED_DIR
set -uo pipefail
cli=$1
generator=$2/tools/make_random_esrgan.py
python=/usr/bin/python3
if [ ! -f "$generator" ] || [ ! -x "$python" ]; then
  echo "skipped: $generator or $python is not available"
  exit 77
fi
source "$(dirname "$0")/script_checks.sh"
run() {  # NAME EXPECTED_STATUS(0|nonzero) ARGS...: output in $work/NAME.out
  local name=$1 expect=$2
  shift 2
  timeout 300 "$cli" -M upscale -t 2 "$@" >"$work/$name.out" 2>&1
  local rc=$?
  if [ "$expect" = 0 ] && [ $rc -ne 0 ]; then fail "$name: exit $rc"; cat "$work/$name.out"; fi
  if [ "$expect" != 0 ] && { [ $rc -eq 0 ] || [ $rc -ge 124 ]; }; then fail "$name: exit $rc"; fi
}
expect_size() {  # FILE WIDTH HEIGHT
  local size
  size=$("$python" -c 'import struct,sys; d=open(sys.argv[1],"rb").read(24); print(*struct.unpack(">II", d[16:24]))' "$1" 2>/dev/null)
  [ "$size" = "$2 $3" ] || fail "$1 is '$size', expected '$2 $3'"
}
expect_one_error() {  # NAME TEXT
  grep -qF -- "$2" "$work/$1.out" || { fail "$1: no '$2' in:"; cat "$work/$1.out"; }
  local n
  n=$(grep -ci "error" "$work/$1.out")
  [ "$n" = 1 ] || { fail "$1: $n error lines"; cat "$work/$1.out"; }
}

"$python" "$generator" --blocks 2 --scale 4 --out "$work/x4.safetensors" >/dev/null || exit 1
"$python" "$generator" --blocks 1 --scale 2 --out "$work/x2.safetensors" >/dev/null || exit 1
# A 20x12 RGB PNG with a gradient.
"$python" - "$work/in.png" <<'PY'
import struct, sys, zlib
w, h = 20, 12
raw = b"".join(b"\0" + bytes(v for x in range(w) for v in (x * 12, y * 20, 128)) for y in range(h))
def chunk(t, d):
    return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d))
open(sys.argv[1], "wb").write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
                              + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))
PY

run x4 0 --upscale-model "$work/x4.safetensors" -i "$work/in.png" -o "$work/x4.png"
expect_size "$work/x4.png" 80 48
run x4_tiled 0 --upscale-model "$work/x4.safetensors" -i "$work/in.png" -o "$work/x4_tiled.png" \
  --upscale-tile-size 8
expect_size "$work/x4_tiled.png" 80 48
run x4_max_vram 0 --upscale-model "$work/x4.safetensors" -i "$work/in.png" -o "$work/x4_mv.png" \
  --max-vram 1
grep -qF -- "--max-vram does not apply to the upscaler" "$work/x4_max_vram.out" ||
  fail "x4_max_vram: no warning that --max-vram does not apply"
run x2_twice 0 --upscale-model "$work/x2.safetensors" -i "$work/in.png" -o "$work/x2_twice.png" \
  --upscale-repeats 2
expect_size "$work/x2_twice.png" 80 48

# A safetensors file that is some other model.
"$python" - "$work/vae.safetensors" <<'PY'
import json, struct, sys
header = json.dumps({"first_stage_model.decoder.conv_in.bias": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}})
open(sys.argv[1], "wb").write(struct.pack("<Q", len(header)) + header.encode() + b"\0" * 16)
PY
run not_esrgan nonzero --upscale-model "$work/vae.safetensors" -i "$work/in.png" -o "$work/never.png"
expect_one_error not_esrgan "is not an ESRGAN upscaler model"
run missing_image nonzero --upscale-model "$work/x4.safetensors" -i "$work/nope.png" -o "$work/never.png"
expect_one_error missing_image "nope.png"
printf 'not a model' >"$work/text.pth"
run text_model nonzero --upscale-model "$work/text.pth" -i "$work/in.png" -o "$work/never.png"
grep -qi "error" "$work/text_model.out" || fail "text_model: no error"
# Sizes no image can have are refused before any upscaling: 20x12 x4 six times is
# 81920x49152. (The work itself would run for minutes.)
run too_many_repeats nonzero --upscale-model "$work/x4.safetensors" -i "$work/in.png" \
  -o "$work/never.png" --upscale-repeats 6
expect_one_error too_many_repeats "use fewer --upscale-repeats or a smaller image"
grep -qF "81920x49152" "$work/too_many_repeats.out" || fail "too_many_repeats: size not named"
[ -e "$work/never.png" ] && fail "a refused run wrote its output"

finish "upscale: all cases passed"
