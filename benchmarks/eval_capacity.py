"""Eval capacity: do Celery workers that share an endpoint's global cap keep a model
server exactly full, never over?

The fault-injecting OpenAI-compatible server (tests/support/fault_server.py, in its own
process) has capacity C (a call arriving while C are in flight gets 503 + Retry-After)
and a fixed latency L per call. An endpoint row points at it with `concurrency = C`: the
global cap (studio/work/slots.py: lock files, or Redis when REDIS_URL is set). An eval
of --cases cases of a chain of --nodes generate nodes (tests/support/packs.py) runs on
real `celery worker` processes (threads pool), in three configurations:

  1 worker, wish C        1 worker with C threads
  3 workers, wish C       3 workers whose threads add up to C
  3 workers, wish 4C      3 workers whose threads add up to 4C: three times more calls
                          want to go out than the cap lets through

makespan = first case started to last case finished (from the rows; worker start-up is
not in it); ideal = calls x L / C, what a server kept exactly full would take. Goals:
makespan within 5% of ideal, and at most 1.3x ideal at wish 4C. Also reported: the most
calls the server ever saw in flight (must not exceed C), its 503s (should be none: the
cap keeps calls from arriving over capacity) and cases that needed a second delivery.

`--poll S` sets the filesystem broker's polling interval for the workers (kombu's
default is 1 s; see benchmarks/eval_scale.py and docs/evals.md). Runs on Postgres and
Redis when DATABASE_URL / REDIS_URL are set (e.g. under scripts/with-services; the
database must be empty). Raw rows: benchmarks/results/eval_capacity.jsonl.

    .venv/bin/python benchmarks/eval_capacity.py [--capacity 6] [--latency 1.0] [--cases 96]
        [--nodes 2] [--poll S] [--json] [--rows FILE [--append]]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.eval_scale import configure, start_workers, stop  # noqa: E402
from tests.support.fault_server import in_own_process  # noqa: E402
from tests.support.packs import write_chain_pack  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "eval_capacity.jsonl"
GOAL_WITHIN = 1.05
GOAL_OVERSUBSCRIBED = 1.3


def chain_files(tmp: Path, cases: int, nodes: int) -> dict[str, bytes]:
    root = write_chain_pack(tmp / "chain", nodes=nodes)
    # The fault server answers a minimal instance of each schema: mood "happy", 1 star.
    lines = [
        json.dumps(
            {"id": f"c{i:04d}", "input": {"story": f"Story number {i}."}, "expected": {f"n{nodes}_mood": "happy"}}
        )
        for i in range(cases)
    ]
    (root / "evalset.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def run_config(
    label: str,
    workers: int,
    threads: int,
    *,
    project: Any,
    user: Any,
    capacity: int,
    latency: float,
    env: dict[str, str],
    logs: Path,
    poll: float | None,
) -> dict[str, Any]:
    import httpx
    from django.db.models import Max, Min

    from studio.endpoints.models import Endpoint
    from studio.evals import shared
    from studio.evals.models import Eval, EvalCase
    from studio.evals.start import start_eval

    with in_own_process(capacity, latency) as base_url:
        endpoint = Endpoint.objects.create(
            name=f"fault-{label}", spec=f"openai:{base_url}#fault", concurrency=capacity, created_by=user
        )
        ev = start_eval(project, user=user, endpoints=[endpoint.pk])[0]
        procs = start_workers(workers, threads, env, logs, poll)
        try:
            deadline = time.monotonic() + 600
            while Eval.objects.get(pk=ev.pk).status != Eval.Status.DONE:
                for p in procs:
                    if p.poll() is not None:
                        raise SystemExit(f"a worker exited with {p.returncode}; see {logs}")
                if time.monotonic() > deadline:
                    raise SystemExit(f"{label}: the eval did not end in 600 s: {shared.counts_of(ev)}")
                time.sleep(0.1)
        finally:
            stop(procs)
        stats = httpx.get(base_url.removesuffix("/v1") + "/_stats").json()
    span = EvalCase.objects.filter(eval=ev).aggregate(first=Min("started_at"), last=Max("finished_at"))
    makespan = (span["last"] - span["first"]).total_seconds()
    calls = stats["outcomes"].get("ok", 0)
    ideal = calls * latency / capacity
    counts = shared.counts_of(ev)
    rows = list(EvalCase.objects.filter(eval=ev).values_list("started_at", "finished_at", "latency_s"))
    model_s = sum(r[2] for r in rows)  # the client's own time per call, summed
    case_s = sum((r[1] - r[0]).total_seconds() for r in rows)
    return {
        "bench": "eval_capacity",
        "config": label,
        "workers": workers,
        "threads_per_worker": threads,
        "wish": workers * threads,
        "capacity": capacity,
        "latency_s": latency,
        "poll_s": poll,
        "cases": ev.total,
        "calls": calls,
        "ideal_s": round(ideal, 3),
        "makespan_s": round(makespan, 3),
        "vs_ideal": round(makespan / ideal, 3) if ideal else None,
        "server_max_in_flight": stats["max_in_flight"],
        "server_503": stats["outcomes"].get("503", 0),
        "passed": counts["passed"],
        "error": counts["error"],
        # where the time went: model calls as the client saw them; the rest of each case's
        # run (checkpoints, scoring, waiting for a slot); between cases (the broker)
        "call_ms_mean": round(1000 * model_s / max(1, calls), 1),
        "in_case_overhead_ms": round(1000 * (case_s - model_s) / max(1, len(rows)), 1),
        "slot_busy": round(model_s / (makespan * capacity), 3) if makespan else None,
        "redelivered": EvalCase.objects.filter(eval=ev, attempts__gt=1).count(),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--capacity", type=int, default=6, help="the server's capacity C = the endpoint's cap")
    parser.add_argument("--latency", type=float, default=1.0, help="seconds per call (default 1.0)")
    parser.add_argument("--cases", type=int, default=96)
    parser.add_argument("--nodes", type=int, default=2, help="generate nodes per case (calls per case)")
    parser.add_argument(
        "--poll",
        type=float,
        default=None,
        help="the filesystem broker's polling interval for the workers (default: the settings')",
    )
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--rows", type=Path, default=RESULTS, help="where to write the raw rows (jsonl)")
    parser.add_argument("--append", action="store_true", help="append to the rows file instead of replacing it")
    args = parser.parse_args(argv)
    c = args.capacity
    configs = [
        ("1 worker, wish C", 1, c),
        ("3 workers, wish C", 3, math.ceil(c / 3)),
        ("3 workers, wish 4C", 3, math.ceil(4 * c / 3)),
    ]

    tmp = Path(tempfile.mkdtemp(prefix="packforge-evalcap-"))
    began = time.perf_counter()
    try:
        env = configure(tmp)
        from django.conf import settings
        from django.contrib.auth.models import User

        from studio.projects.models import create_project

        user = User.objects.create_user("bench", "bench@example.com", "unused-password-for-bench")
        project = create_project(
            slug="capacity",
            name="Capacity",
            owner=user,
            pack_files=chain_files(tmp, args.cases, args.nodes),
            message="Create",
        )
        rows = []
        for label, workers, threads in configs:
            row = run_config(
                label,
                workers,
                threads,
                project=project,
                user=user,
                capacity=c,
                latency=args.latency,
                env=env,
                logs=tmp,
                poll=args.poll,
            )
            rows.append(row)
            print(f"  {label}: {row['makespan_s']} s, {row['vs_ideal']}x ideal", file=sys.stderr)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    db = settings.DATABASES["default"]["ENGINE"].rsplit(".", 1)[-1]
    cap = "redis" if getattr(settings, "REDIS_URL", "") else "lock files"
    meta = {
        "bench": "eval_capacity",
        "kind": "meta",
        "database": db,
        "global_cap": cap,
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "wall_s": round(time.perf_counter() - began, 1),
        "poll_s": args.poll,
    }
    args.rows.parent.mkdir(parents=True, exist_ok=True)
    with open(args.rows, "a" if args.append else "w", encoding="utf-8") as out:
        for row in [meta, *rows]:
            out.write(json.dumps(row) + "\n")
    if args.json:
        print(json.dumps({"meta": meta, "rows": rows}, indent=2))
        return 0
    poll = "kombu's default 1 s" if args.poll is None else f"{args.poll} s"
    broker = f"filesystem broker (polling {poll})" if cap == "lock files" else "Redis broker"
    print(
        f"Eval capacity: {args.cases} cases x {args.nodes} calls against capacity C={c}, latency {args.latency:g} s; "
        f"global cap in {cap}; {db} + {broker}; ideal = calls x L / C"
    )
    print(
        "| configuration | calls | makespan s | ideal s | x ideal | goal | slots busy | call ms | in-case overhead ms "
        "| server max in flight | 503s |"
    )
    print("|---|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|")
    for r in rows:
        goal = f"<= {GOAL_OVERSUBSCRIBED}" if r["wish"] > c else f"<= {GOAL_WITHIN}"
        print(
            f"| {r['config']} ({r['workers']} x {r['threads_per_worker']} threads) | {r['calls']} | "
            f"{r['makespan_s']:.2f} | {r['ideal_s']:.2f} | {r['vs_ideal']:.3f} | {goal} | "
            f"{100 * r['slot_busy']:.0f}% | {r['call_ms_mean']:.0f} | {r['in_case_overhead_ms']:.0f} | "
            f"{r['server_max_in_flight']} | {r['server_503']} |"
        )
    shown = args.rows.relative_to(ROOT) if args.rows.is_relative_to(ROOT) else args.rows
    print(f"\nraw rows: {shown}; wall {meta['wall_s']} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
