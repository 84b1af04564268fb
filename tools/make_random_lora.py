#!/usr/bin/env python3
"""Write a random LoRA for a diffusion-transformer file, in kohya or diffusers/PEFT names.

Reads the tensor names and shapes of a model file (.safetensors; an SD3/SD3.5 MMDiT under
``model.diffusion_model.`` or without a root, as --diffusion-model files are) and writes
rank-R factors for a few weights of every ``--every``-th joint block:

* ``--style kohya``: ``lora_unet_joint_blocks_N_x_block_attn_qkv.lora_down.weight`` /
  ``.lora_up.weight`` / ``.alpha`` (the model's own names, '.' as '_');
* ``--style ldm``: the same with the model's dotted names,
  ``model.diffusion_model.joint_blocks.N.x_block.attn.qkv.lora_down.weight``;
* ``--style diffusers``: ``transformer.transformer_blocks.N.attn.to_q.lora_A.weight`` /
  ``.lora_B.weight``: q, k and v (and the text stream's add_q/k/v_proj) as separate
  Linears, each a third of the rows of the fused qkv weight.

Values: normal(0, --std) from --seed. Needs numpy only.
Usage: make_random_lora.py --model DIT.safetensors --out LORA.safetensors
[--style kohya|ldm|diffusers] [--rank 4] [--every 3] [--std 0.05] [--seed 0]
"""

import argparse
import json
import struct

import numpy as np


def read_shapes(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
    shapes = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        if name.startswith("model.diffusion_model."):
            name = name[len("model.diffusion_model."):]
        shapes[name] = info["shape"]
    return shapes


def write_safetensors(path, tensors):
    header, offset, blobs = {}, 0, []
    for name, arr in tensors.items():
        data = np.ascontiguousarray(arr, dtype=np.float32).tobytes()
        header[name] = {"dtype": "F32", "shape": list(arr.shape),
                        "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
        blobs.append(data)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--style", choices=("kohya", "ldm", "diffusers"), default="kohya")
    ap.add_argument("--rank", type=int, default=4)
    ap.add_argument("--every", type=int, default=3, help="every N-th joint block")
    ap.add_argument("--std", type=float, default=0.05)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    shapes = read_shapes(a.model)
    rng = np.random.default_rng(a.seed)
    depth = 1 + max(int(n.split(".")[1]) for n in shapes if n.startswith("joint_blocks."))
    out = {}

    def pair(stem, n_out, n_in, down_key, up_key, alpha):
        out[stem + down_key] = rng.normal(0, a.std, (a.rank, n_in))
        out[stem + up_key] = rng.normal(0, a.std, (n_out, a.rank))
        if alpha:
            out[stem + ".alpha"] = np.array(a.rank / 2, dtype=np.float32)

    for i in range(0, depth, a.every):
        b = "joint_blocks.%d." % i
        n_out, n_in = shapes[b + "x_block.attn.qkv.weight"]
        h = n_out // 3
        if a.style in ("kohya", "ldm"):
            for w in ("x_block.attn.qkv", "context_block.attn.qkv", "x_block.attn.proj",
                      "x_block.mlp.fc1"):
                o, n = shapes[b + w + ".weight"]
                stem = ("lora_unet_" + (b + w).replace(".", "_") if a.style == "kohya"
                        else "model.diffusion_model." + b + w)
                pair(stem, o, n, ".lora_down.weight", ".lora_up.weight", True)
        else:
            t = "transformer.transformer_blocks.%d." % i
            for w in ("attn.to_q", "attn.to_k", "attn.to_v", "attn.add_q_proj",
                      "attn.add_k_proj", "attn.add_v_proj"):
                pair(t + w, h, n_in, ".lora_A.weight", ".lora_B.weight", False)
            o, n = shapes[b + "x_block.attn.proj.weight"]
            pair(t + "attn.to_out.0", o, n, ".lora_A.weight", ".lora_B.weight", False)
            o, n = shapes[b + "x_block.mlp.fc1.weight"]
            pair(t + "ff.net.0.proj", o, n, ".lora_A.weight", ".lora_B.weight", False)
    write_safetensors(a.out, out)
    print("%s: %d tensors (%s names)" % (a.out, len(out), a.style))


if __name__ == "__main__":
    main()
