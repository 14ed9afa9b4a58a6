"""Eval scale: a 10,000-case x 7-node eval on real Celery worker processes, with a
scripted model (so what is measured is the studio's own cost per case: the broker, the
database, the per-step checkpoints, scoring, and writing each case's row).

Setup, in a temp folder: a fresh database (SQLite by default, migrated), a git root, the
filesystem broker, one user, and a project whose pack is a chain of 6 generate nodes and
an end node (benchmarks/_chain.py) with an evalset of --cases cases (one in ten expects
a wrong value, so a tenth of the cases fail and get blamed).

For each worker count (1, then 2): an eval is started (its rows written and every case
task enqueued before any worker runs), W `celery worker` processes are started (threads
pool, --threads each), and the eval runs to its end. Per run:
  cases/s     cases / makespan; makespan = last case finished - first case started, from
              the rows (worker start-up is not in it)
  ratio       cases/s with 2 workers / with 1 (goal >= 1.8)
  peak RSS    per worker process: VmHWM in /proc/<pid>/status (goal < 300 MB)
  CPU         the workers' CPU seconds per case (/proc/<pid>/stat), and how busy the whole
              machine was during the makespan (/proc/stat): a ratio needs idle cores
Then server time (in-process, Django's test Client) of the eval page, its htmx progress
fragment and GET /api/evals/<id>, on a finished eval of --page-cases rows (default
10,000: when the run was smaller, that many finished rows are copied from the run's own
rows into one more eval, so the pages are timed at full size). Goal p95 < 300 ms.

`--poll S` starts the workers with the filesystem broker's polling interval set to S
seconds (studio/settings.py ships 0.05 s; kombu's own default is 1 s: a worker whose prefetched tasks are all running sleeps
that long before it looks for more; see docs/evals.md). With DATABASE_URL / REDIS_URL
set (e.g. under scripts/with-services) it runs on Postgres and Redis; the database must
be empty (it is migrated here). Raw rows: benchmarks/results/eval_scale.jsonl.

    .venv/bin/python benchmarks/eval_scale.py [--cases 10000] [--workers 1,2] [--threads 4]
        [--poll S] [--page-cases 10000] [--requests 50] [--json] [--rows FILE [--append]]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks._chain import write_chain  # noqa: E402
from runtime.stats import percentile  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "eval_scale.jsonl"
GENERATE_NODES = 6  # + the end node = 7 nodes
GOAL_RATIO = 1.8
GOAL_RSS_MB = 300
GOAL_P95_MS = 300
TICK = os.sysconf("SC_CLK_TCK")


def configure(tmp: Path) -> dict[str, str]:
    """Point the settings at temp storage (unless DATABASE_URL/REDIS_URL are given), then
    start Django and migrate. Returns the environment the workers get."""
    env = {
        "DJANGO_SETTINGS_MODULE": "studio.settings",
        "PACKFORGE_VAR": str(tmp / "var"),
        "PACKFORGE_GIT_ROOT": str(tmp / "git"),
        "LOG_LEVEL": "WARNING",
        "PACKFORGE_EVAL_QUEUE": f"bench-{uuid.uuid4().hex[:8]}",
        "CELERY_TASK_ALWAYS_EAGER": "false",
    }
    if not os.environ.get("DATABASE_URL"):
        env["DATABASE_URL"] = f"sqlite:///{tmp}/studio.sqlite3"
    os.environ.update(env)
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    return {**os.environ}


def chain_pack(tmp: Path, cases: int) -> dict[str, bytes]:
    root = tmp / "pack"
    values = write_chain(root, GENERATE_NODES, name="scale")
    last = f"v{GENERATE_NODES}"
    lines = []
    for i in range(cases):
        expected = {last: values[last] + (1 if i % 10 == 9 else 0)}  # every tenth case fails
        lines.append(
            json.dumps(
                {"id": f"c{i:05d}", "input": {"x": 7}, "expected": expected, "tags": ["odd" if i % 2 else "even"]}
            )
        )
    (root / "evalset.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


# -- measuring processes --------------------------------------------------------------------


def peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / TICK  # utime + stime


def machine_ticks() -> tuple[int, int]:
    """(busy, total) jiffies of all CPUs since boot."""
    values = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = values[3] + (values[4] if len(values) > 4 else 0)
    return sum(values) - idle, sum(values)


# -- workers --------------------------------------------------------------------------------


def start_workers(
    n: int, threads: int, env: dict[str, str], logs: Path, poll: float | None
) -> list[subprocess.Popen[bytes]]:
    procs = []
    for i in range(n):
        launcher = ["-m", "celery", "-A", "studio"] if poll is None else [__file__, "worker-with-poll", str(poll)]
        with open(logs / f"worker{n}-{i}.log", "wb") as log:
            procs.append(
                subprocess.Popen(
                    [
                        sys.executable,
                        *launcher,
                        "worker",
                        "--pool=threads",
                        f"--concurrency={threads}",
                        "--loglevel=WARNING",
                        "-Q",
                        env["PACKFORGE_EVAL_QUEUE"],
                        "-n",
                        f"bench{n}-{i}@%h",
                        "--without-gossip",
                        "--without-mingle",
                        "--without-heartbeat",
                    ],
                    cwd=ROOT,
                    env=env,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                )
            )
    return procs


def stop(procs: list[subprocess.Popen[bytes]]) -> None:
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    for p in procs:
        try:
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def worker_with_poll(poll: float, argv: list[str]) -> None:
    """`celery -A studio worker ...` with the broker's polling interval set (--poll)."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "studio.settings")
    from studio.celery import app

    app.conf.broker_transport_options = {**(app.conf.broker_transport_options or {}), "polling_interval": poll}
    app.worker_main(argv)


def run_eval(
    project: Any,
    user: Any,
    workers: int,
    threads: int,
    env: dict[str, str],
    logs: Path,
    timeout: float,
    poll: float | None,
) -> tuple[dict[str, Any], Any]:
    from django.db.models import Max, Min

    from studio.evals import shared
    from studio.evals.models import Eval, EvalCase
    from studio.evals.start import start_eval

    started = time.perf_counter()
    ev = start_eval(project, user=user)[0]  # rows written, every task enqueued on commit
    enqueue_s = time.perf_counter() - started
    procs = start_workers(workers, threads, env, logs, poll)
    peaks, cpu = [0.0] * workers, [0.0] * workers
    samples: list[tuple[float, int, int]] = []  # (time, busy, total) of the machine
    try:
        deadline = time.monotonic() + timeout
        while True:
            samples.append((time.time(), *machine_ticks()))
            for i, p in enumerate(procs):
                if p.poll() is not None:
                    raise SystemExit(f"worker {i} exited with {p.returncode}; see {logs}")
                peaks[i], cpu[i] = max(peaks[i], peak_rss_mb(p.pid)), cpu_seconds(p.pid)
            if Eval.objects.get(pk=ev.pk).status == Eval.Status.DONE:
                break
            if time.monotonic() > deadline:
                raise SystemExit(f"the eval did not end within {timeout:.0f} s: {shared.counts_of(ev)}")
            time.sleep(0.25)
    finally:
        stop(procs)
    ev.refresh_from_db()
    span = EvalCase.objects.filter(eval=ev).aggregate(first=Min("started_at"), last=Max("finished_at"))
    makespan = (span["last"] - span["first"]).total_seconds()
    first, last = span["first"].timestamp(), span["last"].timestamp()
    inside = [s for s in samples if first <= s[0] <= last] or samples
    busy = (inside[-1][1] - inside[0][1]) / max(1, inside[-1][2] - inside[0][2])
    counts = shared.counts_of(ev)
    row = {
        "bench": "eval_scale",
        "kind": "run",
        "workers": workers,
        "threads": threads,
        "cases": ev.total,
        "nodes": GENERATE_NODES + 1,
        "poll_s": poll,
        "makespan_s": round(makespan, 3),
        "cases_per_s": round(ev.total / makespan, 2),
        "enqueue_s": round(enqueue_s, 3),
        "peak_rss_mb": [round(p, 1) for p in peaks],
        "worker_cpu_ms_per_case": round(1000 * sum(cpu) / ev.total, 2),
        "machine_busy": round(busy, 3),
        "passed": counts["passed"],
        "failed": counts["failed"],
        "error": counts["error"],
        "attempts_over_1": EvalCase.objects.filter(eval=ev, attempts__gt=1).count(),
    }
    return row, ev


# -- page timings ---------------------------------------------------------------------------


def eval_for_pages(ev: Any, size: int) -> Any:
    """`ev` if it has `size` rows, else a finished copy of it with `size` rows (its own
    rows repeated, as repeats), so the pages are timed at full size."""
    from django.db.models import Q

    from studio.evals import shared
    from studio.evals.models import Eval, EvalCase

    if ev.total >= size:
        return ev
    rows = list(EvalCase.objects.filter(eval=ev).order_by("pk"))
    copy = Eval.objects.create(
        project=ev.project,
        version=ev.version,
        model_spec=ev.model_spec,
        batch="pages",
        repeats=-(-size // len(rows)),
        total=size,
        status=Eval.Status.RUNNING,
        created_by=ev.created_by,
    )
    made = []
    for i in range(size):
        row = rows[i % len(rows)]
        row.pk, row.eval, row.repeat = None, copy, i // len(rows)
        made.append(EvalCase(**{f.attname: getattr(row, f.attname) for f in EvalCase._meta.concrete_fields}))
    EvalCase.objects.bulk_create(made, batch_size=1000)
    shared.finalize_eval(copy.pk)
    copy.refresh_from_db()
    assert not EvalCase.objects.filter(Q(eval=copy), ~Q(status__in=["passed", "failed"])).exists()
    return copy


def time_pages(ev: Any, user: Any, n: int) -> list[dict[str, Any]]:
    from django.test import Client

    client = Client()
    client.force_login(user)
    page = f"/p/{ev.project.slug}/evals/{ev.pk}/"
    pages = {
        "eval page": lambda: client.get(page),
        "progress fragment (htmx)": lambda: client.get(page, headers={"HX-Request": "true"}),
        "GET /api/evals/<id>": lambda: client.get(f"/api/evals/{ev.pk}"),
    }
    rows = []
    for name, call in pages.items():
        for i in range(-3, n):
            begun = time.perf_counter()
            response = call()
            ms = (time.perf_counter() - begun) * 1000
            if response.status_code not in (200, 286):
                raise SystemExit(f"{name} answered {response.status_code}")
            if i >= 0:
                rows.append(
                    {
                        "bench": "eval_scale",
                        "kind": "page",
                        "page": name,
                        "request": i,
                        "ms": round(ms, 3),
                        "rows": ev.total,
                        "status": response.status_code,
                    }
                )
    return rows


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["worker-with-poll"]:
        worker_with_poll(float(argv[1]), argv[2:])
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=10_000, help="cases in the evalset (default 10000)")
    parser.add_argument("--workers", default="1,2", help="worker counts to run, comma-separated (default 1,2)")
    parser.add_argument("--threads", type=int, default=4, help="threads per worker process (default 4)")
    parser.add_argument(
        "--poll",
        type=float,
        default=None,
        help="the filesystem broker's polling interval for the workers (default: the settings')",
    )
    parser.add_argument("--page-cases", type=int, default=10_000, help="rows of the eval the pages are timed on")
    parser.add_argument("--requests", type=int, default=50, help="requests per page timed (default 50)")
    parser.add_argument("--timeout", type=float, default=1800, help="give up on one eval after this many seconds")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    parser.add_argument("--rows", type=Path, default=RESULTS, help="where to write the raw rows (jsonl)")
    parser.add_argument("--append", action="store_true", help="append to the rows file instead of replacing it")
    parser.add_argument("--keep", action="store_true", help="keep the temp folder (database, worker logs)")
    args = parser.parse_args(argv)
    counts = [int(w) for w in args.workers.split(",") if w.strip()]

    tmp = Path(tempfile.mkdtemp(prefix="packforge-evalscale-"))
    began = time.perf_counter()
    try:
        env = configure(tmp)
        from django.contrib.auth.models import User

        from studio.projects.models import create_project

        user = User.objects.create_user("bench", "bench@example.com", "unused-password-for-bench")
        project = create_project(
            slug="scale", name="Scale", owner=user, pack_files=chain_pack(tmp, args.cases), message="Create"
        )
        rows: list[dict[str, Any]] = []
        runs = []
        last_eval = None
        for w in counts:
            row, last_eval = run_eval(project, user, w, args.threads, env, tmp, args.timeout, args.poll)
            runs.append(row)
            rows.append(row)
            print(f"  {w} worker(s): {row['cases_per_s']} cases/s, makespan {row['makespan_s']} s", file=sys.stderr)
        page_eval = eval_for_pages(last_eval, args.page_cases) if last_eval is not None else None
        page_rows = time_pages(page_eval, user, args.requests) if page_eval is not None else []
        rows.extend(page_rows)
    finally:
        if args.keep:
            print(f"kept {tmp}", file=sys.stderr)
        else:
            shutil.rmtree(tmp, ignore_errors=True)

    from django.conf import settings

    db = settings.DATABASES["default"]["ENGINE"].rsplit(".", 1)[-1]
    broker = "redis" if getattr(settings, "REDIS_URL", "") else "filesystem"
    base = next((r for r in runs if r["workers"] == 1), None)
    for r in runs:
        r["ratio_vs_1"] = round(r["cases_per_s"] / base["cases_per_s"], 3) if base else None
    pages = {}
    for name in dict.fromkeys(r["page"] for r in page_rows):
        times = [r["ms"] for r in page_rows if r["page"] == name]
        pages[name] = {"p50_ms": round(percentile(times, 50), 1), "p95_ms": round(percentile(times, 95), 1)}
    meta = {
        "bench": "eval_scale",
        "kind": "meta",
        "cases": args.cases,
        "nodes": GENERATE_NODES + 1,
        "threads": args.threads,
        "poll_s": args.poll,
        "database": db,
        "broker": broker,
        "cpus": os.cpu_count(),
        "page_rows": page_eval.total if page_eval is not None else 0,
        "python": platform.python_version(),
        "wall_s": round(time.perf_counter() - began, 1),
    }
    args.rows.parent.mkdir(parents=True, exist_ok=True)
    with open(args.rows, "a" if args.append else "w", encoding="utf-8") as out:
        for row in [meta, *rows]:
            out.write(json.dumps(row) + "\n")
    if args.json:
        print(json.dumps({"meta": meta, "runs": runs, "pages": pages}, indent=2))
        return 0
    poll = "the settings' 0.05 s" if args.poll is None else f"{args.poll} s"
    broker_text = f"filesystem broker (polling {poll})" if broker == "filesystem" else "Redis broker"
    print(
        f"Eval scale: {args.cases} cases x {GENERATE_NODES + 1} nodes, scripted model; {db} + {broker_text}; "
        f"threads pool x {args.threads} per worker; {os.cpu_count()} CPUs"
    )
    print(
        "| workers | cases/s | makespan s | ratio vs 1 (goal >= 1.8) | peak RSS MB per worker (goal < 300) "
        "| worker CPU ms/case | machine busy |"
    )
    print("|---:|---:|---:|---:|---|---:|---:|")
    for r in runs:
        print(
            f"| {r['workers']} | {r['cases_per_s']:.1f} | {r['makespan_s']:.1f} | {r['ratio_vs_1']:.2f} | "
            f"{', '.join(f'{p:.0f}' for p in r['peak_rss_mb'])} | {r['worker_cpu_ms_per_case']:.1f} | "
            f"{100 * r['machine_busy']:.0f}% |"
        )
    print()
    print(f"| page, eval of {meta['page_rows']} finished case rows | p50 ms | p95 ms (goal < 300) |")
    print("|---|---:|---:|")
    for name, p in pages.items():
        print(f"| {name} | {p['p50_ms']:.1f} | {p['p95_ms']:.1f} |")
    shown = args.rows.relative_to(ROOT) if args.rows.is_relative_to(ROOT) else args.rows
    print(f"\nraw rows: {shown}; wall {meta['wall_s']} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
