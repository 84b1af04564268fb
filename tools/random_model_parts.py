"""What the random-weight model writers make_random_z_image.py, make_random_flux2.py,
make_random_qwen_image.py and make_random_wan.py share.

* Tensor specs: ``linear`` and ``norm`` append the specs of one layer, ``qwen3_specs`` the
  Qwen3 text model both models read, ``qwen25vl_specs`` the Qwen2.5-VL text model (Qwen-Image
  reads it), ``ae_specs`` the LDM autoencoder (FLUX.1's 16-channel one, or with
  ``quant_convs`` the FLUX.2 one without its batch-norm statistics), ``wan_vae_specs`` Wan
  2.1's causal autoencoder (Qwen-Image and Wan read it), ``t5_specs`` T5 v1.1's encoder or,
  with ``bias_per_layer``, umT5's (Wan reads it).
* Values and writing: a spec is (name, shape, mean, std), values mean + std * normal(0, 1)
  from a generator of its own seeded with (seed, crc32(name)), so that the same seed writes
  the same bytes; or (name, shape, array, dtype), fixed float values always stored in that
  dtype. ``write_safetensors`` writes a file of specs in f32, f16 or bf16 (round to nearest
  even), a large tensor a slice of rows at a time (the same numbers, less memory); only
  numpy is needed, the safetensors format is written directly.
* Command line: ``parser`` (``--out``, ``--seed``, ``--dtype``, ``--hidden``),
  ``add_qwen3_args``, ``parse_args`` (adds ``--list``), the checks every writer makes and
  ``write_parts``, which lists or writes a writer's files.

Run the writers with /usr/bin/python3 from anywhere: Python finds this module beside them.
"""

import argparse
import json
import os
import struct
import zlib

import numpy as np

from gguf_writer import Q4_K_BLOCK, write_gguf

HEAD_DIM = 128             # Z-Image, FLUX.2 and Qwen3 attention heads
FREQ_DIM = 256             # sinusoidal timestep embedding width
QWEN3_HEADS, QWEN3_KV_HEADS = 32, 8
QWEN3_VOCAB = 151936
QWEN25VL_HEADS, QWEN25VL_KV_HEADS = 28, 4
QWEN25VL_VOCAB = 152064
T5_D_KV, T5_BUCKETS = 64, 32  # T5 / umT5 attention head width, relative position buckets
WAN_VAE_MULT = (1, 2, 4, 4)
WAN_VAE_RES_BLOCKS = 2
WAN_VAE_TEMPORAL_DOWN = (False, True, True)   # encoder stages 0..2
WAN_VAE_TEMPORAL_UP = (True, True, False)     # decoder stages 0..2
CHUNK_VALUES = 1 << 24     # values generated and encoded at a time when writing
DTYPES = {"f32": ("F32", 4), "f16": ("F16", 2), "bf16": ("BF16", 2)}

# ------------------------------------- tensor specs -------------------------------------


def linear(s, name, n_out, n_in, bias=False, gain=1.0):
    """normal(0, gain/sqrt(fan_in)) weight; with bias, a normal(0, 0.02) bias."""
    s.append((f"{name}.weight", (n_out, n_in), 0.0, gain / np.sqrt(n_in)))
    if bias:
        s.append((f"{name}.bias", (n_out,), 0.0, 0.02))


def norm(s, name, n, scale=1.0, param="weight"):
    """A norm's scale: scale x (1 + normal(0, 0.1))."""
    s.append((f"{name}.{param}", (n,), scale, 0.1 * scale))


def qwen3_specs(hidden, n_layers, ff):
    """Qwen3, Hugging Face names, no biases, tied embeddings, the full vocabulary."""
    s = [("model.embed_tokens.weight", (QWEN3_VOCAB, hidden), 0.0, 1.0)]
    q, kv = QWEN3_HEADS * HEAD_DIM, QWEN3_KV_HEADS * HEAD_DIM
    for i in range(n_layers):
        p = f"model.layers.{i}"
        norm(s, f"{p}.input_layernorm", hidden)
        linear(s, f"{p}.self_attn.q_proj", q, hidden)
        linear(s, f"{p}.self_attn.k_proj", kv, hidden)
        linear(s, f"{p}.self_attn.v_proj", kv, hidden)
        linear(s, f"{p}.self_attn.o_proj", hidden, q)
        norm(s, f"{p}.self_attn.q_norm", HEAD_DIM)
        norm(s, f"{p}.self_attn.k_norm", HEAD_DIM)
        norm(s, f"{p}.post_attention_layernorm", hidden)
        linear(s, f"{p}.mlp.gate_proj", ff, hidden)
        linear(s, f"{p}.mlp.up_proj", ff, hidden)
        linear(s, f"{p}.mlp.down_proj", hidden, ff)
    norm(s, "model.norm", hidden)
    return s


def qwen25vl_specs(hidden, n_layers, ff):
    """Qwen2.5-VL's text model, Hugging Face names (``model.*``), biases on q/k/v only, no
    q/k norms, no lm_head (untied in the release, never read), the full vocabulary."""
    s = [("model.embed_tokens.weight", (QWEN25VL_VOCAB, hidden), 0.0, 1.0)]
    q, kv = QWEN25VL_HEADS * HEAD_DIM, QWEN25VL_KV_HEADS * HEAD_DIM
    for i in range(n_layers):
        p = f"model.layers.{i}"
        norm(s, f"{p}.input_layernorm", hidden)
        linear(s, f"{p}.self_attn.q_proj", q, hidden, bias=True)
        linear(s, f"{p}.self_attn.k_proj", kv, hidden, bias=True)
        linear(s, f"{p}.self_attn.v_proj", kv, hidden, bias=True)
        linear(s, f"{p}.self_attn.o_proj", hidden, q)
        norm(s, f"{p}.post_attention_layernorm", hidden)
        linear(s, f"{p}.mlp.gate_proj", ff, hidden)
        linear(s, f"{p}.mlp.up_proj", ff, hidden)
        linear(s, f"{p}.mlp.down_proj", hidden, ff)
    norm(s, "model.norm", hidden)
    return s


def ae_specs(enc_ch, dec_ch, z, quant_convs=False, mult=(1, 2, 4, 4), n_res=2, std=0.02):
    """LDM autoencoder (``encoder.*``, ``decoder.*``) with z latent channels: normal(0, std)
    convolution weights, zero biases, unit GroupNorms. quant_convs adds the 1x1
    ``encoder.quant_conv`` (2z -> 2z) and ``decoder.post_quant_conv`` (z -> z)."""
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

    ch = enc_ch
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
    if quant_convs:
        conv("encoder.quant_conv", 2 * z, 2 * z, 1)

    ch = dec_ch
    c = ch * mult[-1]
    if quant_convs:
        conv("decoder.post_quant_conv", z, z, 1)
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


class _WanVaeSpecs:
    """The layers both Wan autoencoders are built of, appended to ``s`` in order:
    normal(0, 1/sqrt(fan_in)) convolution weights (fan_in = input channels x kernel volume),
    normal(0, 0.02) biases, 1 + normal(0, 0.1) RMS norm scales ``gamma`` [n, 1, 1, 1]
    ([n, 1, 1] in attention); 3D convolutions 5-D [out, in, t, h, w]."""

    def __init__(self):
        self.s = []

    def conv(self, name, n_out, n_in, kernel):
        fan_in = n_in
        for k in kernel:
            fan_in *= k
        self.s.append((f"{name}.weight", (n_out, n_in) + tuple(kernel), 0.0, fan_in ** -0.5))
        self.s.append((f"{name}.bias", (n_out,), 0.0, 0.02))

    def rms(self, name, n, images=False):
        shape = (n, 1, 1) if images else (n, 1, 1, 1)
        self.s.append((f"{name}.gamma", shape, 1.0, 0.1))

    def resblock(self, name, c_in, c_out):
        self.rms(f"{name}.residual.0", c_in)
        self.conv(f"{name}.residual.2", c_out, c_in, (3, 3, 3))
        self.rms(f"{name}.residual.3", c_out)
        self.conv(f"{name}.residual.6", c_out, c_out, (3, 3, 3))
        if c_in != c_out:
            self.conv(f"{name}.shortcut", c_out, c_in, (1, 1, 1))

    def middle(self, prefix, c):
        self.resblock(f"{prefix}.middle.0", c, c)
        self.rms(f"{prefix}.middle.1.norm", c, images=True)
        self.conv(f"{prefix}.middle.1.to_qkv", 3 * c, c, (1, 1))
        self.conv(f"{prefix}.middle.1.proj", c, c, (1, 1))
        self.resblock(f"{prefix}.middle.2", c, c)

    def resampler(self, name, c_in, c_out, temporal, c_time):
        self.conv(f"{name}.resample.1", c_out, c_in, (3, 3))
        if temporal:
            self.conv(f"{name}.time_conv", c_time, c_in, (3, 1, 1))


def wan_vae_specs(dim, z=16):
    """The Wan 2.1 causal autoencoder, Wan names, base width dim: encoder to 2z channels
    (mean and log-variance), ``conv1`` 2z -> 2z, ``conv2`` z -> z, decoder from z channels;
    all 1x1 / 3x3 kernels (_WanVaeSpecs' values)."""
    b = _WanVaeSpecs()
    levels = len(WAN_VAE_MULT)
    # encoder: dims dim x (1, 1, 2, 4, 4)
    dims = [dim] + [dim * m for m in WAN_VAE_MULT]
    b.conv("encoder.conv1", dims[0], 3, (3, 3, 3))
    idx = 0
    for i in range(levels):
        c_in, c_out = dims[i], dims[i + 1]
        for _ in range(WAN_VAE_RES_BLOCKS):
            b.resblock(f"encoder.downsamples.{idx}", c_in, c_out)
            c_in = c_out
            idx += 1
        if i != levels - 1:
            b.resampler(f"encoder.downsamples.{idx}", c_out, c_out, WAN_VAE_TEMPORAL_DOWN[i],
                        c_out)
            idx += 1
    c = dims[-1]
    b.middle("encoder", c)
    b.rms("encoder.head.0", c)
    b.conv("encoder.head.2", 2 * z, c, (3, 3, 3))
    b.conv("conv1", 2 * z, 2 * z, (1, 1, 1))

    # decoder: dims dim x (4, 4, 4, 2, 1); stages after an upsampling start from half
    b.conv("conv2", z, z, (1, 1, 1))
    dims = [dim * WAN_VAE_MULT[-1]] + [dim * m for m in reversed(WAN_VAE_MULT)]
    b.conv("decoder.conv1", dims[0], z, (3, 3, 3))
    b.middle("decoder", dims[0])
    idx = 0
    for i in range(levels):
        c_in, c_out = dims[i], dims[i + 1]
        if i > 0:
            c_in //= 2
        for _ in range(WAN_VAE_RES_BLOCKS + 1):
            b.resblock(f"decoder.upsamples.{idx}", c_in, c_out)
            c_in = c_out
            idx += 1
        if i != levels - 1:
            p = f"decoder.upsamples.{idx}"
            b.conv(f"{p}.resample.1", c_out // 2, c_out, (3, 3))
            if WAN_VAE_TEMPORAL_UP[i]:
                b.conv(f"{p}.time_conv", 2 * c_out, c_out, (3, 1, 1))
            idx += 1
    b.rms("decoder.head.0", dims[-1])
    b.conv("decoder.head.2", 3, dims[-1], (3, 3, 3))
    return b.s


def wan22_vae_specs(dim=160, decoder_dim=256, z=48, patch=2):
    """The Wan 2.2 causal autoencoder (TI2V-5B's), Wan names: as wan_vae_specs, but each
    level of the encoder is one block ``encoder.downsamples.L`` holding its residual blocks
    ``.downsamples.{0,1}`` and its resampler ``.downsamples.2`` (no weights for its averaging
    shortcut), each level of the decoder one block ``decoder.upsamples.L`` with
    ``.upsamples.{0,1,2}`` and the resampler ``.upsamples.3``, whose conv keeps the width; the
    image enters and leaves in patch x patch pixel patches (3 patch^2 channels). Widths: the
    encoder's dim x (1, 1, 2, 4, 4), the decoder's decoder_dim x (4, 4, 4, 2, 1)."""
    b = _WanVaeSpecs()
    image = 3 * patch * patch
    levels = len(WAN_VAE_MULT)
    dims = [dim] + [dim * m for m in WAN_VAE_MULT]
    b.conv("encoder.conv1", dims[0], image, (3, 3, 3))
    for i in range(levels):
        c_in, c_out = dims[i], dims[i + 1]
        for j in range(WAN_VAE_RES_BLOCKS):
            b.resblock(f"encoder.downsamples.{i}.downsamples.{j}", c_in, c_out)
            c_in = c_out
        if i != levels - 1:
            b.resampler(f"encoder.downsamples.{i}.downsamples.{WAN_VAE_RES_BLOCKS}", c_out,
                        c_out, WAN_VAE_TEMPORAL_DOWN[i], c_out)
    b.middle("encoder", dims[-1])
    b.rms("encoder.head.0", dims[-1])
    b.conv("encoder.head.2", 2 * z, dims[-1], (3, 3, 3))
    b.conv("conv1", 2 * z, 2 * z, (1, 1, 1))

    b.conv("conv2", z, z, (1, 1, 1))
    dims = [decoder_dim * WAN_VAE_MULT[-1]] + [decoder_dim * m for m in reversed(WAN_VAE_MULT)]
    b.conv("decoder.conv1", dims[0], z, (3, 3, 3))
    b.middle("decoder", dims[0])
    for i in range(levels):
        c_in, c_out = dims[i], dims[i + 1]
        for j in range(WAN_VAE_RES_BLOCKS + 1):
            b.resblock(f"decoder.upsamples.{i}.upsamples.{j}", c_in, c_out)
            c_in = c_out
        if i != levels - 1:
            b.resampler(f"decoder.upsamples.{i}.upsamples.{WAN_VAE_RES_BLOCKS + 1}", c_out,
                        c_out, WAN_VAE_TEMPORAL_UP[i], 2 * c_out)
    b.rms("decoder.head.0", dims[-1])
    b.conv("decoder.head.2", image, dims[-1], (3, 3, 3))
    return b.s


def t5_specs(dim, n_layers, ff, heads, vocab, bias_per_layer=False):
    """T5 v1.1's encoder, Hugging Face names, no biases, heads of T5_D_KV: with
    bias_per_layer umT5's (a relative position bias table in every block, not only block 0).
    T5 does not scale its attention logits, so q is sqrt(d_kv) x weaker (Hugging Face's T5
    initialisation); the embedding and the bias tables are normal(0, 1)."""
    s = [("shared.weight", (vocab, dim), 0.0, 1.0)]
    inner = heads * T5_D_KV
    for i in range(n_layers):
        p = f"encoder.block.{i}.layer"
        linear(s, f"{p}.0.SelfAttention.q", inner, dim, gain=T5_D_KV ** -0.5)
        linear(s, f"{p}.0.SelfAttention.k", inner, dim)
        linear(s, f"{p}.0.SelfAttention.v", inner, dim)
        linear(s, f"{p}.0.SelfAttention.o", dim, inner)
        if i == 0 or bias_per_layer:
            s.append((f"{p}.0.SelfAttention.relative_attention_bias.weight",
                      (T5_BUCKETS, heads), 0.0, 1.0))
        norm(s, f"{p}.0.layer_norm", dim)
        linear(s, f"{p}.1.DenseReluDense.wi_0", ff, dim)
        linear(s, f"{p}.1.DenseReluDense.wi_1", ff, dim)
        linear(s, f"{p}.1.DenseReluDense.wo", dim, ff)
        norm(s, f"{p}.1.layer_norm", dim)
    norm(s, "encoder.final_layer_norm", dim)
    return s


# ---------------------------------- values & writing ----------------------------------


def values(name, shape, mean, std, seed):
    """float32 values of one tensor; depends only on (seed, name, shape, mean, std)."""
    if isinstance(mean, np.ndarray):
        return mean.reshape(shape).astype(np.float32)
    if std == 0.0:
        return np.full(shape, mean, dtype=np.float32)
    rng = np.random.default_rng([seed, zlib.crc32(name.encode("utf-8"))])
    x = rng.standard_normal(size=shape, dtype=np.float32) * np.float32(std)
    return x + np.float32(mean)


class TensorEncoder:
    """Draws tensors' values and encodes them for the file through buffers it keeps: each
    chunk of at most about CHUNK_VALUES values is drawn, scaled and encoded in place, so
    writing gigabytes costs no fresh memory per chunk (the kernel zeroing new pages was most
    of the time). The numbers are values(...)'s: one generator per tensor draws them in
    the same order, and float32 x * std + mean is computed alike in place."""

    def __init__(self):
        self._f32 = np.empty(0, np.float32)
        self._u32 = np.empty(0, np.uint32)
        self._u16 = np.empty(0, np.uint16)

    def _buffers(self, n):
        if self._f32.size < n:
            self._f32 = np.empty(n, np.float32)
            self._u32 = np.empty(n, np.uint32)
            self._u16 = np.empty(n, np.uint16)
        return self._f32[:n], self._u32[:n], self._u16[:n]

    def chunks(self, name, shape, mean, std, seed, dtype):
        """The encoded bytes of one tensor, as consecutive memoryviews (valid until the
        next one is asked for)."""
        per_row = int(np.prod(shape[1:])) if len(shape) > 1 else 1
        if isinstance(mean, np.ndarray) or std == 0.0 or len(shape) == 0:
            yield self._encode(values(name, shape, mean, std, seed), dtype)
            return
        rng = np.random.default_rng([seed, zlib.crc32(name.encode("utf-8"))])
        rows = shape[0] if shape[0] * per_row <= CHUNK_VALUES else max(1, CHUNK_VALUES // per_row)
        for r0 in range(0, shape[0], rows):
            n = min(rows, shape[0] - r0)
            x, _, _ = self._buffers(n * per_row)
            rng.standard_normal(dtype=np.float32, out=x.reshape((n,) + tuple(shape[1:])))
            np.multiply(x, np.float32(std), out=x)
            np.add(x, np.float32(mean), out=x)
            yield self._encode(x, dtype)

    def _encode(self, x, dtype):
        x = np.ascontiguousarray(x, dtype=np.float32).reshape(-1)
        if dtype == "f32":
            return memoryview(x).cast("B")
        _, u, h = self._buffers(x.size)  # never reallocates the x it was drawn into
        if dtype == "f16":
            f16 = h.view(np.float16)
            np.copyto(f16, x, casting="same_kind")
            return memoryview(f16).cast("B")
        # bf16: round to nearest even on the upper 16 bits of the float32 pattern
        bits = x.view(np.uint32)
        np.right_shift(bits, np.uint32(16), out=u)
        np.bitwise_and(u, np.uint32(1), out=u)
        np.add(u, np.uint32(0x7FFF), out=u)
        np.add(u, bits, out=u)
        np.right_shift(u, np.uint32(16), out=u)
        np.copyto(h, u, casting="unsafe")
        return memoryview(h).cast("B")


def tensor_dtype(spec, dtype):
    return spec[3] if isinstance(spec[2], np.ndarray) else dtype


def write_safetensors(path, specs, dtype, seed, metadata):
    """Writes specs (sorted by name) to path via path.tmp; returns the data size in bytes."""
    specs = sorted(specs, key=lambda t: t[0])
    names = [t[0] for t in specs]
    assert len(names) == len(set(names)), "duplicate tensor names"
    header, offset = {"__metadata__": metadata}, 0
    for spec in specs:
        name, shape = spec[0], spec[1]
        st_dtype, size = DTYPES[tensor_dtype(spec, dtype)]
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
        encoder = TensorEncoder()
        for spec in specs:
            name, shape, mean, std = spec
            for chunk in encoder.chunks(name, shape, mean, std, seed, tensor_dtype(spec, dtype)):
                f.write(chunk)
    os.replace(tmp, path)
    return offset


def write_q4_k_gguf(path, specs, seed, metadata):
    """Writes specs as a GGUF the way quantized releases store a model: matrices whose rows
    fill 256-value blocks as random q4_K blocks of about the spec's spread (drawn while
    writing, so a 20B model needs no 40 GB of floats first), other matrices f16, vectors
    f32. Returns the data size in bytes."""
    tensors = []
    for name, shape, mean, std in sorted(specs, key=lambda t: t[0]):
        random = not isinstance(mean, np.ndarray) and std > 0.0
        if random and len(shape) > 1 and shape[-1] % Q4_K_BLOCK == 0:
            rng_seed = [seed, zlib.crc32(name.encode("utf-8"))]
            tensors.append((name, (shape, rng_seed, std), "random_q4_K"))
        else:
            tensors.append((name, values(name, shape, mean, std, seed),
                            "f16" if len(shape) > 1 else "f32"))
    return write_gguf(path, metadata, tensors)


# ------------------------------------- command line -------------------------------------


def parser(doc, released="bf16/bf16/f32", hidden=256,
           hidden_help="transformer width, multiple of 128", hidden_flag="--hidden"):
    """The options every writer has: --out, --seed, --dtype (released: the three files'
    released types, for the help) and the transformer's width (hidden_flag, --hidden unless
    the model's own name for it differs); the description is doc's first paragraph."""
    ap = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="output folder")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--dtype", choices=sorted(DTYPES),
                    help=f"one type for all three files (default: as released, {released})")
    ap.add_argument(hidden_flag, type=int, default=hidden, help=hidden_help)
    return ap


def add_qwen3_args(ap, hidden_help, layers_help):
    ap.add_argument("--llm-hidden", type=int, default=32, help=hidden_help)
    ap.add_argument("--llm-layers", type=int, default=36, help=layers_help)
    ap.add_argument("--llm-ff", type=int, default=96, help="Qwen3 MLP width")


def add_parts_arg(ap, names):
    ap.add_argument("--parts", default="",
                    help=f"comma-separated files to write ({', '.join(names)}); default: all")


def select_parts(ap, a, parts):
    """parts narrowed to --parts (add_parts_arg's option), or all of them without it."""
    if not a.parts:
        return parts
    wanted = a.parts.split(",")
    unknown = [p for p in wanted if p not in parts]
    if unknown:
        ap.error(f"--parts: {', '.join(unknown)} not among {', '.join(parts)}")
    return {k: v for k, v in parts.items() if k in wanted}


def parse_args(ap, argv):
    """Adds --list (the last option) and parses argv."""
    ap.add_argument("--list", action="store_true", help="print names and shapes, write nothing")
    return ap.parse_args(argv)


def check_hidden(ap, hidden, flag="--hidden"):
    if hidden % HEAD_DIM or hidden <= 0:
        ap.error(f"{flag} must be a positive multiple of 128")


def check_qwen3_layers(ap, n_layers):
    if n_layers == 28:
        ap.error("--llm-layers 28 makes stable-diffusion.cpp assume 16 query heads")


def write_parts(a, parts, generator):
    """parts: {file name without .safetensors: (specs, released dtype)}. With --list prints
    every tensor's name and shape; else writes each file into --out in --dtype or, without
    it, in its released dtype. Returns the exit status."""
    if a.list:
        for name, (specs, _) in parts.items():
            for t in sorted(specs, key=lambda t: t[0]):
                print(f"{name}: {t[0]} {list(t[1])}")
        return 0
    os.makedirs(a.out, exist_ok=True)
    for name, (specs, released) in parts.items():
        dtype = a.dtype or released
        meta = {"format": "pt", "generator": generator, "seed": str(a.seed),
                "dtype": dtype, "part": name}
        path = os.path.join(a.out, name + ".safetensors")
        n = write_safetensors(path, specs, dtype, a.seed, meta)
        print(f"wrote {path}: {len(specs)} tensors, {n / 2**20:.1f} MiB")
    return 0
