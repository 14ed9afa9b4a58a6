"""Expression speed: how long the pack expression language takes to evaluate a routing
condition, and to refuse a value that would be too large (runtime/expr.py, runtime/expr_ops.py); and what a
backtracking pattern costs in `matches()` (RE2, linear in the text) against Python's `re`
(which the runtime used before), on the same inputs in the same run.

Measured in process, --n evaluations per row (a refusal: --n // 100), after one warm-up:
microseconds per evaluation, p50 and p95 over batches of 100 (nearest rank). The tests in
tests/runtime/test_expr.py assert the bounds that do not depend on the machine (steps
charged, memory held while refusing); the times live here. Raw rows (one per batch):
benchmarks/results/expr_eval.jsonl.

    .venv/bin/python benchmarks/expr_eval.py [--n 10000] [--rows FILE]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks._rows import write_rows  # noqa: E402
from runtime.errors import ExprError  # noqa: E402
from runtime.expr import compile_expr  # noqa: E402
from runtime.stats import percentile  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "expr_eval.jsonl"
ENV: dict[str, Any] = {"category": "billing", "items": [1, 2, 3], "input": {"email": "a@example.com"}}
EVALUATED = ["category == 'billing'", "contains(input.email, '@') and len(items) > 2", "sum(items) / len(items)"]
REFUSED = [
    "[[1] * 50000] * 2",
    "[[1] * 100000] * 100000 == [[1] * 100000] * 100000",
    "['x' * 100000] * 100000",
    "[{'k': 'x' * 99990}] * 2",
]
BATCH = 100
# Patterns that backtrack for ever in Python's `re` on a run of "a" with no "b" after it;
# `re` is timed only up to lengths it finishes in seconds.
BACKTRACKING = [("(a|a)*b", (16, 18, 20, 22, 2000)), ("a*a*a*a*b", (50, 100, 150, 2000))]
RE_MAX = {"(a|a)*b": 22, "a*a*a*a*b": 150}


def measure(source: str, n: int, refused: bool, rows: list[dict[str, Any]]) -> dict[str, Any]:
    expr = compile_expr(source)

    def once() -> None:
        try:
            expr.evaluate(ENV)
        except ExprError:
            if not refused:
                raise

    once()
    per_call: list[float] = []
    for batch in range(max(1, n // BATCH)):
        started = time.perf_counter()
        for _ in range(BATCH):
            once()
        us = 1e6 * (time.perf_counter() - started) / BATCH
        per_call.append(us)
        rows.append({"expr": source, "refused": refused, "batch": batch, "us_per_eval": round(us, 3)})
    return {"expr": source, "p50_us": percentile(per_call, 50), "p95_us": percentile(per_call, 95)}


def backtracking(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One `matches()` call (RE2) and one `re.search` per pattern and length, timed."""
    import re

    out = []
    for pattern, lengths in BACKTRACKING:
        for n in lengths:
            text = "a" * n
            expr = compile_expr(f"matches(t, '{pattern}')")
            started = time.perf_counter()
            assert expr.evaluate({"t": text}) is False
            re2_s = time.perf_counter() - started
            re_s = None
            if n <= RE_MAX[pattern]:
                started = time.perf_counter()
                assert re.search(pattern, text) is None
                re_s = time.perf_counter() - started
            row = {
                "pattern": pattern,
                "chars": n,
                "re2_s": round(re2_s, 6),
                "re_s": None if re_s is None else round(re_s, 4),
            }
            rows.append(row)
            out.append(row)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=10_000, help="evaluations per expression (default 10000)")
    parser.add_argument("--rows", type=Path, default=RESULTS, help="where to write the per-batch rows (jsonl)")
    args = parser.parse_args(argv)
    rows: list[dict[str, Any]] = []
    summary = [measure(s, args.n, False, rows) for s in EVALUATED]
    summary += [measure(s, args.n // 100, True, rows) for s in REFUSED]
    width = max(len(s["expr"]) for s in summary)
    print(f"{'expression':<{width}} {'p50 µs':>9} {'p95 µs':>9}")
    for s in summary:
        print(f"{s['expr']:<{width}} {s['p50_us']:>9.2f} {s['p95_us']:>9.2f}")
    print(f"\n{'pattern':<10} {'chars':>6} {'matches() (RE2) s':>18} {'re.search s':>12}")
    for r in backtracking(rows):
        re_s = "-" if r["re_s"] is None else f"{r['re_s']:.4f}"
        print(f"{r['pattern']:<10} {r['chars']:>6} {r['re2_s']:>18.6f} {re_s:>12}")
    write_rows(args.rows, rows)
    print(f"rows: {args.rows} ({len(rows)} rows)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
