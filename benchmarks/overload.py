"""Overload: does the openai: client keep a batch moving when the server pushes back?

N runs of a chain of generate nodes (tests/support/packs.py) are submitted at once (a
thread per run, so the runs always oversubscribe the endpoint) against the
fault-injecting server (tests/support/fault_server.py, in its own process) with capacity
C (a call that arrives while C are in flight gets 503 + Retry-After) and a fixed latency
L per call.
The knob is the client's per-endpoint cap (`concurrency=` in the spec): C, 2C, 4C, and
4C again with jitter switched off (`jitter=false`), to show what jitter buys.

Reported per configuration: makespan against the ideal (total calls x L / C), p50/p95
run latency (submit to done), the server's 503s, the most calls the server saw in
flight, and whether every run completed. Raw rows go to benchmarks/results/overload.jsonl.

    .venv/bin/python benchmarks/overload.py [--runs 40] [--nodes 4] [--capacity 4]
        [--latency 0.1] [--retry-after 1] [--repeat 2] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from runtime import load_pack, open_backend, run_pack  # noqa: E402
from tests.support.fault_server import in_own_process  # noqa: E402
from tests.support.packs import write_chain_pack  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "overload.jsonl"


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return 0.0
    k = (len(ordered) - 1) * q
    low = int(k)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (k - low)


def run_config(
    pack_dir: Path,
    *,
    runs: int,
    capacity: int,
    latency: float,
    retry_after: str,
    concurrency: int,
    jitter: bool,
    repeat: int,
) -> dict[str, Any]:
    pack = load_pack(pack_dir)
    with in_own_process(capacity, latency, retry_after) as base_url:
        spec = (
            f"openai:{base_url}#fault;concurrency={concurrency};jitter={'true' if jitter else 'false'};"
            "deadline=600;attempts=8"
        )
        backend = open_backend(spec)
        durations: list[float] = []
        statuses: list[str] = []

        def one(i: int) -> None:
            started = time.perf_counter()
            result = run_pack(pack, {"story": f"Story number {i}."}, backend=backend, run_id=f"run{i}")
            durations.append(time.perf_counter() - started)
            statuses.append(result.status)

        started = time.perf_counter()
        with ThreadPoolExecutor(max_workers=runs) as pool:
            list(pool.map(one, range(runs)))
        makespan = time.perf_counter() - started
        backend.close()
        stats = httpx.get(base_url.removesuffix("/v1") + "/_stats").json()
    calls = stats["outcomes"].get("ok", 0)
    ideal = calls * latency / capacity
    return {
        "bench": "overload",
        "repeat": repeat,
        "concurrency": concurrency,
        "jitter": jitter,
        "runs": runs,
        "capacity": capacity,
        "latency_s": latency,
        "retry_after": retry_after,
        "calls": calls,
        "ideal_s": round(ideal, 3),
        "makespan_s": round(makespan, 3),
        "vs_ideal": round(makespan / ideal, 3),
        "p50_run_s": round(percentile(durations, 0.5), 3),
        "p95_run_s": round(percentile(durations, 0.95), 3),
        "server_503": stats["outcomes"].get("503", 0),
        "server_max_in_flight": stats["max_in_flight"],
        "completed": statuses.count("done"),
        "all_completed": statuses.count("done") == runs,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--nodes", type=int, default=4)
    parser.add_argument("--capacity", type=int, default=4)
    parser.add_argument("--latency", type=float, default=0.1)
    parser.add_argument("--retry-after", default="1")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    c = args.capacity
    configs = [(c, True), (2 * c, True), (4 * c, True), (4 * c, False)]
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        pack_dir = write_chain_pack(Path(tmp) / "chain", nodes=args.nodes)
        for repeat in range(args.repeat):
            for concurrency, jitter in configs:
                rows.append(
                    run_config(
                        pack_dir,
                        runs=args.runs,
                        capacity=c,
                        latency=args.latency,
                        retry_after=args.retry_after,
                        concurrency=concurrency,
                        jitter=jitter,
                        repeat=repeat,
                    )
                )
    RESULTS.parent.mkdir(exist_ok=True)
    with open(RESULTS, "w", encoding="utf-8") as out:
        for row in rows:
            out.write(json.dumps(row) + "\n")
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    print(
        f"{args.runs} runs x {args.nodes} nodes against capacity {c}, latency {args.latency:g} s, "
        f"Retry-After {args.retry_after} s; ideal = calls x L / C"
    )
    print(
        f"{'client concurrency':<22}{'makespan':>10}{'ideal':>8}{'x ideal':>9}{'p50 run':>9}{'p95 run':>9}"
        f"{'503s':>7}{'max in flight':>15}{'completed':>11}"
    )
    for r in rows:
        label = f"{r['concurrency']} ({r['concurrency'] // c}C){'' if r['jitter'] else ', no jitter'}"
        print(
            f"{label:<22}{r['makespan_s']:>9.2f}s{r['ideal_s']:>7.2f}s{r['vs_ideal']:>9.2f}"
            f"{r['p50_run_s']:>8.2f}s{r['p95_run_s']:>8.2f}s{r['server_503']:>7}{r['server_max_in_flight']:>15}"
            f"{r['completed']:>7}/{r['runs']}"
        )
    print(f"raw rows: {RESULTS.relative_to(Path.cwd()) if RESULTS.is_relative_to(Path.cwd()) else RESULTS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
