#!/usr/bin/env bash
# Runs the same ESRGAN upscale through two command lines that take sd-cli's flags (ours and
# a reference build), one after the other, and prints a Markdown row: wall and user
# seconds and peak RSS (MB, from /usr/bin/time) with ours / reference ratios, and the PSNR
# of our image against the reference's.
#
#   bench/upscale_side_by_side.sh OUR_CLI REF_CLI MODEL IMAGE [extra sd-cli flags...]
#
# e.g. a RealESRGAN_x4plus-shaped file from ../shared/tools/make_random_esrgan.py and a
# 128x128 PNG, -t 2 (set by this script).
set -euo pipefail
ours=$1 ref=$2 model=$3 image=$4
shift 4
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# Prints "wall_s user_s peak_mb" for one run.
run() {
  local cli=$1 name=$2
  shift 2
  /usr/bin/time -f "%e %U %M" -o "$out/time_$name" "$cli" -M upscale -t 2 \
    --upscale-model "$model" -i "$image" -o "$out/$name.png" "$@" >"$out/log_$name" 2>&1 || {
    echo "run failed: $cli" >&2
    tail -5 "$out/log_$name" >&2
    exit 1
  }
  awk '{ printf "%s %s %.0f\n", $1, $2, $3 / 1024 }' "$out/time_$name"
}

read -r ow ou om < <(run "$ours" ours "$@")
read -r rw ru rm_ < <(run "$ref" ref "$@")
psnr=$(/usr/bin/python3 - "$out/ours.png" "$out/ref.png" <<'PY'
import math, struct, sys, zlib
def pixels(path):  # 8-bit RGB/RGBA PNGs as written by both programs
    d = open(path, "rb").read(); i = 8; data = b""
    while i < len(d):
        n, = struct.unpack(">I", d[i:i + 4]); t = d[i + 4:i + 8]; c = d[i + 8:i + 8 + n]; i += 12 + n
        if t == b"IHDR": w, h, _, ct = struct.unpack(">IIBB", c[:10])
        if t == b"IDAT": data += c
    ch = {2: 3, 6: 4}[ct]; raw = zlib.decompress(data); s = w * ch; rows = []; prev = bytearray(s)
    for y in range(h):
        f = raw[y * (s + 1)]; line = bytearray(raw[y * (s + 1) + 1:(y + 1) * (s + 1)])
        for x in range(s):
            a = line[x - ch] if x >= ch else 0; b = prev[x]; c = prev[x - ch] if x >= ch else 0
            p = [0, a, b, (a + b) // 2][f] if f < 4 else (
                a if abs(b - c) <= abs(a - c) and abs(b - c) <= abs(a + b - 2 * c)
                else b if abs(a - c) <= abs(a + b - 2 * c) else c)
            line[x] = (line[x] + p) & 255
        rows.append(line); prev = line
    return b"".join(rows)
a, b = pixels(sys.argv[1]), pixels(sys.argv[2])
mse = sum((x - y) ** 2 for x, y in zip(a, b)) / len(a)
print("inf" if mse == 0 else "%.1f" % (10 * math.log10(255 ** 2 / mse)))
PY
)
echo "| wall s ours | ref | ratio | user s ours | ref | ratio | peak RSS MB ours | ref | ratio | PSNR dB |"
echo "|---|---|---|---|---|---|---|---|---|---|"
awk -v ow="$ow" -v rw="$rw" -v ou="$ou" -v ru="$ru" -v om="$om" -v rm="$rm_" -v p="$psnr" \
  'BEGIN { printf "| %s | %s | %.2f | %s | %s | %.2f | %s | %s | %.2f | %s |\n",
           ow, rw, ow / rw, ou, ru, ou / ru, om, rm, om / rm, p }'
