"""The tiers page's calibration: per gated node, how the auto tier's share and accuracy
move with the confidence threshold, computed by the runtime (`runtime.calibrate`,
docs/eval-report.md "calibration") over the eval's scored runs.

Only the trace steps that recorded a confidence are read, picked out by the database's
JSON functions (as nodes.py reads attempts), so a page never loads whole traces; the
expected values and each gate's current `min` come from the pack at the eval's version."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from django.db import connection

from runtime import Calibration, Pack, Step, Trace, calibrate, gate_minimums
from studio.evals.models import Eval, EvalCase
from studio.evals.results.common import SCORED, once_per_rows, scored

__all__ = ["calibration"]

_SQL_CONFIDENCE = {
    "sqlite": """
        SELECT c.id, c.case_id, json_extract(s.value, '$.node'), json_extract(s.value, '$.confidence')
        FROM {table} AS c, json_each(c.trace, '$.steps') AS s
        WHERE c.eval_id = %s AND c.status IN (%s, %s, %s) AND json_type(s.value, '$.confidence') = 'object'
        ORDER BY c.id, s.key""",
    "postgresql": """
        SELECT c.id, c.case_id, s.value->>'node', (s.value->'confidence')::text
        FROM {table} AS c
        CROSS JOIN LATERAL jsonb_array_elements(c.trace->'steps') WITH ORDINALITY AS s(value, ord)
        WHERE c.eval_id = %s AND c.status IN (%s, %s, %s) AND jsonb_typeof(c.trace->'steps') = 'array'
          AND jsonb_typeof(s.value->'confidence') = 'object'
        ORDER BY c.id, s.ord""",
}


def _confidence_steps(ev: Eval) -> Iterable[tuple[int, str, str, dict[str, Any]]]:
    """(row id, case id, node, confidence) for every step that recorded a confidence, in
    walk order within each run; read once per state of the eval's rows (it reads every trace)."""
    found: list[tuple[int, str, str, dict[str, Any]]] = once_per_rows("confidence-steps:v1", ev, _read_confidence_steps)
    return found


def _read_confidence_steps(ev: Eval) -> list[tuple[int, str, str, dict[str, Any]]]:
    sql = _SQL_CONFIDENCE.get(connection.vendor)
    if sql is not None:
        with connection.cursor() as cur:
            cur.execute(sql.format(table=connection.ops.quote_name(EvalCase._meta.db_table)), [ev.pk, *SCORED])
            rows = cur.fetchall()
        return [(pk, case_id, str(node), json.loads(conf)) for pk, case_id, node, conf in rows]
    out = []
    for pk, case_id, trace in scored(ev).exclude(trace=None).order_by("id").values_list("id", "case_id", "trace"):
        for step in (trace or {}).get("steps") or []:
            if isinstance(step.get("confidence"), dict):
                out.append((pk, case_id, str(step.get("node")), step["confidence"]))
    return out


def calibration(ev: Eval, pack: Pack) -> dict[str, Calibration]:
    """Per gated node of `pack` (the pack at the eval's version), its calibration over the
    eval's scored runs; {} when no run recorded a confidence."""
    traces: dict[int, Trace] = {}
    for pk, case_id, node, conf in _confidence_steps(ev):
        trace = traces.setdefault(pk, Trace(run_id=str(pk), pack=pack.name, case_id=case_id))
        trace.steps.append(Step(node=node, step=len(trace.steps), kind="generate", status="ok", confidence=conf))
    if not traces:
        return {}
    expected = {case.id: case.expected for case in pack.cases}
    runs = [(t, expected.get(t.case_id or "", {})) for t in traces.values()]
    return calibrate(runs, gate_minimums(pack), pack.fields)
