#!/usr/bin/env python3
"""Load on a running sd-server over loopback, bounded in time: while jobs generate one
after another, N client threads poll the status endpoints; then J small jobs in a row with
the server's resident memory read before and after.

usage: server_load.py URL SERVER_PID [--clients 8] [--seconds 10] [--jobs 200]
The server needs --job-history of at least --jobs, so every job can be checked.
Prints requests/s and latency percentiles of GET /sdcpp/v1/jobs/{id} and
GET /sdcpp/v1/capabilities under generation load, lost/duplicated job counts, and RSS.
"""
import argparse
import json
import threading
import time
import urllib.request

ap = argparse.ArgumentParser()
ap.add_argument("url")
ap.add_argument("pid", type=int)
ap.add_argument("--clients", type=int, default=8)
ap.add_argument("--seconds", type=float, default=10)
ap.add_argument("--jobs", type=int, default=200)
ap.add_argument("--size", type=int, default=64)
args = ap.parse_args()


def call(method, path, body=None):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(args.url + path, data=data, method=method,
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=600) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


def rss_mib():
    for line in open(f"/proc/{args.pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0


def job(steps):
    return {"prompt": "load", "width": args.size, "height": args.size, "seed": 1,
            "sample_params": {"sample_steps": steps}}


# 1. Status endpoints while a long job generates.
_, running = call("POST", "/sdcpp/v1/img_gen", job(10000))
while call("GET", "/sdcpp/v1/jobs/" + running["id"])[1]["status"] != "generating":
    time.sleep(0.05)
latencies = {"/sdcpp/v1/jobs/" + running["id"]: [], "/sdcpp/v1/capabilities": []}
stop = time.time() + args.seconds
lock = threading.Lock()


def poller(path):
    mine = []
    while time.time() < stop:
        t = time.perf_counter()
        status, _ = call("GET", path)
        mine.append(time.perf_counter() - t)
        assert status == 200, status
    with lock:
        latencies[path].extend(mine)


threads = [threading.Thread(target=poller, args=(list(latencies)[i % 2],))
           for i in range(args.clients)]
for t in threads:
    t.start()
for t in threads:
    t.join()
call("POST", f"/sdcpp/v1/jobs/{running['id']}/cancel")
for path, values in latencies.items():
    values.sort()
    name = "jobs/{id}" if "jobs" in path else "capabilities"
    print(f"GET {name}: {len(values) / args.seconds:.0f} requests/s, "
          f"p50 {values[len(values) // 2] * 1000:.1f} ms, p99 {values[int(len(values) * 0.99)] * 1000:.1f} ms "
          f"({args.clients // 2} clients, generation running)")

# 2. Many small jobs through a bounded queue: none lost or duplicated, memory flat.
while call("GET", "/sdcpp/v1/jobs/" + running["id"])[1]["status"] not in ("cancelled", "completed"):
    time.sleep(0.05)
rss_before = rss_mib()
ids, refused = [], 0
while len(ids) < args.jobs:
    status, answer = call("POST", "/sdcpp/v1/img_gen", job(2))
    if status == 202:
        ids.append(answer["id"])
    elif status == 429:
        refused += 1
        time.sleep(0.05)
    else:
        raise SystemExit(f"unexpected {status}: {answer}")
done = set()
for job_id in ids:
    while True:
        status, state = call("GET", "/sdcpp/v1/jobs/" + job_id)
        if status == 404:
            raise SystemExit(f"job {job_id} was lost (start the server with --job-history "
                             f"of at least --jobs)")
        if state["status"] == "completed":
            done.add(job_id)
            break
        assert state["status"] in ("queued", "generating"), state
        time.sleep(0.02)
print(f"{len(ids)} jobs: {len(set(ids))} distinct ids, {len(done)} finished, {refused} submissions "
      f"refused with 429 and retried; RSS {rss_before:.0f} MiB before, {rss_mib():.0f} MiB after")
