"""Try-it runs store the runtime's trace dict (as evals do) instead of a studio-specific
list of steps; old rows are converted, so their pages read the same."""

from __future__ import annotations

from typing import Any

from django.db import migrations, models

_ATTEMPT_KEYS = (
    "attempt",
    "stage",
    "ok",
    "category",
    "reason",
    "text",
    "prompt_tokens",
    "completion_tokens",
    "reasoning_tokens",
    "latency_s",
    "ttft_s",
    "cost_usd",
)


def trace_of(steps: list[dict[str, Any]], run_id: str, status: str, error: str) -> dict[str, Any]:
    """runtime.Trace.to_dict's form, version 1 (runtime.TRACE_VERSION when this was written)."""
    trace: dict[str, Any] = {
        "version": 1,
        "run_id": run_id,
        "pack": "",
        "steps": [],
        "attempts": [],
        "tool_calls": [],
        "status": status,
        "error": error or None,
    }
    for s in steps:
        node, step = s.get("node"), s.get("step")
        edge = s.get("edge")
        trace["steps"].append(
            {
                "node": node,
                "step": step,
                "kind": s.get("kind"),
                "status": s.get("status"),
                "writes": s.get("writes") or {},
                "attempt": s.get("attempt") or 0,
                "reason": s.get("reason") or "",
                "edge": {"index": None, "kind": edge["kind"], "target": edge["target"]} if edge else None,
                "prompt": s.get("prompt") or "",
                "replayed": False,
            }
        )
        for a in s.get("attempts") or []:
            trace["attempts"].append({"node": node, "step": step, **{k: a.get(k) for k in _ATTEMPT_KEYS}})
        for c in s.get("tool_calls") or []:
            trace["tool_calls"].append({"node": node, "step": step, **c, "replayed": False})
    return trace


def forwards(apps: Any, schema_editor: Any) -> None:
    TryRun = apps.get_model("runs", "TryRun")
    for run in TryRun.objects.exclude(steps=[]).iterator(chunk_size=500):
        run.trace = trace_of(run.steps or [], f"try-{run.pk}", run.status, run.error)
        run.save(update_fields=["trace"])


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0002_model_spec"),
    ]

    operations = [
        migrations.AddField(model_name="tryrun", name="trace", field=models.JSONField(default=dict)),
        migrations.RunPython(forwards, migrations.RunPython.noop),
        migrations.RemoveField(model_name="tryrun", name="steps"),
    ]
