"""Making review items: when a served run goes `waiting`, one ReviewItem for that wait.

The deployments app sends `run_waiting` (studio.deployments.signals) once the run's row
says `waiting`; `open_item` reads what the item needs from the run's trace (the wait
step: node, question, escalations, candidates; the committed state: every `ok` step's
writes) and the pack at the run's version (the node's schema for that state). One item
per wait: (run, step) is unique, so a signal sent twice makes one item."""

from __future__ import annotations

import json
import logging
from collections import Counter
from typing import Any

from django.db import IntegrityError, transaction

from runtime import node_schema
from studio import packs
from studio.deployments.models import ServedRun
from studio.redaction import stored
from studio.review.models import ReviewItem

log = logging.getLogger("packforge.studio.review")

Reason = ReviewItem.Reason


def connect() -> None:
    from studio.deployments.signals import run_waiting

    run_waiting.connect(on_run_waiting, dispatch_uid="review-open-item")


def on_run_waiting(sender: object, run: ServedRun | None = None, **kwargs: Any) -> None:
    """The signal's receiver. A failure here must not fail the run: it is logged, and
    the run stays waiting (`open_item` may be called again for it)."""
    run = run if run is not None else kwargs.get("served_run")
    if run is None:
        return
    try:
        open_item(run)
    except Exception:
        log.exception("review: no item could be made for %s", run)


def wait_step(trace: dict[str, Any], node: str) -> dict[str, Any] | None:
    """The run's last step, when it is a wait at `node`."""
    steps = trace.get("steps") or []
    if steps and steps[-1].get("status") == "wait" and steps[-1].get("node") == node:
        return dict(steps[-1])
    return None


def committed_state(trace: dict[str, Any], given: Any) -> dict[str, Any]:
    """The run's committed state (each `ok` step's writes, in order), its input under "input"."""
    state: dict[str, Any] = {}
    for step in trace.get("steps") or []:
        if step.get("status") == "ok" and isinstance(step.get("writes"), dict):
            state.update(step["writes"])
    state["input"] = given if isinstance(given, dict) else {}
    return state


def reason_of(trace: dict[str, Any], step: dict[str, Any]) -> str:
    """escalated (past the last model tier), unsure (a human node an `on_unsure` edge
    led to), or human."""
    if step.get("reason") == "escalated" or any(e.get("to") == "person" for e in step.get("escalations") or []):
        return Reason.ESCALATED
    before = _step_before(trace, step)
    edge = (before or {}).get("edge") or {}
    if edge.get("kind") == "on_unsure" and edge.get("target") == step.get("node"):
        return Reason.UNSURE
    return Reason.HUMAN


def _step_before(trace: dict[str, Any], step: dict[str, Any]) -> dict[str, Any] | None:
    earlier = [s for s in trace.get("steps") or [] if s.get("step", 0) < step.get("step", 0)]
    return earlier[-1] if earlier else None


def candidates_for(trace: dict[str, Any], step: dict[str, Any]) -> list[dict[str, Any]]:
    """Every answer a model gave for this wait, each with its tier, status and reason:
    the wait step's own candidates (a node escalated past the last tier); for a human
    node an `on_unsure` edge led to, the draws of the node that was unsure."""
    own = [{**c, "node": step.get("node")} for c in step.get("candidates") or []]
    if own:
        return own
    before = _step_before(trace, step)
    if before is None or (before.get("edge") or {}).get("kind") != "on_unsure":
        return []
    if before.get("candidates"):
        return [{**c, "node": before.get("node")} for c in before["candidates"]]
    out = []
    for a in trace.get("attempts") or []:
        if a.get("node") != before.get("node") or a.get("step") != before.get("step") or a.get("stage") == "reasoning":
            continue
        answer = _parsed(a.get("text") or "")
        if a.get("ok"):
            out.append(
                {
                    "tier": a.get("tier") or "model",
                    "answer": answer,
                    "status": "unsure",
                    "reason": before.get("reason") or "",
                    "node": before.get("node"),
                }
            )
        else:
            why = f"{a.get('category')}: {a.get('reason')}" if a.get("category") else str(a.get("reason") or "")
            out.append(
                {
                    "tier": a.get("tier") or "model",
                    "answer": answer,
                    "status": "rejected",
                    "reason": why,
                    "node": a["node"],
                }
            )
    return out


def _parsed(text: str) -> Any:
    body = text.strip()
    if body.startswith("```"):
        body = body.strip("`").removeprefix("json").strip()
    try:
        value = json.loads(body)
    except (json.JSONDecodeError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def _key(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def verified(candidates: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [c for c in candidates if c.get("status") != "rejected" and isinstance(c.get("answer"), dict)]


def disagreement(candidates: list[dict[str, Any]]) -> list[str]:
    """The fields the verified candidates gave different values for."""
    answers = [c["answer"] for c in verified(candidates)]
    fields = sorted({k for a in answers for k in a})
    return [f for f in fields if len({_key(a.get(f)) for a in answers}) > 1]


def best_candidate(candidates: list[dict[str, Any]], ladder: list[str], schema: dict[str, Any] | None) -> Any:
    """The form's pre-fill: of the verified answers on the highest tier that gave any,
    the most frequent (the latest of a tie); only the fields the schema names. None
    when no model gave a verified answer."""
    found = verified(candidates)
    if not found:
        return None
    rank = {name: i for i, name in enumerate(ladder)}
    top = max(rank.get(c.get("tier") or "", -1) for c in found)
    answers = [c["answer"] for c in found if rank.get(c.get("tier") or "", -1) == top]
    counts = Counter(_key(a) for a in answers)
    most = max(counts.values())
    best = next(a for a in reversed(answers) if counts[_key(a)] == most)
    props = (schema or {}).get("properties")
    if isinstance(props, dict):
        best = {k: v for k, v in best.items() if k in props}
    return best


def schema_for(run: ServedRun, node: str, state: dict[str, Any]) -> dict[str, Any] | None:
    """The node's schema for this state, from the pack at the run's version (None when
    the pack no longer loads: the form is then one JSON field)."""
    try:
        with packs.loaded(run.deployment.project, run.version, own_model=False) as got:
            return node_schema(got.pack, node, state)
    except (packs.PackUnrunnable, KeyError) as exc:
        log.warning("review: no schema for %s at %s: %s", run, node, exc)
        return None


def open_item(run: ServedRun) -> ReviewItem | None:
    """The review item for the run's current wait, made if there is none yet (None when
    the run is not waiting at a node)."""
    run = ServedRun.objects.select_related("deployment__project").get(pk=run.pk)
    if run.status != ServedRun.Status.WAITING or not run.waiting_at:
        return None
    trace = run.trace or {}
    step = wait_step(trace, run.waiting_at)
    number = int(step["step"]) if step else len(trace.get("steps") or []) + 1
    existing = ReviewItem.objects.filter(run=run, step=number).first()
    if existing is not None:
        if existing.is_decided and existing.decision != ReviewItem.Decision.REJECT:
            # The resume refused the decided answer (the run's state moved since the
            # check): the run waits again at the same step, so the item is open again.
            note = f"reopened: {run.error}" if run.error else "reopened: the run waits again"
            ReviewItem.objects.filter(pk=existing.pk, status=ReviewItem.Status.DECIDED).update(
                status=ReviewItem.Status.OPEN, claimed_by=None, claim_until=None, decision="", answer=None, note=note
            )
            existing.refresh_from_db()
        return existing
    step = step or {"node": run.waiting_at, "step": number, "status": "wait"}
    state = run.state if isinstance(run.state, dict) else committed_state(trace, run.input)
    if run.waiting_reason == Reason.ESCALATED:
        step = {**step, "reason": "escalated"}
    found = stored(candidates_for(trace, step))
    schema = schema_for(run, run.waiting_at, state)
    item = ReviewItem(
        run=run,
        deployment=run.deployment,
        project=run.deployment.project,
        node=run.waiting_at,
        step=number,
        reason=reason_of(trace, step),
        question=run.question or str(step.get("prompt") or ""),
        candidates=found,
        disagreement=disagreement(found),
        schema=schema,
        state=state,
        best=best_candidate(found, list(trace.get("ladder") or []), schema),
    )
    try:
        with transaction.atomic():
            item.save()
    except IntegrityError:  # the same wait, made by a signal sent twice at once
        return ReviewItem.objects.get(run=run, step=number)
    return item
