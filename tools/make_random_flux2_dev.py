#!/usr/bin/env python3
"""Write a random-weight FLUX.2 dev model as the three files it runs from, with a synthetic
Mistral tokenizer.

Files (names and layouts of the released ones; every dimension a reader takes from the
file is small, every dimension stable-diffusion.cpp fixes in code keeps its released size):

* ``<out>/flux2_dev.safetensors``  the transformer, as make_random_flux2.py writes klein's
  (see there) with FLUX.2 dev's guidance embedder ``guidance_in.{in_layer, out_layer}`` and
  48 single blocks (stable-diffusion.cpp calls a file dev when it has ``single_blocks.47``).
  Released: hidden 6144 (48 heads), 8 double blocks, text features 15360 (= 3 x 5120,
  Mistral's layers 10, 20 and 30 side by side); default here: hidden 128 (one head), 2
  double blocks, text features 3 x the text model's width.
* ``<out>/mistral.gguf``  Mistral Small 3.2's language model as llama.cpp writes it into
  GGUF (``general.architecture`` llama): ``token_embd``, ``blk.N.{attn_norm, attn_q, attn_k,
  attn_v, attn_output, ffn_norm, ffn_gate, ffn_up, ffn_down}``, ``output_norm``; no biases,
  no q/k norms; q and k in llama.cpp's rotary layout (neighbouring channels pair; random
  weights need no permutation). Head dim 128, 32 query and 8 key/value heads (fixed in
  stable-diffusion.cpp), the full 131072-row embedding. Released: hidden 5120, 40 layers,
  MLP 32768; default here: hidden 32, 31 layers (dev reads hidden_states[30] before the
  final norm), MLP 96. The file carries the tokenizer below as llama.cpp's metadata
  (``tokenizer.ggml.model`` gpt2, ``.pre`` tekken, tokens, merges, token types).
* ``<out>/tokenizer.json``  the same tokenizer as a Hugging Face file (BPE, the tekken
  pre-tokenizer regex, byte-level): Mistral's real vocabulary cannot be shipped, so this is
  a synthetic one of its layout: ids 0-999 the control tokens (``<unk>``, ``<s>``,
  ``</s>``, ``[INST]``, ``[/INST]``, ..., ``[SYSTEM_PROMPT]`` 17, ``[/SYSTEM_PROMPT]`` 18,
  then ``<SPECIAL_20>`` ... ``<SPECIAL_999>``), ids 1000-1255 the 256 bytes as GPT-2's byte
  symbols, then merges learnt from a small English text (FLUX.2 dev's system prompt
  among it).
* ``<out>/ae.safetensors``  the FLUX.2 autoencoder as make_random_flux2.py writes it.

Weights as make_random_flux2.py's (the text model's linears normal(0, 1/sqrt(fan_in)),
norm scales 1 + normal(0, 0.1), the embedding normal(0, 1)); each random tensor has its
own generator seeded with (seed, crc32(name)): same seed, same bytes.

Usage: make_random_flux2_dev.py --out DIR [--seed N] [--dtype f32|f16|bf16] [--hidden 128]
[--double-blocks 2] [--llm-hidden 32] [--llm-layers 31] [--llm-ff 96] [--list]
"""

import json
import os
import re
import sys
from collections import Counter

import numpy as np

import make_random_flux2 as klein
import random_model_parts as rw
from gguf_writer import write_gguf
from random_model_parts import HEAD_DIM

DEV_LAYERS = (10, 20, 30)  # Mistral hidden states dev reads
SINGLE_BLOCKS = 48
MISTRAL_VOCAB = 131072
MISTRAL_HEADS, MISTRAL_KV_HEADS = 32, 8
MISTRAL_ROPE_THETA = 1e9
MERGES = 400

CONTROL_TOKENS = [
    "<unk>", "<s>", "</s>", "[INST]", "[/INST]", "[AVAILABLE_TOOLS]", "[/AVAILABLE_TOOLS]",
    "[TOOL_RESULTS]", "[/TOOL_RESULTS]", "[TOOL_CALLS]", "[IMG]", "<pad>", "[IMG_BREAK]",
    "[IMG_END]", "[PREFIX]", "[MIDDLE]", "[SUFFIX]", "[SYSTEM_PROMPT]", "[/SYSTEM_PROMPT]",
    "[TOOL_CONTENT]",
] + [f"<SPECIAL_{i}>" for i in range(20, 1000)]

# The text the merges are learnt from.
CORPUS = (
    "You are an AI that reasons about image descriptions. You give structured responses "
    "focusing on object relationships, object\nattribution and actions without speculation. "
    "a photograph of a red fox sitting in the snow at sunset, highly detailed. "
    "a lovely cat on a wooden table next to a cup of coffee in the morning light. "
    "an astronaut riding a horse on the moon, digital art, sharp focus. "
    "the quick brown fox jumps over the lazy dog while the other animals watch. "
    "a painting of a mountain lake with trees and clouds reflected in the water. "
    "portrait of an old man with a beard, studio lighting, black and white photo. "
    "a city street at night with neon signs and rain on the road. "
)
WORD = re.compile(r"[^\r\n\w]?[A-Za-z]+|\d| ?[^\s\w]+[\r\n/]*|\s*[\r\n]+|\s+")


def byte_symbols():
    """GPT-2's printable stand-ins for the 256 bytes, in byte order."""
    printable = (list(range(ord("!"), ord("~") + 1)) + list(range(ord("\xa1"), ord("\xac") + 1))
                 + list(range(ord("\xae"), ord("\xff") + 1)))
    table, extra = {}, 0
    for b in range(256):
        if b in printable:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + extra)
            extra += 1
    return [table[b] for b in range(256)]


def learn_merges(n):
    """The n most frequent pairs, merged greedily over CORPUS's words (ties: the pair first
    in sorted order), as byte-symbol strings."""
    sym = byte_symbols()
    words = Counter(tuple(sym[b] for b in w.encode("utf-8")) for w in WORD.findall(CORPUS))
    merges = []
    while len(merges) < n:
        pairs = Counter()
        for w, c in words.items():
            for a, b in zip(w, w[1:]):
                pairs[(a, b)] += c
        if not pairs:
            break
        best = min(pairs.items(), key=lambda kv: (-kv[1], kv[0]))[0]
        merges.append(best)
        merged = {}
        for w, c in words.items():
            out, i = [], 0
            while i < len(w):
                if i + 1 < len(w) and (w[i], w[i + 1]) == best:
                    out.append(w[i] + w[i + 1])
                    i += 2
                else:
                    out.append(w[i])
                    i += 1
            merged[tuple(out)] = merged.get(tuple(out), 0) + c
        words = merged
    return merges


def tokenizer_parts():
    """(tokens by id, merges as "a b", token types (3: control, 1: normal))."""
    sym = byte_symbols()
    merges = learn_merges(MERGES)
    tokens = CONTROL_TOKENS + sym
    for a, b in merges:  # two merges may spell the same token
        if a + b not in tokens:
            tokens.append(a + b)
    types = [3] * len(CONTROL_TOKENS) + [1] * (len(tokens) - len(CONTROL_TOKENS))
    return tokens, [f"{a} {b}" for a, b in merges], types


def tokenizer_json(tokens, merges):
    n_control = len(CONTROL_TOKENS)
    return {
        "version": "1.0",
        "added_tokens": [{"id": i, "content": t, "single_word": False, "lstrip": False,
                          "rstrip": False, "normalized": False, "special": True}
                         for i, t in enumerate(tokens[:n_control])],
        "normalizer": None,
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": TEKKEN_REGEX}, "behavior": "Isolated",
             "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
             "use_regex": False}]},
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True,
                    "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>",
                  "continuing_subword_prefix": None, "end_of_word_suffix": None,
                  "fuse_unk": False, "byte_fallback": False,
                  "vocab": {t: i for i, t in enumerate(tokens)},
                  "merges": merges},
    }


# Mistral's tekken pre-tokenizer (its tokenizer.json's Split pattern).
TEKKEN_REGEX = (
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+"
    r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*"
    r"|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)


def mistral_specs(hidden, n_layers, ff):
    """Mistral's language model under llama.cpp's GGUF names, rows first."""
    s = [("token_embd.weight", (MISTRAL_VOCAB, hidden), 0.0, 1.0)]
    q, kv = MISTRAL_HEADS * HEAD_DIM, MISTRAL_KV_HEADS * HEAD_DIM
    for i in range(n_layers):
        p = f"blk.{i}"
        rw.norm(s, f"{p}.attn_norm", hidden)
        rw.linear(s, f"{p}.attn_q", q, hidden)
        rw.linear(s, f"{p}.attn_k", kv, hidden)
        rw.linear(s, f"{p}.attn_v", kv, hidden)
        rw.linear(s, f"{p}.attn_output", hidden, q)
        rw.norm(s, f"{p}.ffn_norm", hidden)
        rw.linear(s, f"{p}.ffn_gate", ff, hidden)
        rw.linear(s, f"{p}.ffn_up", ff, hidden)
        rw.linear(s, f"{p}.ffn_down", hidden, ff)
    rw.norm(s, "output_norm", hidden)
    return s


def write_mistral(a, specs, tokens, merges, types):
    dtype = "f16" if a.dtype in ("f16", "bf16") else "f32"
    tensors = []
    for name, shape, mean, std in sorted(specs, key=lambda t: t[0]):
        x = rw.values(name, shape, mean, std, a.seed)
        # GGUF keeps norms in f32, as llama.cpp writes them.
        tensors.append((name, x, "f32" if len(shape) == 1 else dtype))
    meta = {
        "general.architecture": "llama",
        "general.name": "random Mistral Small 3.2 language model",
        "general.file_type": 0 if dtype == "f32" else 1,
        "llama.block_count": a.llm_layers,
        "llama.context_length": 131072,
        "llama.embedding_length": a.llm_hidden,
        "llama.feed_forward_length": a.llm_ff,
        "llama.attention.head_count": MISTRAL_HEADS,
        "llama.attention.head_count_kv": MISTRAL_KV_HEADS,
        "llama.attention.key_length": HEAD_DIM,
        "llama.attention.value_length": HEAD_DIM,
        "llama.rope.freq_base": MISTRAL_ROPE_THETA,
        "llama.attention.layer_norm_rms_epsilon": 1e-5,
        "tokenizer.ggml.model": "gpt2",
        "tokenizer.ggml.pre": "tekken",
        "tokenizer.ggml.tokens": tokens,
        "tokenizer.ggml.merges": merges,
        "tokenizer.ggml.token_type": types,
        "tokenizer.ggml.bos_token_id": 1,
        "tokenizer.ggml.eos_token_id": 2,
        "tokenizer.ggml.unknown_token_id": 0,
        "tokenizer.ggml.padding_token_id": 11,
    }
    path = os.path.join(a.out, "mistral.gguf")
    n = write_gguf(path, meta, tensors)
    print(f"wrote {path}: {len(tensors)} tensors, {n / 2**20:.1f} MiB")


def main(argv=None):
    ap = rw.parser(__doc__, released="bf16/bf16/f32", hidden=128)
    ap.add_argument("--double-blocks", type=int, default=2)
    ap.add_argument("--llm-hidden", type=int, default=32, help="Mistral width (features 3x)")
    ap.add_argument("--llm-layers", type=int, default=31,
                    help="Mistral layers; 40 as released, more than 30 (dev reads 10, 20, 30)")
    ap.add_argument("--llm-ff", type=int, default=96, help="Mistral MLP width")
    a = rw.parse_args(ap, argv)
    rw.check_hidden(ap, a.hidden)
    if min(a.double_blocks, a.llm_hidden, a.llm_ff) <= 0:
        ap.error("sizes must be positive")
    if a.llm_layers <= max(DEV_LAYERS):
        ap.error("--llm-layers must be more than 30 (dev reads hidden states 10, 20 and 30)")
    mistral = mistral_specs(a.llm_hidden, a.llm_layers, a.llm_ff)
    parts = {
        "flux2_dev": (klein.dit_specs(a.hidden, a.double_blocks, SINGLE_BLOCKS,
                                      len(DEV_LAYERS) * a.llm_hidden, guidance_in=True), "bf16"),
        "ae": (rw.ae_specs(128, 128, klein.AE_Z, quant_convs=True)
               + klein.bn_specs("released", a.seed), "f32"),
    }
    if a.list:
        for t in sorted(mistral, key=lambda t: t[0]):
            print(f"mistral: {t[0]} {list(t[1])}")
        return rw.write_parts(a, parts, "make_random_flux2_dev.py")
    status = rw.write_parts(a, parts, "make_random_flux2_dev.py")
    tokens, merges, types = tokenizer_parts()
    write_mistral(a, mistral, tokens, merges, types)
    path = os.path.join(a.out, "tokenizer.json")
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        json.dump(tokenizer_json(tokens, merges), f, ensure_ascii=False)
    os.replace(path + ".tmp", path)
    print(f"wrote {path}: {len(tokens)} tokens, {len(merges)} merges")
    return status


if __name__ == "__main__":
    sys.exit(main())
