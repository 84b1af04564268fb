#!/usr/bin/env python3
"""Write a random-weight ControlNet (SD 1.5 or SDXL) as one .safetensors file.

The file has the tensor names and shapes of the released ControlNets in the original
(cldm.py) layout, everything under ``control_model.``:

``--arch sd15`` (default), like ``control_v11p_sd15_canny.pth`` / ``control_sd15_canny``:

* ``time_embed.{0,2}``                    Linear 320 -> 1280 -> 1280
* ``input_blocks.*``, ``middle_block.*``  the SD 1.5 UNet's encoder (model_channels 320,
                                          ch_mult 1,2,4,4, 2 res blocks, attention at the
                                          first three levels and the middle, context 768,
                                          1x1 conv proj_in/out)
* ``input_hint_block.{0,2,...,14}``       eight 3x3 convs 3 -> 16 -> 16 -> 32 -> 32 -> 96 ->
                                          96 -> 256 -> 320 (stride 2 at 4, 8 and 12)
* ``zero_convs.{0..11}.0``                1x1 convs, one per UNet skip connection
* ``middle_block_out.0``                  1x1 conv after the middle block

``--arch sdxl``: the SDXL base UNet's encoder (ch_mult 1,2,4, no attention at the first
level, transformer depth 2 and 10, context 2048, Linear proj_in/out, label_emb for the
2816-wide vector), the same hint block, zero_convs 0..8 and middle_block_out.

Initialisation, as tools that write random checkpoints for this project do: weights of
Linear and conv layers normal(0, --std) (default 0.02) drawn from a generator seeded with
(seed, crc32(name)); biases 0; norm weights 1, their biases 0. ``--zero-std`` sets the
zero convs' std apart (default: --std), so the ControlNet's effect on an image can be made
large enough to measure; a trained ControlNet's zero convs are far from zero.
``--hint-std`` does the same for the input_hint_block convs: at 0.02 eight random convs
shrink the control image's signal about 10^4 times, so the image's content barely matters;
0.06 keeps it about as large as it came in (0.3 overflows f16 activations).

Only numpy is needed; tensors are written one at a time, so memory use stays small.

Usage:
    python3 make_random_controlnet.py --out cn_sd15.safetensors --seed 1
    python3 make_random_controlnet.py --arch sdxl --out cn_sdxl.safetensors
    python3 make_random_controlnet.py --list
"""
import argparse
import json
import os
import struct
import sys
import zlib

import numpy as np

PREFIX = "control_model"

ARCHS = {
    # cldm_v15.yaml
    "sd15": dict(model_channels=320, ch_mult=(1, 2, 4, 4), num_res_blocks=2,
                 depth=(1, 1, 1, 0), middle_depth=1, context_dim=768, linear_proj=False,
                 adm_in_channels=0),
    # the SDXL base UNet's encoder (diffusers' controlnet-*-sdxl-1.0 in the original names)
    "sdxl": dict(model_channels=320, ch_mult=(1, 2, 4), num_res_blocks=2, depth=(0, 2, 10),
                 middle_depth=10, context_dim=2048, linear_proj=True, adm_in_channels=2816),
}
HINT_WIDTHS = (16, 16, 32, 32, 96, 96, 256)


def _linear(specs, name, n_out, n_in, bias=True):
    specs.append((f"{name}.weight", (n_out, n_in), "w"))
    if bias:
        specs.append((f"{name}.bias", (n_out,), "b"))


def _conv(specs, name, n_out, n_in, k, kind="w"):
    specs.append((f"{name}.weight", (n_out, n_in, k, k), kind))
    specs.append((f"{name}.bias", (n_out,), "b"))


def _norm(specs, name, n):
    specs.append((f"{name}.weight", (n,), "nw"))
    specs.append((f"{name}.bias", (n,), "nb"))


def _resblock(specs, name, c_in, c_out, emb):
    _norm(specs, f"{name}.in_layers.0", c_in)
    _conv(specs, f"{name}.in_layers.2", c_out, c_in, 3)
    _linear(specs, f"{name}.emb_layers.1", c_out, emb)
    _norm(specs, f"{name}.out_layers.0", c_out)
    _conv(specs, f"{name}.out_layers.3", c_out, c_out, 3)
    if c_in != c_out:
        _conv(specs, f"{name}.skip_connection", c_out, c_in, 1)


def _transformer(specs, name, c, context_dim, depth, linear_proj):
    _norm(specs, f"{name}.norm", c)
    proj = (lambda n: _linear(specs, n, c, c)) if linear_proj else (lambda n: _conv(specs, n, c, c, 1))
    proj(f"{name}.proj_in")
    for i in range(depth):
        blk = f"{name}.transformer_blocks.{i}"
        for a, ctx in (("attn1", c), ("attn2", context_dim)):
            _linear(specs, f"{blk}.{a}.to_q", c, c, bias=False)
            _linear(specs, f"{blk}.{a}.to_k", c, ctx, bias=False)
            _linear(specs, f"{blk}.{a}.to_v", c, ctx, bias=False)
            _linear(specs, f"{blk}.{a}.to_out.0", c, c)
        _linear(specs, f"{blk}.ff.net.0.proj", 8 * c, c)
        _linear(specs, f"{blk}.ff.net.2", c, 4 * c)
        for n in ("norm1", "norm2", "norm3"):
            _norm(specs, f"{blk}.{n}", c)
    proj(f"{name}.proj_out")


def controlnet_specs(arch):
    a = ARCHS[arch]
    p = PREFIX
    mc = a["model_channels"]
    emb = 4 * mc
    specs = []
    _linear(specs, f"{p}.time_embed.0", emb, mc)
    _linear(specs, f"{p}.time_embed.2", emb, emb)
    if a["adm_in_channels"]:
        _linear(specs, f"{p}.label_emb.0.0", emb, a["adm_in_channels"])
        _linear(specs, f"{p}.label_emb.0.2", emb, emb)
    c_in = 3
    for i, width in enumerate(HINT_WIDTHS + (mc,)):
        _conv(specs, f"{p}.input_hint_block.{2 * i}", width, c_in, 3, kind="h")
        c_in = width
    _conv(specs, f"{p}.input_blocks.0.0", mc, 4, 3)
    _conv(specs, f"{p}.zero_convs.0.0", mc, mc, 1, kind="z")
    ch, idx = mc, 1
    for level, mult in enumerate(a["ch_mult"]):
        for _ in range(a["num_res_blocks"]):
            _resblock(specs, f"{p}.input_blocks.{idx}.0", ch, mult * mc, emb)
            ch = mult * mc
            if a["depth"][level]:
                _transformer(specs, f"{p}.input_blocks.{idx}.1", ch, a["context_dim"],
                             a["depth"][level], a["linear_proj"])
            _conv(specs, f"{p}.zero_convs.{idx}.0", ch, ch, 1, kind="z")
            idx += 1
        if level != len(a["ch_mult"]) - 1:
            _conv(specs, f"{p}.input_blocks.{idx}.0.op", ch, ch, 3)
            _conv(specs, f"{p}.zero_convs.{idx}.0", ch, ch, 1, kind="z")
            idx += 1
    _resblock(specs, f"{p}.middle_block.0", ch, ch, emb)
    _transformer(specs, f"{p}.middle_block.1", ch, a["context_dim"], a["middle_depth"],
                 a["linear_proj"])
    _resblock(specs, f"{p}.middle_block.2", ch, ch, emb)
    _conv(specs, f"{p}.middle_block_out.0", ch, ch, 1, kind="z")
    names = [s[0] for s in specs]
    assert len(names) == len(set(names)), "duplicate tensor names"
    return specs


DTYPES = {"f16": (np.dtype("<f2"), "F16"), "f32": (np.dtype("<f4"), "F32")}


def tensor_values(name, shape, kind, np_dtype, seed, std, zero_std, hint_std):
    if kind in ("w", "z", "h"):
        rng = np.random.default_rng([seed, zlib.crc32(name.encode("utf-8"))])
        x = rng.standard_normal(size=shape, dtype=np.float32)
        x *= np.float32({"w": std, "z": zero_std, "h": hint_std}[kind])
        return x.astype(np_dtype, copy=False)
    if kind == "nw":
        return np.ones(shape, dtype=np_dtype)
    return np.zeros(shape, dtype=np_dtype)


def write(path, specs, dtype, seed, std, zero_std, hint_std, metadata):
    np_dtype, st_dtype = DTYPES[dtype]
    specs = sorted(specs, key=lambda s: s[0])
    header = {"__metadata__": metadata}
    offset = 0
    for name, shape, _ in specs:
        nbytes = int(np.prod(shape)) * np_dtype.itemsize
        header[name] = {"dtype": st_dtype, "shape": list(shape),
                        "data_offsets": [offset, offset + nbytes]}
        offset += nbytes
    header_bytes = json.dumps(header, separators=(",", ":")).encode("utf-8")
    header_bytes += b" " * (-len(header_bytes) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(header_bytes)))
        f.write(header_bytes)
        for name, shape, kind in specs:
            f.write(np.ascontiguousarray(
                tensor_values(name, shape, kind, np_dtype, seed, std, zero_std, hint_std)).tobytes())
    os.replace(tmp, path)
    return offset


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--arch", choices=list(ARCHS), default="sd15")
    ap.add_argument("--out", help="output .safetensors path (required unless --list)")
    ap.add_argument("--dtype", choices=sorted(DTYPES), default="f16")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--std", type=float, default=0.02)
    ap.add_argument("--zero-std", type=float, default=None,
                    help="std of the zero convs' weights (default: --std)")
    ap.add_argument("--hint-std", type=float, default=None,
                    help="std of the input_hint_block convs' weights (default: --std)")
    ap.add_argument("--list", action="store_true", help="print names and shapes only")
    args = ap.parse_args(argv)
    specs = controlnet_specs(args.arch)
    if args.list:
        for name, shape, _ in sorted(specs):
            print(name, list(shape))
        return 0
    if not args.out:
        ap.error("--out is required (unless --list is given)")
    zero_std = args.std if args.zero_std is None else args.zero_std
    hint_std = args.std if args.hint_std is None else args.hint_std
    metadata = {"format": "pt", "generator": "make_random_controlnet.py", "arch": args.arch,
                "seed": str(args.seed), "std": str(args.std), "zero_std": str(zero_std), "hint_std": str(hint_std),
                "dtype": args.dtype}
    nbytes = write(args.out, specs, args.dtype, args.seed, args.std, zero_std, hint_std,
                   metadata)
    params = sum(int(np.prod(s[1])) for s in specs)
    print(f"wrote {args.out} ({args.arch}): {len(specs)} tensors, {params / 1e6:.1f}M params, "
          f"{nbytes / 2**20:.1f} MiB of data")
    return 0


if __name__ == "__main__":
    sys.exit(main())
