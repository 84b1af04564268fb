#!/usr/bin/env python3
"""Writes an SD 1.x or SDXL single-file checkpoint (safetensors, LDM/SGM names) as a diffusers
pipeline folder: unet/, vae/, text_encoder/ (CLIP ViT-L/14), text_encoder_2/ (SDXL's
OpenCLIP ViT-bigG/14) and model_index.json, with diffusers' and transformers' tensor names
and layouts, the values unchanged. It gives the same random-weight model in the other
layout, so a generation from the folder can be compared with one from the file, here and
in other implementations.

    make_diffusers_folder.py --checkpoint sdxl.safetensors --out sdxl-diffusers/

The renaming follows the diffusers and transformers model code: LDM's flat input/output
block counters become nested down/up blocks, OpenCLIP's fused attention input projection
splits into q/k/v, its text projection is transposed into a Linear weight, the VAE's
attention 1x1 convs become Linear weights, and the VAE decoder's levels are numbered from
the bottom instead of the top.
"""
import argparse
import json
import os
import re
import struct

import numpy as np

DTYPES = {"F16": np.float16, "F32": np.float32, "BF16": np.uint16, "I64": np.int64, "I32": np.int32}


def read_safetensors(path):
    """name -> (dtype string, shape, memory-mapped array)"""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
    data = np.memmap(path, dtype=np.uint8, mode="r", offset=8 + n)
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        begin, end = t["data_offsets"]
        arr = data[begin:end].view(DTYPES[t["dtype"]]).reshape(t["shape"])
        out[name] = (t["dtype"], arr)
    return out


def write_safetensors(path, tensors):
    """tensors: list of (name, dtype string, array); written in name order."""
    header, offset = {}, 0
    tensors = sorted(tensors, key=lambda t: t[0])
    for name, dtype, arr in tensors:
        size = arr.size * arr.itemsize
        header[name] = {"dtype": dtype, "shape": list(arr.shape),
                        "data_offsets": [offset, offset + size]}
        offset += size
    blob = json.dumps(header, separators=(",", ":")).encode()
    blob += b" " * (-len(blob) % 8)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(blob)))
        f.write(blob)
        for _, _, arr in tensors:
            f.write(np.ascontiguousarray(arr).tobytes())


RESNET = [("in_layers.0.", "norm1."), ("in_layers.2.", "conv1."), ("emb_layers.1.", "time_emb_proj."),
          ("out_layers.0.", "norm2."), ("out_layers.3.", "conv2."), ("skip_connection.", "conv_shortcut.")]


def rename_resnet(rest):
    for a, b in RESNET:
        if rest.startswith(a):
            return b + rest[len(a):]
    raise ValueError("unknown res block tensor " + rest)


def unet_levels(names):
    """Levels and whether each has attention, from the input block names."""
    blocks = {int(m.group(1)) for n in names for m in [re.match(r"input_blocks\.(\d+)\.", n)] if m}
    levels = (max(blocks) + 1) // 3
    attn = [any(n.startswith("input_blocks.%d.1." % (3 * i + 1)) for n in names)
            for i in range(levels)]
    return levels, attn


def unet_name(n, levels, attn):
    fixed = {"time_embed.0.": "time_embedding.linear_1.", "time_embed.2.": "time_embedding.linear_2.",
             "label_emb.0.0.": "add_embedding.linear_1.", "label_emb.0.2.": "add_embedding.linear_2.",
             "input_blocks.0.0.": "conv_in.", "out.0.": "conv_norm_out.", "out.2.": "conv_out."}
    for a, b in fixed.items():
        if n.startswith(a):
            return b + n[len(a):]
    m = re.match(r"input_blocks\.(\d+)\.(\d+)\.(.*)", n)
    if m:
        k, sub, rest = int(m.group(1)), int(m.group(2)), m.group(3)
        level, j = (k - 1) // 3, (k - 1) % 3
        if j == 2:  # the level's downsampling conv
            return "down_blocks.%d.downsamplers.0.conv.%s" % (level, rest[len("op."):])
        if sub == 0:
            return "down_blocks.%d.resnets.%d.%s" % (level, j, rename_resnet(rest))
        return "down_blocks.%d.attentions.%d.%s" % (level, j, rest)
    m = re.match(r"middle_block\.(\d)\.(.*)", n)
    if m:
        sub, rest = int(m.group(1)), m.group(2)
        if sub == 1:
            return "mid_block.attentions.0." + rest
        return "mid_block.resnets.%d.%s" % (sub // 2, rename_resnet(rest))
    m = re.match(r"output_blocks\.(\d+)\.(\d+)\.(.*)", n)
    if m:
        k, sub, rest = int(m.group(1)), int(m.group(2)), m.group(3)
        up, j = k // 3, k % 3
        if sub == 0:
            return "up_blocks.%d.resnets.%d.%s" % (up, j, rename_resnet(rest))
        if sub == 1 and attn[levels - 1 - up]:
            return "up_blocks.%d.attentions.%d.%s" % (up, j, rest)
        return "up_blocks.%d.upsamplers.0.%s" % (up, rest)
    raise ValueError("unknown UNet tensor " + n)


def vae_name(n, levels):
    n = n.replace("nin_shortcut.", "conv_shortcut.").replace("norm_out.", "conv_norm_out.")
    m = re.match(r"(encoder|decoder)\.mid\.(block_1|block_2|attn_1)\.(.*)", n)
    if m:
        part, block, rest = m.groups()
        if block != "attn_1":
            return "%s.mid_block.resnets.%d.%s" % (part, int(block[-1]) - 1, rest)
        for a, b in [("norm.", "group_norm."), ("q.", "to_q."), ("k.", "to_k."), ("v.", "to_v."),
                     ("proj_out.", "to_out.0.")]:
            if rest.startswith(a):
                return "%s.mid_block.attentions.0.%s%s" % (part, b, rest[len(a):])
    m = re.match(r"encoder\.down\.(\d+)\.(block\.(\d+)|downsample)\.(.*)", n)
    if m:
        i, _, j, rest = m.groups()
        if j is None:
            return "encoder.down_blocks.%s.downsamplers.0.%s" % (i, rest)
        return "encoder.down_blocks.%s.resnets.%s.%s" % (i, j, rest)
    m = re.match(r"decoder\.up\.(\d+)\.(block\.(\d+)|upsample)\.(.*)", n)
    if m:
        i, _, j, rest = m.groups()
        up = levels - 1 - int(i)
        if j is None:
            return "decoder.up_blocks.%d.upsamplers.0.%s" % (up, rest)
        return "decoder.up_blocks.%d.resnets.%s.%s" % (up, j, rest)
    return n  # conv_in, conv_out, quant_conv, post_quant_conv


def open_clip_to_hf(tensors):
    """OpenCLIP text tower (names below `model.`) -> CLIPTextModelWithProjection."""
    out = []
    for n, (dt, a) in tensors.items():
        if n == "logit_scale":
            continue
        if n == "text_projection":
            out.append(("text_projection.weight", dt, np.ascontiguousarray(a.T)))
            continue
        if n == "token_embedding.weight":
            out.append(("text_model.embeddings.token_embedding.weight", dt, a))
            continue
        if n == "positional_embedding":
            out.append(("text_model.embeddings.position_embedding.weight", dt, a))
            continue
        if n.startswith("ln_final."):
            out.append(("text_model.final_layer_norm." + n[len("ln_final."):], dt, a))
            continue
        m = re.match(r"transformer\.resblocks\.(\d+)\.(.*)", n)
        if not m:
            raise ValueError("unknown OpenCLIP tensor " + n)
        layer, rest = "text_model.encoder.layers.%s." % m.group(1), m.group(2)
        if rest.startswith("attn.in_proj_"):
            kind = rest[len("attn.in_proj_"):]  # weight or bias
            for part, chunk in zip(("q", "k", "v"), np.split(a, 3, axis=0)):
                out.append((layer + "self_attn.%s_proj.%s" % (part, kind), dt, chunk))
            continue
        for x, y in [("attn.out_proj.", "self_attn.out_proj."), ("ln_1.", "layer_norm1."),
                     ("ln_2.", "layer_norm2."), ("mlp.c_fc.", "mlp.fc1."), ("mlp.c_proj.", "mlp.fc2.")]:
            if rest.startswith(x):
                out.append((layer + y + rest[len(x):], dt, a))
                break
        else:
            raise ValueError("unknown OpenCLIP tensor " + n)
    return out


def below(tensors, prefix):
    return {n[len(prefix):]: t for n, t in tensors.items() if n.startswith(prefix)}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--checkpoint", required=True, help="SD 1.x or SDXL single-file .safetensors")
    p.add_argument("--out", required=True, help="folder to write (created)")
    args = p.parse_args()

    t = read_safetensors(args.checkpoint)
    unet = below(t, "model.diffusion_model.")
    if not unet:
        raise SystemExit("%s has no model.diffusion_model.* tensors" % args.checkpoint)
    xl = "label_emb.0.0.weight" in unet
    levels, attn = unet_levels(unet.keys())
    write_safetensors(os.path.join(args.out, "unet", "diffusion_pytorch_model.safetensors"),
                      [(unet_name(n, levels, attn), dt, a) for n, (dt, a) in unet.items()])

    vae = below(t, "first_stage_model.")
    vae_levels = 1 + max(int(m.group(1)) for n in vae for m in [re.match(r"encoder\.down\.(\d+)\.", n)] if m)
    vae_out = []
    for n, (dt, a) in vae.items():
        name = vae_name(n, vae_levels)
        if ".attentions.0.to_" in name and name.endswith(".weight") and a.ndim == 4:
            a = a.reshape(a.shape[0], a.shape[1])  # 1x1 conv -> Linear
        vae_out.append((name, dt, a))
    write_safetensors(os.path.join(args.out, "vae", "diffusion_pytorch_model.safetensors"), vae_out)

    clip_l = below(t, "conditioner.embedders.0.transformer." if xl else "cond_stage_model.transformer.")
    if not clip_l:
        raise SystemExit("%s has no CLIP ViT-L/14 text encoder (SD 1.x or SDXL base expected)"
                         % args.checkpoint)
    write_safetensors(os.path.join(args.out, "text_encoder", "model.safetensors"),
                      [(n, dt, a) for n, (dt, a) in clip_l.items()])
    if xl:
        write_safetensors(os.path.join(args.out, "text_encoder_2", "model.safetensors"),
                          open_clip_to_hf(below(t, "conditioner.embedders.1.model.")))

    index = {"_class_name": "StableDiffusionXLPipeline" if xl else "StableDiffusionPipeline",
             "unet": ["diffusers", "UNet2DConditionModel"], "vae": ["diffusers", "AutoencoderKL"],
             "text_encoder": ["transformers", "CLIPTextModel"]}
    if xl:
        index["text_encoder_2"] = ["transformers", "CLIPTextModelWithProjection"]
    with open(os.path.join(args.out, "model_index.json"), "w") as f:
        json.dump(index, f, indent=2)
    print("wrote %s (%s)" % (args.out, "SDXL" if xl else "SD 1.x"))


if __name__ == "__main__":
    main()
