#!/usr/bin/env python3
"""sd-server's memory under a stream of mixed requests: it must level off, not grow per
request.

Starts sd-server on the tiny random SDXL-shaped checkpoint and sends N requests (default
1000), in rounds of ten: text-to-image on the native, A1111 and OpenAI APIs (small images,
one step, with previews), refused requests (bad JSON, unknown fields, oversized, a
clip_skip past the encoder), jobs cancelled while queued or running, job status and result
reads, and event-stream clients that connect and never read. The server's resident memory
(VmRSS) is read after every 10% of the requests; the job history (--job-history) is kept
small so that a round trip through it is part of the run.

Passes when the growth over the second half is within max(16 MiB, 5%) of the resident size
at the half; prints every sample either way (the figure a change can be measured by).

usage: server_memory.py SD_SERVER MAKE_TINY_MODEL SHARED_DIR [N]
Exits 77 (skipped) when SHARED_DIR has no CLIP vocabulary.
"""
import json
import os
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from server_harness import Server  # noqa: E402

SERVER, MAKE_MODEL, SHARED = sys.argv[1:4]
TOTAL = int(sys.argv[4]) if len(sys.argv) > 4 else 1000
VOCAB = os.path.join(SHARED, "data", "clip", "bpe_simple_vocab_16e6.txt.gz")
if not os.path.isfile(VOCAB):
    print(f"skipped: no CLIP vocabulary at {VOCAB}")
    sys.exit(77)
ENV = dict(os.environ, SD_CLIP_VOCAB=VOCAB, OMP_NUM_THREADS="1")
ENV.pop("SD_SERVER_TOKEN", None)
WORK = tempfile.mkdtemp(prefix="sd_server_memory_")
MODEL = os.path.join(WORK, "tiny_sdxl.safetensors")
subprocess.run([MAKE_MODEL, MODEL, os.path.join(WORK, "cn.safetensors")], check=True)


def rss_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    raise RuntimeError("no VmRSS")


def silent_event_client(url, job_id, clients):
    """Opens the job's event stream and never reads it (closed at the end of the run)."""
    host, port = url.rsplit("/", 1)[1].rsplit(":", 1)
    c = socket.create_connection((host, int(port)), timeout=30)
    c.sendall(f"GET /sdcpp/v1/jobs/{job_id}/events HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
    clients.append(c)


def main():
    server = Server(SERVER, ["-m", MODEL, "--job-history", "32", "--max-queue", "64"], ENV)
    proc, url = server.proc, server.url

    def request(method, path, body=None, raw=None):
        status, _, data = server.request(method, path, body, raw=raw, timeout=60)
        return status, data

    gen = {"prompt": "a cat", "width": 64, "height": 64, "sample_params": {"sample_steps": 1}}
    rounds = [
        lambda: request("POST", "/sdcpp/v1/img_gen", gen),
        lambda: request("POST", "/sdapi/v1/txt2img",
                        {"prompt": "a dog", "width": 64, "height": 64, "steps": 1}),
        lambda: request("POST", "/v1/images/generations",
                        {"prompt": "a bird", "size": "64x64", "n": 1}),
        lambda: request("POST", "/sdcpp/v1/img_gen", raw=b"{oops"),
        lambda: request("POST", "/sdcpp/v1/img_gen", {"promt": "typo"}),
        lambda: request("POST", "/sdcpp/v1/img_gen", {"clip_skip": 64}),
        lambda: request("POST", "/sdapi/v1/txt2img", {"prompt": "x", "width": 100000}),
        lambda: request("GET", "/sdcpp/v1/capabilities"),
    ]
    clients, samples, sent = [], [], 0
    step = max(1, TOTAL // 10)
    start = time.time()
    while sent < TOTAL:
        for f in rounds:
            f()
        # A job cancelled while it runs or waits, its status read, an event client that
        # never reads.
        status, body = request("POST", "/sdcpp/v1/img_gen",
                               dict(gen, sample_params={"sample_steps": 4}))
        if status == 202:
            job = json.loads(body)["id"]
            silent_event_client(url, job, clients)
            request("POST", f"/sdcpp/v1/jobs/{job}/cancel")
            request("GET", f"/sdcpp/v1/jobs/{job}")
        request("GET", "/sdcpp/v1/jobs/no-such-job")
        sent += len(rounds) + 2
        if sent // step > len(samples) - 1 or not samples:
            time.sleep(0.2)  # let the queue drain
            samples.append((sent, rss_mib(proc.pid)))
            print(f"{sent:5d} requests: {samples[-1][1]:7.1f} MiB", flush=True)
        # Event clients that never read are closed after a while, as a client gives up.
        while len(clients) > 16:
            clients.pop(0).close()
    for c in clients:
        c.close()
    seconds = time.time() - start
    server.stop()

    half = min(samples, key=lambda s: abs(s[0] - TOTAL // 2))
    end = samples[-1]
    growth = end[1] - half[1]
    allowed = max(16.0, 0.05 * half[1])
    print(f"{sent} requests in {seconds:.0f} s; resident {samples[0][1]:.1f} MiB after "
          f"{samples[0][0]}, {half[1]:.1f} at {half[0]}, {end[1]:.1f} at {end[0]}: "
          f"{growth:+.1f} MiB over the second half (allowed {allowed:.1f})")
    if growth > allowed:
        print("FAIL: the server's memory grows with the requests it serves")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
