#!/usr/bin/env python3
"""Write a random-weight SDXL-variant checkpoint (.safetensors) for side-by-side checks.

The SDXL variants in the released single-file (SGM) layout, with the UNet narrowed to
--model-channels (default 64) so a run fits a small machine. The block layout, the text
encoders and the VAE keep the released shapes, because implementations that fix those
(stable-diffusion.cpp reads only the UNet's widths from a file) must be able to load it.

  --variant inpaint   sd_xl_base + 9 input channels (latent, mask, masked-image latent)
  --variant refiner   sd_xl_refiner.yaml: OpenCLIP-bigG alone under
                      conditioner.embedders.0.model, context 1280, 4 levels (1, 2, 4, 4)
                      with transformer depth 4 at levels 1 and 2 (and the middle), a
                      2560-wide vector (1280 pooled + 5 x 256: sizes, crop, aesthetic score)
  --variant ssd1b     Segmind SSD-1B: SDXL with no middle transformer and fewer blocks
                      (input level 2 depth 4; output blocks 4, 4, 10 | 2, 1, 1)
  --variant vega      Segmind Vega: depth 1 and 2, no middle transformer
  --variant base      SDXL base (for comparisons at the same width)

Tensors are drawn by ../shared/tools/make_random_sd.py's functions (per-tensor seeded, so
the same command writes the same bytes); pass --generator to point elsewhere.

Usage:
  python3 bench/make_sdxl_variant.py --variant inpaint --out /tmp/sdxl_inpaint.safetensors
"""

import argparse
import importlib.util
import os
import sys


def load_generator(path):
    spec = importlib.util.spec_from_file_location("make_random_sd", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["make_random_sd"] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


def ssd1b_unet_specs(g, cfg, input_depths, output_depths):
    """unet_specs with a depth per res block and a middle block of one ResBlock."""
    specs = []
    p, mc = cfg.prefix, cfg.model_channels
    emb = 4 * mc
    g._linear(specs, f"{p}.time_embed.0", emb, mc)
    g._linear(specs, f"{p}.time_embed.2", emb, emb)
    g._linear(specs, f"{p}.label_emb.0.0", emb, cfg.adm_in_channels)
    g._linear(specs, f"{p}.label_emb.0.2", emb, emb)
    g._conv(specs, f"{p}.input_blocks.0.0", mc, cfg.in_channels, 3)
    skips, ch, idx, res = [mc], mc, 1, 0
    n_levels = len(cfg.ch_mult)
    for level, mult in enumerate(cfg.ch_mult):
        for _ in range(cfg.num_res_blocks):
            g._unet_resblock(specs, f"{p}.input_blocks.{idx}.0", ch, mult * mc, emb)
            ch = mult * mc
            if input_depths[res]:
                g._unet_spatial_transformer(specs, f"{p}.input_blocks.{idx}.1", ch,
                                            cfg.context_dim, input_depths[res], True)
            skips.append(ch)
            idx += 1
            res += 1
        if level != n_levels - 1:
            g._conv(specs, f"{p}.input_blocks.{idx}.0.op", ch, ch, 3)
            skips.append(ch)
            idx += 1
    g._unet_resblock(specs, f"{p}.middle_block.0", ch, ch, emb)
    idx = res = 0
    for level in reversed(range(n_levels)):
        mult = cfg.ch_mult[level]
        for i in range(cfg.num_res_blocks + 1):
            g._unet_resblock(specs, f"{p}.output_blocks.{idx}.0", ch + skips.pop(), mult * mc,
                             emb)
            ch = mult * mc
            sub = 1
            if output_depths[res]:
                g._unet_spatial_transformer(specs, f"{p}.output_blocks.{idx}.1", ch,
                                            cfg.context_dim, output_depths[res], True)
                sub = 2
            if level != 0 and i == cfg.num_res_blocks:
                g._conv(specs, f"{p}.output_blocks.{idx}.{sub}.conv", ch, ch, 3)
            idx += 1
            res += 1
    g._norm(specs, f"{p}.out.0", ch)
    g._conv(specs, f"{p}.out.2", cfg.out_channels, ch, 3)
    return specs


def variant_specs(g, variant, mc):
    from dataclasses import replace
    base = g.ARCHS["sdxl"]
    unet = replace(base.unet, model_channels=mc)
    texts = base.text
    if variant == "inpaint":
        unet = replace(unet, in_channels=9)
    elif variant == "refiner":
        unet = replace(unet, ch_mult=(1, 2, 4, 4), transformer_depth=(0, 4, 4, 0),
                       middle_depth=4, context_dim=1280, adm_in_channels=2560)
        bigg = texts[1]
        texts = (replace(bigg, prefix="conditioner.embedders.0.model"),)
    if variant == "ssd1b":
        specs = ssd1b_unet_specs(g, unet, [0, 0, 2, 2, 4, 4], [4, 4, 10, 2, 1, 1, 0, 0, 0])
    elif variant == "vega":
        specs = ssd1b_unet_specs(g, unet, [0, 0, 1, 1, 2, 2], [2, 2, 2, 1, 1, 1, 0, 0, 0])
    else:
        specs = g.unet_specs(unet)
    for t in texts:
        specs += g.text_specs(t)
    specs += g.vae_specs()
    return specs


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--variant", choices=["base", "inpaint", "refiner", "ssd1b", "vega"],
                    required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--model-channels", type=int, default=64)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--dtype", choices=["f16", "f32"], default="f16")
    ap.add_argument("--generator",
                    default=os.path.join(here, "..", "..", "shared", "tools", "make_random_sd.py"))
    args = ap.parse_args()
    g = load_generator(args.generator)
    specs = variant_specs(g, args.variant, args.model_channels)
    meta = {"format": "pt", "generator": "make_sdxl_variant.py", "variant": args.variant,
            "seed": str(args.seed), "dtype": args.dtype}
    nbytes = g.write_safetensors(args.out, specs, args.dtype, args.seed, 0.02, meta)
    print(f"wrote {args.out} ({args.variant}): {len(specs)} tensors, {nbytes / 2**20:.1f} MiB")


if __name__ == "__main__":
    main()
