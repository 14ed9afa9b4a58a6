"""Walker overhead: what the runtime itself costs per node, with a zero-latency model.

The pack is a chain of N generate nodes with one-integer schemas and no asserts
(benchmarks/_chain.py), answered by a FakeBackend (`fake:fakes/scripted.json`), so the
time measured is the walker's: render, parse, validate, commit, route, checkpoint.

Per-node time of a run = wall time of `run_pack` / steps walked (N generate nodes + the
end node; begin/set_status of the run are included, amortised). p50 and p95 over the
runs, for each checkpoint store:
  memory         MemoryStore (one store for all runs)
  sqlite-normal  SQLiteStore(synchronous="normal"), a fresh temp file
  sqlite-full    SQLiteStore(synchronous="full"), a fresh temp file

Replay on resume: the same chain with a `human` node before the end, so every run stops
`waiting` after N checkpointed steps (the run "killed just before its end node"). Each
waiting run is then resumed with `resume_run(..., answers={"confirm": {"ok": true}})`,
with `runtime.walker._replay` (runtime.journal_replay.replay_journal) and the store's `take_over`
wrapped by timers, so from the
same real resume we get
  replay         time inside walker._replay / steps replayed     (the goal's figure)
  journal read   time inside store.take_over (SQL read + JSON decode) / steps replayed
  resume total   whole resume_run (incl. the two live steps) / steps replayed

    .venv/bin/python benchmarks/overhead.py [--runs N] [--nodes N] [--quick] [--json] [--profile CONFIG]
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import io
import json
import pstats
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import runtime.walker as walker_mod
from benchmarks._chain import X, write_chain
from benchmarks._rows import write_rows
from runtime import MemoryStore, SQLiteStore, load_pack, open_backend, resume_run, run_pack
from runtime.stats import percentile

NODES = 50
RUNS = 200
QUICK_RUNS = 40
WARMUP = 5
RESULTS = Path(__file__).resolve().parent / "results" / "overhead.jsonl"

# Goals (ms per node, on p50) and the reference system's range, from the brief.
GOALS = {"memory": 0.2, "sqlite-normal": 0.5, "replay": 0.03}
REFERENCE = {"sqlite-normal": "0.52-0.69", "sqlite-full": "3.0-3.8", "replay": "0.014-0.034"}


def _open_store(config: str, tmp: Path) -> Any:
    if config == "memory":
        return MemoryStore()
    sync = config.removeprefix("sqlite-")
    return SQLiteStore(tmp / f"{config}.db", synchronous=sync)


def bench_walk(config: str, pack: Any, backend: Any, runs: int, tmp: Path, rows: list[dict[str, Any]]) -> list[float]:
    store = _open_store(config, tmp)
    per_node: list[float] = []
    gc.collect()
    try:
        for i in range(-WARMUP, runs):
            started = time.perf_counter_ns()
            result = run_pack(pack, {"x": X}, backend=backend, store=store, run_id=f"{config}-{i}")
            elapsed = time.perf_counter_ns() - started
            if result.status != "done":
                raise RuntimeError(f"{config}: run {i} ended {result.status}: {result.trace.error}")
            if i < 0:
                continue
            steps = len(result.trace.steps)
            ms = elapsed / 1e6
            per_node.append(ms / steps)
            rows.append(
                {
                    "bench": "walk",
                    "config": config,
                    "run": i,
                    "steps": steps,
                    "total_ms": round(ms, 4),
                    "per_node_ms": round(ms / steps, 5),
                }
            )
    finally:
        store.close()
    return per_node


def bench_replay(pack: Any, backend: Any, runs: int, tmp: Path, rows: list[dict[str, Any]]) -> dict[str, list[float]]:
    store = SQLiteStore(tmp / "replay.db", synchronous="normal")
    ids = [f"replay-{i}" for i in range(-WARMUP, runs)]
    for run_id in ids:
        result = run_pack(pack, {"x": X}, backend=backend, store=store, run_id=run_id)
        if result.status != "waiting":
            raise RuntimeError(f"replay: {run_id} ended {result.status}, expected waiting")

    timings: dict[str, int] = {}

    def timed(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter_ns()
            try:
                return fn(*args, **kwargs)
            finally:
                timings[name] = time.perf_counter_ns() - started

        return wrapper

    original_replay = walker_mod._replay
    walker_mod._replay = timed("replay", original_replay)  # resume_run looks _replay up at call time
    store.take_over = timed("take_over", store.take_over)  # type: ignore[method-assign]
    out: dict[str, list[float]] = {"replay": [], "journal-read": [], "resume-total": []}
    gc.collect()
    try:
        for i, run_id in zip(range(-WARMUP, runs), ids, strict=False):
            timings.clear()
            started = time.perf_counter_ns()
            result = resume_run(pack, run_id, backend=backend, store=store, answers={"confirm": {"ok": True}})
            total = time.perf_counter_ns() - started
            if result.status != "done":
                raise RuntimeError(f"replay: resumed {run_id} ended {result.status}: {result.trace.error}")
            replayed = sum(1 for s in result.trace.steps if s.replayed)
            if i < 0:
                continue
            per = {
                "replay": timings["replay"] / 1e6 / replayed,
                "journal-read": timings["take_over"] / 1e6 / replayed,
                "resume-total": total / 1e6 / replayed,
            }
            for k, v in per.items():
                out[k].append(v)
            rows.append(
                {
                    "bench": "replay",
                    "config": "sqlite-normal",
                    "run": i,
                    "replayed_steps": replayed,
                    "replay_ms": round(timings["replay"] / 1e6, 4),
                    "take_over_ms": round(timings["take_over"] / 1e6, 4),
                    "resume_ms": round(total / 1e6, 4),
                    "replay_per_step_ms": round(per["replay"], 5),
                }
            )
    finally:
        walker_mod._replay = original_replay
        store.close()
    return out


def summarise(name: str, values: list[float], unit_note: str) -> dict[str, Any]:
    p50, p95 = percentile(values, 50), percentile(values, 95)
    goal = GOALS.get(name)
    return {
        "config": name,
        "runs": len(values),
        "p50_ms": round(p50, 4),
        "p95_ms": round(p95, 4),
        "goal_ms": goal,
        "goal_met": None if goal is None else p50 <= goal,
        "goal_met_p95": None if goal is None else p95 <= goal,
        "reference_ms": REFERENCE.get(name),
        "per": unit_note,
    }


def table(summary: list[dict[str, Any]]) -> str:
    head = ("measure", "per", "p50 ms", "p95 ms", "goal (p50)", "goal met", "reference")
    lines = []
    for s in summary:
        goal = "-" if s["goal_ms"] is None else f"<= {s['goal_ms']}"
        if s["goal_met"] is None:
            met = "-"
        else:
            met = ("yes" if s["goal_met"] else "NO") + ("" if s["goal_met_p95"] else " (p95 over)")
        lines.append(
            (s["config"], s["per"], f"{s['p50_ms']:.4f}", f"{s['p95_ms']:.4f}", goal, met, s["reference_ms"] or "-")
        )
    widths = [max(len(r[i]) for r in [head, *lines]) for i in range(len(head))]
    fmt = "  ".join(f"{{:<{w}}}" if i in (0, 1, 5, 6) else f"{{:>{w}}}" for i, w in enumerate(widths))
    return "\n".join([fmt.format(*head), fmt.format(*("-" * w for w in widths)), *(fmt.format(*r) for r in lines)])


def profile(config: str, pack: Any, wait_pack: Any, backend: Any, wait_backend: Any, runs: int, tmp: Path) -> str:
    prof = cProfile.Profile()
    (tmp / "prof").mkdir(exist_ok=True)
    prof.enable()
    if config == "replay":
        bench_replay(wait_pack, wait_backend, runs, tmp / "prof", [])
    else:
        bench_walk(config, pack, backend, runs, tmp / "prof", [])
    prof.disable()
    buf = io.StringIO()
    stats = pstats.Stats(prof, stream=buf).strip_dirs().sort_stats("tottime")
    stats.print_stats(25)
    buf.write("\n--- by cumulative time ---\n")
    stats.sort_stats("cumulative").print_stats(30)
    return buf.getvalue()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=None, help=f"timed runs per measure (default {RUNS})")
    parser.add_argument("--nodes", type=int, default=NODES, help=f"generate nodes in the chain (default {NODES})")
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_RUNS} runs per measure (unless --runs)")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON instead of a table")
    parser.add_argument("--rows", type=Path, default=RESULTS, help="where to write the per-run rows (jsonl)")
    parser.add_argument(
        "--only",
        action="append",
        default=None,
        choices=["memory", "sqlite-normal", "sqlite-full", "replay"],
        help="run only these measures",
    )
    parser.add_argument(
        "--profile",
        choices=["memory", "sqlite-normal", "sqlite-full", "replay"],
        help="cProfile one measure and print the top functions (no rows written)",
    )
    args = parser.parse_args(argv)
    runs = args.runs or (QUICK_RUNS if args.quick else RUNS)
    only = args.only or ["memory", "sqlite-normal", "sqlite-full", "replay"]
    rows: list[dict[str, Any]] = []
    summary: list[dict[str, Any]] = []
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="pf-overhead-") as tmpdir:
        tmp = Path(tmpdir)
        write_chain(tmp / "chain", args.nodes, asserts=False)
        write_chain(tmp / "waiting", args.nodes, asserts=False, human_tail=True)
        pack, wait_pack = load_pack(tmp / "chain"), load_pack(tmp / "waiting")
        backend = open_backend(f"fake:{tmp / 'chain' / 'fakes' / 'scripted.json'}")
        wait_backend = open_backend(f"fake:{tmp / 'waiting' / 'fakes' / 'scripted.json'}")
        if args.profile:
            print(profile(args.profile, pack, wait_pack, backend, wait_backend, runs, tmp))
            return 0
        for config in ("memory", "sqlite-normal", "sqlite-full"):
            if config in only:
                summary.append(summarise(config, bench_walk(config, pack, backend, runs, tmp, rows), "step walked"))
        if "replay" in only:
            replay = bench_replay(wait_pack, wait_backend, runs, tmp, rows)
            summary.append(summarise("replay", replay["replay"], "step replayed"))
            summary.append(summarise("journal-read", replay["journal-read"], "step replayed"))
            summary.append(summarise("resume-total", replay["resume-total"], "step replayed"))
    write_rows(args.rows, rows)
    elapsed = time.perf_counter() - started
    if args.json:
        print(json.dumps(summary, indent=1))
        return 0
    print(
        f"Walker overhead: chain of {args.nodes} generate nodes (+ end), zero-latency FakeBackend, "
        f"{runs} timed runs per measure after {WARMUP} warm-up runs"
    )
    print(table(summary))
    print(
        "\nwalk rows: run_pack wall time / steps walked. replay: time inside walker._replay during a real "
        "resume_run of a run waiting at a human node before its end, / steps replayed;\njournal-read: "
        "store.take_over (SQL read + JSON decode) / steps replayed; resume-total: the whole resume_run / "
        "steps replayed. Goals are checked on p50."
    )
    print(f"\nrows: {args.rows} ({len(rows)} rows), {elapsed:.1f}s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
