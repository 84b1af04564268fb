#!/usr/bin/env python3
"""Write a random-weight Chroma model as the three files it runs from, small by default.

Files (names and layouts of the released ones):

* ``<out>/chroma_dit.safetensors``  the transformer, FLUX.1 names without any modulation
  linear or vector embedder: ``img_in``, ``txt_in``, ``double_blocks.N.{img,txt}_{attn.qkv,
  attn.norm.{query,key}_norm.scale, attn.proj, mlp.0, mlp.2}``, ``single_blocks.N.{linear1,
  linear2, norm.{query,key}_norm.scale}``, ``final_layer.linear``, and the approximator
  ``distilled_guidance_layer.{in_proj, norms.N.scale, layers.N.{in,out}_layer, out_proj}``.
  Head dim 128 (RoPE axes 16+56+56), MLP ratio 4. Released: hidden 3072, 19 double and 38
  single blocks, approximator 64 -> 5120 (5 layers) -> 3072; default here: hidden 256, 2 and
  2 blocks, approximator 64 -> 128 (2 layers). ``--released-layout`` keeps the released block
  counts and approximator (stable-diffusion.cpp hard-codes them) with the small width.
* ``<out>/t5xxl.safetensors`` and ``<out>/ae.safetensors``: make_random_flux.py's T5 encoder
  and 16-channel autoencoder (same options, same seed: same bytes).

Weights normal(0, std) with a per-tensor seed, biases zero, norm scales one: same seed, same
bytes. Usage: make_random_chroma.py --out DIR [--hidden 256] [--double 2] [--single 2]
[--approx-width 128] [--approx-depth 2] [--released-layout] [make_random_flux.py's T5
options] [--tools DIR: where make_random_flux.py and make_random_sd.py are].
"""

import argparse
import os
import sys


def dit_specs(flux, sd, hidden, n_double, n_single, context_dim, approx_width, approx_depth):
    s, h, mlp = [], hidden, 4 * hidden
    sd._linear(s, "img_in", h, 64)
    sd._linear(s, "txt_in", h, context_dim)
    a = "distilled_guidance_layer"
    sd._linear(s, f"{a}.in_proj", approx_width, 64)
    for i in range(approx_depth):
        flux._scale(s, f"{a}.norms.{i}.scale", approx_width)
        sd._linear(s, f"{a}.layers.{i}.in_layer", approx_width, approx_width)
        sd._linear(s, f"{a}.layers.{i}.out_layer", approx_width, approx_width)
    sd._linear(s, f"{a}.out_proj", h, approx_width)
    for i in range(n_double):
        for side in ("img", "txt"):
            p = f"double_blocks.{i}.{side}"
            sd._linear(s, f"{p}_attn.qkv", 3 * h, h)
            flux._scale(s, f"{p}_attn.norm.query_norm.scale", flux.HEAD_DIM)
            flux._scale(s, f"{p}_attn.norm.key_norm.scale", flux.HEAD_DIM)
            sd._linear(s, f"{p}_attn.proj", h, h)
            sd._linear(s, f"{p}_mlp.0", mlp, h)
            sd._linear(s, f"{p}_mlp.2", h, mlp)
    for i in range(n_single):
        p = f"single_blocks.{i}"
        sd._linear(s, f"{p}.linear1", 3 * h + mlp, h)
        sd._linear(s, f"{p}.linear2", h, h + mlp)
        flux._scale(s, f"{p}.norm.query_norm.scale", flux.HEAD_DIM)
        flux._scale(s, f"{p}.norm.key_norm.scale", flux.HEAD_DIM)
    sd._linear(s, "final_layer.linear", 64, h)
    return s


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tools", default=os.path.dirname(os.path.abspath(__file__)),
                    help="folder of make_random_flux.py and make_random_sd.py")
    ap.add_argument("--out", required=True, help="output folder")
    ap.add_argument("--hidden", type=int, default=256, help="multiple of 128")
    ap.add_argument("--double", type=int, default=2)
    ap.add_argument("--single", type=int, default=2)
    ap.add_argument("--approx-width", type=int, default=128)
    ap.add_argument("--approx-depth", type=int, default=2)
    ap.add_argument("--released-layout", action="store_true",
                    help="19 double and 38 single blocks, approximator 5120 x 5")
    ap.add_argument("--t5-dim", type=int, default=256, help="multiple of 64")
    ap.add_argument("--t5-layers", type=int, default=2)
    ap.add_argument("--t5-ff", type=int, default=512)
    ap.add_argument("--t5-vocab", type=int, default=8000)
    ap.add_argument("--dtype", choices=("f16", "f32"), default="f16")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--std", type=float, default=0.02)
    a = ap.parse_args(argv)
    sys.path.insert(0, a.tools)
    import make_random_flux as flux  # noqa: E402
    import make_random_sd as sd  # noqa: E402
    if a.released_layout:
        a.double, a.single, a.approx_width, a.approx_depth = 19, 38, 5120, 5
    if a.hidden % flux.HEAD_DIM or a.t5_dim % 64:
        ap.error("--hidden must be a multiple of 128 and --t5-dim of 64")
    os.makedirs(a.out, exist_ok=True)
    meta = {"format": "pt", "generator": "make_random_chroma.py", "seed": str(a.seed),
            "std": str(a.std), "dtype": a.dtype}
    parts = {
        "chroma_dit": dit_specs(flux, sd, a.hidden, a.double, a.single, a.t5_dim,
                                a.approx_width, a.approx_depth),
        "t5xxl": flux.t5_specs(a.t5_dim, a.t5_layers, a.t5_ff, a.t5_vocab),
        "ae": flux.ae16_specs(),
    }
    for name, specs in parts.items():
        path = os.path.join(a.out, name + ".safetensors")
        meta_part = dict(meta, part=name)
        if name != "chroma_dit":  # make_random_flux.py's files, byte for byte
            meta_part["generator"] = "make_random_flux.py"
        n = sd.write_safetensors(path, specs, a.dtype, a.seed, a.std, meta_part)
        print(f"wrote {path}: {len(specs)} tensors, {n / 2**20:.1f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
