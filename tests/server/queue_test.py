#!/usr/bin/env python3
"""sd-server instances sharing one durable job queue in a throwaway PostgreSQL cluster.

Two workers and an --accept-only front on the tiny random SDXL-shaped checkpoint:
- 200 jobs posted round-robin finish exactly once, each read back from another instance
  than the one that took it, and their pixels equal sd-cli's for the same request; the
  synchronous APIs (A1111, OpenAI generations and edits) answer through the front;
- a worker killed with SIGKILL in mid-job: the job's lease expires, it runs again on the
  other worker and finishes once, its history shows the expired lease;
- a worker stopped with SIGTERM in mid-job hands its job back (the attempt does not count);
- cancel from an instance that is not running the job, of a running and of a queued job;
- a poison job (fails every time) ends failed after --max-attempts, and jobs behind it run;
- PostgreSQL stopped under load: 503 with Retry-After meanwhile, never a crash; after its
  restart every accepted job finishes exactly once;
- waiting jobs are limited per tenant (429 with Retry-After), a newer schema and TLS the
  database lacks are refused at start, and the password appears in no server output.

usage: queue_test.py SD_SERVER SD_CLI MAKE_TINY_MODEL SHARED_DIR [JOBS (default 200)]
Exits 77 (skipped) without ../shared's CLIP vocabulary or PostgreSQL's server binaries.
"""
import base64
import http.client
import os
import secrets
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from server_harness import Server, png_pixels  # noqa: E402
from throwaway_postgres import ThrowawayPostgres, server_bin_dir  # noqa: E402

SERVER, CLI, MAKE_MODEL, SHARED = sys.argv[1:5]
JOBS = int(sys.argv[5]) if len(sys.argv) > 5 else 200
LONG_STEPS = 40  # a job that is still running when the test kills or stops its worker
VOCAB = os.path.join(SHARED, "data", "clip", "bpe_simple_vocab_16e6.txt.gz")
if not os.path.isfile(VOCAB):
    print(f"skipped: no CLIP vocabulary at {VOCAB}")
    sys.exit(77)
if not server_bin_dir():
    print("skipped: no PostgreSQL server binaries (scripts/setup.sh installs Debian's postgresql)")
    sys.exit(77)
ENV = dict(os.environ, SD_CLIP_VOCAB=VOCAB, OMP_NUM_THREADS="1")
for name in ("SD_SERVER_TOKEN", "SD_QUEUE_URL"):
    ENV.pop(name, None)
WORK = tempfile.mkdtemp(prefix="sd_queue_test_")
MODEL = os.path.join(WORK, "tiny_sdxl.safetensors")
subprocess.run([MAKE_MODEL, MODEL], check=True)
UPSCALERS = os.path.join(WORK, "upscalers")
os.makedirs(UPSCALERS)
with open(os.path.join(UPSCALERS, "broken.safetensors"), "wb") as f:
    f.write(os.urandom(1000))  # named by a request, fails to load on every worker

failures = []


def check(condition, what):
    if not condition:
        failures.append(what)
        print("FAIL:", what, flush=True)


PASSWORD = "pw-" + secrets.token_hex(8)
pg = ThrowawayPostgres(PASSWORD)
COMMON = ["-m", MODEL, "--queue", pg.url, "--max-queue", "1000", "--lease-seconds", "3",
          "--max-attempts", "3", "--hires-upscalers-dir", UPSCALERS]
servers = []


def start(*extra):
    s = Server(SERVER, COMMON + list(extra), ENV)
    servers.append(s)
    return s


def sql(query):
    return pg.psql(query).strip()


def job_body(seed, steps=2, **extra):
    body = {"prompt": "a lighthouse at dusk", "negative_prompt": "blurry", "width": 64,
            "height": 64, "seed": seed, "sample_params": {"sample_steps": steps,
            "sample_method": "euler", "guidance": {"txt_cfg": 5}}}
    body.update(extra)
    return body


def post(server, body):
    status, headers, answer = server.json("POST", "/sdcpp/v1/img_gen", body)
    if status != 202:
        raise RuntimeError(f"POST img_gen answered {status}: {answer}")
    return answer["id"]


def get_job(server, job_id):
    status, _, job = server.json("GET", "/sdcpp/v1/jobs/" + job_id)
    return job if status == 200 else None


def wait_job(server, job_id, until=("completed", "failed", "cancelled"), timeout=120):
    deadline = time.time() + timeout
    job = None
    while time.time() < deadline:
        job = get_job(server, job_id)
        if job and job["status"] in until:
            return job
        time.sleep(0.05)
    raise RuntimeError(f"job {job_id} never reached {until}: {job}")


def worker_pid(worker_id):
    return int(worker_id.split("-")[-2])


def server_of(job):
    pid = worker_pid(job["history"][-1]["worker"])
    return next(s for s in servers if s.proc.pid == pid)


try:
    a, b = start(), start()
    front = start("--accept-only")
    _, _, caps = front.json("GET", "/sdcpp/v1/capabilities")
    fleet = caps["fleet"]
    check(fleet["workers"] == 2 and fleet["models"][0]["model"] == "tiny_sdxl"
          and fleet["this_server"]["worker"] is None,
          f"the front sees the two workers of the model: {fleet}")

    # Refusals at start: tables of a newer server, TLS the database does not offer (the
    # URL's sslmode reaches the client library).
    sql("CREATE SCHEMA future; CREATE TABLE future.schema_version (version integer);"
        "INSERT INTO future.schema_version VALUES (99)")
    run = subprocess.run([SERVER, *COMMON, "--queue-schema", "future", "--listen-port", "0"],
                         env=ENV, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         timeout=120)
    check(run.returncode == 1 and "version 99, newer than this sd-server's" in run.stdout
          and PASSWORD not in run.stdout, f"tables of a newer server are refused: {run.stdout}")
    run = subprocess.run([SERVER, "-m", MODEL, "--accept-only", "--listen-port", "0",
                          "--queue", pg.url + "?sslmode=require"],
                         env=ENV, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         timeout=120)
    check(run.returncode == 1 and "SSL" in run.stdout and PASSWORD not in run.stdout,
          f"sslmode=require against a server without TLS is refused: {run.stdout}")

    # Waiting jobs are limited per tenant: jobs for a model no worker serves stay queued.
    other_model = os.path.join(WORK, "other.safetensors")
    os.symlink(MODEL, other_model)
    limited = Server(SERVER, ["-m", other_model, "--queue", pg.url, "--accept-only",
                              "--max-queue", "2"], ENV)
    token_env = dict(ENV, SD_SERVER_TOKEN="tenant-two-token")
    tokened = Server(SERVER, ["-m", other_model, "--queue", pg.url, "--accept-only",
                              "--max-queue", "2"], token_env)
    servers.extend([limited, tokened])
    parked = [post(limited, job_body(seed=1)), post(limited, job_body(seed=2))]
    status, headers, answer = limited.json("POST", "/sdcpp/v1/img_gen", job_body(seed=3))
    check(status == 429 and "Retry-After" in headers and answer["error"]["code"] == "queue_full",
          f"a third waiting job of one tenant gets 429: {status} {answer}")
    auth = {"Authorization": "Bearer tenant-two-token"}
    for seed in (4, 5):
        status, _, answer = tokened.json("POST", "/sdcpp/v1/img_gen", job_body(seed=seed),
                                         headers=auth)
        check(status == 202, f"another tenant has its own limit: {status} {answer}")
        parked.append(answer["id"])
    _, _, caps = front.json("GET", "/sdcpp/v1/capabilities")
    other = [m for m in caps["fleet"]["models"] if m["model"] == "other"]
    check(other == [{"model": "other", "workers": 0, "queued": 4}],
          f"the fleet shows the queued jobs no worker serves: {caps['fleet']['models']}")
    for job_id in parked:
        front.json("POST", f"/sdcpp/v1/jobs/{job_id}/cancel")
    limited.stop()
    tokened.stop()

    # JOBS jobs, round-robin; each read back from the next instance.
    t0 = time.time()
    instances = [a, b, front]
    ids = [post(instances[i % 3], job_body(seed=1000 + i)) for i in range(JOBS)]
    accepted = time.time() - t0
    jobs = [wait_job(instances[(i + 1) % 3], job_id, timeout=300) for i, job_id in enumerate(ids)]
    took = time.time() - t0
    print(f"{JOBS} jobs: accepted in {accepted:.1f} s, all finished after {took:.1f} s "
          f"({JOBS / took * 60:.0f} jobs/min on 2 workers)", flush=True)
    # With 3 s leases on a loaded 2-core machine a worker can miss a renewal: the job then
    # runs again elsewhere, which is the queue doing its work. What must hold: every earlier
    # attempt ended by an expired lease, and one result per job (counted below).
    rerun = 0
    for i, job in enumerate(jobs):
        history = job.get("history") or []
        retried_cleanly = all(h.get("outcome") == "lease_expired" for h in history[:-1])
        rerun += job.get("attempts", 0) > 1
        ok = (job["status"] == "completed" and retried_cleanly
              and [im["seed"] for im in job["result"]["images"]] == [1000 + i])
        check(ok, f"job {i} completed with its seed, any earlier attempt ended by an expired "
                  f"lease: {job.get('status')} {job.get('error')} {job.get('attempts')} {history}")
    print(f"{rerun} of {JOBS} jobs ran again after a missed lease renewal", flush=True)
    counts = sql("SELECT count(*), count(DISTINCT job_id) FROM sdcpp.results "
                 "WHERE job_id IN (%s)" % ",".join(f"'{j}'" for j in ids))
    check(counts == f"{JOBS}|{JOBS}", f"{JOBS} results, one per job (count, distinct): {counts}")
    workers_used = {job["history"][0]["worker"] for job in jobs}
    check(len(workers_used) == 2, f"both workers ran jobs: {workers_used}")

    # The same request through sd-cli gives the same pixels.
    for i in (0, JOBS - 1):
        out = os.path.join(WORK, f"cli_{i}.png")
        subprocess.run([CLI, "-m", MODEL, "-t", "1", "-p", "a lighthouse at dusk", "-n", "blurry",
                        "-W", "64", "-H", "64", "--steps", "2", "-s", str(1000 + i),
                        "--cfg-scale", "5", "--sampling-method", "euler", "-o", out],
                       env=ENV, check=True, stdout=subprocess.DEVNULL)
        served = base64.b64decode(jobs[i]["result"]["images"][0]["b64_json"])
        check(png_pixels(served) == png_pixels(open(out, "rb").read()),
              f"job {i}'s pixels equal sd-cli's")

    # The synchronous APIs through the front: it waits on the database's notifications.
    status, _, answer = front.json("POST", "/sdapi/v1/txt2img", {
        "prompt": "a lighthouse at dusk", "negative_prompt": "blurry", "width": 64, "height": 64,
        "steps": 2, "seed": 1000, "cfg_scale": 5, "sampler_name": "euler"})
    check(status == 200 and png_pixels(base64.b64decode(answer["images"][0]))
          == png_pixels(open(os.path.join(WORK, "cli_0.png"), "rb").read()),
          f"A1111 txt2img through the front gives sd-cli's pixels: {status}")
    status, _, answer = front.json("POST", "/v1/images/generations",
                                   {"prompt": "a boat", "size": "64x64", "n": 1})
    check(status == 200 and len(answer.get("data", [])) == 1,
          f"OpenAI generations through the front: {status} {str(answer)[:200]}")
    boundary = uuid.uuid4().hex
    image = open(os.path.join(WORK, "cli_0.png"), "rb").read()
    form = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"prompt\"\r\n\r\na boat\r\n"
            f"--{boundary}\r\nContent-Disposition: form-data; name=\"image\"; filename=\"i.png\"\r\n"
            "Content-Type: image/png\r\n\r\n").encode() + image + f"\r\n--{boundary}--\r\n".encode()
    status, _, data = front.request("POST", "/v1/images/edits", raw=form, headers={
        "Content-Type": f"multipart/form-data; boundary={boundary}"})
    check(status == 200 and b"b64_json" in data,
          f"OpenAI edits (an image in the stored request) through the front: {status} {data[:200]}")

    # Server-Sent Events on an instance that does not run the job: progress, then done.
    job_id = post(a, job_body(seed=9, steps=8))
    host, port = front.url.rsplit("/", 1)[1].split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=60)
    conn.request("GET", f"/sdcpp/v1/jobs/{job_id}/events")
    stream = conn.getresponse()
    events = []
    for line in stream:
        if line.startswith(b"event: "):
            events.append(line[7:].strip().decode())
            if events[-1] == "done":
                break
    conn.close()
    check(events.count("progress") >= 2 and events[-1:] == ["done"],
          f"the front streams a worker's job's progress and end: {events}")

    # SIGKILL of the worker running a job: it runs again on the other one, once.
    long_id = post(front, job_body(seed=7, steps=LONG_STEPS))
    job = wait_job(front, long_id, until=("generating",))
    while job["progress"]["step"] < 2:
        time.sleep(0.02)
        job = get_job(front, long_id)
    victim = server_of(job)
    victim_worker = job["history"][-1]["worker"]
    victim.proc.send_signal(signal.SIGKILL)
    victim.proc.wait()
    survivor = a if victim is b else b
    job = wait_job(front, long_id, timeout=120)
    history = job["history"]
    check(job["status"] == "completed" and job["attempts"] == 2 and len(history) == 2
          and history[0]["worker"] == victim_worker and history[0]["outcome"] == "lease_expired"
          and history[1]["worker"] != victim_worker and history[1]["outcome"] == "completed",
          f"the killed worker's job ran again elsewhere: {job['status']} {history}")
    check(sql(f"SELECT count(*) FROM sdcpp.results WHERE job_id = '{long_id}'") == "1",
          "the rerun job has one result")
    replacement = start()

    # SIGTERM in mid-job: the job goes back at once, and the attempt does not count.
    long_id = post(front, job_body(seed=8, steps=LONG_STEPS))
    job = wait_job(front, long_id, until=("generating",))
    stopping = server_of(job)
    stopping.proc.send_signal(signal.SIGTERM)
    check(stopping.proc.wait(60) == 0, "a worker stopped with SIGTERM exits 0")
    job = wait_job(front, long_id, timeout=120)
    check(job["status"] == "completed" and job["attempts"] == 1
          and job["history"][0]["outcome"] == "interrupted",
          f"a stopped worker's job is handed back and finished elsewhere: {job['history']}")
    workers = [s for s in (a, b, replacement) if s.proc.poll() is None]
    workers.append(start())

    # Cancel from an instance that does not run the job: two running, one queued.
    running = [post(front, job_body(seed=20 + i, steps=400)) for i in range(2)]
    queued = post(front, job_body(seed=22, steps=400))
    for job_id in running:
        wait_job(front, job_id, until=("generating",))
    status, _, answer = workers[0].json("POST", f"/sdcpp/v1/jobs/{queued}/cancel")
    check(status == 200 and answer["status"] == "cancelled",
          f"a queued job is cancelled at once from any instance: {status} {answer}")
    t0 = time.time()
    for job_id in running:
        front.json("POST", f"/sdcpp/v1/jobs/{job_id}/cancel")
    for job_id in running:
        job = wait_job(workers[1], job_id, timeout=30)
        check(job["status"] == "cancelled" and job["history"][-1]["outcome"] == "cancelled",
              f"a running job cancelled from the front ends cancelled: {job['status']}")
    print(f"two running jobs cancelled from the front in {time.time() - t0:.2f} s", flush=True)

    # A poison job fails after --max-attempts; the job behind it runs.
    poison = post(front, job_body(seed=30, hires={"enabled": True, "upscaler": "broken.safetensors",
                                                  "scale": 1.5, "steps": 1}))
    after = post(front, job_body(seed=31))
    job = wait_job(front, poison, timeout=120)
    check(job["status"] == "failed" and job["attempts"] == 3 and len(job["history"]) == 3
          and all(h["outcome"] == "failed" for h in job["history"])
          and "broken.safetensors" in job["error"]["message"],
          f"the poison job failed after 3 attempts: {job['status']} {job.get('error')}")
    check(wait_job(front, after)["status"] == "completed", "the job behind the poison one ran")

    # PostgreSQL stopped under load: 503 meanwhile, every accepted job finishes once after.
    load = [post(workers[i % 2], job_body(seed=40 + i, steps=6)) for i in range(20)]
    time.sleep(0.3)
    pg.stop("fast")
    status, headers, answer = front.json("POST", "/sdcpp/v1/img_gen", job_body(seed=99))
    check(status == 503 and "Retry-After" in headers and answer["error"]["code"] == "queue_unavailable",
          f"a job posted while the database is down gets 503 with Retry-After: {status} {answer}")
    status, headers, _ = front.json("GET", "/sdcpp/v1/jobs/" + load[0])
    check(status == 503 and "Retry-After" in headers, f"polling while it is down: {status}")
    time.sleep(2)
    alive = [s for s in servers if s.proc.returncode is None and s.proc.poll() is None]
    check(len(alive) == 3, f"every server is still running while the database is down: {len(alive)}")
    pg.start()
    for job_id in load:
        job = wait_job(front, job_id, timeout=120)
        check(job["status"] == "completed", f"an accepted job survives the restart: {job['status']}")
    counts = sql("SELECT count(*), count(DISTINCT job_id) FROM sdcpp.results "
                 "WHERE job_id IN (%s)" % ",".join(f"'{j}'" for j in load))
    check(counts == "20|20", f"the jobs across the restart have one result each: {counts}")
    check(post(front, job_body(seed=98)) is not None, "the front takes jobs again")

    for s in servers:
        s.stop()
    log = "".join("".join(s.log) for s in servers)
    check(PASSWORD not in log, "the database password is in no server output")
    check("Segmentation" not in log and "terminate called" not in log, "no server crashed")
finally:
    for s in servers:
        if s.proc.poll() is None:
            s.proc.kill()
    pg.destroy()

if failures:
    print(f"{len(failures)} check(s) failed")
    for s in servers[:3]:
        print("---- server log ----\n" + "".join(s.log[-30:]))
    sys.exit(1)
print("all shared-queue checks passed")
