#!/usr/bin/env python3
"""PyTorch's throughput on the kernels vulkan_tests' VulkanBench times, same shapes, same GPU.

Prints TFLOP/s in bf16 (tensor cores) and in f32 with TF32 off (the SIMT units, what a
GEMM without cooperative matrices can reach), each the mean of 20 runs after 3 warm-ups.
"""
import time

import torch
import torch.nn.functional as F


def tflops(flops, fn):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(20):
        fn()
    torch.cuda.synchronize()
    return flops / ((time.perf_counter() - start) / 20) * 1e-12


def main():
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    dev = "cuda"
    for dtype in (torch.bfloat16, torch.float32):
        name = str(dtype).replace("torch.", "")
        a = torch.randn(4096, 4096, device=dev, dtype=dtype)
        b = torch.randn(4096, 4096, device=dev, dtype=dtype)
        print(f"torch matmul 4096^3 {name}: {tflops(2 * 4096**3, lambda: a @ b):.1f} TFLOP/s")
        x = torch.randn(2, 320, 64, 64, device=dev, dtype=dtype)
        w = torch.randn(320, 320, 3, 3, device=dev, dtype=dtype)
        flops = 2 * 64 * 64 * 320 * 320 * 9 * 2
        print(f"torch conv2d 3x3 320->320 64x64 x2 {name}: "
              f"{tflops(flops, lambda: F.conv2d(x, w, padding=1)):.1f} TFLOP/s")
        q, k, v = (torch.randn(2, 8, 4096, 40, device=dev, dtype=dtype) for _ in range(3))
        flops = 4 * 4096 * 4096 * 40 * 8 * 2
        print(f"torch attention 4096 tokens 8x40 x2 {name}: "
              f"{tflops(flops, lambda: F.scaled_dot_product_attention(q, k, v)):.1f} TFLOP/s")
        q, k, v = (torch.randn(1, 24, 4608, 128, device=dev, dtype=dtype) for _ in range(3))
        flops = 4 * 4608 * 4608 * 128 * 24
        print(f"torch attention 4608 tokens 24x128 {name}: "
              f"{tflops(flops, lambda: F.scaled_dot_product_attention(q, k, v)):.1f} TFLOP/s")
        q, k, v = (torch.randn(1, 1, 4096, 512, device=dev, dtype=dtype) for _ in range(3))
        flops = 4 * 4096 * 4096 * 512
        print(f"torch attention 4096 tokens 1x512 {name}: "
              f"{tflops(flops, lambda: F.scaled_dot_product_attention(q, k, v)):.1f} TFLOP/s")


if __name__ == "__main__":
    main()
