"""The compiler end to end: per spec in specs/ (the five example specs and any other),
with the model-free planner (`rules`) and the recorded planner (specs/<name>/plans/, when
there is one), how many attempts `compiler.build` needs to reach full marks on the offline
test model, the wall time per attempt without model time (neither planner needs a model,
so it is the whole attempt: plan, emit, load, offline eval), per stage, and the best
offline score; then induction quality against the example packs' hand-written grammars
(`compiler.score_against_grammars`, as benchmarks/induction.py measures it).

Raw rows (one per spec and planner and run, one per pack for induction):
benchmarks/results/compile.jsonl.

    .venv/bin/python benchmarks/compile.py [--runs 3] [--rows FILE]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks._rows import write_rows  # noqa: E402
from benchmarks.induction import measure  # noqa: E402
from compiler import build, load_spec  # noqa: E402
from compiler.induce_score import SCORED_KINDS  # noqa: E402
from compiler.planners import make_planner  # noqa: E402
from runtime import Tool, load_tools  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "compile.jsonl"
STAGES = ("plan", "emit", "load", "offline_eval")
MODEL_STAGES = ("target_eval",)  # model time; a model planner's `plan` stage would be too


def tools_for(name: str) -> dict[str, Tool] | None:
    for path in (ROOT / "specs" / name / "tools.py", ROOT / "packs" / name / "tools.py"):
        if path.exists():
            return load_tools(f"{path}:registry")
    return None


def planners_for(spec_dir: Path) -> list[tuple[str, str]]:
    out = [("rules", "rules")]
    plans = spec_dir / "plans"
    if plans.is_dir() and any(plans.glob("*.json")):
        target = plans if len(list(plans.glob("*.json"))) > 1 else plans / "1.json"
        out.append(("recorded", f"recorded:{target}"))
    return out


def run_once(spec_dir: Path, planner: str) -> dict[str, Any]:
    spec = load_spec(spec_dir)
    with tempfile.TemporaryDirectory() as tmp:
        result = build(
            spec, make_planner(planner), Path(tmp) / "work", out=Path(tmp) / "pack", tools=tools_for(spec.name)
        )
    attempts = result.attempts
    first_full = next((r.number for r in attempts if r.full_marks), None)
    best = attempts[result.best - 1] if result.best is not None else None
    model = [sum(r.stages.get(s, 0.0) for s in MODEL_STAGES) for r in attempts]
    return {
        "spec": spec.name,
        "cases": len(spec.gold),
        "attempts": len(attempts),
        "attempts_to_full_marks": first_full,
        "statuses": [r.status for r in attempts],
        "offline_scores": [r.offline_score for r in attempts],
        "best_offline": best.offline_score if best else None,
        "stopped": result.stopped,
        "seconds_per_attempt": statistics.fmean(r.seconds - m for r, m in zip(attempts, model, strict=True)),
        "stage_seconds": {s: statistics.fmean(r.stages.get(s, 0.0) for r in attempts) for s in STAGES},
        "problems": [p for r in attempts for p in r.problems][:5],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="builds per spec and planner (times: the median)")
    parser.add_argument("--rows", type=Path, default=RESULTS, help="where to write the rows (jsonl)")
    args = parser.parse_args(argv)
    raw: list[dict[str, Any]] = []
    table: list[dict[str, Any]] = []
    for spec_dir in sorted(p.parent for p in ROOT.glob("specs/*/spec.yaml")):
        for label, planner in planners_for(spec_dir):
            runs = []
            for k in range(1, args.runs + 1):
                row = {"row": "build", "planner": label, "run": k, **run_once(spec_dir, planner)}
                raw.append(row)
                runs.append(row)
            last = runs[-1]
            table.append(
                {
                    **last,
                    "ms_per_attempt": 1000 * statistics.median(r["seconds_per_attempt"] for r in runs),
                    "stage_ms": {s: 1000 * statistics.median(r["stage_seconds"][s] for r in runs) for s in STAGES},
                }
            )
    print(
        f"{'spec':<18} {'planner':<9} {'cases':>5} {'attempts to full':>16} {'best offline':>12} "
        f"{'ms/attempt':>10}  " + " ".join(f"{s:>12}" for s in STAGES)
    )
    for r in table:
        full = "-" if r["attempts_to_full_marks"] is None else str(r["attempts_to_full_marks"])
        if r["attempts_to_full_marks"] is None:
            full += f" (of {r['attempts']})"
        best = "-" if r["best_offline"] is None else f"{100 * r['best_offline']:.0f}%"
        stages = " ".join(f"{r['stage_ms'][s]:>12.1f}" for s in STAGES)
        print(
            f"{r['spec']:<18} {r['planner']:<9} {r['cases']:>5} {full:>16} {best:>12} {r['ms_per_attempt']:>10.1f}  {stages}"
        )
    print("\ninduction against the example packs' grammars (precision / recall):")
    print(f"{'pack':<18} " + " ".join(f"{k:>14}" for k in SCORED_KINDS))
    for pack in sorted(p.parent for p in ROOT.glob("packs/*/evalset.jsonl")):
        row, _ = measure(pack)
        raw.append({"row": "induction", **row})
        cells = [f"{_pct(row[f'{k}_precision'])}/{_pct(row[f'{k}_recall'])}" for k in SCORED_KINDS]
        print(f"{pack.name:<18} " + " ".join(f"{c:>14}" for c in cells))
    write_rows(args.rows, raw)
    print(f"rows: {args.rows} ({len(raw)} rows)")
    return 0


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.0f}%"


if __name__ == "__main__":
    raise SystemExit(main())
