"""A minimal GGUF (version 3) writer for the random-model tools: metadata of strings,
integers, floats and arrays of them, and f32/f16 tensors, in the layout ggml and llama.cpp
read (ggml/docs/gguf.md): header, key/value pairs, tensor infos (dimensions innermost
first), then the data, each tensor aligned to 32 bytes. A tensor of zeros can be stored as
q4_0 blocks of zero bytes (scale 0) left as a hole in the file: a model of a released
layout whose large layers do not matter to a test then costs no disk space and no writing
time. A matrix can also be stored as random q4_K blocks, drawn at write time: a released
model's quantized file (tens of gigabytes as floats) written in the bytes it is used in."""

import os
import struct

import numpy as np

GGUF_MAGIC = b"GGUF"
GGUF_VERSION = 3
ALIGNMENT = 32

# Value types
UINT32, INT32, FLOAT32, BOOL, STRING, ARRAY = 4, 5, 6, 7, 8, 9
# Tensor types
GGML_F32, GGML_F16, GGML_Q4_0, GGML_Q4_K = 0, 1, 2, 12
Q4_0_BLOCK, Q4_0_BYTES = 32, 18    # values per block, bytes per block (f16 scale, 16 nibbles)
# q4_K: 256 values as f16 d and dmin, twelve bytes of 6-bit scales and mins for eight
# sub-blocks of 32, then 128 bytes of 4-bit values; value = d * scale * q - dmin * min.
Q4_K_BLOCK, Q4_K_BYTES = 256, 144
Q4_K_CHUNK_BLOCKS = 1 << 16        # blocks drawn at a time when writing


def _elements(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def _random_q4_k(shape, seed, std):
    """The bytes of random q4_K blocks whose values spread about std around zero: scales,
    mins and 4-bit values uniform, dmin = 7.5 d so that the mean is zero; the spread of
    d * (scale * q - 7.5 * min) over uniform 6- and 4-bit integers is about 240 d."""
    rng = np.random.default_rng(seed)
    d = np.float16(std / 240.0)
    head = np.array([d, np.float16(7.5 * float(d))], dtype="<f2").view(np.uint8)
    blocks = _elements(shape) // Q4_K_BLOCK
    for b0 in range(0, blocks, Q4_K_CHUNK_BLOCKS):
        nb = min(Q4_K_CHUNK_BLOCKS, blocks - b0)
        chunk = rng.integers(0, 256, size=(nb, Q4_K_BYTES), dtype=np.uint8)
        chunk[:, :4] = head
        yield memoryview(chunk).cast("B")


def _string(s):
    b = s.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


def _scalar(kind, v):
    if kind == STRING:
        return _string(v)
    if kind == UINT32:
        return struct.pack("<I", v)
    if kind == INT32:
        return struct.pack("<i", v)
    if kind == FLOAT32:
        return struct.pack("<f", v)
    if kind == BOOL:
        return struct.pack("<?", v)
    raise ValueError(f"value type {kind}")


def _value(v):
    """(type, bytes) of a Python value: str, bool, int (i32), float (f32), or a list of one
    of those."""
    def kind_of(x):
        if isinstance(x, str):
            return STRING
        if isinstance(x, bool):
            return BOOL
        if isinstance(x, int):
            return INT32
        if isinstance(x, float):
            return FLOAT32
        raise TypeError(f"metadata value {x!r}")
    if isinstance(v, list):
        kind = kind_of(v[0]) if v else INT32
        body = struct.pack("<IQ", kind, len(v)) + b"".join(_scalar(kind, x) for x in v)
        return ARRAY, body
    kind = kind_of(v)
    return kind, _scalar(kind, v)


def write_gguf(path, metadata, tensors):
    """metadata: {key: value}; tensors: [(name, numpy array (rows first, as torch), "f32"
    or "f16")], [(name, shape, "zero_q4_0")] (zeros; the innermost dimension a multiple of
    32), written as a hole, or [(name, (shape, seed, std), "random_q4_K")] (the innermost
    dimension a multiple of 256), drawn while writing. Writes path via path.tmp; returns the
    data size in bytes."""
    head = GGUF_MAGIC + struct.pack("<IQQ", GGUF_VERSION, len(tensors), len(metadata) + 1)
    for key, v in list(metadata.items()) + [("general.alignment", ALIGNMENT)]:
        if key == "general.alignment":
            kind, body = UINT32, struct.pack("<I", v)
        else:
            kind, body = _value(v)
        head += _string(key) + struct.pack("<I", kind) + body
    offset, blobs = 0, []
    for name, array, dtype in tensors:
        if dtype == "zero_q4_0":
            shape = tuple(array)
            if shape[-1] % Q4_0_BLOCK:
                raise ValueError(f"{name}: {shape} does not fill q4_0 blocks")
            data, kind = _elements(shape) // Q4_0_BLOCK * Q4_0_BYTES, GGML_Q4_0  # a hole
        elif dtype == "random_q4_K":
            shape, seed, std = array
            shape = tuple(shape)
            if shape[-1] % Q4_K_BLOCK:
                raise ValueError(f"{name}: {shape} does not fill q4_K blocks")
            data, kind = (lambda s=shape, r=seed, d=std: _random_q4_k(s, r, d)), GGML_Q4_K
        else:
            shape = array.shape
            data = array.astype("<f4" if dtype == "f32" else "<f2").tobytes()
            kind = GGML_F32 if dtype == "f32" else GGML_F16
        dims = list(reversed(shape))  # ggml's ne: innermost first
        head += _string(name) + struct.pack("<I", len(dims))
        head += b"".join(struct.pack("<Q", d) for d in dims)
        head += struct.pack("<IQ", kind, offset)
        blobs.append(data)
        if callable(data):
            size = _elements(shape) // Q4_K_BLOCK * Q4_K_BYTES
        else:
            size = data if isinstance(data, int) else len(data)
        offset += size
        offset += -offset % ALIGNMENT
    head += b"\0" * (-len(head) % ALIGNMENT)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(head)
        for data in blobs:
            if isinstance(data, int):  # zeros: skipped, read back as zeros
                f.seek(data + (-data % ALIGNMENT), os.SEEK_CUR)
                continue
            if callable(data):  # drawn while writing
                size = 0
                for chunk in data():
                    f.write(chunk)
                    size += len(chunk)
                f.write(b"\0" * (-size % ALIGNMENT))
                continue
            f.write(data)
            f.write(b"\0" * (-len(data) % ALIGNMENT))
        f.truncate()
    os.replace(tmp, path)
    return offset
