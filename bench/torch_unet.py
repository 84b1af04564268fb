#!/usr/bin/env python3
"""PyTorch's time for one UNet step of SD 1.5 or SDXL, to set beside sd-cli's on the same GPU.

The networks have the real layouts (channels, blocks, heads, context widths) and random
weights: a step's time and memory depend on the shapes, not on the values. Runs in bf16
with PyTorch's fused attention (scaled_dot_product_attention), batch 2 as classifier-free
guidance runs it, and prints seconds per step and the peak CUDA memory of the step.

  python3 bench/torch_unet.py --arch sd15 --size 512
  python3 bench/torch_unet.py --arch sdxl --size 1024
"""
import argparse
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

ARCHS = {
    # levels' channel multipliers, transformer depth per level (0: none), middle depth,
    # heads (fixed count, or None for 64-dim heads), context width, pooled vector width
    "sd15": dict(mult=(1, 2, 4, 4), depth=(1, 1, 1, 0), mid=1, heads=8, context=768, adm=0),
    "sdxl": dict(mult=(1, 2, 4), depth=(0, 2, 10), mid=10, heads=None, context=2048, adm=2816),
}


class ResBlock(nn.Module):
    def __init__(self, cin, cout, temb):
        super().__init__()
        self.norm1 = nn.GroupNorm(32, cin)
        self.conv1 = nn.Conv2d(cin, cout, 3, padding=1)
        self.emb = nn.Linear(temb, cout)
        self.norm2 = nn.GroupNorm(32, cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, padding=1)
        self.skip = nn.Conv2d(cin, cout, 1) if cin != cout else nn.Identity()

    def forward(self, x, t):
        h = self.conv1(F.silu(self.norm1(x)))
        h = h + self.emb(F.silu(t))[:, :, None, None]
        h = self.conv2(F.silu(self.norm2(h)))
        return self.skip(x) + h


class Attention(nn.Module):
    def __init__(self, dim, context, heads):
        super().__init__()
        self.heads = heads
        self.q = nn.Linear(dim, dim, bias=False)
        self.k = nn.Linear(context, dim, bias=False)
        self.v = nn.Linear(context, dim, bias=False)
        self.out = nn.Linear(dim, dim)

    def forward(self, x, c):
        b = x.shape[0]
        split = lambda t: t.view(b, -1, self.heads, t.shape[-1] // self.heads).transpose(1, 2)
        h = F.scaled_dot_product_attention(split(self.q(x)), split(self.k(c)), split(self.v(c)))
        return self.out(h.transpose(1, 2).reshape(b, -1, x.shape[-1]))


class TransformerBlock(nn.Module):
    def __init__(self, dim, context, heads):
        super().__init__()
        self.norm1, self.norm2, self.norm3 = nn.LayerNorm(dim), nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.attn1 = Attention(dim, dim, heads)
        self.attn2 = Attention(dim, context, heads)
        self.geglu = nn.Linear(dim, 8 * dim)
        self.ff_out = nn.Linear(4 * dim, dim)

    def forward(self, x, c):
        x = x + self.attn1(self.norm1(x), self.norm1(x))
        x = x + self.attn2(self.norm2(x), c)
        a, gate = self.geglu(self.norm3(x)).chunk(2, dim=-1)
        return x + self.ff_out(a * F.gelu(gate))


class SpatialTransformer(nn.Module):
    def __init__(self, ch, depth, context, heads):
        super().__init__()
        self.norm = nn.GroupNorm(32, ch, eps=1e-6)
        self.proj_in = nn.Linear(ch, ch)
        self.blocks = nn.ModuleList(TransformerBlock(ch, context, heads) for _ in range(depth))
        self.proj_out = nn.Linear(ch, ch)

    def forward(self, x, c):
        b, ch, h, w = x.shape
        t = self.proj_in(self.norm(x).flatten(2).transpose(1, 2))
        for block in self.blocks:
            t = block(t, c)
        return x + self.proj_out(t).transpose(1, 2).reshape(b, ch, h, w)


class UNet(nn.Module):
    def __init__(self, mult, depth, mid, heads, context, adm, base=320):
        super().__init__()
        temb = 4 * base
        self.base = base
        self.time = nn.Sequential(nn.Linear(base, temb), nn.SiLU(), nn.Linear(temb, temb))
        self.label = nn.Sequential(nn.Linear(adm, temb), nn.SiLU(), nn.Linear(temb, temb)) if adm else None
        n_heads = lambda ch: heads or ch // 64
        attn = lambda ch, d: SpatialTransformer(ch, d, context, n_heads(ch)) if d else None
        self.conv_in = nn.Conv2d(4, base, 3, padding=1)
        self.down, skips, ch = nn.ModuleList(), [base], base
        for level, m in enumerate(mult):
            for _ in range(2):
                self.down.append(nn.ModuleList([ResBlock(ch, base * m, temb), attn(base * m, depth[level])]))
                ch = base * m
                skips.append(ch)
            if level + 1 < len(mult):
                self.down.append(nn.ModuleList([nn.Conv2d(ch, ch, 3, stride=2, padding=1)]))
                skips.append(ch)
        self.mid = nn.ModuleList([ResBlock(ch, ch, temb), attn(ch, mid), ResBlock(ch, ch, temb)])
        self.up = nn.ModuleList()
        for level, m in reversed(list(enumerate(mult))):
            for i in range(3):
                parts = [ResBlock(ch + skips.pop(), base * m, temb), attn(base * m, depth[level])]
                ch = base * m
                if level and i == 2:
                    parts.append(nn.Conv2d(ch, ch, 3, padding=1))
                self.up.append(nn.ModuleList(parts))
        self.out = nn.Sequential(nn.GroupNorm(32, ch), nn.SiLU(), nn.Conv2d(ch, 4, 3, padding=1))

    def forward(self, x, t, c, y=None):
        half = self.base // 2
        freqs = torch.exp(-torch.arange(half, device=x.device) * (9.210340371976184 / half))
        args = t[:, None].float() * freqs[None]
        emb = self.time(torch.cat([torch.cos(args), torch.sin(args)], dim=-1).to(x.dtype))
        if self.label is not None:
            emb = emb + self.label(y)
        h, skips = self.conv_in(x), []
        skips.append(h)
        for parts in self.down:
            if isinstance(parts[0], ResBlock):
                h = parts[0](h, emb)
                if parts[1] is not None:
                    h = parts[1](h, c)
            else:
                h = parts[0](h)
            skips.append(h)
        h = self.mid[0](h, emb)
        h = self.mid[1](h, c) if self.mid[1] is not None else h
        h = self.mid[2](h, emb)
        for parts in self.up:
            h = parts[0](torch.cat([h, skips.pop()], dim=1), emb)
            if parts[1] is not None:
                h = parts[1](h, c)
            if len(parts) == 3:
                h = parts[2](F.interpolate(h, scale_factor=2, mode="nearest"))
        return self.out(h)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--arch", choices=ARCHS, default="sd15")
    ap.add_argument("--size", type=int, default=512, help="image side in pixels")
    ap.add_argument("--steps", type=int, default=10, help="timed steps after 3 warm-ups")
    a = ap.parse_args()
    cfg = ARCHS[a.arch]
    dev, dtype = "cuda", torch.bfloat16
    net = UNet(**cfg).to(dev, dtype).eval()
    params = sum(p.numel() for p in net.parameters())
    side = a.size // 8
    x = torch.randn(2, 4, side, side, device=dev, dtype=dtype)
    t = torch.full((2,), 500.0, device=dev)
    c = torch.randn(2, 77, cfg["context"], device=dev, dtype=dtype)
    y = torch.randn(2, cfg["adm"], device=dev, dtype=dtype) if cfg["adm"] else None
    with torch.inference_mode():
        for _ in range(3):
            net(x, t, c, y)
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        start = time.perf_counter()
        for _ in range(a.steps):
            net(x, t, c, y)
        torch.cuda.synchronize()
    per_step = (time.perf_counter() - start) / a.steps
    peak = torch.cuda.max_memory_allocated() / 2**20
    print(f"torch {torch.__version__} {a.arch} {a.size}x{a.size} bf16, batch 2: "
          f"{per_step:.4f} s/step, {params / 1e6:.0f}M parameters, peak CUDA memory {peak:.0f} MiB")


if __name__ == "__main__":
    main()
