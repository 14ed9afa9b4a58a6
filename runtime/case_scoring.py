"""Case scoring: a finished run against its gold case (expected fields, end node, path),
the node blamed for a failure, the case's gold tool calls."""

from __future__ import annotations

from collections import Counter

from runtime.blame import blame
from runtime.case_result import DIVERGED, CaseProblem, CaseResult, FieldDiff
from runtime.pack.fields import rule_for, scorer_result, values_match
from runtime.pack.model import Case, Pack
from runtime.scorers import ScorerFailed
from runtime.scoring import case_score
from runtime.walker import RunResult


def mark_diverged(scored: CaseResult, reasons: list[str]) -> None:
    """A run whose tool calls left the replayed recording: not a pass, not a failure
    of the pack or its model (its outcome would have needed a live tool call)."""
    scored.diverged = list(reasons)
    scored.passed = False
    scored.status = DIVERGED
    scored.blamed = None


def score_case(pack: Pack, case: Case, result: RunResult) -> CaseResult:
    trace = result.trace
    diffs = []
    problems = []
    unscored: set[str] = set()  # fields whose scorer failed: no match, and no diff to show
    for name, want in case.expected.items():
        rule = rule_for(pack.fields, name)
        if name not in result.state:
            diffs.append(FieldDiff(name, want, None, missing=True))
        elif rule.compare == "scorer":
            try:
                got = scorer_result(rule, want, result.state[name])
            except ScorerFailed as exc:  # the host's scorer: this case's error, not the eval's
                problems.append(CaseProblem("scorer", str(exc)))
                unscored.add(name)
                continue
            if got.score < rule.pass_at:
                diffs.append(FieldDiff(name, want, result.state[name], score=got.score, reason=got.reason))
        elif not values_match(rule, want, result.state[name]):
            diffs.append(FieldDiff(name, want, result.state[name]))
    stopped_at = trace.end_node or result.waiting_at
    if case.end is not None and stopped_at != case.end:
        problems.append(
            CaseProblem("end", f"expected to stop at '{case.end}', stopped at '{stopped_at or result.status}'")
        )
    elif case.end is None and result.status != "done":
        problems.append(CaseProblem("status", f"run {result.status}" + (f": {trace.error}" if trace.error else "")))
    missed = _missed_path(case.path, trace.path)
    if missed is not None:
        problems.append(CaseProblem("path", f"path did not visit '{missed}' (took {' > '.join(trace.path)})"))
    passed = not diffs and not problems
    # What was committed before an escalated, failed or waiting run stopped; the diffs
    # above already compare against it (result.state is committed state only).
    committed = dict(result.state) if trace.tier != "auto" or result.status != "done" else {}
    rejections = Counter(a.category for a in trace.attempts if not a.ok and a.category and a.stage != "lookahead")
    return CaseResult(
        case_id=case.id,
        passed=passed,
        status=result.status,
        tier=trace.tier,
        output=result.output,
        diffs=diffs,
        problems=problems,
        blamed=None if passed else blame(case, trace, [d.field for d in diffs], missed, pack=pack),
        path=trace.path,
        edges=[s.edge.index for s in trace.steps if s.edge is not None],
        totals=trace.totals(),
        rejections=dict(rejections),
        trace=trace,
        tags=case.tags,
        committed=committed,
        score=case_score(
            {name: name not in unscored and not any(d.field == name for d in diffs) for name in case.expected}, passed
        ),
        expected=dict(case.expected),
        settled_by=trace.settled_by,
        gold_tools=gold_tools(pack, case),
    )


def gold_tools(pack: Pack, case: Case) -> tuple[str, ...] | None:
    """The tool calls `case`'s gold path makes: its `tools`, else the tools of the `tool`
    nodes on its `path`; None when it names neither."""
    if case.tools is not None:
        return case.tools
    if case.path is None:
        return None
    return tuple(t for t in (getattr(pack.nodes.get(n), "tool", None) for n in case.path) if t)


def _missed_path(expected: tuple[str, ...] | None, actual: list[str]) -> str | None:
    """The first node of `expected` that `actual` does not visit in order, if any."""
    if not expected:
        return None
    it = iter(actual)
    for node in expected:
        if not any(step == node for step in it):
            return node
    return None
