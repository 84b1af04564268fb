#!/usr/bin/env python3
"""Two sd-server binaries side by side in one run (e.g. this tree's and one built from an
earlier commit), on the tests' tiny random SDXL-shaped checkpoint over loopback, with a
token (SD_SERVER_TOKEN):

1. Header floods without the token: F floods of M MiB of header lines, one after another;
   how much of each the server takes before it cuts the connection, the time, and the
   server's resident memory after.
2. Idle and slow clients without the token: 48 connections that send nothing and 12 that
   send half a head, then one request with the token: its latency.
3. Small requests with the token: N GET /sdcpp/v1/capabilities in a row on one kept-alive
   connection (median and p99 latency, requests/s), and 4 clients at once.
4. Generations: J synchronous 64x64 1-step A1111 requests in a row (median round trip).

usage: server_http_side_by_side.py SERVER_A SERVER_B MAKE_TINY_MODEL SHARED_DIR
       [--floods 4] [--flood-mib 128] [--requests 2000] [--jobs 20]
"""
import argparse
import http.client
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "server"))
from server_harness import Server  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("server_a")
ap.add_argument("server_b")
ap.add_argument("make_model")
ap.add_argument("shared")
ap.add_argument("--floods", type=int, default=4)
ap.add_argument("--flood-mib", type=int, default=128)
ap.add_argument("--requests", type=int, default=2000)
ap.add_argument("--jobs", type=int, default=20)
args = ap.parse_args()

TOKEN = "bench-token"
AUTH = {"Authorization": "Bearer " + TOKEN}
work = tempfile.mkdtemp(prefix="sd_http_bench_")
model = os.path.join(work, "tiny.safetensors")
subprocess.run([args.make_model, model, os.path.join(work, "cn.safetensors")], check=True)
env = dict(os.environ, SD_CLIP_VOCAB=os.path.join(args.shared, "data", "clip",
                                                  "bpe_simple_vocab_16e6.txt.gz"),
           SD_SERVER_TOKEN=TOKEN, OMP_NUM_THREADS="1")


def rss_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        return int(re.search(r"VmRSS:\s+(\d+)", f.read()).group(1)) / 1024


def floods(host, port, pid):
    line = (b"X-Filler: " + b"a" * 200 + b"\r\n") * 256
    taken, started = [], time.time()
    for _ in range(args.floods):
        with socket.create_connection((host, port), timeout=120) as c:
            c.sendall(b"GET /sdcpp/v1/capabilities HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            sent = 0
            try:
                while sent < args.flood_mib << 20:
                    c.sendall(line)
                    sent += len(line)
            except OSError:
                pass
            taken.append(sent / 1048576)
    return max(taken), time.time() - started, rss_mib(pid)


def idle_then_valid(host, port):
    idle = [socket.create_connection((host, port)) for _ in range(60)]
    for c in idle[48:]:
        c.sendall(b"GET /v1/models HTTP/1.1\r\n")
    started = time.time()
    c = http.client.HTTPConnection(host, port, timeout=120)
    c.request("GET", "/sdcpp/v1/capabilities", headers=AUTH)
    status = c.getresponse().status
    latency = time.time() - started
    for s in idle:
        s.close()
    return status, latency


def small_requests(host, port, count):
    c = http.client.HTTPConnection(host, port, timeout=60)
    times = []
    for _ in range(count):
        started = time.perf_counter()
        c.request("GET", "/sdcpp/v1/capabilities", headers=AUTH)
        r = c.getresponse()
        r.read()
        times.append(time.perf_counter() - started)
    times.sort()
    return (statistics.median(times) * 1000, times[int(0.99 * len(times))] * 1000,
            count / sum(times))


def parallel_requests(host, port, clients, count):
    done = []

    def client():
        c = http.client.HTTPConnection(host, port, timeout=60)
        for _ in range(count):
            c.request("GET", "/sdcpp/v1/capabilities", headers=AUTH)
            c.getresponse().read()
        done.append(count)
    started = time.time()
    threads = [threading.Thread(target=client) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sum(done) / (time.time() - started)


def generations(host, port, count):
    c = http.client.HTTPConnection(host, port, timeout=300)
    body = json.dumps({"prompt": "a fox", "width": 64, "height": 64, "steps": 1, "seed": 1})
    times = []
    for _ in range(count):
        started = time.perf_counter()
        c.request("POST", "/sdapi/v1/txt2img", body=body,
                  headers=dict(AUTH, **{"Content-Type": "application/json"}))
        r = c.getresponse()
        r.read()
        assert r.status == 200, r.status
        times.append(time.perf_counter() - started)
    return statistics.median(times)


results = {}
for name, binary in (("A", args.server_a), ("B", args.server_b)):
    # The LoRA folder is named so that listing it (capabilities) does not walk the cwd.
    server = Server(binary, ["-m", model, "--lora-model-dir", work], env)
    host, port = server.url.rsplit("/", 1)[1].split(":")
    port = int(port)
    try:
        r = {"start_rss": rss_mib(server.proc.pid)}
        r["generation_ms"] = generations(host, port, args.jobs) * 1000
        r["small_p50_ms"], r["small_p99_ms"], r["small_rate"] = small_requests(host, port,
                                                                               args.requests)
        r["small_rate_4_clients"] = parallel_requests(host, port, 4, args.requests // 4)
        r["valid_status"], r["valid_ms"] = idle_then_valid(host, port)
        r["valid_ms"] *= 1000
        r["flood_taken_mib"], r["flood_s"], r["flood_rss"] = floods(host, port, server.proc.pid)
        results[name] = r
    finally:
        server.stop()

print(f"{'':44s} {'A':>12s} {'B':>12s}")
rows = [("resident at start (MiB)", "start_rss", "{:.0f}"),
        ("txt2img 64x64 1 step, median round trip (ms)", "generation_ms", "{:.1f}"),
        ("capabilities, one connection: p50 (ms)", "small_p50_ms", "{:.3f}"),
        ("capabilities, one connection: p99 (ms)", "small_p99_ms", "{:.3f}"),
        ("capabilities, one connection: requests/s", "small_rate", "{:.0f}"),
        ("capabilities, 4 clients: requests/s", "small_rate_4_clients", "{:.0f}"),
        ("token client beside 60 idle/slow: status", "valid_status", "{}"),
        ("token client beside 60 idle/slow: ms", "valid_ms", "{:.1f}"),
        (f"{args.floods} header floods of {args.flood_mib} MiB: MiB taken", "flood_taken_mib",
         "{:.1f}"),
        ("  ... seconds", "flood_s", "{:.1f}"),
        ("  ... resident after (MiB)", "flood_rss", "{:.0f}")]
for label, key, fmt in rows:
    print(f"{label:44s} {fmt.format(results['A'][key]):>12s} {fmt.format(results['B'][key]):>12s}")
