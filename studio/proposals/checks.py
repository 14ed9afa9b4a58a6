"""A proposal's checks (docs/proposals.md): an eval of its base and one of its head on the
same model(s), through the eval machinery, and what they say side by side: per-case
fixed, broken and same on the cases both sides ran (studio.evals.results.compare with
`common_only`), the cases only one side has apart, the gate of head against base, and
the evalset's own changes (cases added, removed, changed)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from django.contrib.auth.models import User

from studio.evals.models import Eval
from studio.evals.results.common import ratio
from studio.evals.results.compare import compare
from studio.evals.results.gate import gate
from studio.evals.results.summary import summarize
from studio.evals.start import EvalRefused, start_eval
from studio.projects.evalset import parse_rows
from studio.projects.storage import PackRepo, StorageError

if TYPE_CHECKING:
    from studio.proposals.models import Proposal

EVALSET = "pack/evalset.jsonl"
FINISHED = (Eval.Status.DONE, Eval.Status.CANCELLED)


def _ladder(proposal: Proposal) -> dict[str, Any]:
    deployment = proposal.deployment
    if deployment is not None and deployment.tiers:
        return {"tiers": list(deployment.tiers)}
    return {"endpoints": (None,)}


def start(proposal: Proposal, user: User) -> None:
    """Start the head's eval, and the base's unless one of this base on these models is
    already there. A refusal (no evalset, a pack that does not load) is kept on the row
    for the page to show; the proposal itself stands."""
    kwargs = _ladder(proposal)
    tiers = kwargs.get("tiers", [])
    try:
        base_eval = proposal.base_eval
        if base_eval is None or base_eval.version != proposal.base or base_eval.tiers != tiers:
            (base_eval,) = start_eval(proposal.project, user=user, version=proposal.base, **kwargs)
        (head_eval,) = start_eval(proposal.project, user=user, version=proposal.head, **kwargs)
    except EvalRefused as exc:
        proposal.checks_error = str(exc)
        proposal.save(update_fields=["checks_error"])
        return
    proposal.base_eval, proposal.head_eval, proposal.checks_error = base_eval, head_eval, ""
    proposal.save(update_fields=["base_eval", "head_eval", "checks_error"])


@dataclass
class EvalsetChange:
    added: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)  # same id, another input, expected or tags

    @property
    def any(self) -> bool:
        return bool(self.added or self.removed or self.changed)


def _cases(repo: PackRepo, version: str) -> dict[str, Any]:
    """The evalset's cases at `version` by id (lines that are not a case with an id left out)."""
    try:
        data = repo.files(version, prefix="pack/").get("evalset.jsonl", b"")
    except StorageError:
        return {}
    rows = parse_rows(data.decode("utf-8", errors="replace"))
    return {row.id: row.case for row in rows if row.case is not None and isinstance(row.case.get("id"), str)}


def evalset_change(repo: PackRepo, base: str, head: str) -> EvalsetChange:
    old, new = _cases(repo, base), _cases(repo, head)
    return EvalsetChange(
        added=sorted(new.keys() - old.keys()),
        removed=sorted(old.keys() - new.keys()),
        changed=sorted(k for k in old.keys() & new.keys() if old[k] != new[k]),
    )


@dataclass
class Checks:
    state: str  # not started | running | done | cancelled (one side was: no gate) | error
    error: str
    base_eval: Eval | None
    head_eval: Eval | None
    delta: dict[str, Any] | None  # compare(base, head, common_only=True), once both are done
    gate: list[dict[str, Any]] | None  # one row per metric, head against base
    evalset: EvalsetChange

    @property
    def gate_passes(self) -> bool | None:
        return None if self.gate is None else all(row["ok"] for row in self.gate)


def checks_of(proposal: Proposal) -> Checks:
    repo = PackRepo(proposal.project.repo_path)
    change = evalset_change(repo, proposal.base, proposal.head)
    a, b = proposal.base_eval, proposal.head_eval
    if proposal.checks_error:
        return Checks("error", proposal.checks_error, a, b, None, None, change)
    if a is None or b is None or b.version != proposal.head:
        return Checks("not started", "", a, b, None, None, change)
    if a.status not in FINISHED or b.status not in FINISHED:
        return Checks("running", "", a, b, None, None, change)
    delta = compare(a, b, common_only=True)
    delta["metrics"] += latency_and_tiers(a, b)
    if Eval.Status.CANCELLED in (a.status, b.status):  # what ran is shown; no gate on part of it
        return Checks("cancelled", "", a, b, delta, None, change)
    return Checks("done", "", a, b, delta, gate(b, a), change)


def _row(name: str, x: float, y: float, lower_is_better: bool | None) -> dict[str, Any]:
    d = y - x
    better = None if lower_is_better is None or abs(d) < 1e-12 else (d < 0) == lower_is_better
    return {"metric": name, "a": x, "b": y, "delta": d, "relative": ratio(d, x), "better": better}


def latency_and_tiers(a: Eval, b: Eval) -> list[dict[str, Any]]:
    """Beside compare()'s metrics: latency per case (p50, p95; lower is better) and each
    tier's share of the cases (no direction: a shift between tiers is read, not scored)."""
    sa, sb = summarize(a), summarize(b)
    rows = [
        _row("latency_p50_s", sa["latency"]["p50"], sb["latency"]["p50"], True),
        _row("latency_p95_s", sa["latency"]["p95"], sb["latency"]["p95"], True),
    ]
    share_a = {t["tier"]: t["share"] or 0.0 for t in sa["tiers"]["rows"]}
    share_b = {t["tier"]: t["share"] or 0.0 for t in sb["tiers"]["rows"]}
    for tier in dict.fromkeys([*share_a, *share_b]):
        x, y = share_a.get(tier, 0.0), share_b.get(tier, 0.0)
        if x or y:
            rows.append(_row(f"tier share: {tier}", x, y, None))
    return rows


def gate_verdict(proposal: Proposal) -> bool | str:
    """True when the head's checks pass the gate against the base; else why not."""
    found = checks_of(proposal)
    if found.state != "done":
        return f"its checks are {found.state}" + (f" ({found.error})" if found.error else "")
    if found.evalset.removed or found.evalset.changed:
        # the gate compares the two evals' metrics; with gold cases taken out or rewritten
        # they no longer measure the same thing, so the gate cannot vouch for the change
        return "it removes or changes gold cases, which the gate cannot judge; turn the gate off for it, or split it"
    if not found.gate_passes:
        failed = [row["metric"] for row in found.gate or [] if not row["ok"]]
        return f"its head fails the gate against its base on {', '.join(failed)}"
    return True
