#!/usr/bin/env python3
"""Write a random-weight Wan 2.1 text-to-video model as the three files it runs from.

Files (names and layouts of the released ones, as Comfy-Org's Wan_2.1_ComfyUI_repackaged
splits them; every size defaults to the released 1.3B model's, because stable-diffusion.cpp
fixes almost all of them; the options make small files for readers that take the sizes
from the files):

* ``<out>/wan.safetensors``  the diffusion transformer, ComfyUI (original Wan) names
  without a prefix, as ``wan2.1_t2v_1.3B_fp16.safetensors``: ``patch_embedding`` (3D
  convolution, weight [dim, 16, 1, 2, 2]: 16 latent channels, 1x2x2 patches),
  ``text_embedding.{0,2}`` [dim, text width] and [dim, dim] (GELU between),
  ``time_embedding.{0,2}`` [dim, 256] and [dim, dim], ``time_projection.1`` [6 dim, dim],
  ``blocks.N.modulation`` [1, 6, dim], ``blocks.N.{self_attn,cross_attn}.{q,k,v,o}``
  [dim, dim] with ``.{norm_q,norm_k}`` [dim] (RMSNorm over the whole width),
  ``blocks.N.norm3`` (the LayerNorm before the cross-attention, weight and bias [dim];
  norm1 and norm2 have no parameters), ``blocks.N.ffn.{0,2}`` [ffn, dim] and [dim, ffn],
  ``head.modulation`` [1, 2, dim] and ``head.head`` [64, dim] (16 channels x 1x2x2). Every
  Linear has a bias; heads are 128 wide. stable-diffusion.cpp reads only the block count
  from the file and fixes the widths by it: 30 blocks are the 1.3B model (dim 1536, 12
  heads, ffn 8960), 40 the 14B one (5120, 40 heads, 13824), any other count gets widths no
  release has; the text width is 4096 either way. Hence the defaults: 30 blocks at the 1.3B
  widths. ``--dim`` / ``--ffn`` / ``--layers`` make small files for readers that take them
  from the file (the width from patch_embedding, heads = width / 128, ffn from ffn.0, the
  blocks by counting); the text width is ``--t5-dim``.
* ``<out>/umt5.safetensors``  umT5-XXL's encoder, Hugging Face T5 names as
  ``umt5_xxl_fp16.safetensors``: ``shared`` [vocab, d_model],
  ``encoder.block.N.layer.0.{layer_norm, SelfAttention.{q,k,v,o}}``,
  ``encoder.block.N.layer.0.SelfAttention.relative_attention_bias`` [32 buckets, heads] in
  every block (umT5; T5 v1.1 has it in block 0 only), ``encoder.block.N.layer.1.{layer_norm,
  DenseReluDense.{wi_0,wi_1,wo}}``, ``encoder.final_layer_norm``; no biases, heads 64 wide
  (q/k/v [64 heads, d_model]). Released and default: d_model 4096, 24 layers, ff 10240, 64
  heads, 256384 tokens (about 5.7 G values). stable-diffusion.cpp runs umT5 for every Wan
  model (it does not tell umT5 from the file) and reads d_model, the heads (q width / 64),
  ff and the layers from the file, but its transformer fixes the text width at 4096: for it
  keep ``--t5-dim 4096`` (``--t5-layers`` / ``--t5-ff`` / ``--t5-heads`` may be small).
  Keep the full vocabulary so that every umT5 token id works.
* ``<out>/wan_vae.safetensors``  the Wan 2.1 autoencoder as ``wan_2.1_vae.safetensors``,
  exactly as make_random_qwen_image.py writes it (random_model_parts.wan_vae_specs): base
  width 96, fixed in stable-diffusion.cpp; ``--vae-dim`` (even) for readers that take it
  from the file.

Weights: normal(0, 1/sqrt(fan_in)) for Linear and convolution weights, normal(0, 0.02) for
biases and 1 + normal(0, 0.1) for norm scales (norm3's bias normal(0, 0.02)); the modulation
tables normal(0, 1/sqrt(dim)), as Wan initialises them; umT5's token embedding and bias
tables normal(0, 1) and its q projections 8x weaker (T5 does not scale its attention
logits). As in make_random_qwen_image.py the video is made to depend on the prompt, not
mostly on the noise: ``patch_embedding`` is 5x weaker and the transformer's q/k norm scales
(self- and cross-attention) are 1.5 x (1 + normal(0, 0.1)). Each tensor has its own
generator seeded with (seed, crc32(name)): same seed, same bytes. umT5, the autoencoder and
the file writing are random_model_parts.py's (beside this script).

dtype: as released by default (transformer and umT5 f16, autoencoder bf16); ``--dtype``
writes all three in one type. Only numpy is needed; the safetensors format is written
directly. At the default sizes the files hold about 1.42 G (transformer), 5.68 G (umT5)
and 0.13 G (autoencoder) values.

Usage: make_random_wan.py --out DIR [--seed N] [--dtype f32|f16|bf16] [--dim 1536]
[--layers 30] [--ffn 8960] [--t5-dim 4096] [--t5-layers 24] [--t5-ff 10240]
[--t5-heads 64] [--t5-vocab 256384] [--vae-dim 96] [--list]
"""

import sys

import random_model_parts as rw
from random_model_parts import FREQ_DIM, linear, norm

PATCH = (1, 2, 2)          # frames, rows, columns
LATENT_CHANNELS = 16
UMT5_VOCAB = 256384

# Each spec is (name, shape, mean, std): the values are mean + std * normal(0, 1).


def dit_specs(dim, n_layers, ffn, text_dim):
    s = []
    patch_in = LATENT_CHANNELS * PATCH[0] * PATCH[1] * PATCH[2]
    # A weak patch embedding and sharper attention (q/k norm scales 1.5) make the video
    # depend on the prompt, not mostly on the noise.
    s.append(("patch_embedding.weight", (dim, LATENT_CHANNELS) + PATCH, 0.0,
              0.2 / patch_in ** 0.5))
    s.append(("patch_embedding.bias", (dim,), 0.0, 0.02))
    linear(s, "text_embedding.0", dim, text_dim, bias=True)
    linear(s, "text_embedding.2", dim, dim, bias=True)
    linear(s, "time_embedding.0", dim, FREQ_DIM, bias=True)
    linear(s, "time_embedding.2", dim, dim, bias=True)
    linear(s, "time_projection.1", 6 * dim, dim, bias=True)
    for i in range(n_layers):
        p = f"blocks.{i}"
        s.append((f"{p}.modulation", (1, 6, dim), 0.0, dim ** -0.5))
        for attn in ("self_attn", "cross_attn"):
            for proj in ("q", "k", "v", "o"):
                linear(s, f"{p}.{attn}.{proj}", dim, dim, bias=True)
            norm(s, f"{p}.{attn}.norm_q", dim, scale=1.5)
            norm(s, f"{p}.{attn}.norm_k", dim, scale=1.5)
        norm(s, f"{p}.norm3", dim)
        s.append((f"{p}.norm3.bias", (dim,), 0.0, 0.02))
        linear(s, f"{p}.ffn.0", ffn, dim, bias=True)
        linear(s, f"{p}.ffn.2", dim, ffn, bias=True)
    s.append(("head.modulation", (1, 2, dim), 0.0, dim ** -0.5))
    linear(s, "head.head", patch_in, dim, bias=True)
    return s


def main(argv=None):
    ap = rw.parser(__doc__, released="f16/f16/bf16", hidden=1536, hidden_flag="--dim",
                   hidden_help="transformer width, multiple of 128 (fixed by the block count "
                               "in stable-diffusion.cpp: 1536 for 30)")
    ap.add_argument("--layers", type=int, default=30,
                    help="transformer blocks (released 30: 1.3B, 40: 14B)")
    ap.add_argument("--ffn", type=int, default=8960,
                    help="transformer feed-forward width (released 8960: 1.3B)")
    ap.add_argument("--t5-dim", type=int, default=4096,
                    help="umT5 width = the transformer's text width (fixed 4096 in "
                         "stable-diffusion.cpp)")
    ap.add_argument("--t5-layers", type=int, default=24, help="umT5 layers (released 24)")
    ap.add_argument("--t5-ff", type=int, default=10240, help="umT5 MLP width (released 10240)")
    ap.add_argument("--t5-heads", type=int, default=64,
                    help="umT5 attention heads, 64 wide each (released 64)")
    ap.add_argument("--t5-vocab", type=int, default=UMT5_VOCAB,
                    help="umT5 vocabulary rows (released 256384; keep it for real token ids)")
    ap.add_argument("--vae-dim", type=int, default=96,
                    help="autoencoder base width, even (fixed 96 in stable-diffusion.cpp)")
    a = rw.parse_args(ap, argv)
    rw.check_hidden(ap, a.dim, "--dim")
    if min(a.layers, a.ffn, a.t5_dim, a.t5_layers, a.t5_ff, a.t5_heads, a.t5_vocab,
           a.vae_dim) <= 0:
        ap.error("sizes must be positive")
    if a.vae_dim % 2:
        ap.error("--vae-dim must be even (the decoder's upsamplers halve the width)")
    parts = {
        "wan": (dit_specs(a.dim, a.layers, a.ffn, a.t5_dim), "f16"),
        "umt5": (rw.t5_specs(a.t5_dim, a.t5_layers, a.t5_ff, a.t5_heads, a.t5_vocab,
                             bias_per_layer=True), "f16"),
        "wan_vae": (rw.wan_vae_specs(a.vae_dim, LATENT_CHANNELS), "bf16"),
    }
    return rw.write_parts(a, parts, "make_random_wan.py")


if __name__ == "__main__":
    sys.exit(main())
