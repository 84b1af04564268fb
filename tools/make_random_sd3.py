#!/usr/bin/env python3
"""Write a random-weight Stable Diffusion 3 / 3.5 model in its released layouts, small by default.

Names are those of the released files (Stability-AI sd3-ref / the "incl_clips" checkpoints):

* the MMDiT under ``model.diffusion_model.``: ``pos_embed`` [1, M*M, hidden],
  ``x_embedder.proj`` (2x2 conv), ``t_embedder.mlp.{0,2}``, ``y_embedder.mlp.{0,2}``,
  ``context_embedder``, ``joint_blocks.N.{context_block,x_block}.{adaLN_modulation.1,
  attn.qkv, attn.proj, attn.ln_{q,k} (--qk-norm), attn2.* (--attn2 blocks), mlp.fc{1,2}}``,
  ``final_layer.{linear, adaLN_modulation.1}``; the last block's context stream has no
  attn.proj and no MLP, and 2 modulation chunks. One head per joint block. Released: SD3
  Medium depth 24, hidden 1536; SD3.5 Medium the same with RMS q/k norms and attn2 in blocks
  0..12 (M 384); SD3.5 Large depth 38, hidden 2432, q/k norms. Default here: depth 24 (readers
  that take the depth as "at least 24", as sd.cpp does, need 24) and hidden 192 (heads of 8).
* the 16-channel autoencoder under ``first_stage_model.`` (LDM names, no quant convs);
* CLIP-L under ``text_encoders.clip_l.transformer.text_model.`` and OpenCLIP bigG under
  ``text_encoders.clip_g.transformer.text_model.`` (Hugging Face names) with
  ``text_encoders.clip_g.transformer.text_projection.weight``: full size by default,
  as readers that build CLIP from the model kind need;
* T5 v1.1's encoder under ``text_encoders.t5xxl.transformer.`` (Hugging Face names, d_kv 64;
  4096 wide as SD3 reads it, few layers and a small vocabulary by default).

``--split`` writes the parts as the separate files users pass with ``--diffusion-model``,
``--vae``, ``--clip_l``, ``--clip_g`` and ``--t5xxl`` (the same tensors, without the roots).

Values: matrices normal(0, std), biases normal(0, std), norm weights 1 + normal(0, 0.1), each
tensor from its own seed (the name's CRC32 and --seed): same arguments, same bytes.
Usage: make_random_sd3.py --out FILE_OR_DIR [--variant sd3|sd3.5m|sd3.5l] [--depth 24]
[--hidden 192]
[--attn2 N] [--pos-max 32] [--no-t5] [--t5-layers 1] [--t5-vocab 8000] [--split [--parts ...]].
Needs numpy only.
"""

import argparse
import json
import os
import struct
import sys
import zlib

import numpy as np

HEAD = 64


def lin(s, name, n_out, n_in, bias=True):
    s.append((name + ".weight", (n_out, n_in), "w"))
    if bias:
        s.append((name + ".bias", (n_out,), "b"))


def conv(s, name, n_out, n_in, k):
    s.append((name + ".weight", (n_out, n_in, k, k), "w"))
    s.append((name + ".bias", (n_out,), "b"))


def norm(s, name, n, bias=True):
    s.append((name + ".weight", (n,), "n"))
    if bias:
        s.append((name + ".bias", (n,), "b"))


def mmdit_specs(depth, hidden, pos_max, qk_norm, attn2, context=4096, adm=2048, ch=16, p=2):
    s, h, head = [], hidden, hidden // depth
    s.append(("pos_embed", (1, pos_max * pos_max, h), "w"))
    conv(s, "x_embedder.proj", h, ch, p)
    lin(s, "t_embedder.mlp.0", h, 256)
    lin(s, "t_embedder.mlp.2", h, h)
    lin(s, "y_embedder.mlp.0", h, adm)
    lin(s, "y_embedder.mlp.2", h, h)
    lin(s, "context_embedder", h, context)
    for i in range(depth):
        for side in ("context_block", "x_block"):
            b = f"joint_blocks.{i}.{side}"
            pre_only = side == "context_block" and i == depth - 1
            second = side == "x_block" and i < attn2
            lin(s, f"{b}.adaLN_modulation.1", (9 if second else 2 if pre_only else 6) * h, h)
            for attn in ("attn", "attn2") if second else ("attn",):
                lin(s, f"{b}.{attn}.qkv", 3 * h, h)
                if not (pre_only and attn == "attn"):
                    lin(s, f"{b}.{attn}.proj", h, h)
                if qk_norm:
                    norm(s, f"{b}.{attn}.ln_q", head, bias=False)
                    norm(s, f"{b}.{attn}.ln_k", head, bias=False)
            if not pre_only:
                lin(s, f"{b}.mlp.fc1", 4 * h, h)
                lin(s, f"{b}.mlp.fc2", h, 4 * h)
    lin(s, "final_layer.linear", p * p * ch, h)
    lin(s, "final_layer.adaLN_modulation.1", 2 * h, h)
    return s


def clip_specs(width, layers, mlp, projection=0):
    s = [("text_model.embeddings.token_embedding.weight", (49408, width), "w"),
         ("text_model.embeddings.position_embedding.weight", (77, width), "w")]
    for i in range(layers):
        b = f"text_model.encoder.layers.{i}"
        for proj in ("q_proj", "k_proj", "v_proj", "out_proj"):
            lin(s, f"{b}.self_attn.{proj}", width, width)
        norm(s, f"{b}.layer_norm1", width)
        norm(s, f"{b}.layer_norm2", width)
        lin(s, f"{b}.mlp.fc1", mlp, width)
        lin(s, f"{b}.mlp.fc2", width, mlp)
    norm(s, "text_model.final_layer_norm", width)
    if projection:
        s.append(("text_projection.weight", (projection, width), "w"))
    return s


def t5_specs(dim, layers, ff, vocab):
    s = [("shared.weight", (vocab, dim), "w")]
    for i in range(layers):
        b = f"encoder.block.{i}.layer"
        for proj in ("q", "k", "v", "o"):
            s.append((f"{b}.0.SelfAttention.{proj}.weight", (dim, dim), "w"))
        if i == 0:
            s.append((f"{b}.0.SelfAttention.relative_attention_bias.weight", (32, dim // HEAD), "w"))
        norm(s, f"{b}.0.layer_norm", dim, bias=False)
        for wi in ("wi_0", "wi_1"):
            s.append((f"{b}.1.DenseReluDense.{wi}.weight", (ff, dim), "w"))
        s.append((f"{b}.1.DenseReluDense.wo.weight", (dim, ff), "w"))
        norm(s, f"{b}.1.layer_norm", dim, bias=False)
    norm(s, "encoder.final_layer_norm", dim, bias=False)
    return s


def vae_resnet(s, name, c_in, c_out):
    norm(s, f"{name}.norm1", c_in)
    conv(s, f"{name}.conv1", c_out, c_in, 3)
    norm(s, f"{name}.norm2", c_out)
    conv(s, f"{name}.conv2", c_out, c_out, 3)
    if c_in != c_out:
        conv(s, f"{name}.nin_shortcut", c_out, c_in, 1)


def vae_attn(s, name, c):
    norm(s, f"{name}.norm", c)
    for p in ("q", "k", "v", "proj_out"):
        conv(s, f"{name}.{p}", c, c, 1)


def vae_specs(z=16, ch=128, mult=(1, 2, 4, 4), n_res=2):
    s = []
    conv(s, "encoder.conv_in", ch, 3, 3)
    c = ch
    for i, m in enumerate(mult):
        for j in range(n_res):
            vae_resnet(s, f"encoder.down.{i}.block.{j}", c, ch * m)
            c = ch * m
        if i != len(mult) - 1:
            conv(s, f"encoder.down.{i}.downsample.conv", c, c, 3)
    vae_resnet(s, "encoder.mid.block_1", c, c)
    vae_attn(s, "encoder.mid.attn_1", c)
    vae_resnet(s, "encoder.mid.block_2", c, c)
    norm(s, "encoder.norm_out", c)
    conv(s, "encoder.conv_out", 2 * z, c, 3)
    conv(s, "decoder.conv_in", c, z, 3)
    vae_resnet(s, "decoder.mid.block_1", c, c)
    vae_attn(s, "decoder.mid.attn_1", c)
    vae_resnet(s, "decoder.mid.block_2", c, c)
    for i in reversed(range(len(mult))):
        for j in range(n_res + 1):
            vae_resnet(s, f"decoder.up.{i}.block.{j}", c, ch * mult[i])
            c = ch * mult[i]
        if i != 0:
            conv(s, f"decoder.up.{i}.upsample.conv", c, c, 3)
    norm(s, "decoder.norm_out", c)
    conv(s, "decoder.conv_out", 3, c, 3)
    return s


def values(name, shape, kind, seed, std):
    rng = np.random.default_rng([zlib.crc32(name.encode()), seed])
    v = rng.standard_normal(int(np.prod(shape)), dtype=np.float32)
    if kind == "n":
        return 1.0 + 0.1 * v
    return std * v


def write_safetensors(path, specs, dtype, seed, std, metadata):
    """Writes tensors one at a time, so memory stays at one tensor however large the file."""
    np_dtype, st_dtype = (np.float16, "F16") if dtype == "f16" else (np.float32, "F32")
    size = np.dtype(np_dtype).itemsize
    header, offset = {"__metadata__": metadata}, 0
    for name, shape, _ in specs:
        n = int(np.prod(shape)) * size
        header[name] = {"dtype": st_dtype, "shape": list(shape), "data_offsets": [offset, offset + n]}
        offset += n
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(raw)))
        f.write(raw)
        for name, shape, kind in specs:
            # The key of a tensor's values is its name in the single file, whatever file it
            # lands in, so --split writes the same numbers.
            key = metadata.get("root", "") + name
            f.write(values(key, shape, kind, seed, std).astype(np_dtype).tobytes())
    return offset


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="output file, or folder with --split")
    ap.add_argument("--variant", choices=("sd3", "sd3.5m", "sd3.5l"), default="sd3")
    ap.add_argument("--depth", type=int, default=24, help="joint blocks (and heads)")
    ap.add_argument("--hidden", type=int, default=192, help="a multiple of --depth")
    ap.add_argument("--attn2", type=int, default=None,
                    help="x_block.attn2 in blocks 0..N-1 (sd3.5m default: depth - 1)")
    ap.add_argument("--pos-max", type=int, default=32, help="position table side (patches)")
    ap.add_argument("--no-t5", action="store_true", help="leave T5-XXL out")
    ap.add_argument("--t5-layers", type=int, default=1)
    ap.add_argument("--t5-ff", type=int, default=512)
    ap.add_argument("--t5-vocab", type=int, default=8000)
    ap.add_argument("--clip-g-layers", type=int, default=32, help="32: full size")
    ap.add_argument("--clip-l-layers", type=int, default=12, help="12: full size")
    ap.add_argument("--split", action="store_true", help="one file per part")
    ap.add_argument("--parts", default="diffusion,vae,clip_l,clip_g,t5xxl",
                    help="with --split: the parts to write (comma-separated)")
    ap.add_argument("--dtype", choices=("f16", "f32"), default="f16")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--std", type=float, default=0.02)
    a = ap.parse_args(argv)
    if a.hidden % a.depth:
        ap.error("--hidden must be a multiple of --depth (one head per block)")
    qk_norm = a.variant != "sd3"
    attn2 = a.attn2 if a.attn2 is not None else (a.depth - 1 if a.variant == "sd3.5m" else 0)
    parts = [
        ("diffusion", "model.diffusion_model.",
         mmdit_specs(a.depth, a.hidden, a.pos_max, qk_norm, attn2)),
        ("vae", "first_stage_model.", vae_specs()),
        ("clip_l", "text_encoders.clip_l.transformer.", clip_specs(768, a.clip_l_layers, 3072)),
        ("clip_g", "text_encoders.clip_g.transformer.",
         clip_specs(1280, a.clip_g_layers, 5120, projection=1280)),
    ]
    if not a.no_t5:
        parts.append(("t5xxl", "text_encoders.t5xxl.transformer.",
                      t5_specs(4096, a.t5_layers, a.t5_ff, a.t5_vocab)))
    meta = {"format": "pt", "generator": "make_random_sd3.py", "variant": a.variant,
            "seed": str(a.seed), "std": str(a.std), "dtype": a.dtype}
    if a.split:
        os.makedirs(a.out, exist_ok=True)
        for part, root, specs in parts:
            if part not in a.parts.split(","):
                continue
            path = os.path.join(a.out, part + ".safetensors")
            n = write_safetensors(path, specs, a.dtype, a.seed, a.std, dict(meta, root=root))
            print(f"wrote {path}: {len(specs)} tensors, {n / 2**20:.1f} MiB")
        return 0
    specs = [(root + name, shape, kind) for _, root, part in parts for name, shape, kind in part]
    n = write_safetensors(a.out, specs, a.dtype, a.seed, a.std, meta)
    print(f"wrote {a.out}: {len(specs)} tensors, {n / 2**20:.1f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
