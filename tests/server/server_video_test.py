#!/usr/bin/env python3
"""sd-server's POST /sdcpp/v1/vid_gen end to end on tiny random Wan models (written by the
project's tools/make_random_wan.py), over loopback.

Text to video: the job runs asynchronously with progress, completes with one container
(webm by default, mp4, avi, animated webp) that ffprobe decodes to the frame count, size
and frame rate asked for; the capabilities list vid_gen. Image to video (a tiny FLF2V with
CLIP vision): init_image and end_image. VACE: control_frames and a reference init_image. Bad requests get 400 naming the field, and the
server serves on.

usage: server_video_test.py SD_SERVER REPOSITORY_ROOT
Exits 77 (skipped) without python3-numpy (for the model writer) or ffprobe.
"""
import base64
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from server_harness import Server  # noqa: E402

SERVER, ROOT = sys.argv[1:3]
PYTHON = "/usr/bin/python3"
if subprocess.run([PYTHON, "-c", "import numpy"], capture_output=True).returncode != 0 or \
        not shutil.which("ffprobe") or not shutil.which("ffmpeg"):
    print("skipped: python3-numpy or ffprobe (Debian's ffmpeg) is not installed")
    sys.exit(77)
WORK = tempfile.mkdtemp(prefix="sd_server_video_test_")
ENV = dict(os.environ, OMP_NUM_THREADS="1")
ENV.pop("SD_SERVER_TOKEN", None)
ENV.pop("SD_UMT5_TOKENIZER", None)
failures = []


def check(condition, what):
    if not condition:
        failures.append(what)
        print("FAIL:", what, flush=True)


def write_models():
    t2v, i2v = os.path.join(WORK, "wan"), os.path.join(WORK, "wan_i2v")
    writer = os.path.join(ROOT, "tools", "make_random_wan.py")
    small = ["--dim", "128", "--layers", "1", "--ffn", "64", "--t5-dim", "64"]
    subprocess.run([PYTHON, writer, "--out", t2v, *small, "--t5-layers", "1", "--t5-ff", "64",
                    "--t5-heads", "2", "--vae-dim", "32"], check=True, stdout=subprocess.DEVNULL)
    subprocess.run([PYTHON, writer, "--out", i2v, "--variant", "flf2v", *small, "--clip-dim",
                    "32", "--clip-layers", "1", "--clip-ff", "64", "--parts", "wan,clip_vision"],
                   check=True, stdout=subprocess.DEVNULL)
    subprocess.run([PYTHON, writer, "--out", os.path.join(WORK, "wan_vace"), "--variant", "vace",
                    *small, "--vace-layers", "1", "--zero-blocks", "--parts", "wan"], check=True,
                   stdout=subprocess.DEVNULL)
    # A T5-style unigram tokenizer beside the umT5 file, where the server looks for it.
    with open(os.path.join(t2v, "tokenizer.json"), "w") as f:
        f.write('{"pre_tokenizer": {"type": "Metaspace", "replacement": "\\u2581", '
                '"add_prefix_space": true}, "model": {"type": "Unigram", "unk_id": 2, "vocab": '
                '[["<pad>", 0.0], ["</s>", 0.0], ["<unk>", 0.0], ["\\u2581", -2.0], '
                '["a", -3.0], ["\\u2581a", -1.0], ["\\u2581cat", -1.5]]}}')
    return t2v, i2v


def pattern_png(name, source, size):
    path = os.path.join(WORK, name)
    subprocess.run(["ffmpeg", "-loglevel", "error", "-y", "-f", "lavfi", "-i",
                    f"{source}=size={size}", "-frames:v", "1", path], check=True)
    with open(path, "rb") as f:
        return base64.b64encode(f.read()).decode()


def finished(server, job_id, timeout=300):
    deadline = time.time() + timeout
    while time.time() < deadline:
        status, _, job = server.json("GET", "/sdcpp/v1/jobs/" + job_id)
        if status != 200 or job["status"] in ("completed", "failed", "cancelled"):
            return job
        time.sleep(0.2)
    return None


def probe(data, suffix):
    path = os.path.join(WORK, "clip" + suffix)
    with open(path, "wb") as f:
        f.write(data)
    out = subprocess.run(["ffprobe", "-v", "error", "-count_frames", "-select_streams", "v:0",
                          "-show_entries", "stream=nb_read_frames,width,height,r_frame_rate",
                          "-of", "csv=p=0", path], capture_output=True, text=True)
    return out.stdout.strip()


def run_clip(server, body, expect_frames, expect_format):
    status, _, submitted = server.json("POST", "/sdcpp/v1/vid_gen", body)
    check(status == 202, f"vid_gen {body.get('output_format')}: status {status} {submitted}")
    if status != 202:
        return None
    check(submitted["kind"] == "vid_gen", f"kind {submitted['kind']}")
    job = finished(server, submitted["id"])
    check(job is not None and job["status"] == "completed", f"job ended as {job}")
    if not job or job["status"] != "completed":
        return None
    result = job["result"]
    check(result["output_format"] == expect_format, f"output_format {result['output_format']}")
    check(result["frame_count"] == expect_frames, f"frame_count {result['frame_count']}")
    check(result["mime_type"] in ("video/webm", "video/mp4", "video/x-msvideo", "image/webp"),
          f"mime_type {result['mime_type']}")
    return base64.b64decode(result["b64_json"]), result


def main():
    t2v, i2v = write_models()
    files = ["--t5xxl", os.path.join(t2v, "umt5.safetensors"), "--vae",
             os.path.join(t2v, "wan_vae.safetensors"), "--steps", "2", "-W", "32", "-H", "32"]
    server = Server(SERVER, ["--diffusion-model", os.path.join(t2v, "wan.safetensors"), *files],
                    ENV)
    try:
        status, _, caps = server.json("GET", "/sdcpp/v1/capabilities")
        check(status == 200 and "vid_gen" in caps["supported_modes"],
              f"capabilities: {caps.get('supported_modes')}")
        check(caps["output_formats_by_mode"]["vid_gen"][0] == "webm", "vid_gen formats")
        got = run_clip(server, {"prompt": "a cat", "video_frames": 5, "fps": 12, "seed": 3}, 5,
                       "webm")
        if got:
            check(probe(got[0], ".webm") == "32,32,12/1,5", f"webm: {probe(got[0], '.webm')}")
            check(got[1]["fps"] == 12 and got[1]["seed"] == 3, f"result {got[1]}")
        # 7 frames are rounded down to 5 (1 + 4 k), as sd-cli does.
        got = run_clip(server, {"prompt": "a cat", "video_frames": 7, "output_format": "mp4"}, 5,
                       "mp4")
        if got:
            check(probe(got[0], ".mp4") == "32,32,16/1,5", f"mp4: {probe(got[0], '.mp4')}")
        got = run_clip(server, {"prompt": "a cat", "video_frames": 5, "output_format": "avi"}, 5,
                       "avi")
        if got:
            check(probe(got[0], ".avi") == "32,32,16/1,5", f"avi: {probe(got[0], '.avi')}")
        got = run_clip(server, {"prompt": "a cat", "video_frames": 5, "output_format": "webp"}, 5,
                       "webp")
        if got:
            check(got[0][:4] == b"RIFF" and got[0].count(b"ANMF") == 5, "animated webp")

        # Bad requests: 400 naming the field, nothing queued.
        for body, word in [({"prompt": "a", "output_format": "gif"}, "output_format"),
                           ({"prompt": "a", "batch_count": 2}, "batch_count"),
                           ({"prompt": "a", "video_frames": 0}, "video_frames"),
                           ({"prompt": "a", "control_frames": ["x"]}, "control_frames"),
                           ({"prompt": "a", "high_noise_sample_params": {}},
                            "high_noise_sample_params"),
                           ({"prompt": "a", "end_image": "not base64!"}, "end_image")]:
            status, _, err = server.json("POST", "/sdcpp/v1/vid_gen", body)
            check(status == 400 and word in str(err), f"{body}: {status} {err}")
        # A text-to-video model refuses a first frame, checked before the job is queued.
        first = pattern_png("first.png", "testsrc", "48x40")
        status, _, err = server.json("POST", "/sdcpp/v1/vid_gen",
                                     {"prompt": "a", "video_frames": 5, "init_image": first})
        check(status == 400 and "image-to-video" in str(err), f"t2v with a frame: {status} {err}")
        # ... and a control video (VACE's), naming the field.
        status, _, err = server.json("POST", "/sdcpp/v1/vid_gen",
                                     {"prompt": "a", "video_frames": 5, "control_frames": [first]})
        check(status == 400 and "control_frames" in str(err) and "VACE" in str(err),
              f"t2v with a control video: {status} {err}")
    finally:
        check(server.stop() == 0, "the text-to-video server did not exit cleanly")

    # Image to video: the first and last frames of a tiny FLF2V.
    server = Server(SERVER, ["--diffusion-model", os.path.join(i2v, "wan.safetensors"),
                             "--clip_vision", os.path.join(i2v, "clip_vision.safetensors"),
                             *files], ENV)
    try:
        first = pattern_png("first.png", "testsrc", "48x40")
        last = pattern_png("last.png", "smptebars", "32x32")
        got = run_clip(server, {"prompt": "a cat", "video_frames": 5, "init_image": first,
                                "end_image": last, "output_format": "mp4"}, 5, "mp4")
        if got:
            check(probe(got[0], ".mp4") == "32,32,16/1,5", f"i2v mp4: {probe(got[0], '.mp4')}")
        # Without its first frame: the engine's reason, before the job is queued.
        status, _, err = server.json("POST", "/sdcpp/v1/vid_gen",
                                     {"prompt": "a", "video_frames": 5})
        check(status == 400 and "first frame" in str(err), f"i2v without a frame: {status} {err}")
    finally:
        check(server.stop() == 0, "the image-to-video server did not exit cleanly")

    # VACE: a control video (two frames of other sizes, fitted) and a reference image.
    server = Server(SERVER, ["--diffusion-model", os.path.join(WORK, "wan_vace", "wan.gguf"),
                             *files], ENV)
    try:
        frames = [pattern_png("c0.png", "testsrc", "48x40"),
                  pattern_png("c1.png", "smptebars", "32x32")]
        reference = pattern_png("ref.png", "rgbtestsrc", "32x32")
        got = run_clip(server, {"prompt": "a cat", "video_frames": 5, "control_frames": frames,
                                "init_image": reference, "vace_strength": 0.7,
                                "output_format": "webm"}, 5, "webm")
        if got:
            check(probe(got[0], ".webm") == "32,32,16/1,5", f"vace webm: {probe(got[0], '.webm')}")
        status, _, err = server.json("POST", "/sdcpp/v1/vid_gen",
                                     {"prompt": "a", "video_frames": 5, "control_frames": frames,
                                      "end_image": reference})
        check(status == 400 and "end_image" in str(err), f"vace with a last frame: {status} {err}")
    finally:
        check(server.stop() == 0, "the VACE server did not exit cleanly")

    shutil.rmtree(WORK, ignore_errors=True)
    if failures:
        print(f"{len(failures)} failure(s)")
        return 1
    print("sd-server vid_gen: every container, image to video, VACE and refusal as expected")
    return 0


if __name__ == "__main__":
    sys.exit(main())
