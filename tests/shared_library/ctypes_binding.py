"""Loads the installed libstable-diffusion.so the way language bindings do: ctypes.CDLL by
name, with structs mirrored field by field from include/stable-diffusion.h.

A wrong mirror silently corrupts memory, so the layouts are checked first: each mirrored
struct must list the header's fields in the header's order, and a C program written from
the mirror prints sizeof, every field's offset and size and the enum values used, compiled
against the installed header (pkg-config --cflags stable-diffusion) for comparison. A bool
mirrored as an int, or a field left out, can hide in padding; these checks find both.

usage: ctypes_binding.py HEADER VERSION [MODEL]  (with MODEL: generate one image from it)
"""

import ctypes
import os
import re
import shlex
import subprocess
import sys
import tempfile
from ctypes import (CFUNCTYPE, POINTER, Structure, byref, c_bool, c_char_p, c_float, c_int,
                    c_int64, c_size_t, c_uint8, c_uint32, c_void_p)

c_enum = c_int  # every enum in the header fits an int


class sd_tiling_params_t(Structure):
    _fields_ = [("enabled", c_bool), ("temporal_tiling", c_bool), ("tile_size_x", c_int),
                ("tile_size_y", c_int), ("target_overlap", c_float), ("rel_size_x", c_float),
                ("rel_size_y", c_float), ("extra_tiling_args", c_char_p)]


class sd_embedding_t(Structure):
    _fields_ = [("name", c_char_p), ("path", c_char_p)]


class sd_ctx_params_t(Structure):
    _fields_ = [(name, c_char_p) for name in (
        "model_path", "clip_l_path", "clip_g_path", "clip_vision_path", "t5xxl_path",
        "llm_path", "llm_vision_path", "diffusion_model_path",
        "high_noise_diffusion_model_path", "uncond_diffusion_model_path",
        "embeddings_connectors_path", "vae_path", "audio_vae_path", "taesd_path",
        "control_net_path", "ip_adapter_path", "motion_module_path")] + [
        ("embeddings", POINTER(sd_embedding_t)), ("embedding_count", c_uint32),
        ("photo_maker_path", c_char_p), ("pulid_weights_path", c_char_p),
        ("tensor_type_rules", c_char_p), ("n_threads", c_int), ("wtype", c_enum),
        ("rng_type", c_enum), ("sampler_rng_type", c_enum), ("prediction", c_enum),
        ("lora_apply_mode", c_enum), ("enable_mmap", c_bool), ("flash_attn", c_bool),
        ("diffusion_flash_attn", c_bool), ("tae_preview_only", c_bool),
        ("diffusion_conv_direct", c_bool), ("vae_conv_direct", c_bool),
        ("force_sdxl_vae_conv_scale", c_bool), ("vae_format", c_enum), ("max_vram", c_char_p),
        ("stream_layers", c_bool), ("eager_load", c_bool), ("backend", c_char_p),
        ("params_backend", c_char_p), ("split_mode", c_char_p), ("auto_fit", c_bool),
        ("rpc_servers", c_char_p), ("model_args", c_char_p), ("quantize_convs", c_bool)]


class sd_image_t(Structure):
    _fields_ = [("width", c_uint32), ("height", c_uint32), ("channel", c_uint32),
                ("data", POINTER(c_uint8))]


class sd_slg_params_t(Structure):
    _fields_ = [("layers", POINTER(c_int)), ("layer_count", c_size_t), ("layer_start", c_float),
                ("layer_end", c_float), ("scale", c_float)]


class sd_guidance_params_t(Structure):
    _fields_ = [("txt_cfg", c_float), ("img_cfg", c_float), ("distilled_guidance", c_float),
                ("slg", sd_slg_params_t)]


class sd_sample_params_t(Structure):
    _fields_ = [("guidance", sd_guidance_params_t), ("scheduler", c_enum),
                ("sample_method", c_enum), ("sample_steps", c_int), ("eta", c_float),
                ("shifted_timestep", c_int), ("custom_sigmas", POINTER(c_float)),
                ("custom_sigmas_count", c_int), ("flow_shift", c_float),
                ("extra_sample_args", c_char_p)]


class sd_pm_params_t(Structure):
    _fields_ = [("id_images", POINTER(sd_image_t)), ("id_images_count", c_int),
                ("id_embed_path", c_char_p), ("style_strength", c_float)]


class sd_pulid_params_t(Structure):
    _fields_ = [("id_embedding_path", c_char_p), ("id_weight", c_float)]


class sd_cache_params_t(Structure):
    _fields_ = [("mode", c_enum), ("reuse_threshold", c_float), ("start_percent", c_float),
                ("end_percent", c_float), ("error_decay_rate", c_float),
                ("use_relative_threshold", c_bool), ("reset_error_on_compute", c_bool),
                ("Fn_compute_blocks", c_int), ("Bn_compute_blocks", c_int),
                ("residual_diff_threshold", c_float), ("max_warmup_steps", c_int),
                ("max_cached_steps", c_int), ("max_continuous_cached_steps", c_int),
                ("taylorseer_n_derivatives", c_int), ("taylorseer_skip_interval", c_int),
                ("scm_mask", c_char_p), ("scm_policy_dynamic", c_bool),
                ("spectrum_w", c_float), ("spectrum_m", c_int), ("spectrum_lam", c_float),
                ("spectrum_window_size", c_int), ("spectrum_flex_window", c_float),
                ("spectrum_warmup_steps", c_int), ("spectrum_stop_percent", c_float)]


class sd_lora_t(Structure):
    _fields_ = [("is_high_noise", c_bool), ("multiplier", c_float), ("path", c_char_p)]


class sd_hires_params_t(Structure):
    _fields_ = [("enabled", c_bool), ("upscaler", c_enum), ("model_path", c_char_p),
                ("scale", c_float), ("target_width", c_int), ("target_height", c_int),
                ("steps", c_int), ("denoising_strength", c_float),
                ("upscale_tile_size", c_int), ("custom_sigmas", POINTER(c_float)),
                ("custom_sigmas_count", c_int)]


class sd_img_gen_params_t(Structure):
    _fields_ = [("loras", POINTER(sd_lora_t)), ("lora_count", c_uint32),
                ("prompt", c_char_p), ("negative_prompt", c_char_p), ("clip_skip", c_int),
                ("init_image", sd_image_t), ("ref_images", POINTER(sd_image_t)),
                ("ref_images_count", c_int), ("ref_image_args", c_char_p),
                ("mask_image", sd_image_t), ("width", c_int), ("height", c_int),
                ("sample_params", sd_sample_params_t), ("strength", c_float),
                ("seed", c_int64), ("batch_count", c_int), ("control_image", sd_image_t),
                ("control_strength", c_float), ("ip_adapter_image", sd_image_t),
                ("ip_adapter_strength", c_float), ("pm_params", sd_pm_params_t),
                ("pulid_params", sd_pulid_params_t),
                ("vae_tiling_params", sd_tiling_params_t), ("cache", sd_cache_params_t),
                ("hires", sd_hires_params_t), ("qwen_image_layers", c_int),
                ("circular_x", c_bool), ("circular_y", c_bool)]


MIRRORED = [sd_tiling_params_t, sd_embedding_t, sd_ctx_params_t, sd_image_t, sd_slg_params_t,
            sd_guidance_params_t, sd_sample_params_t, sd_pm_params_t, sd_pulid_params_t,
            sd_cache_params_t, sd_lora_t, sd_hires_params_t, sd_img_gen_params_t]

# The header's values for the enums used below (checked with the layouts).
SD_TYPE_COUNT, CUDA_RNG, RNG_TYPE_COUNT, PREDICTION_COUNT = 42, 1, 3, 7
SD_VAE_FORMAT_AUTO, SAMPLE_METHOD_COUNT, SCHEDULER_COUNT, SD_LOG_ERROR = -1, 21, 16, 3
SD_HIRES_UPSCALER_LATENT_NEAREST = 2
CONSTANTS = dict(SD_TYPE_COUNT=SD_TYPE_COUNT, CUDA_RNG=CUDA_RNG, RNG_TYPE_COUNT=RNG_TYPE_COUNT,
                 PREDICTION_COUNT=PREDICTION_COUNT, SD_VAE_FORMAT_AUTO=SD_VAE_FORMAT_AUTO,
                 SAMPLE_METHOD_COUNT=SAMPLE_METHOD_COUNT, SCHEDULER_COUNT=SCHEDULER_COUNT,
                 SD_LOG_ERROR=SD_LOG_ERROR,
                 SD_HIRES_UPSCALER_LATENT_NEAREST=SD_HIRES_UPSCALER_LATENT_NEAREST)

failures = []


def check(condition, what):
    if not condition:
        failures.append(what)
        print("FAIL:", what, flush=True)


def c_layouts(workdir):
    """{"struct": size, "struct.field": offset} as the C compiler sees the installed header."""
    lines = ["#include <stddef.h>", "#include <stdio.h>", "#include <stable-diffusion.h>",
             "int main(void) {"]
    for s in MIRRORED:
        lines.append(f'  printf("{s.__name__} %zu\\n", sizeof({s.__name__}));')
        for name, _ in s._fields_:
            field = f"{s.__name__}.{name}"
            lines.append(f'  printf("{field} %zu\\n", offsetof({s.__name__}, {name}));')
            lines.append(
                f'  printf("{field}.size %zu\\n", sizeof((({s.__name__}*)0)->{name}));')
    for name in CONSTANTS:
        lines.append(f'  printf("{name} %d\\n", (int){name});')
    lines += ["  return 0;", "}"]
    src = os.path.join(workdir, "layouts.c")
    exe = os.path.join(workdir, "layouts")
    with open(src, "w") as f:
        f.write("\n".join(lines) + "\n")
    cflags = subprocess.run(["pkg-config", "--cflags", "stable-diffusion"], check=True,
                            capture_output=True, text=True).stdout
    subprocess.run(["cc", "-std=c11", "-Wall", "-Werror", *shlex.split(cflags), src, "-o", exe],
                   check=True)
    out = subprocess.run([exe], check=True, capture_output=True, text=True).stdout
    return {k: int(v) for k, v in (line.split() for line in out.splitlines())}


def header_fields(header):
    """{"struct": [field, ...]} for every `typedef struct { ... } name;` in the header."""
    text = re.sub(r"/\*.*?\*/", "", open(header).read(), flags=re.S)
    fields = {}
    for body, name in re.findall(r"typedef struct\s*\{(.*?)\}\s*(\w+)\s*;", text, flags=re.S):
        decls = [d.strip() for d in body.split(";") if d.strip()]
        fields[name] = [re.search(r"(\w+)\s*(\[[^]]*\])?$", d).group(1) for d in decls]
    return fields


def check_layouts(header):
    declared = header_fields(header)
    with tempfile.TemporaryDirectory() as workdir:
        c = c_layouts(workdir)
    for s in MIRRORED:
        mirrored = [name for name, _ in s._fields_]
        check(mirrored == declared.get(s.__name__),
              f"{s.__name__} fields: mirror {mirrored}, header {declared.get(s.__name__)}")
        check(ctypes.sizeof(s) == c[s.__name__],
              f"sizeof({s.__name__}): mirror {ctypes.sizeof(s)}, header {c[s.__name__]}")
        for name, _ in s._fields_:
            field = f"{s.__name__}.{name}"
            offset, size = getattr(s, name).offset, getattr(s, name).size
            check(offset == c[field], f"offsetof {field}: mirror {offset}, header {c[field]}")
            check(size == c[field + ".size"],
                  f"sizeof {field}: mirror {size}, header {c[field + '.size']}")
    for name, value in CONSTANTS.items():
        check(value == c[name], f"{name}: mirror {value}, header {c[name]}")
    if not failures:
        print(f"layouts: {len(MIRRORED)} structs and {len(CONSTANTS)} enum values match the "
              "header", flush=True)


def load():
    lib = ctypes.CDLL("libstable-diffusion.so")  # found as bindings find it: by name
    lib.sd_version.restype = c_char_p
    lib.sd_ctx_params_init.argtypes = [POINTER(sd_ctx_params_t)]
    lib.sd_ctx_params_to_str.argtypes = [POINTER(sd_ctx_params_t)]
    lib.sd_ctx_params_to_str.restype = c_void_p  # the caller frees it
    lib.new_sd_ctx.argtypes = [POINTER(sd_ctx_params_t)]
    lib.new_sd_ctx.restype = c_void_p
    lib.free_sd_ctx.argtypes = [c_void_p]
    lib.sd_img_gen_params_init.argtypes = [POINTER(sd_img_gen_params_t)]
    lib.generate_image.argtypes = [c_void_p, POINTER(sd_img_gen_params_t),
                                   POINTER(POINTER(sd_image_t)), POINTER(c_int)]
    lib.generate_image.restype = c_bool
    lib.free_sd_images.argtypes = [POINTER(sd_image_t), c_int]
    lib.sd_list_devices.argtypes = [c_char_p, c_size_t]
    lib.sd_list_devices.restype = c_size_t
    return lib


LOG_CB = CFUNCTYPE(None, c_enum, c_char_p, c_void_p)
PROGRESS_CB = CFUNCTYPE(None, c_int, c_int, c_float, c_void_p)
log_lines = []
progress = []
# Kept referenced for as long as the library may call them.
on_log = LOG_CB(lambda level, text, data: log_lines.append((level, text.decode())))
on_progress = PROGRESS_CB(lambda step, steps, time, data: progress.append((step, steps)))


def main():
    header, version = sys.argv[1], sys.argv[2]
    model = sys.argv[3] if len(sys.argv) > 3 else None
    check_layouts(header)
    if failures:  # calling in with a wrong mirror would corrupt memory
        return 1

    lib = load()
    with open("/proc/self/maps") as f:
        where = {line.split()[-1] for line in f if "libstable-diffusion" in line}
    print("loaded:", *sorted(where), flush=True)
    check(lib.sd_version().decode() == version, f"sd_version() is {lib.sd_version()}")
    lib.sd_set_log_callback(on_log, None)
    lib.sd_set_progress_callback(on_progress, None)

    devices = ctypes.create_string_buffer(4096)
    lib.sd_list_devices(devices, len(devices))
    check(devices.value.startswith(b"CPU\t"), f"sd_list_devices: {devices.value!r}")

    # Defaults written by the library, read through the mirror: a shifted field would
    # read its neighbour's value.
    p = sd_ctx_params_t()
    lib.sd_ctx_params_init(byref(p))
    check(p.model_path is None and p.enable_mmap and p.wtype == SD_TYPE_COUNT and
          p.rng_type == CUDA_RNG and p.sampler_rng_type == RNG_TYPE_COUNT and
          p.prediction == PREDICTION_COUNT and p.vae_format == SD_VAE_FORMAT_AUTO and
          not p.eager_load and p.model_args is None, "sd_ctx_params_init defaults")
    g = sd_img_gen_params_t()
    lib.sd_img_gen_params_init(byref(g))
    check(g.batch_count == 1 and g.sample_params.sample_method == SAMPLE_METHOD_COUNT and
          g.sample_params.scheduler == SCHEDULER_COUNT and g.sample_params.sample_steps > 0 and
          g.width > 0 and g.height > 0 and not g.circular_y, "sd_img_gen_params_init defaults")

    p.model_path = b"/no/such/model.safetensors"
    text = lib.sd_ctx_params_to_str(byref(p))
    check(b"model_path: /no/such/model.safetensors\n" in ctypes.string_at(text),
          "sd_ctx_params_to_str")
    ctypes.CDLL(None).free(ctypes.c_void_p(text))

    check(lib.new_sd_ctx(byref(p)) is None, "new_sd_ctx on a missing file returns NULL")
    check(any(level == SD_LOG_ERROR and "/no/such/model.safetensors" in text
              for level, text in log_lines), f"the error names the file: {log_lines}")
    lib.free_sd_images(None, 0)

    if model:
        p.model_path = model.encode()
        p.n_threads = 2
        ctx = lib.new_sd_ctx(byref(p))
        check(ctx is not None, f"new_sd_ctx({model}): {log_lines[-3:]}")
        if ctx:
            g.prompt = b"a lighthouse at dusk"
            g.width = g.height = 64
            g.sample_params.sample_steps = 2
            g.seed = 42
            images = POINTER(sd_image_t)()
            count = c_int(0)
            ok = lib.generate_image(ctx, byref(g), byref(images), byref(count))
            check(ok and count.value == 1, f"generate_image: {log_lines[-3:]}")
            if ok and count.value == 1:
                img = images[0]  # a view of the library's memory: read before freeing
                shape = (img.width, img.height, img.channel)
                check(shape == (64, 64, 3), f"image is {shape}")
                pixels = bytes(img.data[:img.width * img.height * img.channel])
                lib.free_sd_images(images, count)
                check(len(set(pixels)) > 1, "the image is not one flat colour")
                check(progress and progress[-1] == (2, 2), f"progress reported: {progress}")
                print(f"generate_image: {shape} image, progress {progress}", flush=True)

            # The highres fix: a second pass at twice the size from the latent.
            g.hires.enabled = True
            g.hires.upscaler = SD_HIRES_UPSCALER_LATENT_NEAREST
            g.hires.steps = 1
            ok = lib.generate_image(ctx, byref(g), byref(images), byref(count))
            check(ok and count.value == 1, f"generate_image with hires: {log_lines[-3:]}")
            if ok and count.value == 1:
                shape = (images[0].width, images[0].height, images[0].channel)
                lib.free_sd_images(images, count)
                check(shape == (128, 128, 3), f"hires image is {shape}")
            g.hires.denoising_strength = 1.5
            ok = lib.generate_image(ctx, byref(g), byref(images), byref(count))
            check(not ok and count.value == 0, "generate_image refuses a hires strength of 1.5")
            check(any(level == SD_LOG_ERROR and "--hires-denoising-strength 1.5" in text
                      for level, text in log_lines), f"the error names it: {log_lines[-3:]}")
            g.hires.enabled = False
            g.hires.denoising_strength = 0.7

            # A caller's mistakes are refused with an error, not run or ignored.
            def refused(what, text):
                ok = lib.generate_image(ctx, byref(g), byref(images), byref(count))
                check(not ok and count.value == 0, f"generate_image refuses {what}")
                check(any(level == SD_LOG_ERROR and text in message
                          for level, message in log_lines), f"{what}: {log_lines[-3:]}")
            g.batch_count = 2**31 - 1
            refused("a batch of 2^31 - 1 images", "batch count 2147483647")
            g.batch_count = 1
            g.init_image.width = g.init_image.height = 64
            refused("an init image without pixels", "without pixel data")
            g.init_image.width = g.init_image.height = 0
            g.cache.mode = -1
            refused("cache mode -1", "cache.mode -1")
            g.cache.mode = 0
            lib.free_sd_ctx(ctx)
            p.lora_apply_mode = 999
            check(lib.new_sd_ctx(byref(p)) is None, "new_sd_ctx refuses lora_apply_mode 999")
            check(any(level == SD_LOG_ERROR and "lora_apply_mode 999" in message
                      for level, message in log_lines), f"lora mode: {log_lines[-3:]}")

    lib.sd_set_log_callback(None, None)
    lib.sd_set_progress_callback(None, None)
    if failures:
        print(f"{len(failures)} check(s) failed", flush=True)
        return 1
    print("ok", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
