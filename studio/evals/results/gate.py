"""The baseline gate: a project's baseline eval, and whether a later eval regressed against it
(runtime.baseline_gate.check_baseline, as `packforge eval --baseline` gates)."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from runtime import DEFAULT_TOLERANCES, check_baseline
from studio.evals.models import Eval
from studio.evals.results.summary import metrics_of

__all__ = ["baseline_for", "baseline_gate", "gate", "mark_baseline"]


# -- the baseline gate --------------------------------------------------------------------


def gate(ev: Eval, baseline: Eval, tolerances: dict[str, float] | None = None) -> list[dict[str, Any]]:
    """One row per metric (metric, baseline, current, limit, ok), by the runtime's own
    check_baseline with its default tolerances, so the studio and `packforge eval
    --baseline` gate alike."""
    document = {"metrics": metrics_of(baseline), "tolerances": {**DEFAULT_TOLERANCES, **(tolerances or {})}}
    return check_baseline(metrics_of(ev), document)


def baseline_for(ev: Eval) -> Eval | None:
    """The project's baseline, when `ev` is a later eval of the same project."""
    base = Eval.objects.filter(project_id=ev.project_id, is_baseline=True).exclude(pk=ev.pk).first()
    if base is None or (base.created_at, base.pk) >= (ev.created_at, ev.pk):
        return None
    return base


def mark_baseline(ev: Eval) -> None:
    """Make `ev` its project's baseline (one per project)."""
    with transaction.atomic():
        Eval.objects.filter(project_id=ev.project_id, is_baseline=True).exclude(pk=ev.pk).update(is_baseline=False)
        Eval.objects.filter(pk=ev.pk).update(is_baseline=True)
    ev.is_baseline = True


def baseline_gate(ev: Eval) -> dict[str, Any]:
    """Does `ev` pass its project's baseline? One row per metric (`gate`), with the
    verdict and a sentence saying it. An eval with no earlier baseline to regress
    against passes, and says so."""
    current = metrics_of(ev)
    if ev.is_baseline:
        return {
            "passes": True,
            "baseline": ev.pk,
            "metrics": current,
            "rows": [],
            "detail": "this eval is the project's baseline",
        }
    baseline = baseline_for(ev)
    if baseline is None:
        return {
            "passes": True,
            "baseline": None,
            "metrics": current,
            "rows": [],
            "detail": "the project has no earlier baseline eval; mark one with POST /api/evals/{id}/baseline",
        }
    rows = gate(ev, baseline)
    failing = [r["metric"] for r in rows if not r["ok"]]
    detail = (
        f"regressed against eval {baseline.pk}: {', '.join(failing)}"
        if failing
        else f"within tolerance of baseline eval {baseline.pk}"
    )
    return {"passes": not failing, "baseline": baseline.pk, "metrics": current, "rows": rows, "detail": detail}
