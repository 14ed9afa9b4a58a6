"""The baseline gate: an eval's metrics against a stored baseline document, within
per-metric tolerances (`packforge eval --baseline`)."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from runtime.eval_report import EvalReport

DEFAULT_TOLERANCES: dict[str, float] = {
    "pass_rate": 0.0,  # absolute drop allowed
    "escalation_rate": 0.05,  # absolute rise allowed
    "schema_violation_rate": 0.05,  # absolute rise allowed
    "mean_model_calls": 0.10,  # relative rise allowed
    "cost_per_case": 0.10,  # relative rise allowed
}
# Which way each gate metric improves: "higher" (a drop beyond the tolerance fails the
# gate) or "lower" (a rise beyond it fails).
METRIC_DIRECTIONS: Mapping[str, str] = MappingProxyType(
    {
        "pass_rate": "higher",
        "escalation_rate": "lower",
        "schema_violation_rate": "lower",
        "mean_model_calls": "lower",
        "cost_per_case": "lower",
    }
)
_RELATIVE = {"mean_model_calls", "cost_per_case"}


def baseline_document(report: EvalReport) -> dict[str, Any]:
    return {
        "pack": report.pack,
        "version": report.version,
        "model": report.model,
        "metrics": report.metrics(),
        "tolerances": dict(DEFAULT_TOLERANCES),
    }


def check_baseline(metrics: Mapping[str, float], baseline: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Compare `metrics` (EvalReport.metrics()) to a baseline document (`baseline_document`:
    its "metrics" and optional "tolerances"); one row per metric: metric, baseline,
    current, limit, ok."""
    current = metrics
    base = baseline.get("metrics", {})
    tolerances = {**DEFAULT_TOLERANCES, **baseline.get("tolerances", {})}
    rows = []
    for name, tol in tolerances.items():
        if name not in base or name not in current:
            continue
        was, now = float(base[name]), float(current[name])
        if METRIC_DIRECTIONS.get(name) == "higher":
            limit = was - tol
            ok = now >= limit - 1e-12
        else:
            limit = was * (1 + tol) if name in _RELATIVE else was + tol
            ok = now <= limit + 1e-12
        rows.append({"metric": name, "baseline": was, "current": now, "limit": limit, "ok": ok})
    return rows
