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
generator seeded with (seed, crc32(name)): same seed, same bytes. The text model, the
autoencoder and the file writing are random_model_parts.py's (beside this script), shared with
make_random_flux2.py.

dtype: as released by default (transformer and text model bf16, autoencoder f32);
``--dtype`` writes all three in one type. Only numpy is needed; the safetensors format is
written directly.

Usage: make_random_z_image.py --out DIR [--seed N] [--dtype f32|f16|bf16] [--hidden 256]
[--layers 2] [--refiner-layers 1] [--llm-hidden 32] [--llm-layers 36] [--llm-ff 96]
[--ae-ch 128] [--list]
"""

import sys

import random_model_parts as rw
from random_model_parts import FREQ_DIM, HEAD_DIM, linear, norm  # HEAD_DIM: RoPE axes 32+48+48

PATCH = 2
LATENT_CHANNELS = 16
ADALN_EMBED_DIM = 256      # stable-diffusion.cpp ZImage::ADALN_EMBED_DIM

# Each spec is (name, shape, mean, std): the values are mean + std * normal(0, 1).


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
    linear(s, "x_embedder", hidden, PATCH * PATCH * LATENT_CHANNELS, bias=True, gain=0.2)
    linear(s, "t_embedder.mlp.0", t_mid, FREQ_DIM, bias=True)
    linear(s, "t_embedder.mlp.2", ADALN_EMBED_DIM, t_mid, bias=True)
    norm(s, "cap_embedder.0", cap_dim)
    linear(s, "cap_embedder.1", hidden, cap_dim, bias=True)
    s.append(("x_pad_token", (1, hidden), 0.0, 0.2))
    s.append(("cap_pad_token", (1, hidden), 0.0, 1.0))

    def block(p, modulated):
        linear(s, f"{p}.attention.qkv", 3 * heads * HEAD_DIM, hidden)
        linear(s, f"{p}.attention.out", hidden, heads * HEAD_DIM)
        norm(s, f"{p}.attention.q_norm", HEAD_DIM, scale=1.5)
        norm(s, f"{p}.attention.k_norm", HEAD_DIM, scale=1.5)
        linear(s, f"{p}.feed_forward.w1", ff, hidden)
        linear(s, f"{p}.feed_forward.w2", hidden, ff)
        linear(s, f"{p}.feed_forward.w3", ff, hidden)
        for n in ("attention_norm1", "attention_norm2", "ffn_norm1", "ffn_norm2"):
            norm(s, f"{p}.{n}", hidden)
        if modulated:
            linear(s, f"{p}.adaLN_modulation.0", 4 * hidden, adaln_in, bias=True)

    for i in range(n_refiner):
        block(f"noise_refiner.{i}", True)
        block(f"context_refiner.{i}", False)
    for i in range(n_layers):
        block(f"layers.{i}", True)
    linear(s, "final_layer.linear", PATCH * PATCH * LATENT_CHANNELS, hidden, bias=True)
    linear(s, "final_layer.adaLN_modulation.1", hidden, adaln_in, bias=True)
    return s


def main(argv=None):
    ap = rw.parser(__doc__)
    ap.add_argument("--layers", type=int, default=2, help="main transformer layers")
    ap.add_argument("--refiner-layers", type=int, default=1,
                    help="noise and context refiner layers each")
    rw.add_qwen3_args(ap, "Qwen3 width (= the text feature width)",
                      "Qwen3 layers; 36 as released, so that layer 35 is the second to last")
    ap.add_argument("--ae-ch", type=int, default=128, help="autoencoder width, multiple of 32")
    a = rw.parse_args(ap, argv)
    rw.check_hidden(ap, a.hidden)
    if a.ae_ch % 32 or a.ae_ch <= 0:
        ap.error("--ae-ch must be a positive multiple of 32 (GroupNorm of 32 groups)")
    if min(a.layers, a.refiner_layers, a.llm_hidden, a.llm_layers, a.llm_ff) <= 0:
        ap.error("sizes must be positive")
    rw.check_qwen3_layers(ap, a.llm_layers)
    parts = {
        "z_image": (dit_specs(a.hidden, a.layers, a.refiner_layers, a.llm_hidden), "bf16"),
        "qwen3": (rw.qwen3_specs(a.llm_hidden, a.llm_layers, a.llm_ff), "bf16"),
        "ae": (rw.ae_specs(a.ae_ch, a.ae_ch, LATENT_CHANNELS), "f32"),
    }
    return rw.write_parts(a, parts, "make_random_z_image.py")


if __name__ == "__main__":
    sys.exit(main())
