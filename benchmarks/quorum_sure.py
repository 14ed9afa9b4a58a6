"""A quorum's first draw standing alone when the model was sure of it (`sure: P`,
docs/pack-format.md "Quorum draws"), on the real-model benchmark's two quorum packs.

For each task (review_aspects, shipping_details: three draws, two must agree):

1. **Calibration run.** The pack with every draw made (agree 1, draw_all), the first
   draw's call asking for logprobs; per case: the probability of the first draw's least
   likely token, whether the first draw alone is exact, and whether the quorum as
   written (two of the three draws agree, else a person: a miss) is exact.
   Only an accepted first call counts (a rejected one never stands alone). P is chosen
   on the even-numbered cases: the lowest value (three decimals, rounded down) at which
   at least 10 first draws stand alone and the pack's auto tier (a first draw standing
   alone, else the quorum's settled answer; a held case goes to a person) is exact at
   least as often as the quorum's alone. It is measured on the odd-numbered cases: how
   many first draws stand alone and how many of those are right, and the auto tier with
   and without `sure` (cases, accuracy). The cost arms below run on every case, the
   calibration half included: their exact column is not a held-out figure.
2. **Cost.** On every case, each arm on a freshly started llama-server: the pack as
   written without `sure`, the pack with `sure: P`, and one call (the benchmark's arm b);
   calls, prompt tokens read and seconds per case, as real_models.py measures them.

Model: SmolLM2-135M-Instruct on llama-server (2 CPU threads), as real_models.py. Rows:
benchmarks/results/quorum_sure.jsonl.

    .venv/bin/python benchmarks/quorum_sure.py [--tasks review_aspects,shipping_details] [--limit N] [--sure P]
"""

from __future__ import annotations

import argparse
import math
import shutil
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import real_models as rm
from benchmarks._rows import read_rows, write_rows
from runtime import load_pack, run_pack, wilson_interval
from runtime.backends import Backend, ModelCall, ModelReply, open_backend

TASKS = ("review_aspects", "shipping_details")
RESULTS = rm.HERE / "results" / "quorum_sure.jsonl"
MIN_CASES = 10


class FirstDrawLogprobs:
    """The endpoint, asking for logprobs on each node's first call and keeping the
    probability of its least likely token, by request id."""

    def __init__(self, inner: Backend) -> None:
        self.inner, self.spec = inner, inner.spec
        self.least: dict[str, float] = {}

    def complete(self, call: ModelCall) -> ModelReply:
        if call.attempt == 1 and call.purpose == "answer":
            call.logprobs = True
        reply = self.inner.complete(call)
        if call.attempt == 1 and reply.logprobs:
            self.least[call.request_id] = math.exp(min(t.logprob for t in reply.logprobs))
        return reply

    def close(self) -> None:
        self.inner.close()


@contextmanager
def endpoint(log_dir: Path) -> Iterator[Backend]:
    """A freshly started llama-server, so no arm reads another's prompts from its cache."""
    server = rm.start_server("smollm2", log_dir)
    backend = open_backend(f"openai:{server.base_url}#smollm2;concurrency={rm.CONCURRENCY};grammar=gbnf")
    try:
        yield backend
    finally:
        backend.close()
        server.stop()


def quorum_node(task: rm.Task) -> tuple[str, dict[str, Any]]:
    return next((n, spec) for n, spec in task.graph["nodes"].items() if int(spec.get("samples", 1)) > 1)


def calibration_rows(task: rm.Task, cases: list[dict[str, Any]], log_dir: Path) -> list[dict[str, Any]]:
    node_id, spec = quorum_node(task)
    agree = int(spec.get("agree", int(spec["samples"]) // 2 + 1))
    fields = spec.get("agree_on") or spec["writes"]
    with rm.pack_copy(task, {c["id"] for c in cases}, opened=True) as root, endpoint(log_dir) as inner:
        pack = load_pack(root)
        backend = FirstDrawLogprobs(inner)

        def one(case: dict[str, Any]) -> dict[str, Any]:
            result = run_pack(pack, case["input"], backend=backend, run_id=f"sure-{task.name}-{case['id']}")
            draws = [rm.lenient_parse(a.text) for a in result.trace.attempts if a.node == node_id and a.ok]
            # `sure` reads the first draw's first call, and only when it was accepted.
            opening = next((a for a in result.trace.attempts if a.node == node_id and a.attempt == 1), None)
            accepted = opening is not None and opening.ok
            keys = [tuple(rm.canonical(task, f, (d or {}).get(f)) for f in fields) for d in draws]
            top, count = Counter(keys).most_common(1)[0] if keys else ((), 0)
            quorum = draws[keys.index(top)] if count >= agree else None  # else a person reads it
            return {
                "task": task.name,
                "case": case["id"],
                "least_p": backend.least.get(f"{result.run_id}.{node_id}.1") if accepted else None,
                "first_exact": accepted and rm.score(task, case["expected"], rm.lenient_parse(opening.text))[0],
                "quorum_exact": quorum is not None and rm.score(task, case["expected"], quorum)[0],
                "quorum_settled": quorum is not None,
                "first_two_agree": len(keys) >= 2 and keys[0] == keys[1],
            }

        with ThreadPoolExecutor(max_workers=rm.CONCURRENCY) as pool:
            return list(pool.map(one, cases))


def _rate(rows: list[dict[str, Any]], key: str) -> float:
    return sum(r[key] for r in rows) / len(rows) if rows else 0.0


def auto_tier(rows: list[dict[str, Any]], p: float | None) -> tuple[int, int]:
    """(cases the pack settles without a person, of them exact) with `sure: p` (None:
    the quorum alone): a first draw that stands alone, else the quorum's answer."""
    auto = right = 0
    for r in rows:
        alone = p is not None and r["least_p"] is not None and r["least_p"] >= p
        if alone or r["quorum_settled"]:
            auto += 1
            right += r["first_exact"] if alone else r["quorum_exact"]
    return auto, right


def choose_p(rows: list[dict[str, Any]]) -> float | None:
    """The lowest P (three decimals, rounded down) at which at least MIN_CASES first
    draws stand alone and the pack's auto tier is exact at least as often as with the
    quorum alone; None when there is none."""
    auto, right = auto_tier(rows, None)
    bar = right / auto if auto else 0.0
    chosen = None
    for p in sorted({math.floor(r["least_p"] * 1000) / 1000 for r in rows if r["least_p"]}, reverse=True):
        alone = sum(1 for r in rows if r["least_p"] is not None and r["least_p"] >= p)
        with_p, right_p = auto_tier(rows, p)
        if p > 0 and alone >= MIN_CASES and right_p / with_p >= bar:
            chosen = p
    return chosen


@contextmanager
def with_sure(task: rm.Task, p: float | None) -> Iterator[rm.Task]:
    """The task with its quorum node's `sure` set to `p` (None: removed), judged on the
    whole answer: `sure_fields` is taken out (real_models.py measures the pack with it)."""
    with tempfile.TemporaryDirectory(prefix=f"sure-{task.name}-") as tmp:
        root = Path(tmp) / task.name
        shutil.copytree(task.root, root)
        graph = yaml.safe_load((root / "graph.yaml").read_text())
        node_id, _ = quorum_node(task)
        graph["nodes"][node_id].pop("sure", None)
        graph["nodes"][node_id].pop("sure_fields", None)
        if p is not None:
            graph["nodes"][node_id]["sure"] = p
        (root / "graph.yaml").write_text(yaml.safe_dump(graph, sort_keys=False))
        packs, rm.PACKS = rm.PACKS, Path(tmp)
        try:
            yield rm.load_task(task.name)
        finally:
            rm.PACKS = packs


def cost_rows(task: rm.Task, cases: list[dict[str, Any]], p: float | None, log_dir: Path) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    arms: list[tuple[str, float | None]] = [("quorum", None)] + ([("sure", p)] if p is not None else [])
    for arm, value in arms:
        with with_sure(task, value) as variant, endpoint(log_dir) as backend:
            rows, why = rm.run_pack_arm(variant, cases, backend, opened=False)
        if why is not None:
            raise SystemExit(why)
        out += [{**r.to_dict(), "arm": arm, "sure": value} for r in rows]
    with endpoint(log_dir) as backend:
        out += [r.to_dict() for r in rm.run_one_call(task, cases, backend, grammar=True)]
    return out


def _ci(k: int, n: int) -> str:
    lo, hi = wilson_interval(k, n)
    return f"{k / n:.1%} [{lo:.1%}-{hi:.1%}]" if n else "-"


def report(
    task: str, calibration: list[dict[str, Any]], chosen: float | None, p: float | None, cost: list[dict[str, Any]]
) -> None:
    """`chosen`: the P the rule chose on the even half (None: none holds); `p`: the P
    measured (the chosen one, else the one given with --sure)."""
    odd = calibration[1::2]
    print(f"\n{task}: P chosen on {len(calibration[::2])} even cases = {chosen}; measured at {p}")
    for half, cases in (("even", calibration[::2]), ("odd", odd)):
        (quorum_n, quorum_right), (sure_n, sure_right) = auto_tier(cases, None), auto_tier(cases, p)
        print(
            f"  {half} half, auto tier: quorum {quorum_n} cases, {_ci(quorum_right, quorum_n)}; "
            f"with sure {sure_n} cases, {_ci(sure_right, sure_n)}"
        )
    if p is not None:
        alone = [r for r in odd if r["least_p"] is not None and r["least_p"] >= p]
        print(
            f"  odd half ({len(odd)} cases): the first draw stands alone on {len(alone)}, "
            f"{sum(r['first_exact'] for r in alone)} of them exact (the quorum: "
            f"{sum(r['quorum_exact'] for r in alone)}, settling {sum(r['quorum_settled'] for r in alone)})"
        )
    by_arm: dict[str, list[dict[str, Any]]] = {}
    for r in cost:
        by_arm.setdefault(r["arm"], []).append(r)
    one = by_arm["one_call"]
    one_s = statistics.mean(r["seconds"] for r in one)
    one_read = statistics.mean(r["prompt_tokens"] - r["cached_tokens"] for r in one)
    print("| arm | exact [95% CI] | calls/case | prompt read | vs one call | s/case | vs one call |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for arm, rows in by_arm.items():
        n, k = len(rows), sum(r["exact"] for r in rows)
        seconds = statistics.mean(r["seconds"] for r in rows)
        read = statistics.mean(r["prompt_tokens"] - r["cached_tokens"] for r in rows)
        calls = statistics.mean(r.get("model_calls", 1) for r in rows)
        print(
            f"| {arm} | {_ci(k, n)} | {calls:.2f} | {read:.0f} | {read / one_read:.2f}x | "
            f"{seconds:.2f} | {seconds / one_s:.2f}x |"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", default=",".join(TASKS))
    parser.add_argument("--limit", type=int, default=None, help="N cases of each task, spread over its evalset")
    parser.add_argument(
        "--sure", type=float, default=None, help="P to time when the rule chooses none (reported as not chosen)"
    )
    parser.add_argument("--from-rows", metavar="FILE", help="re-print the tables from a rows file; no model is called")
    args = parser.parse_args(argv)
    if args.from_rows:
        rows = read_rows(Path(args.from_rows))
        for task in dict.fromkeys(r["task"] for r in rows):
            mine = [r for r in rows if r["task"] == task]
            choice = next(r for r in mine if r.get("kind") == "choice")
            calibration = [r for r in mine if r.get("kind") == "calibration"]
            report(task, calibration, choice["chosen"], choice["sure"], [r for r in mine if "arm" in r])
        return 0
    started = time.monotonic()
    out: list[dict[str, Any]] = []
    log_dir = Path(tempfile.mkdtemp(prefix="quorum-sure-"))
    for name in [t for t in args.tasks.split(",") if t]:
        if name not in TASKS:
            parser.error(f"unknown task {name!r}; known: {', '.join(TASKS)}")
        task = rm.load_task(name)
        cases = rm.spread(task.cases, args.limit)
        calibration = calibration_rows(task, cases, log_dir)
        chosen = choose_p(calibration[::2])
        p = chosen if chosen is not None else args.sure
        cost = cost_rows(task, cases, p, log_dir)
        out += [{**r, "kind": "calibration"} for r in calibration]
        out += [{"task": name, "kind": "choice", "chosen": chosen, "sure": p}]
        out += [{**r, "task": name} for r in cost]
        write_rows(RESULTS, out)
        report(name, calibration, chosen, p, cost)
    shutil.rmtree(log_dir, ignore_errors=True)
    print(f"\n{time.monotonic() - started:.0f}s; rows in {RESULTS.relative_to(rm.HERE.parent)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
