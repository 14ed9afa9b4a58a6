"""Serving: what the runs API adds to a run, how many runs a second one worker process
and two serve, and how late an event reaches a client's event stream.

Starts `scripts/start` as a user would, on its embedded defaults (a fresh var/ in a temp
folder: SQLite, the embedded Redis broker on a unix socket, gunicorn on loopback, one
`celery worker` with --concurrency from CELERY_CONCURRENCY), logs in as its admin,
makes an API token and a deployment of an example pack (default support_triage) with no
endpoints (the pack's own scripted model is its one tier). Every request below is real
HTTP (httpx) to the studio on 127.0.0.1. Then, with worker concurrency 1:

  overhead    --runs sequential runs: per run, the bare runtime first (`run_pack` of the
              same input in this process, the pack's scripted model, in-memory store),
              then `POST /api/deployments/<name>/runs?wait=30` until the answer. Added
              latency = the POST's time - the bare run's. On the defaults the web
              process that accepts a `?wait` run walks it (docs/serving.md, "Where a run
              is walked"). Each run is split with the row's timestamps (one clock: same
              machine): accept (the POST sent -> the row created), queue (created -> a
              walker claimed it: commit, broker, worker pickup; 0 when the accepting
              request holds the run from its insert), walk (claimed -> finished: the walk
              with its database checkpoints and events), answer (finished -> the client
              has the answer: the ?wait wake-up and read of the row, the response). Also
              the CPU the studio's processes (worker, web server, broker;
              /proc/<pid>/stat) spent per run, which other load on a shared machine does
              not inflate. Measured again on the second start (below) with
              PACKFORGE_SERVE_WALK_ON_WAIT=false: every run through the broker and a
              worker, as runs submitted without `?wait` go.
  SSE         --sse-runs runs submitted without waiting, each followed at once by
              `GET .../runs/<id>/events`; delivery latency = when the client read an event
              - the event's `at` (when the worker wrote it), for events written after the
              stream had started (earlier ones are backlog, read at once, not counted).
              Measured again on the second start (below) with PACKFORGE_SSE_POLL_S=
              --sse-poll (default 0.02 s; the setting's default is 0.2 s).
              The worker logs, per delivery, the statements it sent and the CPU it spent
              in each delivery (studio.work.metering, on with PACKFORGE_WORK_METER); the script reads those lines
              (of the runs through the broker: the web server logs at WARNING).
  throughput  --throughput-runs runs submitted at once (4 client threads, no wait), then
              waited for, after a warm-up of 2 runs per pool process; runs/s = runs /
              (last finished - first submitted), and runs / (last finished - first
              claimed by a worker).
  waits       --throughput-runs runs submitted with `?wait=30` by --wait-clients threads
              at once (default 8): each walked by the web server thread that accepted it,
              every one writing to the one SQLite file; each must answer 200 done (a
              load test of the walk-here path); latency p50/p95 and runs/s.
The studio is then stopped and started again on the same var/ with CELERY_CONCURRENCY=2
and PACKFORGE_SERVE_WALK_ON_WAIT=false; the throughput measure is repeated (ratio 2 vs 1
in one run of this script), then the overhead through the broker.

Last, in this process on a fresh SQLite database (Django's test Client, as
benchmarks/eval_scale.py times the eval pages): the review queue with --queue-items open
items (two deployments, three nodes, ages over a day): its page, its htmx poll and
`GET /api/review/items`, --queue-requests each (goal p95 < 200 ms).

p50/p95 by nearest rank. Raw rows (one per run measured, then a summary row):
benchmarks/results/serving.jsonl.

    .venv/bin/python benchmarks/serving.py [--runs 100] [--sse-runs 20] [--throughput-runs 100]
        [--sse-poll 0.02] [--wait-clients 8] [--queue-items 10000] [--queue-requests 50]
        [--pack support_triage]
        [--json] [--rows FILE] [--keep]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks._rows import write_rows  # noqa: E402
from benchmarks.eval_scale import cpu_seconds, machine_ticks  # noqa: E402
from benchmarks.stress import Studio, free_port  # noqa: E402
from runtime.stats import percentile  # noqa: E402
from tests.support.started import group_processes  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "serving.jsonl"
DEPLOYMENT = "bench"
GOAL_P95_MS = 20.0
WARMUP = 5
CLIENT_THREADS = 4


def ts(value: str | None) -> float:
    return datetime.fromisoformat(value).timestamp() if value else float("nan")


def pct(values: list[float], p: float) -> float:
    return round(percentile(values, p), 2) if values else float("nan")


# -- the bare runtime ----------------------------------------------------------------------


class Bare:
    """The same pack, in this process, on its scripted model: what a run costs without
    the studio."""

    def __init__(self, pack_dir: Path) -> None:
        from runtime import load_pack, open_backend

        self.pack = load_pack(pack_dir)
        self.backend = open_backend(self.pack.model or "", base_dir=self.pack.root, default=self.pack.model)

    def run(self, value: dict[str, Any]) -> tuple[float, str]:
        from runtime import run_pack

        begun, cpu = time.perf_counter(), time.process_time()
        result = run_pack(self.pack, value, backend=self.backend)
        self.cpu_ms = (time.process_time() - cpu) * 1000
        return (time.perf_counter() - begun) * 1000, str(result.status)


# -- the studio ----------------------------------------------------------------------------


def start_studio(tmp: Path, port: int, concurrency: int, extra: dict[str, str] | None = None) -> Studio:
    env = {k: v for k, v in os.environ.items() if k not in ("SECRET_KEY", "DEBUG", "CELERY_TASK_ALWAYS_EAGER")}
    for name in ("DATABASE_URL", "REDIS_URL"):
        env.pop(name, None)  # the embedded defaults, whatever the shell has
    env.update(
        PORT=str(port),
        HOST="127.0.0.1",
        PACKFORGE_VAR=str(tmp / "var"),
        PACKFORGE_GIT_ROOT=str(tmp / "var" / "git"),
        DATABASE_URL=f"sqlite:///{tmp}/var/studio.sqlite3",
        CELERY_CONCURRENCY=str(concurrency),
        DJANGO_SETTINGS_MODULE="studio.settings",
        PACKFORGE_WORK_METER="true",  # the worker logs each delivery's statements and CPU (studio.work.metering)
    )
    env.update(extra or {})
    studio = Studio(tmp / "var", env)
    studio.wait_for(r"^Packforge studio: (http://\S+)", timeout=300)
    studio.wait_for(r"\bready\.", timeout=120)  # the Celery worker
    return studio


def login_token(url: str, password: str) -> str:
    with httpx.Client(base_url=url, timeout=60) as browser:
        page = browser.get("/login/")
        csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
        assert csrf, page.text
        browser.post("/login/", data={"csrfmiddlewaretoken": csrf.group(1), "username": "admin", "password": password})
        made = browser.post(
            "/api/tokens", json={"name": "bench"}, headers={"X-CSRFToken": browser.cookies["csrftoken"]}
        )
        if made.status_code != 201:
            raise SystemExit(f"could not make a token: {made.status_code} {made.text}")
        return str(made.json()["token"])


def deploy(http: httpx.Client, pack: str, bare: Bare) -> tuple[str, str]:
    """The deployment: `tiers: []` (the pack's own scripted model, as docs/serving.md
    says); if the studio refuses that, one endpoint whose spec is the same scripted
    model. Returns the tier's name and the refusal ("" when none)."""
    body = {"project": pack.lower(), "name": DEPLOYMENT, "tiers": []}
    made = http.post("/api/deployments", json=body)
    if made.status_code == 201:
        return "pack", ""
    refused = f"{made.status_code} {made.text}"
    model = str(bare.pack.model or "")
    spec = f"fake:{(bare.pack.root / model.removeprefix('fake:')).resolve()}"
    endpoint = http.post("/api/endpoints", json={"name": "scripted", "spec": spec, "concurrency": 4})
    if endpoint.status_code != 201:
        raise SystemExit(f"could not create the endpoint: {endpoint.status_code} {endpoint.text}")
    made = http.post("/api/deployments", json={**body, "tiers": [endpoint.json()["id"]]})
    if made.status_code != 201:
        raise SystemExit(f"could not create the deployment: {made.status_code} {made.text}")
    print(f"  tiers [] refused ({refused}); served on an endpoint {spec}", file=sys.stderr)
    return "endpoint scripted", refused


def cpu_by_part(studio: Studio) -> dict[str, float]:
    """CPU seconds so far of the studio's processes: the Celery worker (main and pool),
    the web server (gunicorn), the broker (redis-server)."""
    parts = {"worker": 0.0, "web": 0.0, "broker": 0.0}
    for pid, cmd in group_processes(studio.proc.pid).items():
        part = "worker" if "celery" in cmd else "web" if "gunicorn" in cmd else "broker" if "redis" in cmd else ""
        if part:
            try:
                parts[part] += cpu_seconds(pid)
            except OSError:
                continue
    return parts


# -- the measures ---------------------------------------------------------------------------


def overhead(
    http: httpx.Client, bare: Bare, inputs: list[dict[str, Any]], n: int, studio: Studio, path: str
) -> tuple[list[dict[str, Any]], dict[str, float]]:
    rows = []
    cpu_before: dict[str, float] = {}
    for i in range(-WARMUP, n):
        if i == 0:
            cpu_before = cpu_by_part(studio)
        value = inputs[i % len(inputs)]
        bare_ms, bare_status = bare.run(value)
        sent = time.time()
        begun = time.perf_counter()
        got = http.post(f"/api/deployments/{DEPLOYMENT}/runs", params={"wait": 30}, json={"input": value})
        api_ms = (time.perf_counter() - begun) * 1000
        received = time.time()
        if got.status_code != 200:
            raise SystemExit(f"run {i}: {got.status_code} {got.text[:2000]}")
        run = got.json()
        if run["status"] != bare_status:
            raise SystemExit(f"run {i}: served {run['status']} ({run['error']}), bare {bare_status}")
        if i < 0:
            continue
        created, started, finished = ts(run["created_at"]), ts(run["started_at"]), ts(run["finished_at"])
        rows.append(
            {
                "bench": "serving",
                "kind": "overhead",
                "path": path,
                "run": i,
                "status": run["status"],
                "steps": len(run["steps"]),
                "bare_ms": round(bare_ms, 3),
                "bare_cpu_ms": round(bare.cpu_ms, 3),
                "api_ms": round(api_ms, 3),
                "added_ms": round(api_ms - bare_ms, 3),
                "accept_ms": round((created - sent) * 1000, 3),
                "queue_ms": round((started - created) * 1000, 3),
                "walk_ms": round((finished - started) * 1000, 3),
                "answer_ms": round((received - finished) * 1000, 3),
            }
        )
    cpu_after = cpu_by_part(studio)
    return rows, {part: round(1000 * (cpu_after[part] - cpu_before[part]) / n, 2) for part in cpu_after}


WORKER_LINE = re.compile(r"served run (\d+) (\w+): (\d+) statements, ([\d.]+) ms CPU")


def worker_lines(output: str) -> list[tuple[int, int, float]]:
    """(run pk, statements, CPU ms) of each delivery the worker logged (studio.work.metering)."""
    return [(int(m[1]), int(m[3]), float(m[4])) for m in WORKER_LINE.finditer(output)]


def sse(http: httpx.Client, inputs: list[dict[str, Any]], n: int, poll: float | None) -> list[dict[str, Any]]:
    rows = []
    for i in range(n):
        got = http.post(f"/api/deployments/{DEPLOYMENT}/runs", json={"input": inputs[i % len(inputs)]})
        if got.status_code != 202:
            raise SystemExit(f"sse run {i}: {got.status_code} {got.text[:2000]}")
        run_id = got.json()["run_id"]
        opened = None
        with http.stream("GET", f"/api/deployments/{DEPLOYMENT}/runs/{run_id}/events", params={"timeout": 30}) as s:
            for line in s.iter_lines():
                now = time.time()
                if opened is None and line.startswith("retry:"):
                    opened = now  # the stream has started: what is written after this is live
                if not line.startswith("data: "):
                    continue
                event = json.loads(line[6:])
                at = ts(event["at"])
                rows.append(
                    {
                        "bench": "serving",
                        "kind": "sse",
                        "sse_poll_s": poll,
                        "run": i,
                        "seq": event["seq"],
                        "event": event["kind"],
                        "live": opened is not None and at > opened,
                        "latency_ms": round((now - at) * 1000, 3),
                    }
                )
                if event["kind"] == "run.end":
                    break
    return rows


def throughput(http: httpx.Client, inputs: list[dict[str, Any]], n: int, concurrency: int) -> dict[str, Any]:
    for i in range(2 * concurrency):  # every pool process has loaded the pack and its connections
        warm = http.post(f"/api/deployments/{DEPLOYMENT}/runs", params={"wait": 30}, json={"input": inputs[i]})
        if warm.status_code != 200:
            raise SystemExit(f"throughput warm-up: {warm.status_code} {warm.text[:300]}")
    prefix = f"tp{concurrency}-{int(time.time())}-"
    ids = [f"{prefix}{i}" for i in range(n)]
    failures: list[str] = []
    first_sent: list[float] = []
    lock = threading.Lock()

    def client(k: int) -> None:
        with httpx.Client(base_url=str(http.base_url), headers=dict(http.headers), timeout=60) as own:
            for i in range(k, n, CLIENT_THREADS):
                with lock:
                    first_sent.append(time.time())
                got = own.post(
                    f"/api/deployments/{DEPLOYMENT}/runs",
                    json={"run_id": ids[i], "input": inputs[i % len(inputs)]},
                )
                if got.status_code != 202:
                    failures.append(f"{ids[i]}: {got.status_code} {got.text[:300]}")

    busy_before, total_before = machine_ticks()
    threads = [threading.Thread(target=client, args=(k,)) for k in range(CLIENT_THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if failures:
        raise SystemExit("throughput submits failed: " + "; ".join(failures[:5]))
    deadline = time.monotonic() + 600
    while True:
        listed = http.get(f"/api/deployments/{DEPLOYMENT}/runs", params={"limit": 500}).json()
        mine = [r for r in listed if r["run_id"].startswith(prefix)]
        if len(mine) == n and all(r["final"] or r["status"] == "waiting" for r in mine):
            break
        if time.monotonic() > deadline:
            raise SystemExit(f"throughput runs not ended after 600 s: {[r['status'] for r in mine]}")
        time.sleep(0.25)
    busy_after, total_after = machine_ticks()
    start = min(first_sent)
    end = max(ts(r["finished_at"]) for r in mine)
    first_claim = min(ts(r["started_at"]) for r in mine)
    return {
        "bench": "serving",
        "kind": "throughput",
        "concurrency": concurrency,
        "runs": n,
        "done": sum(r["status"] == "done" for r in mine),
        "attempts_over_1": sum(r["attempts"] > 1 for r in mine),
        "span_s": round(end - start, 3),
        "runs_per_s": round(n / (end - start), 2),
        "worker_span_s": round(end - first_claim, 3),
        "worker_runs_per_s": round(n / (end - first_claim), 2),
        "machine_busy": round((busy_after - busy_before) / max(1, total_after - total_before), 3),
        "load_average": os.getloadavg()[0],
    }


def concurrent_waits(http: httpx.Client, inputs: list[dict[str, Any]], n: int, clients: int) -> dict[str, Any]:
    """`n` runs submitted with `?wait=30` by `clients` threads at once: each walked by the
    web server thread that accepted it, all writing to the one SQLite file. Every run
    must answer 200 with its final status (a load test of the walk-here path on the
    embedded defaults); the latency of each and the runs per second."""
    prefix = f"cw{clients}-{int(time.time())}-"
    latencies: list[float] = []
    failures: list[str] = []
    lock = threading.Lock()

    def client(k: int) -> None:
        with httpx.Client(base_url=str(http.base_url), headers=dict(http.headers), timeout=60) as own:
            for i in range(k, n, clients):
                begun = time.perf_counter()
                got = own.post(
                    f"/api/deployments/{DEPLOYMENT}/runs",
                    params={"wait": 30},
                    json={"run_id": f"{prefix}{i}", "input": inputs[i % len(inputs)]},
                )
                ms = (time.perf_counter() - begun) * 1000
                with lock:
                    if got.status_code != 200 or got.json()["status"] != "done":
                        failures.append(f"{prefix}{i}: {got.status_code} {got.text[:300]}")
                    else:
                        latencies.append(ms)

    begun = time.perf_counter()
    threads = [threading.Thread(target=client, args=(k,)) for k in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    span = time.perf_counter() - begun
    return {
        "bench": "serving",
        "kind": "concurrent_waits",
        "clients": clients,
        "runs": n,
        "done": len(latencies),
        "failures": failures[:10],
        "runs_per_s": round(n / span, 2),
        "p50_ms": pct(latencies, 50),
        "p95_ms": pct(latencies, 95),
        "max_ms": round(max(latencies), 2) if latencies else None,
    }


QUEUE_NODES = ("classify", "extract", "prioritise")
QUEUE_GOAL_P95_MS = 200.0


def queue_pages(tmp: Path, items: int, n: int) -> list[dict[str, Any]]:
    """The review queue with `items` open items (two deployments, three nodes, ages
    spread over a day): server time of its page, its htmx poll and the API list, through
    Django's test Client in this process (as benchmarks/eval_scale.py times its pages)."""
    from benchmarks._studio import configure

    configure(tmp)
    from datetime import timedelta

    from django.contrib.auth.models import User
    from django.test import Client
    from django.utils import timezone

    from studio.deployments.models import Deployment, ServedRun
    from studio.projects.models import create_project
    from studio.projects.views import example_files
    from studio.review.models import ReviewItem

    user = User.objects.create_user("bench", "bench@example.com", "unused-password-for-bench")
    project = create_project(
        slug="triage", name="Triage", owner=user, pack_files=example_files("support_triage"), message="Create"
    )
    version = project.head if hasattr(project, "head") else ""
    deployments = [
        Deployment.objects.create(
            project=project, name=f"queue-{k}", version=version or "0" * 40, tiers=[1], created_by=user
        )
        for k in range(2)
    ]
    now = timezone.now()
    runs = [
        ServedRun(
            deployment=deployments[i % 2],
            run_id=f"q{i:05d}",
            input={"ticket": f"ticket {i}"},
            input_digest=f"{i:064d}",
            status="waiting",
            version=version or "0" * 40,
            waiting_at=QUEUE_NODES[i % 3],
            waiting_reason="escalated",
            question="Which category?",
        )
        for i in range(items)
    ]
    ServedRun.objects.bulk_create(runs, batch_size=1000)
    made = [
        ReviewItem(
            run=run,
            deployment=run.deployment,
            project=project,
            node=run.waiting_at,
            step=1,
            reason="escalated",
            question="Which category?",
            candidates=[{"tier": "small", "answer": {"category": "billing"}, "status": "unsure", "reason": "draws"}],
            schema={"type": "object", "properties": {"category": {"type": "string"}}},
            state={"input": run.input},
            best={"category": "billing"},
            created_at=now - timedelta(seconds=8.64 * i),
        )
        for i, run in enumerate(ServedRun.objects.order_by("pk"))
    ]
    ReviewItem.objects.bulk_create(made, batch_size=1000)
    client = Client()
    client.force_login(user)
    listed = client.get("/api/review/items").json()
    if listed["total"] != items:
        raise SystemExit(f"the queue lists {listed['total']} items, not {items}")
    pages: dict[str, Callable[[], Any]] = {
        "queue page": lambda: client.get("/review/"),
        "queue poll (htmx)": lambda: client.get("/review/", headers={"HX-Request": "true"}),
        "GET /api/review/items": lambda: client.get("/api/review/items"),
    }
    rows = []
    for name, call in pages.items():
        for i in range(-3, n):
            begun = time.perf_counter()
            response = call()
            ms = (time.perf_counter() - begun) * 1000
            if response.status_code != 200:
                raise SystemExit(f"{name} answered {response.status_code}: {response.content[:500]!r}")
            if i >= 0:
                rows.append(
                    {
                        "bench": "serving",
                        "kind": "queue",
                        "page": name,
                        "request": i,
                        "ms": round(ms, 3),
                        "items": items,
                    }
                )
    return rows


# -- main -----------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=100, help="sequential runs for the overhead (default 100)")
    parser.add_argument("--sse-runs", type=int, default=20, help="runs whose event stream is read (default 20)")
    parser.add_argument("--throughput-runs", type=int, default=100, help="runs per throughput measure (default 100)")
    parser.add_argument(
        "--sse-poll",
        type=float,
        default=0.02,
        help="the SSE measure again on the second start, with PACKFORGE_SSE_POLL_S set to this (0: skip; default 0.02)",
    )
    parser.add_argument(
        "--wait-clients",
        type=int,
        default=8,
        help="client threads submitting --throughput-runs runs with ?wait at once (0: skip; default 8)",
    )
    parser.add_argument("--pack", default="support_triage", help="the example pack served (default support_triage)")
    parser.add_argument("--queue-items", type=int, default=10_000, help="open review items (0: skip; default 10000)")
    parser.add_argument("--queue-requests", type=int, default=50, help="requests per queue page timed (default 50)")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    parser.add_argument("--rows", type=Path, default=RESULTS, help="where to write the raw rows (jsonl)")
    parser.add_argument("--keep", action="store_true", help="keep the temp folder (var/, logs)")
    args = parser.parse_args(argv)

    pack_dir = ROOT / "packs" / args.pack
    bare = Bare(pack_dir)
    cases = [json.loads(line)["input"] for line in (pack_dir / "evalset.jsonl").read_text().splitlines() if line]
    inputs = [c for c in cases if bare.run(c)[1] == "done"]  # runs that end (none waits for a person)
    if not inputs:
        raise SystemExit(f"no input of {args.pack}'s evalset runs to its end on the scripted model")

    tmp = Path(tempfile.mkdtemp(prefix="pf-serving-"))
    port = free_port()
    began = time.perf_counter()
    load_before = os.getloadavg()[0]
    rows: list[dict[str, Any]] = []
    runs: list[dict[str, Any]] = []
    print(f"serving: {args.pack}, var in {tmp}", file=sys.stderr)
    studio = start_studio(tmp, port, 1)
    try:
        url = studio.wait_for(r"^Packforge studio: (http://\S+)", timeout=1).group(1)
        password = studio.wait_for(r"^admin password: (\S+)$", timeout=1).group(1)
        token = login_token(url, password)
        http = httpx.Client(base_url=url, timeout=60, headers={"Authorization": f"Bearer {token}"})
        tier, refused = deploy(http, args.pack, bare)
        print("  overhead, walked by the web process ...", file=sys.stderr)
        over_rows, cpu_per_run = overhead(http, bare, inputs, args.runs, studio, "web")
        rows.extend(over_rows)
        print("  SSE ...", file=sys.stderr)
        rows.extend(sse(http, inputs, args.sse_runs, None))
        print("  throughput, concurrency 1 ...", file=sys.stderr)
        runs.append(throughput(http, inputs, args.throughput_runs, 1))
        if args.wait_clients:
            print(f"  {args.wait_clients} clients submitting with ?wait at once ...", file=sys.stderr)
            waits = concurrent_waits(http, inputs, args.throughput_runs, args.wait_clients)
            rows.append(waits)
        http.close()
    finally:
        studio.stop()
    if studio.proc.returncode not in (0, None) and "Traceback" in studio.output:
        print(studio.output[-3000:], file=sys.stderr)
    extra = {"PACKFORGE_SERVE_WALK_ON_WAIT": "false"}
    if args.sse_poll:
        extra["PACKFORGE_SSE_POLL_S"] = str(args.sse_poll)
    studio = start_studio(tmp, port, 2, extra)
    try:
        with httpx.Client(base_url=url, timeout=60, headers={"Authorization": f"Bearer {token}"}) as http:
            print("  throughput, concurrency 2 ...", file=sys.stderr)
            runs.append(throughput(http, inputs, args.throughput_runs, 2))
            print("  overhead, through the broker ...", file=sys.stderr)
            logged_before = len(worker_lines(studio.output))
            broker_rows, broker_cpu = overhead(http, bare, inputs, args.runs, studio, "broker")
            rows.extend(broker_rows)
            delivered = worker_lines(studio.output)[logged_before + WARMUP :]  # the measured runs' deliveries
            if args.sse_poll:
                print(f"  SSE, PACKFORGE_SSE_POLL_S={args.sse_poll} ...", file=sys.stderr)
                rows.extend(sse(http, inputs, args.sse_runs, args.sse_poll))
        broker = "embedded Redis" if re.search(r"^broker: Redis on unix://", studio.output, re.M) else "other broker"
    finally:
        studio.stop()
        if args.keep:
            print(f"kept {tmp}", file=sys.stderr)
        else:
            shutil.rmtree(tmp, ignore_errors=True)

    queue: dict[str, dict[str, float]] = {}
    if args.queue_items:
        print(f"  queue pages, {args.queue_items} items ...", file=sys.stderr)
        qtmp = Path(tempfile.mkdtemp(prefix="pf-serving-queue-"))
        try:
            qrows = queue_pages(qtmp, args.queue_items, args.queue_requests)
        finally:
            shutil.rmtree(qtmp, ignore_errors=True)
        rows.extend(qrows)
        for name in dict.fromkeys(r["page"] for r in qrows):
            times = [r["ms"] for r in qrows if r["page"] == name]
            queue[name] = {"p50_ms": pct(times, 50), "p95_ms": pct(times, 95)}
    over = [r for r in rows if r["kind"] == "overhead" and r["path"] == "web"]
    via_broker = [r for r in rows if r["kind"] == "overhead" and r["path"] == "broker"]
    events = [r for r in rows if r["kind"] == "sse" and r["sse_poll_s"] is None]
    live = [r["latency_ms"] for r in events if r["live"]]
    fast = [r["latency_ms"] for r in rows if r["kind"] == "sse" and r["sse_poll_s"] is not None and r["live"]]
    parts = ("added_ms", "bare_ms", "api_ms", "accept_ms", "queue_ms", "walk_ms", "answer_ms")
    split = {k: {"p50": pct([r[k] for r in over], 50), "p95": pct([r[k] for r in over], 95)} for k in parts}
    split_broker = {
        k: {"p50": pct([r[k] for r in via_broker], 50), "p95": pct([r[k] for r in via_broker], 95)} for k in parts
    }
    bare_cpu = [r["bare_cpu_ms"] for r in over]
    in_worker = {
        "deliveries": len(delivered),
        "statements_p50": pct([float(d[1]) for d in delivered], 50),
        "statements_max": max((d[1] for d in delivered), default=None),
        "cpu_ms_p50": pct([d[2] for d in delivered], 50),
        "cpu_ms_p95": pct([d[2] for d in delivered], 95),
    }
    for table, measured in ((split, over), (split_broker, via_broker)):
        walk_extra = [r["walk_ms"] - r["bare_ms"] for r in measured]
        table["walk_minus_bare_ms"] = {"p50": pct(walk_extra, 50), "p95": pct(walk_extra, 95)}
    one = next(r for r in runs if r["concurrency"] == 1)
    for r in runs:
        r["ratio_vs_1"] = round(r["runs_per_s"] / one["runs_per_s"], 2)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    summary = {
        "bench": "serving",
        "kind": "summary",
        "pack": args.pack,
        "setup": f"SQLite + {broker} (scripts/start), gunicorn on loopback, celery prefork worker",
        "tier": tier,
        "empty_tiers_refused": refused,
        "runs": len(over),
        "steps_per_run": sorted({r["steps"] for r in over}),
        "split": split,
        "cpu_ms_per_run": cpu_per_run,
        "split_through_broker": split_broker,
        "cpu_ms_per_run_through_broker": broker_cpu,
        "bare_cpu_ms_p50": pct(bare_cpu, 50),
        "run_served": in_worker,
        "goal_p95_ms": GOAL_P95_MS,
        "meets_goal": split["added_ms"]["p95"] < GOAL_P95_MS,
        "sse_events": len(events),
        "sse_live_events": len(live),
        "sse_p50_ms": pct(live, 50),
        "sse_p95_ms": pct(live, 95),
        "sse_max_ms": round(max(live), 2) if live else None,
        "sse_fast_poll_s": args.sse_poll or None,
        "sse_fast_live_events": len(fast),
        "sse_fast_p50_ms": pct(fast, 50),
        "sse_fast_p95_ms": pct(fast, 95),
        "throughput": runs,
        "concurrent_waits": next((r for r in rows if r["kind"] == "concurrent_waits"), None),
        "queue_items": args.queue_items,
        "queue_pages": queue,
        "queue_goal_p95_ms": QUEUE_GOAL_P95_MS,
        "cpus": os.cpu_count(),
        "load_average": [load_before, os.getloadavg()[0]],
        "commit": commit.stdout.strip(),
        "wall_s": round(time.perf_counter() - began, 1),
    }
    write_rows(args.rows, [*rows, *runs, summary])
    if args.json:
        print(json.dumps(summary, indent=1))
        return 0
    print(
        f"Serving: {args.pack} ({summary['steps_per_run']} steps a run) on its scripted model (tier: {tier}); "
        f"{summary['setup']}; "
        f"{os.cpu_count()} CPUs, load average {load_before:.1f} before, {os.getloadavg()[0]:.1f} after"
    )
    print()
    print(f"| per run, {len(over)} sequential runs | p50 ms | p95 ms | through the broker: p50 ms | p95 ms |")
    print("|---|---:|---:|---:|---:|")
    names = {
        "bare_ms": "bare runtime (`run_pack` in-process)",
        "api_ms": "`POST .../runs?wait=30` until the answer",
        "added_ms": f"**added by the runs API** (goal p95 < {GOAL_P95_MS:.0f} ms)",
        "accept_ms": "  accept: POST sent -> row created",
        "queue_ms": "  queue: row created -> claimed (commit, broker, pickup; 0 when walked by the web)",
        "walk_ms": "  walk: claimed -> finished (walk + DB checkpoints + events)",
        "walk_minus_bare_ms": "  walk - bare (the DB writes of the walk)",
        "answer_ms": "  answer: finished -> client has it (wake-up, read of the row, response)",
    }
    for key, name in names.items():
        a, b = split[key], split_broker[key]
        print(f"| {name} | {a['p50']:.1f} | {a['p95']:.1f} | {b['p50']:.1f} | {b['p95']:.1f} |")
    print()
    for label, cpu in (("walked by the web process", cpu_per_run), ("through the broker", broker_cpu)):
        print(
            f"CPU per served run, {label} (ms; the studio's processes during the sequential runs): "
            + ", ".join(f"{part} {ms:.1f}" for part, ms in cpu.items())
            + f"; the bare run {summary['bare_cpu_ms_p50']:.1f} (p50)"
        )
    print(
        f"In the worker, per delivery through the broker (its log line; {in_worker['deliveries']} deliveries): "
        f"{in_worker['statements_p50']:.0f} statements (max {in_worker['statements_max']}), "
        f"CPU p50 {in_worker['cpu_ms_p50']:.1f} ms, p95 {in_worker['cpu_ms_p95']:.1f} ms "
        "(run_served: claim, walk, checkpoints, events, settle; the rest of the worker's CPU is Celery's)"
    )
    print(f"goal met: {'yes' if summary['meets_goal'] else 'NO'}")
    print()
    print(f"| SSE delivery, {args.sse_runs} runs: event written -> client read it | live events | p50 ms | p95 ms |")
    print("|---|---:|---:|---:|")
    print(
        f"| PACKFORGE_SSE_POLL_S default (0.2 s) | {len(live)} | {summary['sse_p50_ms']:.1f} | {summary['sse_p95_ms']:.1f} |"
    )
    if args.sse_poll:
        print(
            f"| PACKFORGE_SSE_POLL_S={args.sse_poll} | {len(fast)} | {summary['sse_fast_p50_ms']:.1f} | "
            f"{summary['sse_fast_p95_ms']:.1f} |"
        )
    print()
    print(
        "| worker concurrency | runs | runs/s (first submit -> last end) | runs/s (first claim -> last end) "
        "| ratio vs 1 | machine busy |"
    )
    print("|---:|---:|---:|---:|---:|---:|")
    for r in runs:
        print(
            f"| {r['concurrency']} | {r['runs']} | {r['runs_per_s']:.1f} | {r['worker_runs_per_s']:.1f} | "
            f"{r['ratio_vs_1']:.2f} | {100 * r['machine_busy']:.0f}% |"
        )
    cw = summary["concurrent_waits"]
    if cw:
        print()
        print(
            f"{cw['clients']} clients submitting {cw['runs']} runs with ?wait=30 at once (each walked by the request): "
            f"{cw['done']} answered done, {len(cw['failures'])} not; {cw['runs_per_s']:.1f} runs/s; "
            f"latency p50 {cw['p50_ms']:.1f} ms, p95 {cw['p95_ms']:.1f} ms, max {cw['max_ms']} ms"
        )
        for failure in cw["failures"]:
            print(f"  not done: {failure}")
    if queue:
        print()
        print(
            f"| review queue, {args.queue_items} open items (in-process test Client) | p50 ms | p95 ms (goal < 200) |"
        )
        print("|---|---:|---:|")
        for name, q in queue.items():
            print(f"| {name} | {q['p50_ms']:.1f} | {q['p95_ms']:.1f} |")
    shown = args.rows.relative_to(ROOT) if args.rows.is_relative_to(ROOT) else args.rows
    print(f"\nraw rows: {shown}; wall {summary['wall_s']} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
