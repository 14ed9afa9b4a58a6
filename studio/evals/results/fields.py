"""Per-field accuracy, partial credit and the trivial baseline of an eval, from its stored
rows and the evalset at the eval's version, computed by the runtime's own functions
(runtime.field_table, runtime.baseline_summary), so the page and `packforge eval` say the
same thing about the same runs (docs/eval-report.md, "Fields and the trivial baseline").

A row stores its field diffs, not every value: a field without a diff matched its rule,
so its expected value stands in for it (runtime.observed). An error row (no outcome)
has no values: every field it expects counts as wrong."""

from __future__ import annotations

from typing import Any

from runtime import Pack, baseline_summary, case_score, field_matches, field_table, observed_values
from studio.evals.models import Eval
from studio.evals.results.common import Status, scored

__all__ = ["field_scores"]


def field_scores(ev: Eval, pack: Pack) -> dict[str, Any]:
    """`fields` (per expected field: compare, cases, accuracy, baseline_accuracy, and F1
    for set fields), `baseline` (the trivial baseline's values, pass_rate, mean_score),
    `mean_score` and `runs` over the scored rows whose case is in `pack`'s evalset;
    `unknown`: scored rows whose case is not (the evalset changed under the eval)."""
    gold = {c.id: c.expected for c in pack.cases}
    rows: list[tuple[dict[str, Any], dict[str, Any]]] = []
    scores: list[float] = []
    unknown = 0
    for case_id, status, diffs in scored(ev).order_by("case_id", "repeat").values_list("case_id", "status", "diffs"):
        expected = gold.get(case_id)
        if expected is None:
            unknown += 1
            continue
        actual = {} if status == Status.ERROR else observed_values(expected, diffs or [])
        rows.append((expected, actual))
        scores.append(case_score(field_matches(pack.fields, expected, actual), status == Status.PASSED))
    return {
        "fields": field_table(pack.fields, rows),
        "baseline": baseline_summary(pack.fields, [e for e, _ in rows]),
        "mean_score": sum(scores) / len(scores) if scores else None,
        "runs": len(rows),
        "unknown": unknown,
    }
