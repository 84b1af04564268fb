#!/usr/bin/env python3
"""The shared job queue's cost and throughput against the in-process queue, side by side in
one run, on the tests' tiny random SDXL-shaped checkpoint (64x64, 2 steps: the queue's
overhead shows, not the model's speed) and a throwaway PostgreSQL cluster.

1. Round trip of one synchronous A1111 request at a time (N in a row): in-process queue vs
   the shared queue with one worker; the difference is the queue's overhead per job.
2. Claim latency with an idle worker: from the job's row being created to the worker's claim
   (the database's own clock), p50 and p99 over the same requests.
3. Throughput: N jobs posted at once to the native API, all polled to the end, with 1, 2 and
   3 workers (on a 2-core machine more workers show the queue's overhead, not scaling),
   and the in-process queue.

usage: queue_bench.py SD_SERVER MAKE_TINY_MODEL SHARED_DIR [--jobs 100] [--sequential 40]
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "server"))
from server_harness import Server  # noqa: E402
from throwaway_postgres import ThrowawayPostgres  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("server")
ap.add_argument("make_model")
ap.add_argument("shared")
ap.add_argument("--jobs", type=int, default=100)
ap.add_argument("--sequential", type=int, default=40)
args = ap.parse_args()

env = dict(os.environ, OMP_NUM_THREADS="1",
           SD_CLIP_VOCAB=os.path.join(args.shared, "data", "clip", "bpe_simple_vocab_16e6.txt.gz"))
env.pop("SD_QUEUE_URL", None)
work = tempfile.mkdtemp(prefix="sd_queue_bench_")
model = os.path.join(work, "tiny.safetensors")
subprocess.run([args.make_model, model], check=True)
pg = ThrowawayPostgres("bench")


def sdapi(seed):
    return {"prompt": "a lighthouse", "width": 64, "height": 64, "steps": 2, "seed": seed}


def native(seed):
    return {"prompt": "a lighthouse", "width": 64, "height": 64, "seed": seed,
            "sample_params": {"sample_steps": 2}}


def round_trips(server, n, seed0):
    times = []
    for i in range(n):
        t = time.perf_counter()
        status, _, _ = server.request("POST", "/sdapi/v1/txt2img", sdapi(seed0 + i))
        assert status == 200, status
        times.append(time.perf_counter() - t)
    return times


def throughput(post_to, poll_from, n, seed0):
    t = time.perf_counter()
    ids = []
    for i in range(n):
        status, _, job = post_to[i % len(post_to)].json("POST", "/sdcpp/v1/img_gen", native(seed0 + i))
        assert status == 202, (status, job)
        ids.append(job["id"])
    for job_id in ids:
        while True:
            _, _, job = poll_from.json("GET", "/sdcpp/v1/jobs/" + job_id)
            if job["status"] in ("completed", "failed", "cancelled"):
                assert job["status"] == "completed", job
                break
            time.sleep(0.01)
    return n / (time.perf_counter() - t) * 60


def pct(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))]


common = ["-m", model, "--max-queue", str(args.jobs + 10), "--job-history", str(args.jobs + 10)]
queue = ["--queue", pg.url]
rows = []
try:
    local = Server(args.server, common, env)
    shared = [Server(args.server, common + queue, env)]
    # Interleaved, so that a change of machine speed hits both alike.
    local_rt, shared_rt = [], []
    for i in range(args.sequential):
        local_rt += round_trips(local, 1, 10 * i)
        shared_rt += round_trips(shared[0], 1, 10 * i)
    overhead = statistics.median(shared_rt) - statistics.median(local_rt)
    rows.append(("one synchronous request at a time, median round trip",
                 f"in-process {statistics.median(local_rt) * 1000:.1f} ms, shared "
                 f"{statistics.median(shared_rt) * 1000:.1f} ms: {overhead * 1000:+.1f} ms per job "
                 f"({statistics.median(shared_rt) / statistics.median(local_rt):.2f}x)"))
    claim = [float(x) for x in pg.psql(
        "SELECT extract(epoch FROM a.started - j.created) * 1000 FROM sdcpp.attempts a "
        "JOIN sdcpp.jobs j ON j.id = a.job_id").split()]
    rows.append(("claim latency, idle worker (row created to claimed)",
                 f"p50 {pct(claim, 50):.1f} ms, p99 {pct(claim, 99):.1f} ms over {len(claim)} jobs"))

    rates = {"in-process": throughput([local], local, args.jobs, 100000)}
    local.stop()
    for workers in (1, 2, 3):
        while len(shared) < workers:
            shared.append(Server(args.server, common + queue, env))
        rates[f"shared, {workers} worker{'s' if workers > 1 else ''}"] = throughput(
            shared, shared[0], args.jobs, 200000 + 1000 * workers)
    for name, rate in rates.items():
        rows.append((f"{args.jobs} jobs posted at once: {name}",
                     f"{rate:.0f} jobs/min ({rate / rates['in-process']:.2f}x in-process)"))
    for s in shared:
        s.stop()
finally:
    pg.destroy()

print(f"| measured on {os.cpu_count()} cores, tiny model 64x64 2 steps | result |")
print("|---|---|")
for what, result in rows:
    print(f"| {what} | {result} |")
