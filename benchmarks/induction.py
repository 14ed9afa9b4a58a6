"""Induction quality: what schema induction (compiler/induce.py) recovers of the example
packs' hand-written grammars, from their gold cases alone.

Per pack in packs/*/ (evalset.jsonl = the gold cases, grammars/*.json = the hand-written
answer schemas): precision and recall of type, enum and pattern facts
(`compiler.induce_score.score_against_grammars`: a fact is (kind, field path[, value]); only
fields both the grammars and the gold cases have count), the share of the hand grammars'
enum values the induced enums hold, counts of the other induced constraints, and the
mismatches in words. Raw rows (one per pack, one per mismatch):
benchmarks/results/induction.jsonl.

    .venv/bin/python benchmarks/induction.py [--rows FILE]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks._rows import write_rows  # noqa: E402
from compiler.induce import induce  # noqa: E402
from compiler.induce_score import SCORED_KINDS, score_against_grammars  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "induction.jsonl"


def measure(pack: Path) -> tuple[dict[str, Any], list[str]]:
    rows = [json.loads(line) for line in (pack / "evalset.jsonl").read_text().splitlines() if line.strip()]
    ind = induce([(r["input"], r["expected"]) for r in rows])
    grammars = [json.loads(g.read_text()) for g in sorted((pack / "grammars").glob("*.json"))]
    score = score_against_grammars(ind, grammars)
    kinds = [c.kind for c in ind.constraints()]
    row: dict[str, Any] = {"pack": pack.name, "cases": len(rows), "fields": len(ind.fields)}
    for k in SCORED_KINDS:
        row[k] = dict(score.kinds[k])
        row[f"{k}_precision"] = score.precision(k)
        row[f"{k}_recall"] = score.recall(k)
    row["enum_values"] = dict(score.enum_values)
    row["relations"] = len(ind.relations)
    row["branches"] = len(ind.branches)
    row["copied"] = sorted(ind.copied)
    row["constraints"] = len(kinds)
    row["unseen_grammar_fields"] = list(score.unseen)
    return row, list(score.mismatches)


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.0f}%"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=Path, default=RESULTS, help="where to write the rows (jsonl)")
    args = parser.parse_args(argv)
    raw: list[dict[str, Any]] = []
    summary: list[dict[str, Any]] = []
    notes: list[str] = []
    for pack in sorted(p.parent for p in ROOT.glob("packs/*/evalset.jsonl")):
        row, mismatches = measure(pack)
        summary.append(row)
        raw.append({"row": "pack", **row})
        raw += [{"row": "mismatch", "pack": pack.name, "text": m} for m in mismatches]
        notes += [f"{pack.name}: {m}" for m in mismatches]
    total: dict[str, Any] = {"pack": "all", "cases": sum(r["cases"] for r in summary)}
    for k in SCORED_KINDS:
        t = {m: sum(r[k][m] for r in summary) for m in ("induced", "hand", "matched")}
        total[f"{k}_precision"] = t["matched"] / t["induced"] if t["induced"] else None
        total[f"{k}_recall"] = t["matched"] / t["hand"] if t["hand"] else None
    ev = {m: sum(r["enum_values"][m] for r in summary) for m in ("hand", "matched")}
    total["enum_values"] = ev
    total.update(relations=sum(r["relations"] for r in summary), branches=sum(r["branches"] for r in summary))
    total["copied"] = [c for r in summary for c in r["copied"]]
    raw.append({"row": "total", **total})

    head = f"{'pack':<16} {'cases':>5} {'type P/R':>10} {'enum P/R':>10} {'pattern P/R':>12} {'enum vals':>9}"
    print(head + f" {'rel':>4} {'branch':>6}  copied")
    for r in [*summary, total]:
        pr = [f"{_pct(r[f'{k}_precision'])}/{_pct(r[f'{k}_recall'])}" for k in SCORED_KINDS]
        vals = r["enum_values"]
        share = f"{vals['matched']}/{vals['hand']}"
        line = f"{r['pack']:<16} {r['cases']:>5} {pr[0]:>10} {pr[1]:>10} {pr[2]:>12} {share:>9}"
        print(line + f" {r['relations']:>4} {r['branches']:>6}  {', '.join(r['copied']) or '-'}")
    print("\nmismatches:")
    for n in notes:
        print(f"  {n}")
    write_rows(args.rows, raw)
    print(f"rows: {args.rows} ({len(raw)} rows)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
