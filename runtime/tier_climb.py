"""Running one node of a walk: on the model tiers when the run has them (the climb,
docs/tiers.md, and its resume after an escalation journaled before a kill), or
answered by a person past the last tier."""

from __future__ import annotations

import logging
from typing import Any

from runtime.errors import OutputRejected
from runtime.journal import EscalatePayload
from runtime.nodes import NODE_KINDS
from runtime.nodes.base import Outcome
from runtime.pack.model import Node
from runtime.tiers import PERSON, candidates, person_writes
from runtime.trace_items import Candidate, StepExtras
from runtime.walk import Walk, unjournaled

log = logging.getLogger("packforge.run")


def run_node(walk: Walk, node: Node) -> tuple[Outcome, StepExtras]:
    """Run `node` (on the tiers, when the run has them and the node asks a model);
    the outcome and the Step fields it adds (tier, escalations, candidates, provenance)."""
    kind = NODE_KINDS[node.kind]
    waited = walk.waiting if walk.waiting is not None and walk.waiting.node == node.id else None
    walk.waiting = None
    if waited is not None and waited.reason == "escalated":
        # Resumed at a node that waits for a person after the last model tier.
        extra: StepExtras = {
            "escalations": waited.escalations or [],
            "candidates": waited.candidates or [],
            "tier": waited.tier,
        }
        if node.id not in walk.answers:
            return Outcome("wait", reason="escalated", prompt=waited.question), extra
        return _person(walk, node, waited.question), {**extra, "tier": PERSON, **_provenance(walk)}
    if walk.tiers and kind.asks_model:
        return _climb(walk, node)
    outcome = kind.run(node, walk)
    return outcome, (_provenance(walk) if kind.waits and outcome.status == "ok" else {})


def _provenance(walk: Walk) -> StepExtras:
    return {"provenance": walk.answered_by or "human"}


def _person(walk: Walk, node: Node, prompt: str) -> Outcome:
    """Commit a person's answer at a model node (checked as a model's answer is)."""
    answer = walk.answers.pop(node.id)
    try:
        writes = person_writes(walk.pack, node.id, walk.view(), answer)
    except OutputRejected as exc:
        return Outcome("fail", reason=f"human answer rejected: {exc.reason}", prompt=prompt)
    return Outcome("ok", writes=writes, prompt=prompt)


def _climb(walk: Walk, node: Node) -> tuple[Outcome, StepExtras]:
    """Run a model node on tier 0, then on each next tier while it fails or is unsure
    (docs/tiers.md). Each climb is journaled before the next tier is asked, so a run
    killed meanwhile resumes on the tier it had reached."""
    kind = NODE_KINDS[node.kind]
    start = 0
    escalations: list[dict[str, Any]] = []
    found: list[Candidate] = []
    pending = walk.pending
    walk.pending = None
    if pending is not None and pending.node == node.id and pending.step == walk.step:
        # A resumed run given fewer tiers than it climbed stays on the last one it has.
        start = min(pending.tier_index, len(walk.tiers) - 1)
        escalations, found = list(pending.escalations), list(pending.candidates)
    k = start
    try:
        while True:
            walk.tier_index = k
            tier = walk.tiers[k].name
            before = len(walk.trace.attempts)
            outcome = kind.run(node, walk)
            new = walk.trace.attempts[before:]
            found += candidates(new, node.id, tier, outcome.status, outcome.reason, outcome.writes)
            extra: StepExtras = {"tier": tier, "escalations": escalations, "candidates": found}
            asked = any(a.node == node.id for a in new)  # a node that asked no model gains nothing higher up
            if outcome.status not in ("fail", "unsure") or not asked:
                return outcome, extra
            last = k + 1 == len(walk.tiers)
            if last and outcome.status == "fail" and walk.pack.edge_out(node.id, "on_fail") is not None:
                return outcome, extra
            to = PERSON if last else walk.tiers[k + 1].name
            escalation = {"from": tier, "to": to, "reason": f"{outcome.status}: {outcome.reason}", "node": node.id}
            escalations.append(escalation)
            log.info("node.escalated", extra={"fields": escalation})
            if last:
                if walk.options.on_escalate is not None:
                    walk.options.on_escalate(escalation)
                if node.id in walk.answers:  # a gold case's answer for the person (evals)
                    return _person(walk, node, outcome.prompt), {**extra, "tier": PERSON, **_provenance(walk)}
                return Outcome("wait", reason="escalated", prompt=outcome.prompt, notes=outcome.notes), extra
            climb = EscalatePayload(
                node=node.id,
                step=walk.step,
                from_tier=tier,
                to_tier=to,
                reason=escalation["reason"],
                tier_index=k + 1,
                escalations=escalations,
                candidates=found,
                attempts=unjournaled(walk),
                budget_left=walk.budget_left,
            )
            walk.store.append(walk.run_id, walk.fence, "escalate", node.id, walk.step, climb.to_payload())
            if walk.options.on_escalate is not None:
                walk.options.on_escalate(escalation)
            k += 1
    finally:
        walk.tier_index = 0
