"""The cost-per-case page (sortable, paged, its table an htmx fragment) and one case's trace."""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any
from urllib.parse import urlencode

from django.http import Http404, HttpResponse
from django.urls import reverse

from runtime import Pack, Trace
from studio import charts
from studio.evals.models import EvalCase
from studio.evals.results.cases import evalset_of, output_of
from studio.evals.results.common import edge_name
from studio.evals.results.cost import cost_summary, cost_table
from studio.evals.views.common import (
    context_for,
    dur,
    open_eval,
    pack_of,
    page,
    usd,
)
from studio.http import StudioRequest
from studio.numbers import whole_number
from studio.redaction import visible_trace
from studio.runs.steps import add_given_json

__all__ = ["COLUMNS", "committed_values", "eval_case", "eval_cost", "trace_steps"]

# -- cost per case ------------------------------------------------------------------------

COLUMNS = [
    ("case", "Case"),
    ("status", "Status"),
    ("cost", "Cost"),
    ("tokens", "Tokens"),
    ("latency", "Latency"),
    ("generations", "Generations"),
]


def eval_cost(request: StudioRequest, slug: str, eval_id: int) -> HttpResponse:
    ev, role = open_eval(request, slug, eval_id)
    table = cost_table(
        ev,
        sort=request.GET.get("sort", "cost"),
        direction=request.GET.get("dir", "desc"),
        page=whole_number(request.GET.get("page"), minimum=1, maximum=1_000_000) or 1,
    )
    base = reverse("evals-cost", args=[ev.project.slug, ev.pk])
    rows = [
        {
            **r,
            "url": reverse("evals-case-trace", args=[ev.project.slug, ev.pk, r["case_id"], r["repeat"]]),
            "cost_text": usd(r["cost_usd"]),
            "latency_text": dur(r["latency_s"]),
        }
        for r in table["rows"]
    ]
    headers = []
    for key, title in COLUMNS:
        flip = "asc" if table["sort"] == key and table["dir"] == "desc" else "desc"
        headers.append(
            {
                "key": key,
                "title": title,
                "url": f"{base}?{urlencode({'sort': key, 'dir': flip})}",
                "active": table["sort"] == key,
                "dir": table["dir"],
            }
        )

    def at(n: int) -> str:
        return f"{base}?{urlencode({'sort': table['sort'], 'dir': table['dir'], 'page': n})}"

    pager = {
        "prev": at(table["page"] - 1) if table["page"] > 1 else None,
        "next": at(table["page"] + 1) if table["page"] < table["pages"] else None,
    }
    context = context_for(ev, role, "cost", table=table, rows=rows, headers=headers, pager=pager)
    if not (request.htmx and request.htmx.target == "cost-table"):
        spend = cost_summary(ev)
        values = spend.pop("values")
        show = {
            "cost_mean": usd(spend["cost"]["mean"]),
            "cost_p50": usd(spend["cost"]["p50"]),
            "cost_p95": usd(spend["cost"]["p95"]),
            "cost_total": usd(spend["cost_total"]),
            "latency_p50": dur(spend["latency"]["p50"]),
            "latency_p95": dur(spend["latency"]["p95"]),
        }
        context.update(
            summary=spend,
            show=show,
            histogram=charts.histogram(
                values,
                label="Cost per case run (USD)",
                fmt=usd,
                marks=[("p50", spend["cost"]["p50"]), ("p95", spend["cost"]["p95"])] if values else [],
            ),
        )
    return page(request, "evals/results_cost.html", context, fragments=("cost-table",))


# -- one case's trace ---------------------------------------------------------------------


def pretty(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, indent=2, sort_keys=True)


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


def trace_steps(trace: dict[str, Any], pack: Pack | None) -> list[dict[str, Any]]:
    """The trace (as studio.redaction.visible_trace shows it), node by node: each step
    with its attempts, tool calls and commits."""
    attempts: dict[tuple[Any, Any], list[dict[str, Any]]] = defaultdict(list)
    for a in trace.get("attempts") or []:
        attempts[(a.get("node"), a.get("step"))].append(dict(a))
    tools: dict[tuple[Any, Any], list[dict[str, Any]]] = defaultdict(list)
    for t in trace.get("tool_calls") or []:
        tools[(t.get("node"), t.get("step"))].append(
            {**t, "args_json": _json(t.get("args")), "result_json": _json(t.get("result"))}
        )
    names = {e.index: edge_name(e) for e in pack.edges} if pack is not None else {}
    out = []
    for s in trace.get("steps") or []:
        key = (s.get("node"), s.get("step"))
        mine = attempts.pop(key, [])
        edge = s.get("edge") or None
        out.append(
            {
                **s,
                "attempts": mine,
                "tool_calls": tools.pop(key, []),
                "writes_list": [(k, _json(v)) for k, v in (s.get("writes") or {}).items()],
                "edge_name": (names.get(edge["index"]) or f"→ {edge.get('target')} ({edge.get('kind')})")
                if edge
                else "",
                "tokens": sum(
                    (a.get("prompt_tokens") or 0) + (a.get("completion_tokens") or 0) + (a.get("reasoning_tokens") or 0)
                    for a in mine
                ),
                "latency_s": sum(a.get("latency_s") or 0 for a in mine)
                + sum(t.get("latency_s") or 0 for t in tools.get(key, [])),
                "cost_usd": sum(a.get("cost_usd") or 0 for a in mine),
            }
        )
    for (node, step), rest in sorted(attempts.items(), key=lambda kv: (kv[0][1] or 0, str(kv[0][0]))):
        # attempts of a step that never committed (the run stopped inside it)
        out.append(
            {
                "node": node,
                "step": step,
                "kind": "",
                "status": "stopped",
                "attempts": rest,
                "tool_calls": tools.pop((node, step), []),
                "writes_list": [],
                "edge_name": "",
                "tokens": sum(
                    (a.get("prompt_tokens") or 0) + (a.get("completion_tokens") or 0) + (a.get("reasoning_tokens") or 0)
                    for a in rest
                ),
                "latency_s": sum(a.get("latency_s") or 0 for a in rest),
                "cost_usd": sum(a.get("cost_usd") or 0 for a in rest),
            }
        )
    out.sort(key=lambda s: s.get("step") or 0)
    return out


def committed_values(trace: dict[str, Any]) -> list[tuple[str, str]]:
    """What a run that stopped early (escalated, failed, waiting) had committed, as
    (field, JSON) rows: its output is empty or partial, its committed values are not.
    Empty for a run that finished in the auto tier, as in the runtime's eval report."""
    if not trace:
        return []
    try:
        run = Trace.from_dict(trace)
    except (TypeError, ValueError):  # a stored trace this runtime cannot read
        return []
    if run.tier == "auto" and run.status == "done":
        return []
    state: dict[str, Any] = {}
    for step in run.commits():
        state.update(step.writes)
    return [(k, _json(v)) for k, v in sorted(state.items())]


def eval_case(request: StudioRequest, slug: str, eval_id: int, case_id: str, repeat: int) -> HttpResponse:
    ev, role = open_eval(request, slug, eval_id)
    case = EvalCase.objects.filter(eval=ev, case_id=case_id, repeat=repeat).first()
    if case is None:
        raise Http404("No such case run in this eval")
    trace = case.trace if isinstance(case.trace, dict) else {}
    steps = trace_steps(visible_trace(trace, role), pack_of(ev))  # pack_of keeps the loaded pack
    hidden = sum(1 for s in steps for a in s["attempts"] if a.get("hidden"))
    for s in steps:
        s.update(latency_text=dur(s["latency_s"]), cost_text=usd(s["cost_usd"]))
        for a in s["attempts"]:
            a.update(latency_text=dur(a.get("latency_s")), cost_text=usd(a.get("cost_usd")))
            add_given_json(a)
        for t in s["tool_calls"]:
            t["latency_text"] = dur(t.get("latency_s"))
    repeats = list(EvalCase.objects.filter(eval=ev, case_id=case_id).order_by("repeat").values_list("repeat", "status"))
    pack = pack_of(ev)
    gold = evalset_of(pack).get(case_id)
    output = output_of(trace, pack)
    # the error once: the row's (the worker's) and the trace's (the run's) are often the same text
    errors = [e for e in dict.fromkeys([case.error.strip(), str(trace.get("error") or "").strip()]) if e]
    # A case held back by admission (studio.work.admission) is queued with a note, not an error.
    waiting_note = case.error.strip() if case.status == EvalCase.Status.QUEUED and case.held_at else ""
    if waiting_note:
        errors = [e for e in errors if e != waiting_note]
    context = context_for(
        ev,
        role,
        "case",
        case=case,
        steps=steps,
        hidden=hidden,
        repeats=repeats,
        trace_status=trace.get("status"),
        waiting_note=waiting_note,
        end_node=trace.get("end_node"),
        errors=errors,
        gold=gold,
        input_text=pretty(gold.input) if gold is not None else "",
        expected_text=pretty(gold.expected) if gold is not None else "",
        output_text=pretty(output) if output is not None else "",
        corrected_text=pretty(output if output else (gold.expected if gold is not None else {})),
        has_trace=bool(trace),
        committed=committed_values(trace),
        diffs=[
            {**d, "expected_json": _json(d.get("expected")), "actual_json": _json(d.get("actual"))}
            for d in case.diffs or []
            if isinstance(d, dict)
        ],
        tokens=case.prompt_tokens + case.completion_tokens + case.reasoning_tokens,
        show={"latency": dur(case.latency_s), "cost": usd(case.cost_usd)},
    )
    return page(request, "evals/results_case.html", context)
