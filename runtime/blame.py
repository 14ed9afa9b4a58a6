"""Blame: the node most responsible for a failed eval case, following provenance
through deterministic nodes (docs/eval-report.md, Blame)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from runtime.nodes import kind_names
from runtime.pack.fields import matches, rule_for

if TYPE_CHECKING:
    from runtime.pack.model import Case, Pack
    from runtime.trace import Step, Trace


def blame(
    case: Case, trace: Trace, wrong_fields: list[str], missed: str | None, *, pack: Pack | None = None
) -> str | None:
    """The node most responsible for a failed case (`wrong_fields`: its fields that differ
    from the expected values).

    In order: the node that failed the run; the earliest commit among the wrong
    fields' origins (where state first diverged); the node whose on_fail or
    on_unsure edge was taken (where the run left the happy path); the node before
    a missed path node or a wrong end; the last node walked.

    A wrong field's origin is its last writer, unless that writer is deterministic
    (its kind neither asks a model nor waits for a person: a tool, a transform) and
    `pack` is given: then blame follows provenance to the fields the writer read
    (`_origin`)."""
    steps = trace.steps
    if not steps:
        return None
    if trace.status in ("failed", "cancelled"):
        failed = [s for s in steps if s.status == "fail"]
        return (failed[-1] if failed else steps[-1]).node
    commits = trace.commits()
    wrong = [_origin(pack, case, commits, j) for f in wrong_fields if (j := _last_commit(commits, f)) is not None]
    if wrong:
        return commits[min(wrong)].node
    for step in steps:
        if step.edge is not None and step.edge.kind in ("on_fail", "on_unsure"):
            return step.node
    if missed is not None and case.path:
        idx = case.path.index(missed)
        if idx > 0 and case.path[idx - 1] in trace.path:
            return case.path[idx - 1]
        return steps[0].node
    return steps[-2].node if len(steps) > 1 else steps[-1].node


def _last_commit(commits: list[Step], name: str, before: int | None = None) -> int | None:
    """The index in `commits` of the last commit (before index `before`) that wrote `name`."""
    stop = len(commits) if before is None else before
    for j in range(stop - 1, -1, -1):
        if name in commits[j].writes:
            return j
    return None


def _origin(pack: Pack | None, case: Case, commits: list[Step], j: int) -> int:
    """The commit to blame for the values commit `j` wrote (an index into `commits`).

    A model node's (or a person's) commit is its own origin. A deterministic node's
    value came from the fields it read (its reads, tool args included), as committed
    before it ran. If the case's expected values name some of those fields and every
    named one was right when it read them, the node computed a wrong value from right
    inputs: it is the origin. If some named one was wrong, the origin is the earliest
    origin among the wrong ones. If expected names none of them, the origin is the
    earliest model node among their origins; with none (it read only the input, or
    only other deterministic results), the node itself."""
    step = commits[j]
    node = pack.nodes.get(step.node) if pack is not None else None
    if node is None or step.kind not in _deterministic_kinds():
        return j
    refs = (*node.reads, *node.args.values())
    fed: dict[str, int] = {}  # field read -> the commit it was read from
    for ref in refs:
        name = ref.split(".", 1)[0]
        if name == "input" or name in fed:
            continue
        k = _last_commit(commits, name, before=j)
        if k is not None:
            fed[name] = k
    named = {name: k for name, k in fed.items() if name in case.expected}
    rules = pack.fields if pack is not None else {}
    wrong = [
        k
        for name, k in named.items()
        if not matches(rule_for(rules, name), case.expected[name], commits[k].writes[name])
    ]
    if named and not wrong:
        return j
    if wrong:
        return min(_origin(pack, case, commits, k) for k in wrong)
    upstream = [o for o in (_origin(pack, case, commits, k) for k in fed.values()) if _asks_model(commits[o].kind)]
    return min(upstream) if upstream else j


def _deterministic_kinds() -> tuple[str, ...]:
    """Kinds whose writes are computed from what they read (no model, no person)."""
    return kind_names(asks_model=False, waits=False)


def _asks_model(kind: str) -> bool:
    return kind in kind_names(asks_model=True)
