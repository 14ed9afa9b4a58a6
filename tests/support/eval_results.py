"""Eval result rows built in plain sight, for the result page tests and the result pages
benchmark: an eval, one run, a real report from the runtime, a sample eval with a
rejected generation."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.utils import timezone

from runtime import (
    Attempt,
    EdgeTaken,
    EvalReport,
    Pack,
    Step,
    ToolCall,
    Trace,
    evaluate,
    load_pack,
    load_tools,
    open_backend,
)
from studio.evals.models import Eval, EvalCase
from studio.evals.results.cases import output_of
from studio.projects.models import Project

REJECTED = "REJECTED-ANSWER-<b>only-authors</b>"


def make_eval(
    project: Project,
    user: User,
    *,
    version: str | None = None,
    status: str = "done",
    model: str = "fake:fakes/scripted.json",
    repeats: int = 1,
    ago_s: float = 0,
    total: int = 0,
    tags: list[str] | None = None,
) -> Eval:
    return Eval.objects.create(
        project=project,
        version=version or project.head,
        model_spec=model,
        repeats=repeats,
        status=status,
        total=total,
        tags=tags or [],
        created_by=user,
        created_at=timezone.now() - timedelta(seconds=ago_s),
    )


def add_run(
    ev: Eval,
    case_id: str,
    *,
    repeat: int = 0,
    status: str = "passed",
    tier: str = "auto",
    blamed: str = "",
    edges: list[int] | None = None,
    problems: list[str] | None = None,
    rejections: dict[str, int] | None = None,
    generations: int = 4,
    model_calls: int | None = None,
    cost: float = 0.0,
    latency: float = 0.0,
    tokens: tuple[int, int, int] = (0, 0, 0),
    trace: dict[str, Any] | None = None,
    diffs: list[dict[str, Any]] | None = None,
) -> EvalCase:
    return EvalCase.objects.create(
        eval=ev,
        case_id=case_id,
        repeat=repeat,
        status=status,
        tier=tier,
        blamed=blamed,
        edges=edges or [],
        problems=problems or [],
        rejections=rejections or {},
        generations=generations,
        model_calls=generations if model_calls is None else model_calls,
        cost_usd=cost,
        latency_s=latency,
        prompt_tokens=tokens[0],
        completion_tokens=tokens[1],
        reasoning_tokens=tokens[2],
        trace=trace,
        diffs=diffs or [],
        run_status="done" if status != "queued" else "",
        finished_at=timezone.now(),
    )


def rejected_trace(case_id: str = "bad-1") -> dict[str, Any]:
    """classify is rejected once (schema) then accepted; extract calls a tool; the run fails."""
    trace = Trace(run_id=f"r-{case_id}", pack="support_triage", case_id=case_id, status="done", end_node="general")
    trace.attempts = [
        Attempt(
            "classify",
            1,
            1,
            "sample",
            False,
            "schema",
            'category must be one of: "billing"',
            text=REJECTED,
            prompt_tokens=100,
            completion_tokens=10,
            latency_s=0.5,
            cost_usd=0.001,
            request_id="req-1",
        ),
        Attempt(
            "classify",
            1,
            2,
            "resample",
            True,
            text='{"category": "other"}',
            prompt_tokens=100,
            completion_tokens=8,
            latency_s=0.25,
            cost_usd=0.001,
        ),
        Attempt(
            "extract",
            2,
            1,
            "sample",
            True,
            text='{"order_id": null, "amount_usd": null}',
            prompt_tokens=50,
            completion_tokens=5,
            latency_s=0.125,
            cost_usd=0.0005,
        ),
    ]
    trace.steps = [
        Step(
            "classify",
            1,
            "generate",
            "ok",
            {"category": "other"},
            attempt=2,
            edge=EdgeTaken(0, "next", "extract"),
            prompt="Classify <this> ticket",
        ),
        Step(
            "extract",
            2,
            "generate",
            "ok",
            {"order_id": None, "amount_usd": None},
            attempt=1,
            edge=EdgeTaken(7, "next", "general"),
            prompt="Extract from the ticket",
        ),
        Step("general", 3, "end", "end"),
    ]
    trace.tool_calls = [
        ToolCall("extract", 2, "lookup_order", {"order_id": "ORD-1"}, {"found": False}, latency_s=0.0625)
    ]
    return trace.to_dict()


def example_pack(name: str = "support_triage") -> Pack:
    return load_pack(Path(settings.EXAMPLE_PACKS) / name)


def run_example(name: str = "support_triage") -> tuple[Pack, EvalReport]:
    """The example pack against its own scripted model: real traces, from the runtime."""
    pack = example_pack(name)
    tools_file = pack.root / "tools.py"
    tools = load_tools(f"{tools_file}:registry") if tools_file.exists() else None
    return pack, evaluate(pack, open_backend(pack.model or "", base_dir=pack.root), tools=tools, concurrency=1)


def store_report(ev: Eval, report: EvalReport, repeat: int = 0) -> None:
    EvalCase.objects.bulk_create(
        [
            EvalCase(
                eval=ev,
                case_id=c.case_id,
                repeat=repeat,
                status="passed" if c.passed else "failed",
                tier=c.tier,
                blamed=c.blamed or "",
                run_status=c.status,
                path=c.path,
                edges=c.edges,
                problems=[p.to_dict() for p in c.problems],
                diffs=[
                    {"field": d.field, "expected": d.expected, "actual": d.actual, "missing": d.missing}
                    for d in c.diffs
                ],
                rejections=c.rejections,
                generations=int(c.totals["generations"]),
                model_calls=int(c.totals["model_calls"]),
                prompt_tokens=int(c.totals["prompt_tokens"]),
                completion_tokens=int(c.totals["completion_tokens"]),
                reasoning_tokens=int(c.totals["reasoning_tokens"]),
                latency_s=c.totals["latency_s"],
                cost_usd=c.totals["cost_usd"],
                trace=c.trace.to_dict(),
                finished_at=timezone.now(),
            )
            for c in report.cases
        ]
    )
    Eval.objects.filter(pk=ev.pk).update(total=ev.cases.count())
    ev.refresh_from_db()


def sample_eval(project: Project, owner: User, **kwargs: Any) -> Eval:
    """The example pack's real eval (15 runs, traces from the runtime) plus one failed run
    with a rejected generation, for the pages."""
    ev = make_eval(project, owner, **kwargs)
    store_report(ev, run_example("support_triage")[1])
    add_run(
        ev,
        "bad-1",
        status="failed",
        blamed="classify",
        edges=[0, 7],
        tier="auto",
        problems=["expected to stop at 'billing_ops', stopped at 'general'"],
        rejections={"schema": 1},
        generations=3,
        cost=0.0025,
        latency=0.875,
        tokens=(250, 23, 0),
        trace=rejected_trace("bad-1"),
        diffs=[{"field": "category", "expected": "billing", "actual": "other", "missing": False}],
    )
    Eval.objects.filter(pk=ev.pk).update(total=ev.cases.count())
    ev.refresh_from_db()
    return ev


def fill_eval(ev: Eval, runs: int, traces: bool) -> None:
    """`runs` finished case rows cycled from the example pack's real report (one in seven
    failed and blamed on classify), with their traces or without."""
    pack, report = run_example("support_triage")
    cases = report.cases
    outputs = [output_of(c.trace.to_dict(), pack) for c in cases]  # stored at scoring, as the worker does
    rows = []
    for i in range(runs):
        c = cases[i % len(cases)]
        failed = i % 7 == 0
        rows.append(
            EvalCase(
                eval=ev,
                case_id=f"case-{i:05d}",
                status="failed" if failed else "passed",
                tier=c.tier,
                blamed="classify" if failed else "",
                edges=c.edges,
                problems=[p.to_dict() for p in c.problems],
                rejections=c.rejections,
                generations=int(c.totals["generations"]),
                model_calls=int(c.totals["model_calls"]),
                prompt_tokens=int(c.totals["prompt_tokens"]),
                completion_tokens=int(c.totals["completion_tokens"]),
                cost_usd=c.totals["cost_usd"] * (1 + i % 13 / 10),
                latency_s=0.2 + (i % 17) / 10,
                trace=c.trace.to_dict() if traces else None,
                output=outputs[i % len(cases)],
                finished_at=timezone.now(),
            )
        )
    EvalCase.objects.bulk_create(rows, batch_size=1000)
    Eval.objects.filter(pk=ev.pk).update(total=runs)
