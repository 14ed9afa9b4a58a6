"""How often a SIGKILL makes a side effect happen twice, and what the idempotency key buys.

A real `packforge run` of a three-tool pack (lookup -> charge -> notify; charge and notify
have side effects, tests/support/tool_kill.py) is killed, then resumed from its
checkpoint as a supervisor would (or started again when the kill came before the run was
recorded). Two ways to kill, --kills times each:

  window   SIGKILL right after charge's side effect, before its result is journaled
           (the tool signals the parent, which kills it): the at-least-once window
  random   SIGKILL at a uniformly random moment of the run (0 .. the mean wall time of
           an unkilled run, measured first), each tool taking --latency seconds on
           either side of its effect, as a remote call does

Every execution of a side-effecting tool logs its idempotency key. Re-executed side
effects: keys executed more than once. Effective duplicates: what the world sees, for a
tool that ignores the key (every execution counts) and one that deduplicates on it.
Raw rows: benchmarks/results/tool_kill.jsonl.

    .venv/bin/python benchmarks/tool_kill.py [--kills 10] [--latency 0.05] [--seed 1]
"""

from __future__ import annotations

import argparse
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._rows import write_rows
from tests.support.tool_kill import KillBench, duplicates, write_kill_pack

RESULTS = Path(__file__).resolve().parent / "results" / "tool_kill.jsonl"


def one_run(bench: KillBench, mode: str, run_id: str, kill_after_s: float | None) -> dict[str, Any]:
    killed = False
    if mode == "window":
        killed = bench.kill_in_the_window(run_id)
    else:
        assert kill_after_s is not None
        proc = bench.start(run_id)
        try:
            proc.wait(timeout=kill_after_s)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGKILL)
            killed = True
        proc.communicate()
    finished = bench.finish(run_id)
    attempts = [k for k in bench.keys("attempts.log") if k.startswith(run_id + ":")]
    effects = [k for k in bench.keys("effects.log") if k.startswith(run_id + ":")]
    return {
        "mode": mode,
        "run_id": run_id,
        "kill_after_s": kill_after_s,
        "killed": killed,
        "completed": bench.status(run_id) == "done" and finished.returncode == 0,
        "executions": len(attempts),
        "reexecuted": duplicates(attempts),
        "duplicates_ignoring_key": duplicates(attempts),
        "duplicates_with_key_dedupe": duplicates(effects),
        "reexecuted_keys": sorted({k for k in attempts if attempts.count(k) > 1}),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=10)
    parser.add_argument("--latency", type=float, default=0.05, help="seconds each tool takes on either side")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="tool-kill-") as tmp:
        root = Path(tmp)
        pack, tools = write_kill_pack(root / "kill")
        logs = root / "logs"
        logs.mkdir()
        bench = KillBench(pack, tools, root / "runs.sqlite", logs, latency_s=args.latency)
        walls = []
        for i in range(3):  # an unkilled run's wall time bounds the random kill moment
            started = time.monotonic()
            done = bench.finish(f"calibrate-{i}")
            walls.append(time.monotonic() - started)
            assert done.returncode == 0, done.stderr
        wall = sum(walls) / len(walls)
        for i in range(args.kills):
            rows.append(one_run(bench, "window", f"window-{i}", None))
        for i in range(args.kills):
            rows.append(one_run(bench, "random", f"random-{i}", rng.uniform(0, wall)))
    for row in rows:
        row.update({"latency_s": args.latency, "seed": args.seed, "unkilled_wall_s": round(wall, 3)})
    write_rows(RESULTS, rows)
    print(f"unkilled run: {wall:.2f} s wall (mean of 3); tools take {args.latency:.2f} s on either side of an effect\n")
    header = ("kill at", "kills", "re-executed side effects", "dupes, key ignored", "dupes, key dedupe", "completed")
    table = [header]
    for mode, label in (("window", "the window"), ("random", "random moment")):
        got = [r for r in rows if r["mode"] == mode]
        table.append(
            (
                label,
                str(sum(r["killed"] for r in got)),
                str(sum(r["reexecuted"] for r in got)),
                str(sum(r["duplicates_ignoring_key"] for r in got)),
                str(sum(r["duplicates_with_key_dedupe"] for r in got)),
                f"{sum(r['completed'] for r in got)}/{len(got)}",
            )
        )
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    for n, row in enumerate(table):
        print(" | ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
        if n == 0:
            print(" | ".join("-" * w for w in widths))
    print(f"\nraw rows: {RESULTS.relative_to(Path.cwd()) if RESULTS.is_relative_to(Path.cwd()) else RESULTS}")


if __name__ == "__main__":
    main()
