"""Does the pack's automatic tier beat one call gated on its own confidence?

benchmarks/real_models.py compares the pack's held-out auto tier with one call's
accuracy on the same cases: on SmolLM2-135M one call did as well there, so the pack's
gain is the split itself (cases sent on automatically vs to a person), not a higher
exact. One call can be split too: ask its call for logprobs and hold the cases it was
least sure of. This measures that split against the pack's, threshold for threshold.

Arms, on every case of each task, a fresh llama-server each (as real_models.py starts
it: `grammar=gbnf;prefill=true`, two slots), taking turns a block of cases at a time:
  one_call        real_models.py's one-call arm (union schema, the pack's examples, greedy)
  one_call_gated  the same call asking for logprobs; its confidence is the least, over
                  the answer's fields, of the field's logprob confidence as a pack's
                  `confidence:` gate measures it (runtime.confidence.value_confidence):
                  renormalised over the field's enum where it has one (routing's two
                  labels; the sub-issue over all sub-issues, the union schema has no
                  per-department choice), else the plain product of the value's token
                  probabilities (aspects' set, extraction's strings)
The pack's rows are read from a real_models.py rows file (arm "pack": every gate opened,
each case's confidence the least of its gates', logprob or agreement share).

Both splits are judged the same way: cases in evalset order, even positions calibrate
and odd ones measure (real_models.py's halves); on the calibration half the threshold
is chosen (the lowest whose auto tier, of at least 10 cases, reaches the target
accuracy; failing that the most accurate one keeping >= 40% automatic), and the
measurement half gives the auto tier's share and accuracy. "most confident": accuracy
of the most confident 25/50/75% of the measurement half (no threshold: the ranking
alone, so the two splits are compared at equal shares; cases tied at the cut count at
their group's accuracy, since a quorum's agreement share ties most cases). One call's
and the gated call's exact should match (same greedy prompt); their seconds give what
asking for logprobs costs. The pack's halves are over the cases its rows hold: with
--limit they may differ from the one call's. Rows: benchmarks/results/one_call_gated.jsonl.

    .venv/bin/python benchmarks/one_call_gated.py [--tasks a,b] [--limit N] [--pack-rows FILE]
    .venv/bin/python benchmarks/one_call_gated.py --from-rows FILE [--pack-rows FILE] [--tasks a,b]

(--from-rows takes helpdesk_routing_flat too: that pack's split beside routing's gated call.)
"""

from __future__ import annotations

import argparse
import functools
import statistics
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import real_models
from benchmarks._rows import read_rows, write_rows
from benchmarks.real_models import Row, Task
from runtime import open_backend
from runtime.backends.base import Backend, TokenLogprob
from runtime.confidence import allowed_values, value_confidence

RESULTS = Path(__file__).resolve().parent / "results" / "one_call_gated.jsonl"
# A pack that lays out another task anew (helpdesk_routing_flat) has that task's one
# call: it is run once, under the task's name, and shown beside both packs.
TASKS = tuple(t for t in real_models.TASKS if t not in real_models.ONE_CALL_OF)
ARMS = ("one_call", "one_call_gated")


def field_confidences(
    task: Task, text: str, logprobs: list[TokenLogprob] | None, got: dict[str, Any] | None
) -> dict[str, float | None]:
    """Each answered field's logprob confidence (None where the tokens cannot say)."""
    out: dict[str, float | None] = {}
    for name in task.fields:
        if not got or name not in got:
            out[name] = None
            continue
        allowed = allowed_values(task.union_schema["properties"].get(name))
        found = value_confidence(text, logprobs, name, got[name], allowed, greedy=True)
        out[name] = None if found is None else found.p
    return out


def run(task: Task, cases: list[dict[str, Any]], backend: Backend, gated: bool) -> list[Row]:
    gate = functools.partial(field_confidences, task) if gated else None
    return real_models.run_one_call(task, cases, backend, grammar=True, gate=gate)


def halves(rows: list[Row], order: dict[str, int]) -> tuple[list[Row], list[Row]]:
    """real_models.py's split: in evalset order, even positions calibrate, odd measure."""
    ranked = sorted(rows, key=lambda r: order[r.case])
    return ranked[0::2], ranked[1::2]


SHARES = (0.25, 0.5, 0.75)


def most_confident(rows: list[Row], share: float) -> tuple[float, int]:
    """(expected passed, n) among the most confident `share` of `rows`: the ranking
    alone, no threshold. A case without a confidence ranks last. Cases tied at the cut
    share it: the tied group counts at its own accuracy for the places left (a quorum's
    agreement takes only 1, 2/3 and 1/3, so most cases tie, and any order among them,
    the evalset's included, would decide the figure)."""
    n = round(share * len(rows))
    levels = sorted({-1.0 if r.confidence is None else r.confidence for r in rows}, reverse=True)
    passed, left = 0.0, n
    for level in levels:
        group = [r for r in rows if (-1.0 if r.confidence is None else r.confidence) == level]
        take = min(left, len(group))
        passed += take * sum(r.exact for r in group) / len(group)
        left -= take
        if not left:
            break
    return passed, n


def _pct(passed: float, n: int) -> str:
    return f"{100 * passed / n:5.1f}% of {n}" if n else "   -"


def split(rows: list[Row], order: dict[str, int], target: float) -> dict[str, Any]:
    calib, measure = halves(rows, order)
    out: dict[str, Any] = {"n": len(measure)}
    for name, threshold in (
        ("calibrated", real_models.choose_threshold(calib, target)),
        ("at_share", real_models.threshold_for_share(calib)),
    ):
        auto = real_models.auto_at(measure, threshold)
        out[name] = {
            "threshold": threshold,
            "auto": len(auto),
            "passed": sum(r.exact for r in auto),
            "share": len(auto) / len(measure) if measure else 0.0,
        }
    out["most_confident"] = {share: most_confident(measure, share) for share in SHARES}
    out["whole_half"] = (sum(r.exact for r in measure), len(measure))
    return out


def pack_rows(path: Path, task: str) -> list[Row]:
    return [Row.from_dict(r) for r in read_rows(path) if r.get("task") == task and r.get("arm") == "pack"]


def _tier(name: str, s: dict[str, Any], part: str) -> str:
    t = s[part]
    acc = real_models._ci(t["passed"], t["auto"]) if t["auto"] else "   -"
    return f"{name:<15} {part:<10} {t['threshold']:>9.3g} {100 * t['share']:>5.0f}%  {acc:<22}"


def print_table(task: Task, by_arm: dict[str, list[Row]], pack: list[Row], target: float) -> None:
    order = {c["id"]: i for i, c in enumerate(task.cases)}
    print(f"\n{task.name}  ({len(next(iter(by_arm.values()), []))} cases)")
    print(f"  {'arm':<15} {'exact [95% CI]':<22} {'prompt read':>11} {'s/case':>7}")
    for arm, rows in by_arm.items():
        read = statistics.fmean(r.prompt_tokens - r.cached_tokens for r in rows) if rows else 0.0
        secs = statistics.fmean(r.seconds for r in rows) if rows else 0.0
        print(f"  {arm:<15} {real_models._ci(sum(r.exact for r in rows), len(rows)):<22} {read:11.0f} {secs:7.2f}")
    plain, gated = by_arm.get("one_call", []), by_arm.get("one_call_gated", [])
    if plain and gated:
        same = {r.case: r.exact for r in plain}
        differ = sum(same.get(r.case) != r.exact for r in gated)
        ratio = statistics.fmean(r.seconds for r in gated) / max(statistics.fmean(r.seconds for r in plain), 1e-9)
        print(f"  logprobs: seconds {ratio:.2f}x; cases scored differently from the plain call: {differ}")
    print(f"  {'split':<15} {'threshold':<10} {'(chosen)':>9} {'share':>6}  {'auto accuracy [95% CI]':<22}")
    splits = {"pack": pack, "one call gated": gated}
    for name, rows in splits.items():
        if not rows:
            print(f"  {name:<15} no rows")
            continue
        s = split(rows, order, target)
        for part in ("calibrated", "at_share"):
            print("  " + _tier(name, s, part))
        tops = "; ".join(f"{100 * share:.0f}%: {_pct(*s['most_confident'][share])}" for share in SHARES)
        print(f"  {name:<15} most confident of the measured half: {tops}; all {real_models._ci(*s['whole_half'])}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", default=",".join(TASKS))
    parser.add_argument("--limit", type=int, default=None, help="N cases of each task, spread over its evalset")
    parser.add_argument("--target-auto-accuracy", type=float, default=0.95)
    parser.add_argument("--pack-rows", metavar="FILE", default=str(real_models.RESULTS), help="real_models.py rows")
    parser.add_argument("--rows", metavar="FILE", default=str(RESULTS))
    parser.add_argument("--from-rows", metavar="FILE", help="re-print from a rows file; no model is called")
    args = parser.parse_args(argv)
    tasks = [t for t in args.tasks.split(",") if t]
    for name in tasks:
        if name not in real_models.TASKS:
            parser.error(f"unknown task {name!r}; known: {', '.join(real_models.TASKS)}")
    if args.from_rows:
        saved = [Row.from_dict(r) for r in read_rows(Path(args.from_rows))]
        for name in tasks:
            task = real_models.load_task(name)
            one_call = real_models.ONE_CALL_OF.get(name, name)
            by_arm = {arm: [r for r in saved if r.task == one_call and r.arm == arm] for arm in ARMS}
            print_table(task, by_arm, pack_rows(Path(args.pack_rows), name), args.target_auto_accuracy)
        return 0
    layouts = [name for name in tasks if name in real_models.ONE_CALL_OF]
    if layouts:
        parser.error(f"{', '.join(layouts)}: its one call is {real_models.ONE_CALL_OF[layouts[0]]}'s; run that task")
    started, out = time.monotonic(), []
    with tempfile.TemporaryDirectory(prefix="one-call-gated-") as logs:
        for name in tasks:
            task = real_models.load_task(name)
            cases = real_models.spread(task.cases, args.limit)
            by_arm: dict[str, list[Row]] = {arm: [] for arm in ARMS}
            with ExitStack() as stack:  # every server started is stopped, a failed start included
                backends = {}
                for arm in ARMS:
                    server = real_models.start_server("smollm2", Path(tempfile.mkdtemp(dir=logs)))
                    stack.callback(server.stop)
                    backends[arm] = open_backend(
                        f"openai:{server.base_url}#smollm2;concurrency={real_models.CONCURRENCY};"
                        "grammar=gbnf;prefill=true"
                    )
                    stack.callback(backends[arm].close)
                for n, i in enumerate(range(0, len(cases), real_models.BLOCK)):
                    block = cases[i : i + real_models.BLOCK]
                    for arm in ARMS[n % 2 :] + ARMS[: n % 2]:  # who goes first alternates
                        by_arm[arm] += run(task, block, backends[arm], gated=arm == "one_call_gated")
            print_table(task, by_arm, pack_rows(Path(args.pack_rows), name), args.target_auto_accuracy)
            out += [{**r.to_dict(), "model": "smollm2", "shots": task.shots} for rows in by_arm.values() for r in rows]
            write_rows(Path(args.rows), out)
    print(f"\n{time.monotonic() - started:.0f}s; raw rows in {args.rows}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
