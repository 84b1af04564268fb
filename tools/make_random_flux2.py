#!/usr/bin/env python3
"""Write a random-weight FLUX.2 klein model as the three files it runs from.

Files (names and layouts of the released ones; every dimension a reader takes from the
file is small, every dimension stable-diffusion.cpp fixes in code keeps its released size):

* ``<out>/flux2_klein.safetensors``  the transformer, Black Forest Labs names without a
  prefix, as ``flux-2-klein-4b.safetensors``; no biases anywhere:
  ``img_in`` [hidden, 128] (the 128-channel patchified latent, patch 1), ``txt_in``
  [hidden, text features], ``time_in.{in_layer [hidden, 256], out_layer [hidden, hidden]}``,
  the shared modulations ``double_stream_modulation_img.lin`` and
  ``double_stream_modulation_txt.lin`` [6 hidden, hidden] and ``single_stream_modulation.lin``
  [3 hidden, hidden]; ``double_blocks.N.{img,txt}_attn.qkv`` [3 hidden, hidden],
  ``.{img,txt}_attn.norm.{query,key}_norm.scale`` [128], ``.{img,txt}_attn.proj``
  [hidden, hidden], ``.{img,txt}_mlp.0`` [6 hidden, hidden] (SwiGLU: gate half first) and
  ``.{img,txt}_mlp.2`` [hidden, 3 hidden]; ``single_blocks.N.linear1`` [9 hidden, hidden]
  (q, k, v, then the 6 hidden SwiGLU input), ``.linear2`` [hidden, 4 hidden],
  ``.norm.{query,key}_norm.scale`` [128]; ``final_layer.linear`` [128, hidden] and
  ``final_layer.adaLN_modulation.1`` [2 hidden, hidden] (shift, scale). Head dim 128 (RoPE
  axes 4 x 32), MLP ratio 3, 128 latent channels. ``--guidance-in`` adds FLUX.2 dev's
  ``guidance_in.{in_layer, out_layer}`` (klein has none). Released klein 4B: hidden 3072
  (24 heads), 5 double and 20 single blocks, text features 7680 (= 3 x 2560); default
  here: hidden 256 (2 heads), 2 double and 2 single blocks, text features 3 x the text
  model's width. stable-diffusion.cpp calls a file FLUX.2 dev (not klein) when it has a
  ``single_blocks.47``, so keep fewer than 48 single blocks.
* ``<out>/qwen3.safetensors``  the Qwen3 text model, Hugging Face names as
  ``qwen_3_4b.safetensors``: ``model.embed_tokens``, ``model.layers.N.{input_layernorm,
  self_attn.{q,k,v,o}_proj, self_attn.{q,k}_norm, post_attention_layernorm,
  mlp.{gate,up,down}_proj}``, ``model.norm``; no biases, tied embeddings (no lm_head).
  Head dim 128, 32 query and 8 key/value heads (fixed in stable-diffusion.cpp for Qwen3
  unless there are 28 layers), the full 151936-row vocabulary so that every token id
  works. Released (Qwen3-4B): hidden 2560, 36 layers, MLP 9728; default here: hidden 32,
  36 layers, MLP 96. klein's text features are the outputs of layers 9, 18 and 27
  (hidden_states[9], [18], [27], before the final norm) concatenated, so at least 27
  layers are needed. random_model_parts.py's writer, as make_random_z_image.py's: same seed
  and sizes, same tensor data (only the metadata differs).
* ``<out>/ae.safetensors``  the FLUX.2 autoencoder, BFL names as FLUX.2-dev's
  ``ae.safetensors``: ``encoder.*`` (conv_out -> 64 = 2 x 32 channels, then
  ``encoder.quant_conv`` 64 -> 64, 1x1), ``decoder.post_quant_conv`` 32 -> 32 (1x1), then
  ``decoder.*`` (conv_in from 32 channels), channel multipliers 1,2,4,4, 2 res blocks, and
  ``bn.running_mean`` / ``bn.running_var`` [128]: the statistics of a BatchNorm (eps 1e-4,
  no affine) over the 2x2-patchified latent, channel c*4 + py*2 + px. Released and
  default: width 128 (stable-diffusion.cpp fixes the encoder's width at 128 and loads it
  even for text-to-image; it reads the decoder's width from decoder.conv_in).
  ``--ae-decoder-ch`` makes only the decoder narrower (stable-diffusion.cpp accepts that);
  ``--ae-ch`` makes both halves narrower, for readers that take every width from the file.

Weights: the transformer and the text model use normal(0, 1/sqrt(fan_in)) for Linear
weights and 1 + normal(0, 0.1) for norm scales; the token embedding is normal(0, 1). As in
make_random_z_image.py the image is made to depend on the prompt, not mostly on the noise:
``img_in`` is 5x weaker and the transformer's q/k norm scales are 1.5 x (1 + normal(0,
0.1)). The autoencoder uses normal(0, 0.02) weights, zero biases and unit GroupNorms
(random_model_parts.py's, as make_random_z_image.py's: same values for the tensors of the
same name and shape).
The batch-norm statistics are not random: by default (``--bn-stats released``) they are
the released FLUX.2 autoencoder's values to 4 decimals, which stable-diffusion.cpp uses as
constants instead of reading the file (running_var is written as std^2 - 1e-4, so that
sqrt(running_var + 1e-4) gives those std values back); they are always stored as f32.
``--bn-stats random`` writes mean normal(0, 0.05) and std 1.75 + normal(0, 0.03) instead
(only for readers that take them from the file). Each random tensor has its own generator
seeded with (seed, crc32(name)): same seed, same bytes.

dtype: as released by default (transformer and text model bf16, autoencoder f32);
``--dtype`` writes all three in one type. Only numpy is needed; the safetensors format is
written directly.

Usage: make_random_flux2.py --out DIR [--seed N] [--dtype f32|f16|bf16] [--hidden 256]
[--double-blocks 2] [--single-blocks 2] [--guidance-in] [--llm-hidden 32]
[--llm-layers 36] [--llm-ff 96] [--ae-ch 128] [--ae-decoder-ch N]
[--bn-stats released|random] [--parts flux2_klein,qwen3,ae] [--list]
"""

import sys
import zlib

import numpy as np

import random_model_parts as rw
from random_model_parts import FREQ_DIM, HEAD_DIM, linear, norm  # HEAD_DIM: RoPE axes 4 x 32

LATENT_CHANNELS = 128      # 32 autoencoder channels x 2x2 patch
AE_Z = 32
MLP_RATIO = 3
KLEIN_LAYERS = (9, 18, 27)  # Qwen3 hidden states klein reads
BN_EPS = 1e-4

# The released FLUX.2 autoencoder's batch-norm statistics over its 128 patchified latent
# channels, in units of 1e-4: mean, then sqrt(running_var + 1e-4).
BN_MEAN_E4 = [
    -676, -715, -753, -745, 223, 180, 142, 184, -1, -63, -2, -31, -272, -281, -276, -290,
    -769, -672, -902, -892, 168, 152, 79, 86, 83, 15, 3, -43, -439, -419, -438, -431,
    -102, -132, -66, -48, -311, -306, -279, -180, 30, 15, 126, 145, 347, 338, 337, 283,
    20, 47, 47, 50, 123, 81, 81, 146, 681, 679, 767, 732, -462, -474, -392, -511,
    -528, -477, -470, -517, -317, -316, -345, -283, 510, 445, 578, 458, -412, -458, -487, -467,
    -88, -106, -88, -46, -376, -432, -436, -499, 118, 166, 203, 279, 113, 129, 16, 72,
    -118, -18, -141, -54, -91, -138, -145, -187, 323, 305, 259, 300, 540, 614, 495, 590,
    -511, -603, -478, -524, -227, -274, -154, -255, -572, -565, -518, -496, 116, 54, 163, 104,
]
BN_STD_E4 = [
    18029, 17786, 17868, 17837, 17717, 17590, 17610, 17479,
    17336, 17373, 17340, 17343, 18626, 18527, 18629, 18589,
    17593, 17526, 17556, 17583, 17363, 17400, 17355, 17394,
    17342, 17246, 17392, 17304, 17551, 17513, 17559, 17488,
    18449, 18454, 18550, 18535, 18240, 17813, 17854, 17945,
    18047, 17876, 17695, 17676, 17782, 17667, 17925, 17848,
    17579, 17407, 17483, 17368, 17961, 17998, 17920, 17925,
    17780, 17747, 17727, 17749, 17526, 17447, 17657, 17495,
    17775, 17720, 17813, 17813, 18162, 18013, 18023, 18033,
    17527, 17331, 17563, 17482, 17610, 17507, 17681, 17613,
    17665, 17545, 17828, 17726, 17896, 17999, 17864, 17760,
    17613, 17625, 17560, 17577, 17783, 17671, 17810, 17799,
    17201, 17068, 17265, 17091, 17793, 17578, 17502, 17455,
    17587, 17500, 17525, 17362, 17616, 17572, 17444, 17430,
    17509, 17610, 17634, 17612, 17254, 17135, 17321, 17226,
    17664, 17624, 17718, 17664, 17457, 17441, 17569, 17530,
]

# A spec is (name, shape, mean, std): values mean + std * normal(0, 1); or
# (name, shape, array, dtype): fixed float values stored in that dtype.


def dit_specs(hidden, n_double, n_single, ctx_dim, guidance_in=False):
    s = []
    mlp = MLP_RATIO * hidden
    # A weak patch embedding and sharper attention (q/k norm scales 1.5) make the image
    # depend on the prompt, not mostly on the noise.
    linear(s, "img_in", hidden, LATENT_CHANNELS, gain=0.2)
    linear(s, "txt_in", hidden, ctx_dim)
    linear(s, "time_in.in_layer", hidden, FREQ_DIM)
    linear(s, "time_in.out_layer", hidden, hidden)
    if guidance_in:
        linear(s, "guidance_in.in_layer", hidden, FREQ_DIM)
        linear(s, "guidance_in.out_layer", hidden, hidden)
    linear(s, "double_stream_modulation_img.lin", 6 * hidden, hidden)
    linear(s, "double_stream_modulation_txt.lin", 6 * hidden, hidden)
    linear(s, "single_stream_modulation.lin", 3 * hidden, hidden)

    def qk_norm(p):
        norm(s, f"{p}.norm.query_norm", HEAD_DIM, scale=1.5, param="scale")
        norm(s, f"{p}.norm.key_norm", HEAD_DIM, scale=1.5, param="scale")

    for i in range(n_double):
        for stream in ("img", "txt"):
            p = f"double_blocks.{i}.{stream}"
            linear(s, f"{p}_attn.qkv", 3 * hidden, hidden)
            qk_norm(f"{p}_attn")
            linear(s, f"{p}_attn.proj", hidden, hidden)
            linear(s, f"{p}_mlp.0", 2 * mlp, hidden)
            linear(s, f"{p}_mlp.2", hidden, mlp)
    for i in range(n_single):
        p = f"single_blocks.{i}"
        linear(s, f"{p}.linear1", 3 * hidden + 2 * mlp, hidden)
        linear(s, f"{p}.linear2", hidden, hidden + mlp)
        qk_norm(p)
    linear(s, "final_layer.linear", LATENT_CHANNELS, hidden)
    linear(s, "final_layer.adaLN_modulation.1", 2 * hidden, hidden)
    return s


def bn_stats(kind, seed):
    if kind == "released":
        mean = np.array(BN_MEAN_E4, dtype=np.float64) * 1e-4
        std = np.array(BN_STD_E4, dtype=np.float64) * 1e-4
    else:
        rng = np.random.default_rng([seed, zlib.crc32(b"bn.stats")])
        mean = rng.standard_normal(LATENT_CHANNELS) * 0.05
        std = 1.75 + rng.standard_normal(LATENT_CHANNELS) * 0.03
    var = std * std - BN_EPS
    return mean.astype(np.float32), var.astype(np.float32)


def bn_specs(kind, seed):
    mean, var = bn_stats(kind, seed)
    return [("bn.running_mean", (LATENT_CHANNELS,), mean, "f32"),
            ("bn.running_var", (LATENT_CHANNELS,), var, "f32")]


def main(argv=None):
    ap = rw.parser(__doc__)
    ap.add_argument("--double-blocks", type=int, default=2)
    ap.add_argument("--single-blocks", type=int, default=2, help="fewer than 48")
    ap.add_argument("--guidance-in", action="store_true",
                    help="add FLUX.2 dev's guidance embedder (not in klein)")
    rw.add_qwen3_args(ap, "Qwen3 width (the text features are 3 x this)",
                      "Qwen3 layers; 36 as released, at least 27 (klein reads 9, 18, 27)")
    ap.add_argument("--ae-ch", type=int, default=128,
                    help="autoencoder width (both halves), multiple of 32")
    ap.add_argument("--ae-decoder-ch", type=int,
                    help="decoder width only (default: --ae-ch), multiple of 32")
    ap.add_argument("--bn-stats", choices=("released", "random"), default="released",
                    help="autoencoder batch-norm statistics")
    rw.add_parts_arg(ap, ("flux2_klein", "qwen3", "ae"))
    a = rw.parse_args(ap, argv)
    dec_ch = a.ae_decoder_ch or a.ae_ch
    rw.check_hidden(ap, a.hidden)
    if a.ae_ch % 32 or a.ae_ch <= 0 or dec_ch % 32 or dec_ch <= 0:
        ap.error("autoencoder widths must be positive multiples of 32 (GroupNorm of 32 groups)")
    if min(a.double_blocks, a.single_blocks, a.llm_hidden, a.llm_ff) <= 0:
        ap.error("sizes must be positive")
    if a.single_blocks >= 48:
        ap.error("--single-blocks >= 48 makes stable-diffusion.cpp take the file for FLUX.2 dev")
    if a.llm_layers < max(KLEIN_LAYERS):
        ap.error("--llm-layers must be at least 27 (klein reads hidden states 9, 18 and 27)")
    rw.check_qwen3_layers(ap, a.llm_layers)
    parts = {
        "flux2_klein": (dit_specs(a.hidden, a.double_blocks, a.single_blocks,
                                  len(KLEIN_LAYERS) * a.llm_hidden, a.guidance_in), "bf16"),
        "qwen3": (rw.qwen3_specs(a.llm_hidden, a.llm_layers, a.llm_ff), "bf16"),
        "ae": (rw.ae_specs(a.ae_ch, dec_ch, AE_Z, quant_convs=True)
               + bn_specs(a.bn_stats, a.seed), "f32"),
    }
    return rw.write_parts(a, rw.select_parts(ap, a, parts), "make_random_flux2.py")


if __name__ == "__main__":
    sys.exit(main())
