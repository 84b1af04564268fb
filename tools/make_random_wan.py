#!/usr/bin/env python3
"""Write a random-weight Wan 2.1 model (text to video, or image to video with --variant) as
the files it runs from.

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

Image to video (``--variant``): ``i2v`` is Wan 2.1 I2V (``wan2.1_i2v_480p_14B``'s layout at
these sizes): ``patch_embedding`` reads 36 channels (the 16 latent ones, a 4-channel mask,
the conditioning clip's 16), ``img_emb.proj.{0,4}`` (LayerNorms [1280] and [dim], weight and
bias) around ``img_emb.proj.{1,3}`` [1280, 1280] and [dim, 1280], and each block's
cross-attention gains ``k_img``, ``v_img`` [dim, dim] and ``norm_k_img`` [dim]; it also writes
``<out>/clip_vision.safetensors``, CLIP ViT-H/14's vision tower in Hugging Face names as
``clip_vision_h.safetensors``: ``vision_model.embeddings.{class_embedding [w],
patch_embedding.weight [w, 3, 14, 14], position_embedding.weight [257, w]}``,
``vision_model.pre_layrnorm``, ``vision_model.encoder.layers.N.{layer_norm1, layer_norm2,
self_attn.{q,k,v,out}_proj, mlp.fc1 [ff, w], mlp.fc2 [w, ff]}`` (all with biases),
``vision_model.post_layernorm`` and ``visual_projection.weight`` [1024, w]. Released and
default: w 1280, 32 layers, ff 5120 (stable-diffusion.cpp fixes them and img_emb's 1280;
``--clip-dim`` / ``--clip-layers`` / ``--clip-ff`` make small towers for readers that take
them from the file, 16 heads each). ``flf2v`` adds ``img_emb.emb_pos`` [1, 514, w] (the first
and last frames' tokens); ``i2v-2.2`` is Wan 2.2 I2V's layout: 36 input channels, no image
attention, no CLIP vision file.

Wan 2.2 TI2V-5B (``--variant ti2v``): ``<out>/wan.gguf`` is the 5B transformer's layout
(48 latent channels in and out, stable-diffusion.cpp fixes dim 3072, 30 blocks, ffn 14336,
and knows the model by its patch embedding's 48 x 3072 channels) with every block, the text
embedding and the time projection zero, stored as q4_0 blocks of zeros left as holes in the
file (no disk space, no writing time; 2.8 GB as the readers map it). The blocks then add
nothing, so the transformer is its patch embedding, the time embedding and the modulated
head: a velocity that depends on the latent and the timestep (per frame where frames differ)
but not on the prompt. Those tensors are f32 and random. ``<out>/wan_vae.safetensors`` is
Wan 2.2's autoencoder (random_model_parts.wan22_vae_specs; widths 160 and 256 and 48
latent channels, fixed in stable-diffusion.cpp; about 0.7 G values). umT5 as for t2v.

Wan 2.1 VACE (``--variant vace``): ``<out>/wan.gguf`` is the T2V transformer plus
``vace_patch_embedding`` (weight [dim, 96, 1, 2, 2]: the control video's two 16-channel
latents and the 64-value mask of a latent pixel) and ``--vace-layers`` VACE blocks
``vace_blocks.N`` (a block's tensors, ``after_proj`` [dim, dim] and, in block 0,
``before_proj`` [dim, dim], with biases), as ``Wan2.1_VACE_1.3B``'s layout, in
``<out>/wan.safetensors``. With ``--zero-blocks`` it is ``<out>/wan.gguf`` instead, its main
blocks zero (q4_0 holes, as TI2V's) and the rest f32, so the velocity comes through the patch
embedding, the VACE blocks' hints and the head: a test model of the VACE path that costs no
disk space. umT5 and the autoencoder as for t2v.

TAEHV (``<out>/taehv.safetensors``, every variant): the tiny video autoencoder for the
variant's latents as madebyollin's ``taew2_1.safetensors`` (16 channels) or
``taew2_2.safetensors`` (ti2v: 48 channels, 2x2 pixel patches) stores it, PyTorch
Sequential names: ``decoder.1`` (conv, latent -> 256), per level L = 0, 1, 2 three memory
blocks ``decoder.{3,4,5}+6L.conv.{0,2,4}`` (3x3 with bias, conv.0 reading 2 w channels), a
TGrow ``decoder.7+6L.conv`` (1x1 to w x frames: 1, 2, 2) and ``decoder.8+6L`` (3x3, no bias;
widths 256, 128, 64, 64), the output conv ``decoder.22`` (-> 3 patch^2); ``encoder.0`` (3
patch^2 -> 64), per level a TPool ``encoder.2+5L.conv`` (1x1 from 64 x frames: 2, 2, 1), a
stride-2 ``encoder.3+5L`` (no bias) and three memory blocks, then ``encoder.17`` (-> latent).
The output conv's bias is 0.5 and its weights 20x weaker (frames around mid-grey, mostly
in range, so that comparisons see the values, not the clipping).

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
[--t5-heads 64] [--t5-vocab 256384] [--vae-dim 96]
[--variant t2v|i2v|flf2v|i2v-2.2|ti2v|vace] [--vace-layers 15] [--zero-blocks]
[--clip-dim 1280] [--clip-layers 32] [--clip-ff 5120] [--parts wan,umt5,taehv,...] [--list]
"""

import os
import sys

import numpy as np

import random_model_parts as rw
from gguf_writer import write_gguf
from random_model_parts import FREQ_DIM, linear, norm

PATCH = (1, 2, 2)          # frames, rows, columns
LATENT_CHANNELS = 16
TI2V_LATENT_CHANNELS = 48  # Wan 2.2's autoencoder
TI2V_DIM, TI2V_LAYERS, TI2V_FFN = 3072, 30, 14336
# The tensors a TI2V test transformer holds as zeros (see the docstring).
TI2V_ZERO = ("blocks.", "text_embedding.", "time_projection.")
MASK_CHANNELS = 4          # image to video: the given frames, 4 video frames per latent one
# VACE's context: the control video's two latents and the mask of a latent pixel's 8 x 8.
VACE_CONTEXT_CHANNELS = 2 * LATENT_CHANNELS + 64
# The blocks a VACE test transformer holds as zeros (see the docstring).
VACE_ZERO = ("blocks.",)
CLIP_PATCH = 14
CLIP_POSITIONS = 257       # 16 x 16 patches of 224 pixels and the class token
CLIP_PROJECTION = 1024
UMT5_VOCAB = 256384

# Each spec is (name, shape, mean, std): the values are mean + std * normal(0, 1).


def block_specs(s, p, dim, ffn, image_attention=False):
    """One transformer block under prefix p (also a VACE block's, which adds projections)."""
    s.append((f"{p}.modulation", (1, 6, dim), 0.0, dim ** -0.5))
    for attn in ("self_attn", "cross_attn"):
        for proj in ("q", "k", "v", "o"):
            linear(s, f"{p}.{attn}.{proj}", dim, dim, bias=True)
        norm(s, f"{p}.{attn}.norm_q", dim, scale=1.5)
        norm(s, f"{p}.{attn}.norm_k", dim, scale=1.5)
    if image_attention:
        linear(s, f"{p}.cross_attn.k_img", dim, dim, bias=True)
        linear(s, f"{p}.cross_attn.v_img", dim, dim, bias=True)
        norm(s, f"{p}.cross_attn.norm_k_img", dim, scale=1.5)
    norm(s, f"{p}.norm3", dim)
    s.append((f"{p}.norm3.bias", (dim,), 0.0, 0.02))
    linear(s, f"{p}.ffn.0", ffn, dim, bias=True)
    linear(s, f"{p}.ffn.2", dim, ffn, bias=True)


def dit_specs(dim, n_layers, ffn, text_dim, variant="t2v", clip_dim=1280, vace_layers=0):
    s = []
    latent = TI2V_LATENT_CHANNELS if variant == "ti2v" else LATENT_CHANNELS
    patch_out = latent * PATCH[0] * PATCH[1] * PATCH[2]
    in_channels = latent if variant in ("t2v", "ti2v", "vace") else 2 * latent + MASK_CHANNELS
    patch_in = in_channels * PATCH[0] * PATCH[1] * PATCH[2]
    image_attention = variant in ("i2v", "flf2v")
    # A weak patch embedding and sharper attention (q/k norm scales 1.5) make the video
    # depend on the prompt, not mostly on the noise.
    s.append(("patch_embedding.weight", (dim, in_channels) + PATCH, 0.0,
              0.2 / patch_in ** 0.5))
    s.append(("patch_embedding.bias", (dim,), 0.0, 0.02))
    linear(s, "text_embedding.0", dim, text_dim, bias=True)
    linear(s, "text_embedding.2", dim, dim, bias=True)
    linear(s, "time_embedding.0", dim, FREQ_DIM, bias=True)
    linear(s, "time_embedding.2", dim, dim, bias=True)
    linear(s, "time_projection.1", 6 * dim, dim, bias=True)
    for i in range(n_layers):
        block_specs(s, f"blocks.{i}", dim, ffn, image_attention)
    s.append(("head.modulation", (1, 2, dim), 0.0, dim ** -0.5))
    linear(s, "head.head", patch_out, dim, bias=True)
    if image_attention:
        layer_norm(s, "img_emb.proj.0", clip_dim)
        linear(s, "img_emb.proj.1", clip_dim, clip_dim, bias=True)
        linear(s, "img_emb.proj.3", dim, clip_dim, bias=True)
        layer_norm(s, "img_emb.proj.4", dim)
        if variant == "flf2v":
            s.append(("img_emb.emb_pos", (1, 2 * CLIP_POSITIONS, clip_dim), 0.0, 0.02))
    if variant == "vace":
        vace_in = VACE_CONTEXT_CHANNELS * PATCH[0] * PATCH[1] * PATCH[2]
        s.append(("vace_patch_embedding.weight", (dim, VACE_CONTEXT_CHANNELS) + PATCH, 0.0,
                  0.2 / vace_in ** 0.5))
        s.append(("vace_patch_embedding.bias", (dim,), 0.0, 0.02))
        for i in range(vace_layers):
            p = f"vace_blocks.{i}"
            block_specs(s, p, dim, ffn)
            if i == 0:
                linear(s, f"{p}.before_proj", dim, dim, bias=True)
            linear(s, f"{p}.after_proj", dim, dim, bias=True)
    return s


def write_zero_block_dit(a, specs, zero, name):
    """The transformer as wan.gguf, its `zero` tensors zero (q4_0 holes where they fill q4_0
    blocks, else f32), the rest random f32. 5-d kernels (the patch embeddings) are stored as
    ggml keeps them, [dim * C, 1, 2, 2]."""
    tensors = []
    for tname, shape, mean, std in sorted(specs, key=lambda t: t[0]):
        if tname.startswith(zero):
            if len(shape) >= 2 and shape[-1] % 32 == 0:
                tensors.append((tname, shape, "zero_q4_0"))
            else:
                tensors.append((tname, np.zeros(shape, np.float32), "f32"))
            continue
        x = rw.values(tname, shape, mean, std, a.seed)
        if len(shape) == 5:
            x = x.reshape((shape[0] * shape[1],) + tuple(shape[2:]))
        tensors.append((tname, x, "f32"))
    os.makedirs(a.out, exist_ok=True)
    path = os.path.join(a.out, "wan.gguf")
    n = write_gguf(path, {"general.architecture": "wan", "general.name": name}, tensors)
    print(f"wrote {path}: {len(tensors)} tensors, {n / 2**20:.1f} MiB (mostly holes)")


def layer_norm(s, name, n):
    norm(s, name, n)
    s.append((f"{name}.bias", (n,), 0.0, 0.02))


TAEHV_DECODER_WIDTHS = (256, 128, 64, 64)
TAEHV_TIME_UP = (1, 2, 2)
TAEHV_ENCODER_WIDTH = 64
TAEHV_TIME_DOWN = (2, 2, 1)
TAEHV_BLOCKS = 3
TAEHV_OUT_GAIN = 0.05  # the random decoder's frames mostly within [0, 1]


def taehv_specs(z, patch):
    """TAEHV's decoder and encoder (see the docstring) for z latent channels."""
    s = []

    def conv(name, n_out, n_in, k, bias=True, bias_mean=0.0, gain=1.0):
        s.append((f"{name}.weight", (n_out, n_in, k, k), 0.0, gain * (n_in * k * k) ** -0.5))
        if bias:
            s.append((f"{name}.bias", (n_out,), bias_mean, 0.02))

    def mem_block(name, w):
        conv(f"{name}.conv.0", w, 2 * w, 3)
        conv(f"{name}.conv.2", w, w, 3)
        conv(f"{name}.conv.4", w, w, 3)

    widths = TAEHV_DECODER_WIDTHS
    conv("decoder.1", widths[0], z, 3)
    for level in range(3):
        w = widths[level]
        for b in range(TAEHV_BLOCKS):
            mem_block(f"decoder.{3 + 6 * level + b}", w)
        conv(f"decoder.{7 + 6 * level}.conv", w * TAEHV_TIME_UP[level], w, 1, bias=False)
        conv(f"decoder.{8 + 6 * level}", widths[level + 1], w, 3, bias=False)
    conv("decoder.22", 3 * patch * patch, widths[3], 3, bias_mean=0.5, gain=TAEHV_OUT_GAIN)
    w = TAEHV_ENCODER_WIDTH
    conv("encoder.0", w, 3 * patch * patch, 3)
    for level in range(3):
        conv(f"encoder.{2 + 5 * level}.conv", w, w * TAEHV_TIME_DOWN[level], 1, bias=False)
        conv(f"encoder.{3 + 5 * level}", w, w, 3, bias=False)
        for b in range(TAEHV_BLOCKS):
            mem_block(f"encoder.{4 + 5 * level + b}", w)
    conv("encoder.17", z, w, 3)
    return s


def clip_vision_specs(width, n_layers, ff):
    """CLIP's vision tower in Hugging Face names (clip_vision_h.safetensors)."""
    s = []
    v = "vision_model"
    s.append((f"{v}.embeddings.class_embedding", (width,), 0.0, 1.0))
    s.append((f"{v}.embeddings.patch_embedding.weight", (width, 3, CLIP_PATCH, CLIP_PATCH), 0.0,
              1.0 / (3 * CLIP_PATCH * CLIP_PATCH) ** 0.5))
    s.append((f"{v}.embeddings.position_embedding.weight", (CLIP_POSITIONS, width), 0.0, 0.1))
    layer_norm(s, f"{v}.pre_layrnorm", width)
    for i in range(n_layers):
        p = f"{v}.encoder.layers.{i}"
        layer_norm(s, f"{p}.layer_norm1", width)
        for proj in ("q", "k", "v", "out"):
            linear(s, f"{p}.self_attn.{proj}_proj", width, width, bias=True)
        layer_norm(s, f"{p}.layer_norm2", width)
        linear(s, f"{p}.mlp.fc1", ff, width, bias=True)
        linear(s, f"{p}.mlp.fc2", width, ff, bias=True)
    layer_norm(s, f"{v}.post_layernorm", width)
    linear(s, "visual_projection", CLIP_PROJECTION, width)
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
    ap.add_argument("--variant", choices=("t2v", "i2v", "flf2v", "i2v-2.2", "ti2v", "vace"),
                    default="t2v",
                    help="t2v (Wan 2.1 T2V), i2v (Wan 2.1 I2V, with clip_vision), flf2v "
                         "(Wan 2.1 FLF2V, with clip_vision), i2v-2.2 (Wan 2.2 I2V), ti2v (Wan "
                         "2.2 TI2V-5B: wan.gguf and Wan 2.2's autoencoder), vace (Wan 2.1 "
                         "VACE)")
    ap.add_argument("--vace-layers", type=int, default=15,
                    help="VACE blocks of --variant vace (released 15 for the 1.3B model)")
    ap.add_argument("--zero-blocks", action="store_true",
                    help="--variant vace: write wan.gguf with the main blocks zero (q4_0 holes)")
    ap.add_argument("--clip-dim", type=int, default=1280,
                    help="CLIP vision width, multiple of 16 (fixed 1280 in stable-diffusion.cpp)")
    ap.add_argument("--clip-layers", type=int, default=32, help="CLIP vision layers (32)")
    ap.add_argument("--clip-ff", type=int, default=5120, help="CLIP vision MLP width (5120)")
    rw.add_parts_arg(ap, ("wan", "umt5", "wan_vae", "taehv", "clip_vision (i2v, flf2v)"))
    a = rw.parse_args(ap, argv)
    rw.check_hidden(ap, a.dim, "--dim")
    if min(a.layers, a.ffn, a.vace_layers, a.t5_dim, a.t5_layers, a.t5_ff, a.t5_heads, a.t5_vocab,
           a.vae_dim, a.clip_dim, a.clip_layers, a.clip_ff) <= 0:
        ap.error("sizes must be positive")
    if a.vae_dim % 2:
        ap.error("--vae-dim must be even (the decoder's upsamplers halve the width)")
    if a.clip_dim % 16:
        ap.error("--clip-dim must be a multiple of 16 (16 heads)")
    parts = {
        "wan": (dit_specs(a.dim, a.layers, a.ffn, a.t5_dim, a.variant, a.clip_dim,
                          a.vace_layers), "f16"),
        "umt5": (rw.t5_specs(a.t5_dim, a.t5_layers, a.t5_ff, a.t5_heads, a.t5_vocab,
                             bias_per_layer=True), "f16"),
        "wan_vae": (rw.wan_vae_specs(a.vae_dim, LATENT_CHANNELS), "bf16"),
        "taehv": (taehv_specs(LATENT_CHANNELS, 1), "f16"),
    }
    if a.variant in ("i2v", "flf2v"):
        parts["clip_vision"] = (clip_vision_specs(a.clip_dim, a.clip_layers, a.clip_ff), "f16")
    if a.variant == "ti2v":
        parts["wan_vae"] = (rw.wan22_vae_specs(), "bf16")
        parts["taehv"] = (taehv_specs(TI2V_LATENT_CHANNELS, 2), "f16")
    parts = rw.select_parts(ap, a, parts)
    if a.variant == "ti2v" and "wan" in parts:
        del parts["wan"]
        if not a.list:
            write_zero_block_dit(a, dit_specs(TI2V_DIM, TI2V_LAYERS, TI2V_FFN, a.t5_dim, "ti2v"),
                                 TI2V_ZERO, "random TI2V-5B")
    if a.zero_blocks and a.variant != "vace":
        ap.error("--zero-blocks is for --variant vace")
    if a.variant == "vace" and a.zero_blocks and "wan" in parts:
        del parts["wan"]
        if not a.list:
            write_zero_block_dit(a, dit_specs(a.dim, a.layers, a.ffn, a.t5_dim, "vace",
                                              vace_layers=a.vace_layers),
                                 VACE_ZERO, "random VACE")
    return rw.write_parts(a, parts, "make_random_wan.py")


if __name__ == "__main__":
    sys.exit(main())
