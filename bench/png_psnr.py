"""PSNR between two 8-bit PNG images of the same size, for benchmarks that compare images.

    /usr/bin/python3 bench/png_psnr.py A.png B.png    ->  "PSNR 41.3 dB" or "identical"

Reads non-interlaced 8-bit gray, RGB and RGBA PNGs (what sd-cli writes) with zlib and NumPy.
"""
import struct
import sys
import zlib

import numpy as np

CHANNELS = {0: 1, 2: 3, 6: 4}  # PNG colour type -> samples per pixel


def paeth(a, b, c):
    pa, pb, pc = abs(b - c), abs(a - c), abs(a + b - 2 * c)
    return a if pa <= pb and pa <= pc else (b if pb <= pc else c)


def read_png(path):
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        sys.exit(f"{path}: not a PNG file")
    pos, compressed = 8, b""
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            width, height, depth, colour = struct.unpack(">IIBB", body[:10])
            channels = CHANNELS[colour]
        elif kind == b"IDAT":
            compressed += body
    raw = zlib.decompress(compressed)
    stride = width * channels
    rows = np.zeros((height, stride), np.int32)
    previous = np.zeros(stride, np.int32)
    for y in range(height):
        start = y * (stride + 1)
        kind = raw[start]
        line = np.frombuffer(raw[start + 1 : start + 1 + stride], np.uint8).astype(np.int32)
        if kind == 0:  # None
            row = line
        elif kind == 2:  # Up
            row = (line + previous) & 255
        else:  # Sub, Average, Paeth: each byte depends on the one to its left
            row = np.zeros(stride, np.int32)
            for x in range(stride):
                left = row[x - channels] if x >= channels else 0
                up_left = previous[x - channels] if x >= channels else 0
                if kind == 1:
                    predicted = left
                elif kind == 3:
                    predicted = (left + previous[x]) // 2
                else:
                    predicted = paeth(left, previous[x], up_left)
                row[x] = (line[x] + predicted) & 255
        rows[y] = row
        previous = row
    return rows.astype(np.float64)


def main():
    a, b = read_png(sys.argv[1]), read_png(sys.argv[2])
    if a.shape != b.shape:
        sys.exit(f"sizes differ: {a.shape} and {b.shape}")
    mse = ((a - b) ** 2).mean()
    print("identical" if mse == 0 else "PSNR %.1f dB" % (10 * np.log10(255**2 / mse)))


if __name__ == "__main__":
    main()
