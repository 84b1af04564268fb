#!/usr/bin/env python3
"""Write a random-weight Qwen-Image model as the three files it runs from.

Files (names and layouts of the released ones; every dimension a reader takes from the
file is small, every dimension stable-diffusion.cpp fixes in code keeps its released size,
which for Qwen-Image is almost all of them):

* ``<out>/qwen_image.safetensors``  the diffusion transformer (MMDiT), diffusers names
  without a prefix, as ``qwen_image_bf16.safetensors``: ``img_in`` [hidden, 64] (16 latent
  channels x 2x2 patch), ``txt_norm`` (RMSNorm over the 3584 text features), ``txt_in``
  [hidden, 3584], ``time_text_embed.timestep_embedder.linear_{1,2}`` (256 -> hidden ->
  hidden), ``transformer_blocks.N.{img,txt}_mod.1`` [6 hidden, hidden],
  ``.attn.{to_q,to_k,to_v}`` (image stream) and ``.attn.{add_q_proj,add_k_proj,add_v_proj}``
  (text stream) [hidden, hidden], ``.attn.{norm_q,norm_k,norm_added_q,norm_added_k}`` [128],
  ``.attn.to_out.0`` and ``.attn.to_add_out`` [hidden, hidden],
  ``.{img,txt}_mlp.net.0.proj`` [4 hidden, hidden] and ``.{img,txt}_mlp.net.2``
  [hidden, 4 hidden]; ``norm_out.linear`` [2 hidden, hidden] (scale, then shift) and
  ``proj_out`` [64, hidden]. Every Linear has a bias; the block LayerNorms have no
  parameters. stable-diffusion.cpp fixes 24 heads of 128 (hidden 3072), the text width
  3584 and the 64 channels, and reads only the block count from the file: released 60,
  default here 2, the fewest that use every tensor (the last block's text-stream
  ``to_add_out`` and ``txt_mlp`` feed nothing that reaches the image). ``--hidden`` /
  ``--llm-hidden`` change the widths for readers that take them from the file.
* ``<out>/qwen2_5_vl.safetensors``  Qwen2.5-VL-7B's text model, Hugging Face names as
  ``qwen_2.5_vl_7b.safetensors``: ``model.embed_tokens``, ``model.layers.N.{input_layernorm,
  self_attn.{q,k,v,o}_proj, post_attention_layernorm, mlp.{gate,up,down}_proj}``,
  ``model.norm``; biases on q/k/v only; no lm_head (never read) and no vision tower
  (``visual.*``, only Qwen-Image-Edit reads it). Head dim 128 with 28 query and 4
  key/value heads (fixed in stable-diffusion.cpp), the full 152064-row vocabulary so that
  every token id works, and width 3584: the reader takes the width from the file, but the
  transformer's fixed text width must match it. The MLP width and the layer count are
  read from the file: released 18944 and 28, default here 128 and 2 (Qwen-Image reads the
  last layer's output after the final norm, so any layer count works).
* ``<out>/qwen_image_vae.safetensors``  the Wan 2.1 autoencoder as Qwen-Image's
  ``qwen_image_vae.safetensors``, Wan names: ``encoder.*``, ``conv1`` (1x1x1, 32 -> 32),
  ``conv2`` (1x1x1, 16 -> 16), ``decoder.*``; causal 3D convolutions (5-D weights
  [out, in, t, h, w]), RMS norms ``...gamma`` of shape [dim, 1, 1, 1] ([dim, 1, 1] in the
  attention blocks), 2-D ``resample.1`` convolutions, ``time_conv`` in the temporal
  resamplers, base width 96, channel multipliers 1,2,4,4, 2 res blocks, 16 latent channels.
  stable-diffusion.cpp fixes all of it (and builds the encoder even for text-to-image), so
  it is written at its released size; ``--vae-dim`` changes the base width for readers
  that take it from the file.

* ``<out>/qwen2_5_vl_mmproj.gguf`` (only with ``--vision-layers N``)  Qwen2.5-VL's vision
  tower as llama.cpp's mmproj file for Qwen-Image-Edit's ``--llm_vision``: llama.cpp names
  ``v.patch_embd.weight`` and ``v.patch_embd.weight.1`` (the 2-frame 3-D patch kernel as
  one [hidden, 3, 14, 14] kernel per frame), ``v.blk.N.{ln1, ln2}`` (RMSNorm scales),
  ``v.blk.N.{attn_q, attn_k, attn_v, attn_out}`` [hidden, hidden] and
  ``v.blk.N.{ffn_gate, ffn_up}`` [ff, hidden], ``v.blk.N.ffn_down`` [hidden, ff], every one
  with a bias, ``v.post_ln`` (the merger's RMSNorm), ``mm.0`` [4 hidden, 4 hidden] and
  ``mm.2`` [3584, 4 hidden] with biases; f16 matrices and kernels, f32 vectors, as
  llama.cpp writes them. stable-diffusion.cpp fixes 16 heads, 14-pixel patches merged 2x2,
  112-pixel windows and full attention in blocks 7, 15, 23, 31, and reads the width, the MLP
  width, the block count and the output width (= the text width) from the file: released
  1280, 3420, 32, 3584; ``--vision-hidden`` (a multiple of 64) and ``--vision-ff`` default
  to 128 and 160 here, and 8 blocks use both kinds of attention.
* ``<out>/qwen2_5_vl_visual.safetensors`` (with ``--vision-hf`` too)  the same tower, the
  same values, in Hugging Face's names as a Qwen2.5-VL checkpoint's ``visual.*``:
  ``visual.patch_embed.proj.weight`` (the Conv3d [hidden, 3, 2, 14, 14]),
  ``visual.blocks.N.attn.qkv`` [3 hidden, hidden] (q, k, v fused), ``.attn.proj``,
  ``.mlp.{gate,up,down}_proj``, ``.norm1``, ``.norm2``, ``visual.merger.ln_q`` and
  ``visual.merger.mlp.{0,2}``; a reader that splits and stacks them gets the mmproj's
  tower.

Weights: the transformer and the text model use normal(0, 1/sqrt(fan_in)) for Linear
weights, normal(0, 0.02) for biases and 1 + normal(0, 0.1) for norm scales; the token
embedding is normal(0, 1). As in make_random_z_image.py the image is made to depend on the
prompt, not mostly on the noise: ``img_in`` is 5x weaker and the transformer's q/k norm
scales are 1.5 x (1 + normal(0, 0.1)). The autoencoder uses normal(0, 1/sqrt(fan_in))
convolution weights (fan_in = input channels x kernel volume), normal(0, 0.02) biases and
1 + normal(0, 0.1) RMS norm scales. Each tensor has its own generator seeded with (seed,
crc32(name)): same seed, same bytes. The text model, the autoencoder and the file
writing are random_model_parts.py's (beside this script).

dtype: as released by default (all three bf16); ``--dtype`` writes all three in one type.
Only numpy is needed; the safetensors format is written directly. At the default sizes
the files hold about 0.72 G (transformer), 0.61 G (text model, mostly the 152064 x 3584
embedding) and 0.13 G (autoencoder) values.

Usage: make_random_qwen_image.py --out DIR [--seed N] [--dtype f32|f16|bf16]
[--hidden 3072] [--layers 2] [--llm-hidden 3584] [--llm-layers 2] [--llm-ff 128]
[--vae-dim 96] [--vision-layers 0] [--vision-hidden 128] [--vision-ff 160] [--vision-hf]
[--vision-only] [--q4k-gguf] [--list]
"""

import os
import sys

import numpy as np

import random_model_parts as rw
from gguf_writer import write_gguf
from random_model_parts import FREQ_DIM, HEAD_DIM, linear, norm  # HEAD_DIM: RoPE 16+56+56

PATCH = 2
LATENT_CHANNELS = 16
MLP_RATIO = 4

# Each spec is (name, shape, mean, std): the values are mean + std * normal(0, 1).


def dit_specs(hidden, n_layers, text_dim):
    s = []
    mlp = MLP_RATIO * hidden
    patch_dim = PATCH * PATCH * LATENT_CHANNELS
    # A weak patch embedding and sharper attention (q/k norm scales 1.5) make the image
    # depend on the prompt, not mostly on the noise.
    linear(s, "img_in", hidden, patch_dim, bias=True, gain=0.2)
    norm(s, "txt_norm", text_dim)
    linear(s, "txt_in", hidden, text_dim, bias=True)
    linear(s, "time_text_embed.timestep_embedder.linear_1", hidden, FREQ_DIM, bias=True)
    linear(s, "time_text_embed.timestep_embedder.linear_2", hidden, hidden, bias=True)
    for i in range(n_layers):
        p = f"transformer_blocks.{i}"
        for stream in ("img", "txt"):
            linear(s, f"{p}.{stream}_mod.1", 6 * hidden, hidden, bias=True)
            linear(s, f"{p}.{stream}_mlp.net.0.proj", mlp, hidden, bias=True)
            linear(s, f"{p}.{stream}_mlp.net.2", hidden, mlp, bias=True)
        for proj in ("to_q", "to_k", "to_v", "add_q_proj", "add_k_proj", "add_v_proj",
                     "to_out.0", "to_add_out"):
            linear(s, f"{p}.attn.{proj}", hidden, hidden, bias=True)
        for n in ("norm_q", "norm_k", "norm_added_q", "norm_added_k"):
            norm(s, f"{p}.attn.{n}", HEAD_DIM, scale=1.5)
    linear(s, "norm_out.linear", 2 * hidden, hidden, bias=True)
    linear(s, "proj_out", patch_dim, hidden, bias=True)
    return s


VISION_PATCH = 14
VISION_MERGE = 2


def vision_specs(hidden, n_layers, ff, out_dim):
    """Qwen2.5-VL's vision tower in llama.cpp's mmproj names."""
    s = []
    fan_in = 3 * VISION_PATCH * VISION_PATCH
    for frame in ("v.patch_embd.weight", "v.patch_embd.weight.1"):
        s.append((frame, (hidden, 3, VISION_PATCH, VISION_PATCH), 0.0, 1.0 / np.sqrt(2 * fan_in)))
    for i in range(n_layers):
        p = f"v.blk.{i}"
        norm(s, f"{p}.ln1", hidden)
        norm(s, f"{p}.ln2", hidden)
        for proj in ("attn_q", "attn_k", "attn_v", "attn_out"):
            linear(s, f"{p}.{proj}", hidden, hidden, bias=True)
        linear(s, f"{p}.ffn_gate", ff, hidden, bias=True)
        linear(s, f"{p}.ffn_up", ff, hidden, bias=True)
        linear(s, f"{p}.ffn_down", hidden, ff, bias=True)
    merged = hidden * VISION_MERGE * VISION_MERGE
    norm(s, "v.post_ln", hidden)
    linear(s, "mm.0", merged, merged, bias=True)
    linear(s, "mm.2", out_dim, merged, bias=True)
    return s


def write_vision(a, specs):
    """The tower as an mmproj GGUF: f16 matrices and kernels, f32 vectors."""
    tensors = []
    for name, shape, mean, std in sorted(specs, key=lambda t: t[0]):
        x = rw.values(name, shape, mean, std, a.seed)
        tensors.append((name, x, "f16" if len(shape) > 1 else "f32"))
    os.makedirs(a.out, exist_ok=True)
    path = os.path.join(a.out, "qwen2_5_vl_mmproj.gguf")
    meta = {"general.architecture": "clip", "general.name": "random Qwen2.5-VL vision",
            "clip.has_vision_encoder": True, "clip.projector_type": "qwen2.5vl_merger",
            "clip.vision.embedding_length": a.vision_hidden,
            "clip.vision.feed_forward_length": a.vision_ff,
            "clip.vision.block_count": a.vision_layers,
            "clip.vision.attention.head_count": 16,
            "clip.vision.patch_size": VISION_PATCH}
    n = write_gguf(path, meta, tensors)
    print(f"wrote {path}: {len(tensors)} tensors, {n / 2**20:.1f} MiB")


def write_vision_hf(a, specs):
    """The same tower (the same values) in Hugging Face's names, as the visual.* weights of a
    Qwen2.5-VL checkpoint: the two frames as one Conv3d kernel [hidden, 3, 2, 14, 14], q, k
    and v fused as attn.qkv [3 hidden, hidden]; f16 matrices, f32 vectors."""
    v = {name: rw.values(name, shape, mean, std, a.seed) for name, shape, mean, std in specs}
    out = []

    def put(name, x):
        out.append((name, x.shape, x.astype(np.float32), "f16" if x.ndim > 1 else "f32"))

    put("visual.patch_embed.proj.weight",
        np.stack([v["v.patch_embd.weight"], v["v.patch_embd.weight.1"]], axis=2))
    for i in range(a.vision_layers):
        b, p = f"v.blk.{i}", f"visual.blocks.{i}"
        for kind in ("weight", "bias"):
            put(f"{p}.attn.qkv.{kind}",
                np.concatenate([v[f"{b}.attn_{x}.{kind}"] for x in "qkv"], axis=0))
            put(f"{p}.attn.proj.{kind}", v[f"{b}.attn_out.{kind}"])
            for llama, hf in (("ffn_gate", "gate_proj"), ("ffn_up", "up_proj"),
                              ("ffn_down", "down_proj")):
                put(f"{p}.mlp.{hf}.{kind}", v[f"{b}.{llama}.{kind}"])
        put(f"{p}.norm1.weight", v[f"{b}.ln1.weight"])
        put(f"{p}.norm2.weight", v[f"{b}.ln2.weight"])
    put("visual.merger.ln_q.weight", v["v.post_ln.weight"])
    for kind in ("weight", "bias"):
        put(f"visual.merger.mlp.0.{kind}", v[f"mm.0.{kind}"])
        put(f"visual.merger.mlp.2.{kind}", v[f"mm.2.{kind}"])
    path = os.path.join(a.out, "qwen2_5_vl_visual.safetensors")
    meta = {"format": "pt", "generator": "make_random_qwen_image.py", "seed": str(a.seed),
            "part": "visual"}
    n = rw.write_safetensors(path, out, "f32", a.seed, meta)
    print(f"wrote {path}: {len(out)} tensors, {n / 2**20:.1f} MiB")


def main(argv=None):
    ap = rw.parser(__doc__, released="bf16/bf16/bf16", hidden=3072,
                   hidden_help="transformer width, multiple of 128 (fixed 3072 in "
                               "stable-diffusion.cpp)")
    ap.add_argument("--layers", type=int, default=2, help="transformer blocks (released 60)")
    ap.add_argument("--llm-hidden", type=int, default=3584,
                    help="text model width = the transformer's text width (fixed 3584 in "
                         "stable-diffusion.cpp)")
    ap.add_argument("--llm-layers", type=int, default=2, help="text model layers (released 28)")
    ap.add_argument("--llm-ff", type=int, default=128, help="text model MLP width (released 18944)")
    ap.add_argument("--vae-dim", type=int, default=96,
                    help="autoencoder base width, even (fixed 96 in stable-diffusion.cpp)")
    ap.add_argument("--vision-layers", type=int, default=0,
                    help="also write the vision tower (qwen2_5_vl_mmproj.gguf) with this many "
                         "blocks (released 32; 0: none)")
    ap.add_argument("--vision-hidden", type=int, default=128,
                    help="vision tower width, a multiple of 64 (released 1280)")
    ap.add_argument("--vision-ff", type=int, default=160,
                    help="vision tower MLP width (released 3420)")
    ap.add_argument("--vision-hf", action="store_true",
                    help="also write the tower in Hugging Face's names "
                         "(qwen2_5_vl_visual.safetensors, the same values)")
    ap.add_argument("--q4k-gguf", action="store_true",
                    help="write the transformer and the text model as GGUF files of random q4_K "
                         "blocks (qwen_image_q4_K.gguf, qwen2_5_vl_q4_K.gguf; for benchmarks "
                         "at the released size) and the autoencoder as usual")
    ap.add_argument("--vision-only", action="store_true",
                    help="write the vision tower only (beside three files made before)")
    a = rw.parse_args(ap, argv)
    rw.check_hidden(ap, a.hidden)
    if min(a.layers, a.llm_hidden, a.llm_layers, a.llm_ff, a.vae_dim) <= 0:
        ap.error("sizes must be positive")
    if a.vae_dim % 2:
        ap.error("--vae-dim must be even (the decoder's upsamplers halve the width)")
    parts = {
        "qwen_image": (dit_specs(a.hidden, a.layers, a.llm_hidden), "bf16"),
        "qwen2_5_vl": (rw.qwen25vl_specs(a.llm_hidden, a.llm_layers, a.llm_ff), "bf16"),
        "qwen_image_vae": (rw.wan_vae_specs(a.vae_dim, LATENT_CHANNELS), "bf16"),
    }
    if a.vision_layers < 0 or a.vision_hidden <= 0 or a.vision_hidden % 64 or a.vision_ff <= 0:
        ap.error("--vision-hidden must be a positive multiple of 64 (16 heads with 2-D "
                 "rotary positions), the other vision sizes positive")
    if a.vision_only and a.vision_layers <= 0:
        ap.error("--vision-only needs --vision-layers N")
    if a.q4k_gguf and not a.list and not a.vision_only:
        os.makedirs(a.out, exist_ok=True)
        for name in ("qwen_image", "qwen2_5_vl"):
            path = os.path.join(a.out, name + "_q4_K.gguf")
            meta = {"general.name": f"random {name}", "general.quantization_version": 2}
            n = rw.write_q4_k_gguf(path, parts.pop(name)[0], a.seed, meta)
            print(f"wrote {path}: {n / 2**20:.1f} MiB")
    status = 0 if a.vision_only else rw.write_parts(a, parts, "make_random_qwen_image.py")
    if a.vision_layers > 0:
        specs = vision_specs(a.vision_hidden, a.vision_layers, a.vision_ff, a.llm_hidden)
        if a.list:
            for t in sorted(specs, key=lambda t: t[0]):
                print(f"qwen2_5_vl_mmproj: {t[0]} {list(t[1])}")
        else:
            write_vision(a, specs)
            if a.vision_hf:
                write_vision_hf(a, specs)
    return status


if __name__ == "__main__":
    sys.exit(main())
