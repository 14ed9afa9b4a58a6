"""Compile against the target: each benchmark spec (benchmarks/specs/<task>, gold = the
hand pack's evalset) is compiled with the rules planner and searched on a real small
model; on the test split of the seeded split the table shows the compiled pack, the
hand-written pack (benchmarks/packs/<task>, run on the same cases and the same model),
the best one call the search found and the trivial baseline, with 95% Wilson
intervals; the target calls the build spent; and the calls a rebuild with the same
cache made (must be 0).

Model: SmolLM2-135M-Instruct (Q4_1) on llama.cpp's own llama-server, built and fetched
by tests/support/model_servers.py, or --url for a server already running.

    .venv/bin/python benchmarks/compile_target.py [--tasks a,b] [--budget N] [--url URL]
    .venv/bin/python benchmarks/compile_target.py --from-rows benchmarks/results/compile_target.jsonl

Raw rows go to benchmarks/results/compile_target.jsonl (one per task)."""

from __future__ import annotations

import argparse
import copy
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import runtime  # noqa: E402
from benchmarks._rows import read_rows  # noqa: E402
from compiler import load_spec  # noqa: E402
from compiler.loop import build  # noqa: E402
from compiler.planners import make_planner  # noqa: E402
from compiler.target_cache import CachedBackend  # noqa: E402
from runtime import load_pack, open_backend, wilson_interval  # noqa: E402

TASKS = ("helpdesk_routing", "review_aspects", "shipping_details")
ROWS = REPO / "benchmarks" / "results" / "compile_target.jsonl"


def hand_pack(task: str, target: str, test_ids: list[str], cache: Path) -> dict[str, Any]:
    """The hand-written pack on the test cases: passed when every expected field matches
    (what it committed counts when a gate held the run for a person)."""
    pack = load_pack(REPO / "benchmarks" / "packs" / task)
    subset = copy.copy(pack)
    wanted = set(test_ids)
    subset.cases = [c for c in pack.cases if c.id in wanted]
    backend = CachedBackend(open_backend(target), cache, target)
    try:
        report = runtime.evaluate(subset, backend, concurrency=2, run_prefix=f"hand-{task}")
    finally:
        backend.close()
    by_id = {c.id: c for c in subset.cases}
    passed = 0
    for result in report.cases:
        actual = result.output or result.committed
        matches = runtime.field_matches(pack.fields, by_id[result.case_id].expected, actual)
        passed += all(matches.values())
    return {"passed": passed, "total": len(report.cases), "calls": backend.counts.calls}


def run_task(task: str, target: str, budget: int, root: Path) -> dict[str, Any]:
    spec = load_spec(REPO / "benchmarks" / "specs" / task)
    cache = root / task / "cache"

    def compile_into(name: str) -> Any:
        return build(
            spec,
            make_planner("rules"),
            root / task / f"work{name}",
            out=root / task / f"pack{name}",
            target=target,
            cache=cache,
            budget=budget,
            concurrency=2,
            on_progress=lambda p: print(f"  [{task}] {p.message}", file=sys.stderr, flush=True),
        )

    started = time.monotonic()
    first = compile_into("")
    seconds = time.monotonic() - started
    again = compile_into("-again")  # the same spec, a new work dir, the same cache
    assert first.verdict is not None and again.verdict is not None
    verdict = first.verdict.document
    split = json.loads((root / task / "work" / "split.json").read_text())
    hand = hand_pack(task, target, split["test"], cache)
    return {
        "task": task,
        "target": target,
        "budget": budget,
        "seconds": round(seconds, 1),
        "verdict": verdict,
        "hand": hand,
        "rebuild_calls": again.verdict.document["cost"]["target_calls"],
        "cache_entries": sum(1 for _ in cache.rglob("*.json")),  # every distinct call the build needed
        "at": time.strftime("%Y-%m-%dT%H:%M:%S"),
    }


def _cell(passed: int | None, total: int | None) -> str:
    if passed is None or not total:
        return "-"
    lo, hi = wilson_interval(passed, total)
    return f"{100 * passed / total:.1f}% [{100 * lo:.0f}-{100 * hi:.0f}]"


def table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| task | test cases | compiled | hand pack | best one call | trivial baseline | chosen | exit | target calls (distinct) | rebuild calls | overflow cases |",
        "|---|---:|---|---|---|---|---|---:|---:|---:|---:|",
    ]
    for r in rows:
        v = r["verdict"]
        arms = v.get("arms") or {}

        def arm(name: str, arms: dict[str, Any] = arms) -> str:
            t = (arms.get(name) or {}).get("test") or {}
            return _cell(t.get("passed"), t.get("total"))

        overflow = sum((arms.get(n) or {}).get("overflow_cases", 0) for n in ("pack", "one_call"))
        lines.append(
            f"| {r['task']} | {v['split']['test']} | {arm('pack')} | {_cell(r['hand']['passed'], r['hand']['total'])} "
            f"| {arm('one_call')} | {arm('baseline')} | {v.get('chosen')} | {v.get('exit_code')} "
            f"| {r.get('cache_entries', v['cost']['target_calls'])} | {r['rebuild_calls']} | {overflow} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", default=",".join(TASKS))
    parser.add_argument("--budget", type=int, default=3000, help="target calls per task")
    parser.add_argument("--url", help="a running OpenAI-compatible server (default: start llama-server + SmolLM2)")
    parser.add_argument("--from-rows", metavar="FILE", help="print the table from committed rows; no model")
    parser.add_argument(
        "--root",
        default=str(REPO / "var" / "compile_target"),
        help="work dirs and the target-call cache (kept: a rerun answers from the cache)",
    )
    args = parser.parse_args(argv)
    if args.from_rows:
        rows = read_rows(Path(args.from_rows))
        print(table(rows))
        return 0
    server = None
    url = args.url
    if url is None:
        from tests.support.model_servers import start_smollm2_server

        server = start_smollm2_server(Path(tempfile.mkdtemp(prefix="compile-target-")))
        url = server.base_url
    target = f"openai:{url}#smollm2;concurrency=2;grammar=gbnf"
    rows = []
    try:
        root = Path(args.root)
        for task in args.tasks.split(","):
            for stale in ("work", "work-again", "pack", "pack-again"):
                shutil.rmtree(root / task / stale, ignore_errors=True)  # the cache stays
            row = run_task(task, target, args.budget, root)
            rows.append(row)
            ROWS.parent.mkdir(parents=True, exist_ok=True)
            with open(ROWS, "a", encoding="utf-8") as fh:
                fh.write(json.dumps(row, sort_keys=True) + "\n")
            print(table(rows), flush=True)
    finally:
        if server is not None:
            server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
