"""How many few-shot examples does one plain call do best with?

benchmarks/real_models.py's one-call arm takes as many examples as the pack's hungriest
node (the same examples, so the comparison is about the graph, not the prompt). That
makes the baseline move with the pack's own choices. This sweep runs only the one-call
arm (the union schema as grammar, greedy, the nearest examples by word overlap, the
endpoint as real_models.py opens it: `grammar=gbnf;prefill=true`), on every case of each
task, with 0 to 4 examples, a fresh llama-server per run, so the pack can be held
against the strongest one call too, not only the one its own example count gives.

"= nearest" / "= n-th nearest": answers equal to the nearest example's answer, and to
the farthest shown one's (by the task's compare rules). The counts are compared on the
same cases they are measured on: read the best count's
figure as the one call's ceiling here, not as a held-out estimate. Rows (real_models.py's
row format, with `shots`): benchmarks/results/one_call_shots.jsonl.

    .venv/bin/python benchmarks/one_call_shots.py [--tasks a,b] [--shots 0,1,2] [--limit N]
    .venv/bin/python benchmarks/one_call_shots.py --from-rows FILE
"""

from __future__ import annotations

import argparse
import contextlib
import io
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import real_models
from benchmarks._rows import read_rows, write_rows
from runtime import wilson_interval

RESULTS = Path(__file__).resolve().parent / "results" / "one_call_shots.jsonl"


def sweep(tasks: list[str], shots: list[int], limit: int | None, out: Path) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="one-call-shots-") as tmp:
        for task in tasks:
            for n in shots:
                part = Path(tmp) / f"{task}-{n}.jsonl"
                argv = ["--tasks", task, "--arms", "one_call", "--shots", str(n), "--rows", str(part)]
                if limit:
                    argv += ["--limit", str(limit)]
                with contextlib.redirect_stdout(io.StringIO()):  # its own tables; ours is below
                    real_models.main(argv)
                rows += [r for r in read_rows(part) if "summary" not in r]
                write_rows(out, rows)
    return rows


def copies(task: real_models.Task, rows: list[dict[str, Any]], n: int) -> tuple[int, int]:
    """How many answers equal the nearest example's answer, and how many the n-th
    nearest's (the farthest shown): SmolLM2-135M mostly repeats the example just before
    the question, so where it copies tells which one was shown last."""
    inputs = {c["id"]: c["input"] for c in task.cases}
    near = far = 0
    for r in rows:
        shown = real_models.nearest_examples(task, inputs[r["case"]], n)
        if not shown or r["got"] is None:
            continue
        near += real_models.score(task, {f: shown[0]["expected"].get(f) for f in task.fields}, r["got"])[0]
        far += real_models.score(task, {f: shown[-1]["expected"].get(f) for f in task.fields}, r["got"])[0]
    return near, far


def print_table(rows: list[dict[str, Any]]) -> None:
    print(
        f"{'task':<18} {'shots':>5}  {'exact [95% CI]':<22} {'score':>5} {'prompt read':>11} {'s/case':>6}"
        f"  {'= nearest':>9} {'= n-th nearest':>14}"
    )
    for task in dict.fromkeys(r["task"] for r in rows):
        mine = [r for r in rows if r["task"] == task]
        loaded = real_models.load_task(task)
        for n in sorted({r["shots"] for r in mine}):
            cell = [r for r in mine if r["shots"] == n]
            right = sum(r["exact"] for r in cell)
            low, high = wilson_interval(right, len(cell))
            read = statistics.fmean(r["prompt_tokens"] - r["cached_tokens"] for r in cell)
            near, far = copies(loaded, cell, n)
            print(
                f"{task:<18} {n:>5}  {right / len(cell):6.1%} [{low:.1%}-{high:.1%}]  "
                f"{statistics.fmean(r['score'] for r in cell):5.2f} {read:11.0f} "
                f"{statistics.fmean(r['seconds'] for r in cell):6.2f}  {near:>9} {far:>14}"
            )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", default=",".join(real_models.TASKS))
    parser.add_argument("--shots", default="0,1,2,3,4", help="example counts to run (comma-separated)")
    parser.add_argument("--limit", type=int, default=None, help="N cases of each task, spread over its evalset")
    parser.add_argument("--rows", metavar="FILE", default=str(RESULTS))
    parser.add_argument("--from-rows", metavar="FILE", help="re-print the table from a rows file; no model is called")
    args = parser.parse_args(argv)
    if args.from_rows:
        print_table(read_rows(Path(args.from_rows)))
        return 0
    tasks = [t for t in args.tasks.split(",") if t]
    unknown = [t for t in tasks if t not in real_models.TASKS]
    if unknown:
        parser.error(f"unknown task(s) {unknown}; known: {', '.join(real_models.TASKS)}")
    try:
        shots = [int(n) for n in args.shots.split(",") if n.strip()]
    except ValueError:
        parser.error(f"--shots takes whole numbers, comma-separated: {args.shots!r}")
    if any(n < 0 for n in shots):
        parser.error("--shots: counts of 0 or more")
    started = time.monotonic()
    rows = sweep(tasks, shots, args.limit, Path(args.rows))
    print_table(rows)
    print(f"\n{time.monotonic() - started:.0f}s; raw rows in {args.rows}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
