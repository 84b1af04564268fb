#!/usr/bin/env python3
"""sd-server end to end on a tiny random SDXL-shaped checkpoint, over loopback.

Every endpoint of the three APIs; the same request and seed as sd-cli giving the same
pixels; bad input answered with a JSON error naming the problem (and the server serving on);
the token, CORS, body-size and queue limits; cancelling queued and running jobs; a client
hanging up mid-job; SIGTERM with a job running (exit 0, soon).

usage: server_test.py SD_SERVER SD_CLI MAKE_TINY_MODEL SHARED_DIR
Exits 77 (skipped) when SHARED_DIR has no CLIP vocabulary.
"""
import base64
import json
import os
import re
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from server_harness import Server as HarnessServer, png_pixels  # noqa: E402

SERVER, CLI, MAKE_MODEL, SHARED = sys.argv[1:5]
VOCAB = os.path.join(SHARED, "data", "clip", "bpe_simple_vocab_16e6.txt.gz")
if not os.path.isfile(VOCAB):
    print(f"skipped: no CLIP vocabulary at {VOCAB}")
    sys.exit(77)
ENV = dict(os.environ, SD_CLIP_VOCAB=VOCAB, OMP_NUM_THREADS="1")
ENV.pop("SD_SERVER_TOKEN", None)
WORK = tempfile.mkdtemp(prefix="sd_server_test_")
MODEL = os.path.join(WORK, "tiny_sdxl.safetensors")
CONTROL_NET = os.path.join(WORK, "tiny_sdxl_controlnet.safetensors")
subprocess.run([MAKE_MODEL, MODEL, CONTROL_NET], check=True)
failures = []


def check(condition, what):
    if not condition:
        failures.append(what)
        print("FAIL:", what, flush=True)


def png_text(data):
    """The PNG's text chunks, with the build's commit id blanked (a binary relinked after
    a commit carries another one)."""
    pos, out = 8, []
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        if kind in (b"tEXt", b"iTXt", b"zTXt"):
            out.append(re.sub(rb'"commit":"[^"]*"', b'"commit":""', data[pos + 8:pos + 8 + length]))
        pos += 12 + length
    return out


def same_image_file(a, b):
    return png_pixels(a) == png_pixels(b) and png_text(a) == png_text(b) and png_text(a)


class Server(HarnessServer):
    """sd-server on the tiny checkpoint with `extra` flags."""

    def __init__(self, *extra, env=None):
        super().__init__(SERVER, ["-m", MODEL, *extra], env or ENV)


def raw_exchange(url, request):
    """Sends raw request bytes (with Connection: close) and returns the whole answer."""
    import socket
    host, port = url.rsplit("/", 1)[1].rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=30) as c:
        c.sendall(request)
        answer = b""
        while True:
            part = c.recv(65536)
            if not part:
                return answer
            answer += part


def png_claiming(width, height):
    """A PNG whose header claims width x height, with no real pixel data behind it."""
    def chunk(kind, data):
        return (struct.pack(">I", len(data)) + kind + data +
                struct.pack(">I", zlib.crc32(kind + data) & 0xffffffff))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(b"\0" * 64)) + chunk(b"IEND", b""))


def expect_error(server, method, path, body, status, text, **kw):
    got, _, answer = server.json(method, path, body, **kw)
    message = (answer or {}).get("error", {}).get("message", "") if isinstance(answer, dict) else ""
    check(got == status and text in message,
          f"{method} {path}: expected {status} with '{text}', got {got}: {answer}")


def wait_job(server, job_id, until, timeout=120):
    deadline = time.time() + timeout
    while time.time() < deadline:
        _, _, job = server.json("GET", "/sdcpp/v1/jobs/" + job_id)
        if job and job.get("status") in until:
            return job
        time.sleep(0.05)
    raise RuntimeError(f"job {job_id} never reached {until}: {job}")


# A request both programs understand: sd-cli flags and the A1111 body.
PROMPT, SEED, STEPS = "a red fox in the snow", 1234, 3
cli_png = os.path.join(WORK, "cli.png")
subprocess.run([CLI, "-m", MODEL, "-t", "1", "-p", PROMPT, "-n", "blurry", "-W", "64", "-H", "64",
                "--steps", str(STEPS), "-s", str(SEED), "--cfg-scale", "5",
                "--sampling-method", "euler", "-o", cli_png],
               env=ENV, check=True, stdout=subprocess.DEVNULL)
cli_bytes = open(cli_png, "rb").read()
# ... and with the ControlNet guided by an image (the server runs with --control-net).
CONTROL_PNG = os.path.join(WORK, "control.png")
with open(CONTROL_PNG, "wb") as f:
    f.write(cli_bytes)
cli_control_png = os.path.join(WORK, "cli_control.png")
subprocess.run([CLI, "-m", MODEL, "-t", "1", "-p", PROMPT, "-n", "blurry", "-W", "64", "-H", "64",
                "--steps", str(STEPS), "-s", str(SEED), "--cfg-scale", "5",
                "--sampling-method", "euler", "--control-net", CONTROL_NET,
                "--control-image", CONTROL_PNG, "--control-strength", "0.8", "-o", cli_control_png],
               env=ENV, check=True, stdout=subprocess.DEVNULL)
cli_control_bytes = open(cli_control_png, "rb").read()

UPSCALERS = os.path.join(WORK, "upscalers")
os.makedirs(os.path.join(UPSCALERS, "anime"))
open(os.path.join(UPSCALERS, "anime", "x2.safetensors"), "wb").close()  # listed, not loaded
# A link out of the folder is not listed (nor its target shown).
os.symlink(MODEL, os.path.join(UPSCALERS, "escape.safetensors"))
server = Server("--max-queue", "1", "--max-body-mb", "1", "--max-image-side", "1024",
                "--hires-upscalers-dir", UPSCALERS)
try:
    # --- discovery endpoints
    for path, kind in [("/v1/models", dict), ("/sdapi/v1/loras", list), ("/sdapi/v1/upscalers", list),
                       ("/sdapi/v1/latent-upscale-modes", list), ("/sdapi/v1/samplers", list),
                       ("/sdapi/v1/schedulers", list), ("/sdapi/v1/sd-models", list),
                       ("/sdapi/v1/options", dict), ("/sdcpp/v1/capabilities", dict)]:
        status, _, answer = server.json("GET", path)
        check(status == 200 and isinstance(answer, kind), f"GET {path}: {status} {answer}")
    _, _, models = server.json("GET", "/v1/models")
    check(models["data"][0]["object"] == "model", f"/v1/models shape: {models}")
    _, _, samplers = server.json("GET", "/sdapi/v1/samplers")
    check("euler_a" in [s["name"] for s in samplers], "samplers lists euler_a")
    _, _, caps = server.json("GET", "/sdcpp/v1/capabilities")
    check(caps["limits"]["max_queue_size"] == 1 and caps["limits"]["max_width"] == 1024,
          f"capabilities limits: {caps.get('limits')}")
    check(caps["model"]["stem"] == "tiny_sdxl", f"capabilities model: {caps.get('model')}")
    _, _, upscalers = server.json("GET", "/sdapi/v1/upscalers")
    check([u["name"] for u in upscalers] == ["None", "Lanczos", "Nearest", "anime/x2.safetensors"],
          f"upscalers list the built-in ones and --hires-upscalers-dir's models: {upscalers}")
    check({"name": "anime/x2.safetensors"} in caps["upscalers"], f"capabilities upscalers: {caps['upscalers']}")
    check(WORK not in json.dumps(caps), f"capabilities publish no absolute path: {caps['model']}")
    status, headers, page = server.request("GET", "/")
    check("frame-ancestors 'none'" in headers.get("Content-Security-Policy", "") and
          headers.get("X-Frame-Options") == "DENY", f"the page's security headers: {headers}")

    # --- who may call: the host named, the page's origin, the body's type, one framing
    expect_error(server, "GET", "/sdcpp/v1/capabilities", None, 403,
                 "does not answer to the host name 'attacker.example'",
                 headers={"Host": "attacker.example:1234"})
    expect_error(server, "POST", "/sdcpp/v1/img_gen", None, 403, "origin 'http://evil.example'",
                 raw=b'{"prompt": "x"}',
                 headers={"Origin": "http://evil.example", "Content-Type": "text/plain"})
    expect_error(server, "POST", "/sdcpp/v1/img_gen", None, 415, "application/json",
                 raw=b'{"prompt": "x"}', headers={"Content-Type": "text/plain"})
    for framing in (b"Content-Length: 2\r\nContent-Length: 40\r\n",
                    b"Content-Length: 2\r\nTransfer-Encoding: chunked\r\n"):
        answer = raw_exchange(server.url, b"POST /sdcpp/v1/img_gen HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                              b"Connection: close\r\nContent-Type: application/json\r\n" +
                              framing + b"\r\n{}")
        check(answer.startswith(b"HTTP/1.1 400") and b"more than one way" in answer,
              f"two framings refused: {answer[:200]}")
    # Chunked and compressed bodies escape --max-body-mb in the HTTP layer: refused before
    # they are read.
    answer = raw_exchange(server.url, b"POST /sdcpp/v1/img_gen HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                          b"Connection: close\r\nContent-Type: application/json\r\n"
                          b"Transfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n")
    check(answer.startswith(b"HTTP/1.1 411") and b"Content-Length" in answer,
          f"a chunked body is refused: {answer[:200]}")
    expect_error(server, "POST", "/sdcpp/v1/img_gen", None, 415, "uncompressed",
                 raw=zlib.compress(b'{"prompt": "x"}'), headers={"Content-Encoding": "gzip"})
    status, headers, page = server.request("GET", "/")
    check(status == 200 and b"<form" in page and b"/sdcpp/v1/img_gen" in page, "web page at /")

    # --- A1111 txt2img: the same pixels as sd-cli
    body = {"prompt": PROMPT, "negative_prompt": "blurry", "width": 64, "height": 64,
            "steps": STEPS, "seed": SEED, "cfg_scale": 5, "sampler_name": "Euler",
            "restore_faces": False, "styles": [[[["nested"]]]]}
    status, _, answer = server.json("POST", "/sdapi/v1/txt2img", body)
    check(status == 200 and len(answer.get("images", [])) == 1, f"txt2img: {status} {answer}")
    server_png = base64.b64decode(answer["images"][0])
    check(png_pixels(server_png) == png_pixels(cli_bytes), "txt2img pixels equal sd-cli's")
    check(same_image_file(server_png, cli_bytes), "txt2img file equals sd-cli's, metadata included")
    check(json.loads(answer["info"])["all_seeds"] == [SEED], f"txt2img info: {answer['info']}")
    check(answer["parameters"]["prompt"] == PROMPT, "txt2img echoes its parameters")
    check("styles" not in answer["parameters"] and "restore_faces" not in answer["parameters"],
          f"txt2img echoes no field it ignores: {answer['parameters']}")

    # --- native async: the same request again gives the same image; progress is reported
    native = {"prompt": PROMPT, "negative_prompt": "blurry", "width": 64, "height": 64,
              "seed": SEED, "sample_params": {"sample_method": "euler", "sample_steps": STEPS,
                                              "guidance": {"txt_cfg": 5}}}
    status, _, submitted = server.json("POST", "/sdcpp/v1/img_gen", native)
    check(status == 202 and submitted["poll_url"].endswith(submitted["id"]), f"img_gen: {submitted}")
    job = wait_job(server, submitted["id"], ["completed", "failed", "cancelled"])
    check(job["status"] == "completed", f"native job: {job}")
    check(job["progress"]["step"] == STEPS and job["progress"]["steps"] == STEPS,
          f"native job progress: {job['progress']}")
    check(same_image_file(base64.b64decode(job["result"]["images"][0]["b64_json"]), cli_bytes),
          "native job image equals sd-cli's")
    # Without --control-net a control image is refused, naming the flag.
    check(not caps["features"]["control_image"], "capabilities: no control images without a ControlNet")
    expect_error(server, "POST", "/sdcpp/v1/img_gen",
                 dict(native, control_image=base64.b64encode(cli_bytes).decode()), 400, "--control-net")
    # Server-Sent Events of a finished job: one "done" event with the result.
    status, headers, events = server.request("GET", f"/sdcpp/v1/jobs/{submitted['id']}/events")
    check(status == 200 and b"event: done" in events and b"b64_json" in events,
          f"events stream: {status} {events[:200]}")
    # ... and of a running one: progress events, then done.
    status, _, submitted = server.json("POST", "/sdcpp/v1/img_gen",
                                       dict(native, width=128, height=128,
                                            sample_params={"sample_steps": 12}))
    status, _, events = server.request("GET", f"/sdcpp/v1/jobs/{submitted['id']}/events")
    check(events.count(b"event: progress") >= 2 and b"event: done" in events,
          f"live events: {events[:300]}")

    # --- OpenAI generations (native fields through sd_cpp_extra_args) and edits
    extra = '<sd_cpp_extra_args>{"seed": 5, "sample_params": {"sample_steps": 2}}</sd_cpp_extra_args>'
    status, _, answer = server.json("POST", "/v1/images/generations",
                                    {"prompt": "a boat " + extra, "size": "64x48", "n": 2})
    check(status == 200 and len(answer.get("data", [])) == 2, f"generations: {status} {answer}")
    if status == 200:
        w, h, _, _ = png_pixels(base64.b64decode(answer["data"][0]["b64_json"]))
        check((w, h) == (64, 48), f"generations size {w}x{h}")
    boundary = "sdservertestboundary"
    parts = [("prompt", None, b"a boat at night"), ("size", None, b"64x64"),
             ("output_format", None, b"jpeg"), ("image", "in.png", server_png)]
    form = b""
    for name, filename, content in parts:
        disposition = f'form-data; name="{name}"' + (f'; filename="{filename}"' if filename else "")
        form += f"--{boundary}\r\nContent-Disposition: {disposition}\r\n".encode()
        form += (b"Content-Type: image/png\r\n" if filename else b"") + b"\r\n" + content + b"\r\n"
    form += f"--{boundary}--\r\n".encode()
    status, _, data = server.request("POST", "/v1/images/edits", raw=form,
                                     headers={"Content-Type": f"multipart/form-data; boundary={boundary}"})
    answer = json.loads(data)
    check(status == 200 and answer.get("output_format") == "jpeg", f"edits: {status} {answer}")
    if status == 200:
        check(base64.b64decode(answer["data"][0]["b64_json"])[:2] == b"\xff\xd8", "edits gives a JPEG")

    # --- A1111 img2img with a mask
    status, _, answer = server.json("POST", "/sdapi/v1/img2img", {
        "prompt": "a fox", "init_images": [base64.b64encode(server_png).decode()],
        "mask": "data:image/png;base64," + base64.b64encode(server_png).decode(),
        "denoising_strength": 0.5, "steps": 2, "seed": 3})
    check(status == 200 and len(answer.get("images", [])) == 1, f"img2img: {status} {answer}")
    check("init_images" not in answer.get("parameters", {}), "img2img does not echo images")

    # --- bad input: 4xx with the field named, the server serving on
    expect_error(server, "POST", "/sdapi/v1/txt2img", None, 400, "not valid JSON", raw=b"{oops")
    # 58,000 nested arrays in an ignored field once crashed the server as it echoed them.
    deep = b'{"prompt": "x", "styles": ' + b"[" * 58000 + b"]" * 58000 + b"}"
    for path in ("/sdapi/v1/txt2img", "/sdapi/v1/img2img", "/sdcpp/v1/img_gen",
                 "/v1/images/generations"):
        expect_error(server, "POST", path, None, 400, "more than 400 deep", raw=deep)
    expect_error(server, "POST", "/sdcpp/v1/img_gen", None, 400, "not valid JSON", raw=b"[1,")
    expect_error(server, "POST", "/sdcpp/v1/img_gen", None, 400, "empty", raw=b"")
    expect_error(server, "POST", "/sdcpp/v1/img_gen", [1, 2], 400, "JSON object")
    expect_error(server, "POST", "/sdapi/v1/txt2img", {"prompt": "x", "sampler_name": "warp9"}, 400,
                 "unknown sampler 'warp9'")
    expect_error(server, "POST", "/sdcpp/v1/img_gen", {"sample_params": {"scheduler": "nope"}}, 400,
                 "unknown scheduler 'nope'")
    expect_error(server, "POST", "/sdapi/v1/txt2img", {"prompt": "x", "steps": "ten"}, 400,
                 "field 'steps' must be an integer, got a string")
    expect_error(server, "POST", "/sdcpp/v1/img_gen", {"sample_params": {"sample_steps": -3}}, 400,
                 "sample_params.sample_steps' must be from 1")
    # Custom sigmas as sd-cli checks --sigmas: two or more, finite, >= 0, not increasing.
    for sigmas, text in (([1], "at least two values"), ([1e300, 0], "is not a sigma"),
                         ([-1, -2], "is not a sigma"), ([0.5, 1, 0], "must not increase")):
        expect_error(server, "POST", "/sdcpp/v1/img_gen",
                     {"sample_params": {"custom_sigmas": sigmas}}, 400, "custom_sigmas")
        expect_error(server, "POST", "/sdcpp/v1/img_gen",
                     {"sample_params": {"custom_sigmas": sigmas}}, 400, text)
    # What only the loaded model can tell, refused before queueing as sd-cli refuses it: a
    # clip_skip past the text encoder's layers, a step cache for transformers on a UNet.
    expect_error(server, "POST", "/sdcpp/v1/img_gen", {"clip_skip": 64}, 400,
                 "clip_skip 64 is more than the text encoder's")
    expect_error(server, "POST", "/sdapi/v1/txt2img", {"prompt": "x", "clip_skip": 13}, 400,
                 "clip_skip 13 is more than the text encoder's")
    for option, text in (("threshold=1,threshold=2", "'threshold' is given twice"),
                         ("=1", "has no option ''")):
        expect_error(server, "POST", "/sdcpp/v1/img_gen",
                     {"cache_mode": "ucache", "cache_option": option}, 400, text)
    for mode in ("easycache", "dbcache", "taylorseer", "cache-dit"):
        expect_error(server, "POST", "/sdcpp/v1/img_gen", {"cache_mode": mode}, 400,
                     f"cache_mode {mode} does not work on")
    expect_error(server, "POST", "/sdapi/v1/txt2img", {"prompt": "x", "width": 100000, "height": 64},
                 400, "--max-image-side")
    expect_error(server, "POST", "/sdapi/v1/txt2img", {"prompt": "x", "width": 100, "height": 64},
                 400, "multiple of 8")
    expect_error(server, "POST", "/sdapi/v1/txt2img", {"prompt": "x", "batch_size": 500}, 400,
                 "--max-batch")
    expect_error(server, "POST", "/sdcpp/v1/img_gen", {"promt": "typo"}, 400, "unknown field 'promt'")
    expect_error(server, "POST", "/sdcpp/v1/img_gen", {"vae_tiling_params": {"tile_sise_x": 4}},
                 400, "unknown field 'vae_tiling_params.tile_sise_x'")
    for layers in ([2.5], [1e300]):
        expect_error(server, "POST", "/sdcpp/v1/img_gen",
                     {"sample_params": {"guidance": {"slg": {"layers": layers}}}}, 400,
                     "sample_params.guidance.slg.layers[0]")
    expect_error(server, "POST", "/sdapi/v1/txt2img",
                 {"prompt": "x", "batch_size": 1 << 20, "n_iter": 1 << 20}, 400, "at most")
    # Work is bounded before queueing: every size a request reaches, and its pixel-steps.
    expect_error(server, "POST", "/sdapi/v1/txt2img",
                 {"prompt": "x", "width": 1024, "height": 1024, "enable_hr": True, "hr_scale": 16},
                 400, "the hires pass would make a 16384x16384 image")
    expect_error(server, "POST", "/sdapi/v1/txt2img",
                 {"prompt": "x", "width": 1024, "height": 1024, "steps": 2000}, 400,
                 "million pixel-steps of work")
    expect_error(server, "POST", "/v1/images/generations", {"prompt": "x", "size": " 64x64"}, 400,
                 "WIDTHxHEIGHT")
    # A 16384 x 16384 PNG of a few bytes is refused from its header, before decoding
    # (768 MB of pixels); so are more reference images than a request may send.
    huge = base64.b64encode(png_claiming(16384, 16384)).decode()
    expect_error(server, "POST", "/sdapi/v1/img2img", {"prompt": "x", "init_images": [huge]}, 400,
                 "larger than the 2048 pixels a side")
    expect_error(server, "POST", "/sdcpp/v1/img_gen", {"ref_images": [huge]}, 400,
                 "larger than the 2048 pixels a side")
    small = base64.b64encode(png_claiming(8, 8)).decode()
    expect_error(server, "POST", "/sdcpp/v1/img_gen", {"ref_images": [small] * 17}, 400,
                 "at most 16 reference images")
    expect_error(server, "POST", "/sdapi/v1/img2img", {"prompt": "x", "init_images": ["%%%"]}, 400,
                 "'init_images[0]' is not base64")
    expect_error(server, "POST", "/sdapi/v1/img2img",
                 {"prompt": "x", "init_images": [base64.b64encode(b"not an image").decode()]},
                 400, "'init_images[0]' is not a readable image")
    expect_error(server, "POST", "/sdapi/v1/img2img", {"prompt": "x"}, 400, "'init_images' is required")
    expect_error(server, "POST", "/sdcpp/v1/img_gen",
                 {"prompt": "x", "ref_images": [base64.b64encode(b"not an image").decode()]},
                 400, "'ref_images[0]' is not a readable image")
    expect_error(server, "POST", "/v1/images/generations", {"size": "64x64"}, 400, "'prompt' is required")
    expect_error(server, "POST", "/v1/images/generations", {"prompt": "x", "size": "big"}, 400,
                 "WIDTHxHEIGHT")
    expect_error(server, "POST", "/v1/images/edits", {"prompt": "x"}, 400, "multipart/form-data")
    for name in ["../../etc/passwd", "/etc/passwd"]:
        expect_error(server, "POST", "/sdcpp/v1/img_gen", {"lora": [{"path": name}]}, 400, "LoRA")
    expect_error(server, "GET", "/sdcpp/v1/jobs/job_nope", None, 404, "no job 'job_nope'")
    expect_error(server, "POST", "/sdcpp/v1/jobs/job_nope/cancel", None, 404, "no job")
    expect_error(server, "GET", "/no/such/endpoint", None, 404, "no endpoint GET /no/such/endpoint")
    answer = raw_exchange(server.url, b"GET /\xff\xfe HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                          b"Connection: close\r\n\r\n")
    check(answer.startswith(b"HTTP/1.1 404") and b"no endpoint GET /" in answer,
          f"a path that is not UTF-8: {answer[:200]}")
    expect_error(server, "POST", "/sdapi/v1/txt2img", None, 413, "--max-body-mb",
                 raw=b'{"prompt": "' + b"x" * (2 << 20) + b'"}')
    status, _, _ = server.json("GET", "/sdcpp/v1/capabilities")
    check(status == 200, "still serving after bad input")

    # --- a client hanging up mid-job does not stop the server or the job
    try:
        server.request("POST", "/sdapi/v1/txt2img",
                       {"prompt": "x", "width": 64, "height": 64, "steps": 4}, timeout=0.3)
    except Exception:
        pass
    status, _, _ = server.json("GET", "/sdapi/v1/options")
    check(status == 200, "serving after a client hung up")

    # --- queue limits: one running, one waiting (--max-queue 1), the next refused
    # Many small steps: long enough to be caught running, short steps even in a sanitizer
    # build, so a cancel or a stop takes effect soon.
    long_job = {"prompt": "slow", "width": 64, "height": 64, "sample_params": {"sample_steps": 2000}}
    _, _, running = server.json("POST", "/sdcpp/v1/img_gen", long_job)
    wait_job(server, running["id"], ["generating"])
    _, _, waiting = server.json("POST", "/sdcpp/v1/img_gen", long_job)
    # The hung-up client's job may still hold the worker; wait for the long one to run.
    deadline = time.time() + 60
    while time.time() < deadline:
        status, headers, answer = server.json("POST", "/sdcpp/v1/img_gen", long_job)
        if status == 429:
            break
        if status == 202:
            server.json("POST", f"/sdcpp/v1/jobs/{answer['id']}/cancel")
        time.sleep(0.2)
    check(status == 429 and int(headers.get("Retry-After", "0")) >= 1 and
          "queue is full" in answer["error"]["message"], f"queue full: {status} {headers} {answer}")
    _, _, job = server.json("GET", "/sdcpp/v1/jobs/" + waiting["id"])
    check(job["status"] == "queued" and job["queue_position"] == 1, f"waiting job: {job}")
    status, _, answer = server.json("POST", f"/sdcpp/v1/jobs/{waiting['id']}/cancel")
    check(status == 200 and answer["status"] == "cancelled", f"cancel waiting: {status} {answer}")
    expect_error(server, "POST", f"/sdcpp/v1/jobs/{waiting['id']}/cancel", None, 409, "already finished")
    deadline = time.time() + 60
    while time.time() < deadline:
        _, _, job = server.json("GET", "/sdcpp/v1/jobs/" + running["id"])
        if job["progress"]["step"] >= 1:
            break
        time.sleep(0.05)
    check(job["progress"]["steps"] == 2000 and job["progress"]["step"] >= 1,
          f"running job progress: {job['progress']}")
    # Its live preview (the default proj mode: the latent's colours).
    check(caps["features"]["live_preview"], "capabilities announce live previews")
    while time.time() < deadline and not job.get("preview"):
        _, _, job = server.json("GET", "/sdcpp/v1/jobs/" + running["id"])
        time.sleep(0.05)
    check(job.get("preview") and job["preview"]["url"].startswith(
        f"/sdcpp/v1/jobs/{running['id']}/preview"), f"running job preview: {job.get('preview')}")
    if job.get("preview"):
        status, headers, preview = server.request("GET", job["preview"]["url"])
        # One pixel per latent pixel: the image's size over the VAE's downscale.
        size = png_pixels(preview)[:2] if status == 200 else None
        check(status == 200 and headers.get("Content-Type") == "image/png" and size and
              size[0] == size[1] and 64 % size[0] == 0 and size[0] < 64,
              f"live preview: {status} {headers} {size}")
    expect_error(server, "GET", f"/sdcpp/v1/jobs/{waiting['id']}/preview", None, 404, "no live preview")
    expect_error(server, "GET", "/sdcpp/v1/jobs/job_nope/preview", None, 404, "no job")
    # Event streams are bounded (half the request threads): the next gets 503, the rest of
    # the API is still served, and a closed stream gives its place back.
    limit = caps["limits"]["max_event_streams"]
    host, port = server.url.rsplit("/", 1)[1].split(":")
    def open_stream():
        c = socket.create_connection((host, int(port)), timeout=30)
        c.sendall(f"GET /sdcpp/v1/jobs/{running['id']}/events HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
        head = b""
        while b"\r\n\r\n" not in head:
            part = c.recv(4096)
            if not part:
                break
            head += part
        return c, head
    streams = [open_stream() for _ in range(limit)]
    check(all(h.startswith(b"HTTP/1.1 200") for _, h in streams),
          f"{limit} event streams open: {[h[:20] for _, h in streams]}")
    status, headers, answer = server.json("GET", f"/sdcpp/v1/jobs/{running['id']}/events", timeout=20)
    check(status == 503 and answer["error"]["code"] == "too_many_streams" and "Retry-After" in headers,
          f"one event stream past the limit: {status} {answer}")
    status, _, _ = server.json("GET", "/sdcpp/v1/capabilities", timeout=20)
    check(status == 200, f"capabilities with every stream place taken: {status}")
    for c, _ in streams:
        c.close()
    reopened = b""
    for _ in range(50):  # the server sees a closed stream at its next write (within a second)
        c, reopened = open_stream()
        c.close()
        if reopened.startswith(b"HTTP/1.1 200"):
            break
        time.sleep(0.2)
    check(reopened.startswith(b"HTTP/1.1 200"), f"a closed stream gives its place back: {reopened[:60]}")

    started = time.time()
    status, _, _ = server.json("POST", f"/sdcpp/v1/jobs/{running['id']}/cancel")
    job = wait_job(server, running["id"], ["cancelled", "completed", "failed"], timeout=60)
    check(job["status"] == "cancelled" and job["error"]["code"] == "cancelled" and
          job["progress"]["step"] < 2000, f"cancel running: {job}")
    print(f"a running job stopped {time.time() - started:.2f}s after its cancel", flush=True)

    # --- SIGTERM with a job running: the waiting client is told, the process exits 0
    _, _, running = server.json("POST", "/sdcpp/v1/img_gen", long_job)
    wait_job(server, running["id"], ["generating"])
    sync_answer = {}
    def sync_call():
        try:
            sync_answer["status"], _, sync_answer["body"] = server.json(
                "POST", "/sdapi/v1/txt2img", {"prompt": "queued", "width": 64, "height": 64})
        except Exception as e:  # the connection may close first
            sync_answer["exception"] = repr(e)
    caller = threading.Thread(target=sync_call)
    caller.start()
    time.sleep(0.5)
    started = time.time()
    code = server.stop()
    caller.join(120)
    check(code == 0, f"exit status after SIGTERM: {code}")
    # A bound against hanging, not a speed check: one step and the shutdown must end.
    check(time.time() - started < 120, "SIGTERM took too long")
    check(sync_answer.get("status") == 503 or "exception" in sync_answer,
          f"client waiting at SIGTERM: {sync_answer}")
    check("stopping" in "".join(server.log), "the log says it is stopping")
finally:
    server.stop()
    if failures:
        print("".join(server.log[-40:]))

# --- the token, beyond loopback and on it; CORS
result = subprocess.run([SERVER, "-m", MODEL, "--listen-ip", "0.0.0.0", "--listen-port", "0"],
                        env=ENV, capture_output=True, text=True, timeout=60)
check(result.returncode != 0 and "without a token" in result.stderr and "--insecure" in result.stderr,
      f"open address without a token: {result.returncode} {result.stderr}")
token_env = dict(ENV, SD_SERVER_TOKEN="s3cret-token")
secured = Server("--cors-origins", "http://app.example", "--control-net", CONTROL_NET, env=token_env)
try:
    expect_error(secured, "GET", "/sdcpp/v1/capabilities", None, 401, "Authorization: Bearer")
    # With --control-net, a control image guides it: the same pixels as sd-cli's --control-image.
    auth = {"Authorization": "Bearer s3cret-token"}
    _, _, caps = secured.json("GET", "/sdcpp/v1/capabilities", headers=auth)
    check(caps["features"]["control_image"], "capabilities: control images with --control-net")
    status, _, submitted = secured.json("POST", "/sdcpp/v1/img_gen", dict(
        native, control_image=base64.b64encode(cli_bytes).decode(), control_strength=0.8), headers=auth)
    check(status == 202, f"img_gen with a control image: {status} {submitted}")
    job = {}
    deadline = time.time() + 120
    while status == 202 and time.time() < deadline and job.get("status") not in ("completed", "failed"):
        _, _, job = secured.json("GET", "/sdcpp/v1/jobs/" + submitted["id"], headers=auth)
        time.sleep(0.05)
    controlled = base64.b64decode(job["result"]["images"][0]["b64_json"]) if job.get("result") else b""
    check(controlled and png_pixels(controlled) == png_pixels(cli_control_bytes) and
          png_pixels(controlled) != png_pixels(cli_bytes),
          f"control image: sd-cli's pixels, not the plain image's: {job.get('status')} {job.get('error')}")
    expect_error(secured, "POST", "/sdcpp/v1/img_gen", dict(native, control_image="not base64!"),
                 400, "control_image", headers=auth)
    expect_error(secured, "GET", "/v1/models", None, 401, "token",
                 headers={"Authorization": "Bearer wrong-token!"})
    status, _, _ = secured.json("GET", "/v1/models", headers={"Authorization": "Bearer s3cret-token"})
    check(status == 200, f"right token: {status}")
    status, _, _ = secured.request("GET", "/")
    check(status == 200, "the page itself needs no token")
    status, headers, _ = secured.request("OPTIONS", "/sdcpp/v1/img_gen", headers={
        "Origin": "http://app.example", "Access-Control-Request-Method": "POST"})
    check(status == 204 and headers.get("Access-Control-Allow-Origin") == "http://app.example",
          f"CORS preflight allowed: {status} {headers}")
    status, headers, _ = secured.request("GET", "/v1/models", headers={
        "Origin": "http://evil.example", "Authorization": "Bearer s3cret-token"})
    check("Access-Control-Allow-Origin" not in headers, "no CORS header for other origins")
    expect_error(secured, "OPTIONS", "/sdcpp/v1/img_gen", None, 403, "--cors-origins",
                 headers={"Origin": "http://evil.example"})

    # --- clients without the token cannot take the server from one with it
    def rss_mib(pid):
        with open(f"/proc/{pid}/status") as f:
            return int(re.search(r"VmRSS:\s+(\d+)", f.read()).group(1)) / 1024
    host, port = secured.url.rsplit("/", 1)[1].split(":")
    before = rss_mib(secured.proc.pid)
    # Header floods: each is cut off after the head's limit (64 KiB), answered 431 when the
    # client still listens.
    flood = (b"X-Filler: " + b"a" * 200 + b"\r\n") * 64
    flood_answers = []
    for _ in range(8):
        with socket.create_connection((host, int(port)), timeout=30) as c:
            sent = 0
            try:
                c.sendall(b"GET /sdcpp/v1/capabilities HTTP/1.1\r\nHost: 127.0.0.1\r\n")
                for _ in range((64 << 20) // len(flood)):
                    c.sendall(flood)
                    sent += len(flood)
            except OSError:
                pass
            try:
                flood_answers.append(c.recv(200))
            except OSError:
                flood_answers.append(b"")
    check(sent < (64 << 20), f"a 64 MiB header flood is cut off ({sent} bytes taken)")
    check(all(a == b"" or a.startswith(b"HTTP/1.1 431") for a in flood_answers),
          f"header floods answered 431: {[a[:40] for a in flood_answers]}")
    grown = rss_mib(secured.proc.pid) - before
    check(grown < 64, f"eight 64 MiB header floods left {grown:.0f} MiB resident")
    # Idle and half-sent connections hold no request thread: 96 of them, then a client with
    # the token is served at once.
    idle = [socket.create_connection((host, int(port)), timeout=30) for _ in range(96)]
    for c in idle[::2]:
        c.sendall(b"POST /sdcpp/v1/img_gen HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 99")
    status, _, _ = secured.json("GET", "/sdcpp/v1/capabilities", headers=auth, timeout=20)
    check(status == 200, f"a client with the token served beside 96 idle connections: {status}")
    for c in idle:
        c.close()
    # A body announced by a client without the token is never read: 401 at once.
    answer = raw_exchange(secured.url, b"POST /sdcpp/v1/img_gen HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                          b"Content-Type: application/json\r\nContent-Length: 30000000\r\n\r\n")
    check(answer.startswith(b"HTTP/1.1 401"), f"tokenless body refused from its head: {answer[:80]}")
finally:
    check(secured.stop() == 0, "token server exits 0")

if failures:
    print(f"{len(failures)} check(s) failed")
    sys.exit(1)
print("all checks passed")
