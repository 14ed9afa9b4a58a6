"""The evalset runner: run every gold case, score it, blame a node for each failure.

The report (runtime.eval_report, docs/eval-report.md), a case's result
(runtime.case_result), its scoring (runtime.case_scoring) and the baseline gate
(runtime.baseline_gate) live beside it; their names stay importable from here."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor

from runtime.backends.base import Backend
from runtime.baseline_gate import DEFAULT_TOLERANCES as DEFAULT_TOLERANCES
from runtime.baseline_gate import METRIC_DIRECTIONS as METRIC_DIRECTIONS
from runtime.baseline_gate import baseline_document as baseline_document
from runtime.baseline_gate import check_baseline as check_baseline
from runtime.calibration import gate_minimums
from runtime.case_result import DIVERGED as DIVERGED
from runtime.case_result import PATH_PROBLEM_KINDS as PATH_PROBLEM_KINDS
from runtime.case_result import PROBLEM_KINDS as PROBLEM_KINDS
from runtime.case_result import SCHEMA_CATEGORIES as SCHEMA_CATEGORIES
from runtime.case_result import CaseProblem as CaseProblem
from runtime.case_result import CaseResult as CaseResult
from runtime.case_result import FieldDiff as FieldDiff
from runtime.case_result import case_trace as case_trace
from runtime.case_scoring import gold_tools as gold_tools
from runtime.case_scoring import mark_diverged as mark_diverged
from runtime.case_scoring import score_case as score_case
from runtime.checkpoint import CheckpointStore, MemoryStore
from runtime.eval_report import EvalReport as EvalReport
from runtime.eval_report import tool_metrics as tool_metrics
from runtime.pack.model import Case, Pack
from runtime.recordings import ToolTape
from runtime.tiers import Tier
from runtime.tools import Tool
from runtime.walker import RunOptions, run_pack


def select_cases(
    pack: Pack, tags: set[str] | None = None, *, exclude_tags: set[str] | None = None, untagged: bool = False
) -> list[Case]:
    """The evalset cases an eval runs: every case; or, given `tags` and/or `untagged`,
    those with any of `tags` and those with no tag at all; less every case with any of
    `exclude_tags` (so held-out cases, tagged or not, can be run alone)."""
    wanted = set(tags or ())
    chosen = [
        c for c in pack.cases if (not wanted and not untagged) or wanted & set(c.tags) or (untagged and not c.tags)
    ]
    return [c for c in chosen if not (exclude_tags and exclude_tags & set(c.tags))]


def evaluate(
    pack: Pack,
    backend: Backend,
    *,
    tools: Mapping[str, Tool] | None = None,
    concurrency: int = 4,
    tags: set[str] | None = None,
    exclude_tags: set[str] | None = None,
    untagged: bool = False,
    store: CheckpointStore | None = None,
    model: str | None = None,
    run_prefix: str = "eval",
    on_case: Callable[[CaseResult], None] | None = None,
    repeats: int = 1,
    tiers: Sequence[Tier] | None = None,
    tape: ToolTape | None = None,
) -> EvalReport:
    """Run every case (those `select_cases` picks with `tags`, `exclude_tags` and
    `untagged`) `repeats` times with bounded
    concurrency. Run ids are `<run_prefix>-<case>`, or `<run_prefix>-<case>-r<k>` (k from
    1) when `repeats` > 1. `on_case` is called once per finished run, one call at a time.
    `tiers`: model tiers for every run (docs/tiers.md; `backend` should be tier 0's);
    the report's `tiers_by_model` splits cases and spend by tier. `tape`: a tool
    recording (runtime.recordings) that every run records its tool calls into (mode
    "record") or takes their results from, calling no tool (mode "replay"); a run whose
    calls diverge from it is reported `diverged`, never passed or blamed."""
    if repeats < 1:
        raise ValueError("repeats must be at least 1")
    store = store if store is not None else MemoryStore()
    picked = select_cases(pack, tags, exclude_tags=exclude_tags, untagged=untagged)
    runs = [(case, k) for case in picked for k in range(1, repeats + 1)]
    report = EvalReport(
        pack.name,
        pack.version,
        model or backend.spec,
        pack.edges,
        repeats=repeats,
        rules=pack.fields,
        train_tag=pack.train_tag,
        ladder=[t.name for t in tiers or []],
        tape=tape.mode if tape is not None else None,
    )
    report.expected = {c.id: dict(c.expected) for c in picked}
    report.gates = gate_minimums(pack)
    lock = threading.Lock()

    def one(planned: tuple[Case, int]) -> CaseResult:
        case, k = planned
        hook = tape.for_run() if tape is not None else None
        result = run_pack(
            pack,
            case.input,
            backend=backend,
            tools=tools,
            store=store,
            run_id=f"{run_prefix}-{case.id}" + (f"-r{k}" if repeats > 1 else ""),
            case_id=case.id,
            answers=case.human,
            options=RunOptions(tape=hook),
            tiers=tiers,
        )
        scored = score_case(pack, case, result)
        scored.repeat = k
        if hook is not None and hook.diverged:
            mark_diverged(scored, hook.divergences)
        if on_case is not None:
            with lock:
                on_case(scored)
        return scored

    with ThreadPoolExecutor(max_workers=max(1, concurrency)) as pool:
        report.cases = list(pool.map(one, runs))
    return report
