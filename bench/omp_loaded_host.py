#!/usr/bin/env python3
"""A binding on a busy machine: libstable-diffusion.so loaded through ctypes, as Python
bindings load it, generating on the tests' tiny SDXL-shaped checkpoint (64x64 by default, 4 steps,
n_threads = the machine's cores) while as many busy processes as cores run beside it. Side
by side in one run, for each of --policies:
  default                nothing chosen: the library's default
  GOMP_SPINCOUNT=300000  libgomp's own default, before the library chose
  (or any other VARIABLE=VALUE, e.g. OMP_WAIT_POLICY=passive)
Prints each run's wall and CPU seconds (median of R generations after a first one).

usage: omp_loaded_host.py LIBSTABLE_DIFFUSION_SO MAKE_TINY_MODEL SHARED_DIR [--runs 3] [--size 64]
"""
import argparse
import ctypes
import multiprocessing
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "shared_library"))

ap = argparse.ArgumentParser()
ap.add_argument("library")
ap.add_argument("make_model")
ap.add_argument("shared")
ap.add_argument("--runs", type=int, default=3)
ap.add_argument("--size", type=int, default=64)
ap.add_argument("--policies", default="default,GOMP_SPINCOUNT=300000",
                help="comma-separated: 'default' (nothing set) or VARIABLE=VALUE")
ap.add_argument("--model-file", help="a checkpoint to use instead of the tiny one")
ap.add_argument("--model")  # internal: generate in this process
args = ap.parse_args()


def generate():
    from ctypes import POINTER, byref, c_int
    import ctypes_binding as b
    lib = ctypes.CDLL(args.library)
    lib.sd_ctx_params_init.argtypes = [POINTER(b.sd_ctx_params_t)]
    lib.new_sd_ctx.argtypes = [POINTER(b.sd_ctx_params_t)]
    lib.new_sd_ctx.restype = ctypes.c_void_p
    lib.sd_img_gen_params_init.argtypes = [POINTER(b.sd_img_gen_params_t)]
    lib.generate_image.argtypes = [ctypes.c_void_p, POINTER(b.sd_img_gen_params_t),
                                   POINTER(POINTER(b.sd_image_t)), POINTER(c_int)]
    lib.generate_image.restype = ctypes.c_bool
    p = b.sd_ctx_params_t()
    lib.sd_ctx_params_init(byref(p))
    p.model_path = args.model.encode()
    p.n_threads = os.cpu_count()
    ctx = lib.new_sd_ctx(byref(p))
    assert ctx, "new_sd_ctx failed"
    g = b.sd_img_gen_params_t()
    lib.sd_img_gen_params_init(byref(g))
    g.prompt = b"a lighthouse at dusk"
    g.width = g.height = args.size
    g.sample_params.sample_steps = 4
    g.seed = 42
    walls, cpus = [], []
    for i in range(args.runs + 1):
        images, count = POINTER(b.sd_image_t)(), c_int(0)
        wall, cpu = time.time(), resource.getrusage(resource.RUSAGE_SELF)
        assert lib.generate_image(ctx, byref(g), byref(images), byref(count))
        after = resource.getrusage(resource.RUSAGE_SELF)
        if i:  # the first run warms up
            walls.append(time.time() - wall)
            cpus.append(after.ru_utime + after.ru_stime - cpu.ru_utime - cpu.ru_stime)
    print(f"{statistics.median(walls):.3f} {statistics.median(cpus):.3f}")


if args.model:
    generate()
    sys.exit(0)

work = tempfile.mkdtemp(prefix="sd_omp_bench_")
model = args.model_file or os.path.join(work, "tiny.safetensors")
if not args.model_file:
    subprocess.run([args.make_model, model, os.path.join(work, "cn.safetensors")], check=True)
vocab = os.path.join(args.shared, "data", "clip", "bpe_simple_vocab_16e6.txt.gz")
base = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
base["SD_CLIP_VOCAB"] = vocab


def busy():
    while True:
        pass


results = {}
policies = args.policies.split(",")
for name in policies:
    extra = dict([name.split("=", 1)]) if "=" in name else {}
    for loaded in (False, True):
        hogs = [multiprocessing.Process(target=busy, daemon=True) for _ in range(os.cpu_count())] \
            if loaded else []
        for h in hogs:
            h.start()
        out = subprocess.run([sys.executable, __file__, args.library, args.make_model, args.shared,
                              "--runs", str(args.runs), "--size", str(args.size), "--model", model],
                             env=dict(base, **extra), capture_output=True, text=True, timeout=1800)
        for h in hogs:
            h.terminate()
        if out.returncode != 0:
            sys.exit(out.stderr[-2000:])
        results[(name, loaded)] = [float(x) for x in out.stdout.split()[-2:]]

print(f"{args.size}x{args.size}, 4 steps, n_threads {os.cpu_count()}, median of {args.runs}: wall s / CPU s")
print(f"{'':24s} {'idle machine':>18s} {'busy machine':>18s}")
for name in policies:
    idle, busy_ = results[(name, False)], results[(name, True)]
    print(f"{name:24s} {idle[0]:8.3f} / {idle[1]:7.3f} {busy_[0]:8.3f} / {busy_[1]:7.3f}")
