#!/usr/bin/env python3
"""Write a random-weight Z-Image model (Turbo or Base) as the three files it runs from.

Files (names and layouts of the released ones; every dimension a reader takes from the
file is small, every dimension stable-diffusion.cpp fixes in code keeps its released size):

* ``<out>/z_image.safetensors``  the diffusion transformer, ComfyUI (Lumina2 / NextDiT)
  names without prefix, as ``z_image_turbo_bf16.safetensors``: ``x_embedder``,
  ``t_embedder.mlp.{0,2}``, ``cap_embedder.{0,1}`` (RMSNorm over the text features, then
  Linear), ``noise_refiner.N`` and ``layers.N`` (modulated), ``context_refiner.N`` (not
  modulated), each block ``attention.{qkv, out, q_norm, k_norm}``,
  ``feed_forward.{w1, w2, w3}``, ``attention_norm{1,2}``, ``ffn_norm{1,2}`` and, when
  modulated, ``adaLN_modulation.0``; ``final_layer.{linear, adaLN_modulation.1}``,
  ``x_pad_token`` and ``cap_pad_token`` ([1, hidden]). Head dim 128 (RoPE axes 32+48+48),
  patch 2, 16 latent channels, timestep MLP 256 -> min(hidden, 1024) -> 256, adaLN input
  min(hidden, 256), FFN width 256 * ceil(int(hidden * 8 / 3) / 256). Released: hidden 3840
  (30 heads), 30 layers, 2 refiner layers each, text features 2560; default here: hidden
  256 (2 heads), 2 layers, 1 refiner layer each, text features = the text model's width.
* ``<out>/qwen3.safetensors``    the Qwen3 text model, Hugging Face names as
  ``qwen_3_4b.safetensors``: ``model.embed_tokens``, ``model.layers.N.{input_layernorm,
  self_attn.{q,k,v,o}_proj, self_attn.{q,k}_norm, post_attention_layernorm,
  mlp.{gate,up,down}_proj}``, ``model.norm``; no biases, tied embeddings (no lm_head).
  Head dim 128, 32 query and 8 key/value heads (fixed in stable-diffusion.cpp for Qwen3
  unless there are 28 layers), the full 151936-row vocabulary so that every token id
  works. Released: hidden 2560, 36 layers, MLP 9728; default here: hidden 32, 36 layers,
  MLP 96. The layer count stays 36 because stable-diffusion.cpp takes Z-Image's text
  features from the output of layer 35 (hidden_states[35], the second to last of 36, before
  the final norm) by that fixed number; with fewer than 35 layers it silently uses the
  normed last layer instead.
* ``<out>/ae.safetensors``       FLUX.1's 16-channel autoencoder, LDM names, no quant convs
  (``encoder.*``, ``decoder.*``), channel multipliers 1,2,4,4, 2 res blocks. Released and
  default: width 128 (stable-diffusion.cpp fixes the encoder's width at 128 and loads it
  even for text-to-image); ``--ae-ch`` makes both halves narrower for readers that take
  the widths from the file.

Weights: the transformer and the text model use normal(0, 1/sqrt(fan_in)) for Linear
weights, normal(0, 0.02) for biases and 1 + normal(0, 0.1) for norm scales, so that every
block changes its input (modulation gates near +-0.5) while activations stay near unit
scale; the token embedding and cap_pad_token are normal(0, 1). The image then depends on
the prompt, not mostly on the noise: the patch embedding is 5x weaker (x_pad_token
normal(0, 0.2) to match) and the transformer's q/k norm scales are 1.5 x (1 + normal(0,
0.1)), for attention logits of std ~2.3. (Sharper attention makes the prompt matter more
but the image chaotic: at 2.5 x, rounding the weights to bf16 instead of f32 changed the
image as much as changing the prompt did; at 1.5 x it changes it about 8x less.)
The autoencoder uses normal(0, 0.02) weights, zero biases and unit norms, as
make_random_flux.py's (same seed and dtype: same values). Each tensor has its own
generator seeded with (seed, crc32(name)): same seed, same bytes.

dtype: as released by default (transformer and text model bf16, autoencoder f32);
``--dtype`` writes all three in one type. Only numpy is needed; the safetensors format is
written directly.

Usage: make_random_z_image.py --out DIR [--seed N] [--dtype f32|f16|bf16] [--hidden 256]
[--layers 2] [--refiner-layers 1] [--llm-hidden 32] [--llm-layers 36] [--llm-ff 96]
[--ae-ch 128] [--list]
"""

import argparse
import json
import os
import struct
import sys
import zlib

import numpy as np

HEAD_DIM = 128             # Z-Image and Qwen3: fixed by the RoPE axes 32+48+48 / in code
PATCH = 2
LATENT_CHANNELS = 16
ADALN_EMBED_DIM = 256      # stable-diffusion.cpp ZImage::ADALN_EMBED_DIM
FREQ_DIM = 256             # sinusoidal timestep embedding width
QWEN3_HEADS, QWEN3_KV_HEADS = 32, 8
QWEN3_VOCAB = 151936

# Each spec is (name, shape, mean, std): the values are mean + std * normal(0, 1).


def linear(s, name, n_out, n_in, bias=True, gain=1.0):
    s.append((f"{name}.weight", (n_out, n_in), 0.0, gain / np.sqrt(n_in)))
    if bias:
        s.append((f"{name}.bias", (n_out,), 0.0, 0.02))


def norm(s, name, n, scale=1.0):
    s.append((f"{name}.weight", (n,), scale, 0.1 * scale))


def ffn_width(hidden):
    # FeedForward(dim, hidden_dim=dim, multiple_of=256, ffn_dim_multiplier=8/3)
    h = int(8.0 / 3.0 * hidden)
    return 256 * ((h + 255) // 256)


def dit_specs(hidden, n_layers, n_refiner, cap_dim):
    s = []
    heads = hidden // HEAD_DIM
    ff = ffn_width(hidden)
    t_mid = min(hidden, 1024)
    adaln_in = min(hidden, ADALN_EMBED_DIM)
    # A weak patch embedding and sharper attention (q/k norm scales 1.5) make the image
    # depend on the prompt, not mostly on the noise.
    linear(s, "x_embedder", hidden, PATCH * PATCH * LATENT_CHANNELS, gain=0.2)
    linear(s, "t_embedder.mlp.0", t_mid, FREQ_DIM)
    linear(s, "t_embedder.mlp.2", ADALN_EMBED_DIM, t_mid)
    norm(s, "cap_embedder.0", cap_dim)
    linear(s, "cap_embedder.1", hidden, cap_dim)
    s.append(("x_pad_token", (1, hidden), 0.0, 0.2))
    s.append(("cap_pad_token", (1, hidden), 0.0, 1.0))

    def block(p, modulated):
        linear(s, f"{p}.attention.qkv", 3 * heads * HEAD_DIM, hidden, bias=False)
        linear(s, f"{p}.attention.out", hidden, heads * HEAD_DIM, bias=False)
        norm(s, f"{p}.attention.q_norm", HEAD_DIM, scale=1.5)
        norm(s, f"{p}.attention.k_norm", HEAD_DIM, scale=1.5)
        linear(s, f"{p}.feed_forward.w1", ff, hidden, bias=False)
        linear(s, f"{p}.feed_forward.w2", hidden, ff, bias=False)
        linear(s, f"{p}.feed_forward.w3", ff, hidden, bias=False)
        for n in ("attention_norm1", "attention_norm2", "ffn_norm1", "ffn_norm2"):
            norm(s, f"{p}.{n}", hidden)
        if modulated:
            linear(s, f"{p}.adaLN_modulation.0", 4 * hidden, adaln_in)

    for i in range(n_refiner):
        block(f"noise_refiner.{i}", True)
        block(f"context_refiner.{i}", False)
    for i in range(n_layers):
        block(f"layers.{i}", True)
    linear(s, "final_layer.linear", PATCH * PATCH * LATENT_CHANNELS, hidden)
    linear(s, "final_layer.adaLN_modulation.1", hidden, adaln_in)
    return s


def qwen3_specs(hidden, n_layers, ff):
    s = [("model.embed_tokens.weight", (QWEN3_VOCAB, hidden), 0.0, 1.0)]
    q, kv = QWEN3_HEADS * HEAD_DIM, QWEN3_KV_HEADS * HEAD_DIM
    for i in range(n_layers):
        p = f"model.layers.{i}"
        norm(s, f"{p}.input_layernorm", hidden)
        linear(s, f"{p}.self_attn.q_proj", q, hidden, bias=False)
        linear(s, f"{p}.self_attn.k_proj", kv, hidden, bias=False)
        linear(s, f"{p}.self_attn.v_proj", kv, hidden, bias=False)
        linear(s, f"{p}.self_attn.o_proj", hidden, q, bias=False)
        norm(s, f"{p}.self_attn.q_norm", HEAD_DIM)
        norm(s, f"{p}.self_attn.k_norm", HEAD_DIM)
        norm(s, f"{p}.post_attention_layernorm", hidden)
        linear(s, f"{p}.mlp.gate_proj", ff, hidden, bias=False)
        linear(s, f"{p}.mlp.up_proj", ff, hidden, bias=False)
        linear(s, f"{p}.mlp.down_proj", hidden, ff, bias=False)
    norm(s, "model.norm", hidden)
    return s


def ae_specs(ch, z=LATENT_CHANNELS, mult=(1, 2, 4, 4), n_res=2, std=0.02):
    s = []

    def conv(name, n_out, n_in, k):
        s.append((f"{name}.weight", (n_out, n_in, k, k), 0.0, std))
        s.append((f"{name}.bias", (n_out,), 0.0, 0.0))

    def gnorm(name, n):
        s.append((f"{name}.weight", (n,), 1.0, 0.0))
        s.append((f"{name}.bias", (n,), 0.0, 0.0))

    def resnet(name, c_in, c_out):
        gnorm(f"{name}.norm1", c_in)
        conv(f"{name}.conv1", c_out, c_in, 3)
        gnorm(f"{name}.norm2", c_out)
        conv(f"{name}.conv2", c_out, c_out, 3)
        if c_in != c_out:
            conv(f"{name}.nin_shortcut", c_out, c_in, 1)

    def attn(name, c):
        gnorm(f"{name}.norm", c)
        for proj in ("q", "k", "v", "proj_out"):
            conv(f"{name}.{proj}", c, c, 1)

    conv("encoder.conv_in", ch, 3, 3)
    c = ch
    for i, m in enumerate(mult):
        for j in range(n_res):
            resnet(f"encoder.down.{i}.block.{j}", c, ch * m)
            c = ch * m
        if i != len(mult) - 1:
            conv(f"encoder.down.{i}.downsample.conv", c, c, 3)
    resnet("encoder.mid.block_1", c, c)
    attn("encoder.mid.attn_1", c)
    resnet("encoder.mid.block_2", c, c)
    gnorm("encoder.norm_out", c)
    conv("encoder.conv_out", 2 * z, c, 3)
    conv("decoder.conv_in", c, z, 3)
    resnet("decoder.mid.block_1", c, c)
    attn("decoder.mid.attn_1", c)
    resnet("decoder.mid.block_2", c, c)
    for i in reversed(range(len(mult))):
        for j in range(n_res + 1):
            resnet(f"decoder.up.{i}.block.{j}", c, ch * mult[i])
            c = ch * mult[i]
        if i != 0:
            conv(f"decoder.up.{i}.upsample.conv", c, c, 3)
    gnorm("decoder.norm_out", c)
    conv("decoder.conv_out", 3, c, 3)
    return s


# ---------------------------------- values & writing ----------------------------------

DTYPES = {"f32": ("F32", 4), "f16": ("F16", 2), "bf16": ("BF16", 2)}


def values(name, shape, mean, std, seed):
    """float32 values of one tensor; depends only on (seed, name, shape, mean, std)."""
    if std == 0.0:
        return np.full(shape, mean, dtype=np.float32)
    rng = np.random.default_rng([seed, zlib.crc32(name.encode("utf-8"))])
    x = rng.standard_normal(size=shape, dtype=np.float32) * np.float32(std)
    return x + np.float32(mean)


def encode(x, dtype):
    if dtype == "f32":
        return x.astype("<f4").tobytes()
    if dtype == "f16":
        return x.astype("<f2").tobytes()
    # bf16: round to nearest even on the upper 16 bits of the float32 pattern
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    u = (u + np.uint32(0x7FFF) + ((u >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)
    return u.astype("<u2").tobytes()


def write_safetensors(path, specs, dtype, seed, metadata):
    specs = sorted(specs, key=lambda t: t[0])
    names = [t[0] for t in specs]
    assert len(names) == len(set(names)), "duplicate tensor names"
    st_dtype, size = DTYPES[dtype]
    header, offset = {"__metadata__": metadata}, 0
    for name, shape, _, _ in specs:
        n = int(np.prod(shape)) * size
        header[name] = {"dtype": st_dtype, "shape": list(shape),
                        "data_offsets": [offset, offset + n]}
        offset += n
    head = json.dumps(header, separators=(",", ":")).encode("utf-8")
    head += b" " * (-len(head) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(head)))
        f.write(head)
        for name, shape, mean, std in specs:
            f.write(encode(values(name, shape, mean, std, seed), dtype))
    os.replace(tmp, path)
    return offset


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="output folder")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--dtype", choices=sorted(DTYPES),
                    help="one type for all three files (default: as released, bf16/bf16/f32)")
    ap.add_argument("--hidden", type=int, default=256, help="transformer width, multiple of 128")
    ap.add_argument("--layers", type=int, default=2, help="main transformer layers")
    ap.add_argument("--refiner-layers", type=int, default=1,
                    help="noise and context refiner layers each")
    ap.add_argument("--llm-hidden", type=int, default=32,
                    help="Qwen3 width (= the text feature width)")
    ap.add_argument("--llm-layers", type=int, default=36,
                    help="Qwen3 layers; 36 as released, so that layer 35 is the second to last")
    ap.add_argument("--llm-ff", type=int, default=96, help="Qwen3 MLP width")
    ap.add_argument("--ae-ch", type=int, default=128, help="autoencoder width, multiple of 32")
    ap.add_argument("--list", action="store_true", help="print names and shapes, write nothing")
    a = ap.parse_args(argv)
    if a.hidden % HEAD_DIM or a.hidden <= 0:
        ap.error("--hidden must be a positive multiple of 128")
    if a.ae_ch % 32 or a.ae_ch <= 0:
        ap.error("--ae-ch must be a positive multiple of 32 (GroupNorm of 32 groups)")
    if min(a.layers, a.refiner_layers, a.llm_hidden, a.llm_layers, a.llm_ff) <= 0:
        ap.error("sizes must be positive")
    if a.llm_layers == 28:
        ap.error("--llm-layers 28 makes stable-diffusion.cpp assume 16 query heads")
    parts = {
        "z_image": (dit_specs(a.hidden, a.layers, a.refiner_layers, a.llm_hidden), "bf16"),
        "qwen3": (qwen3_specs(a.llm_hidden, a.llm_layers, a.llm_ff), "bf16"),
        "ae": (ae_specs(a.ae_ch), "f32"),
    }
    if a.list:
        for name, (specs, _) in parts.items():
            for t in sorted(specs, key=lambda t: t[0]):
                print(f"{name}: {t[0]} {list(t[1])}")
        return 0
    os.makedirs(a.out, exist_ok=True)
    for name, (specs, released) in parts.items():
        dtype = a.dtype or released
        meta = {"format": "pt", "generator": "make_random_z_image.py", "seed": str(a.seed),
                "dtype": dtype, "part": name}
        path = os.path.join(a.out, name + ".safetensors")
        n = write_safetensors(path, specs, dtype, a.seed, meta)
        print(f"wrote {path}: {len(specs)} tensors, {n / 2**20:.1f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
