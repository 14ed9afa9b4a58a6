"""The walker: runs a pack's graph against a model, one verified node at a time.

Per step: the node's kind produces an Outcome from a read-only view of state; only
then are its writes committed (with provenance), the next node chosen by the graph's
edges (never by the model), and the step appended to the checkpoint journal.

This module holds the walk loop (run_pack, resume_run, routing, the run's end); the run
in progress and its model and tool calls are runtime.walk, running one node on the
model tiers runtime.tier_climb, rebuilding a run from its journal runtime.journal_replay
(its entries' payloads are runtime.journal's, decoded into a trace by runtime.trace.TraceBuilder)."""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from runtime.backends.base import Backend
from runtime.checkpoint import CheckpointStore, MemoryStore
from runtime.errors import BackendError, Cancelled, ExprError, OutputRejected, RunStateError
from runtime.journal import StepPayload, WaitPayload
from runtime.journal_replay import replay_journal as _replay
from runtime.lookahead import Lookahead
from runtime.nodes.base import Outcome
from runtime.pack.model import Edge, Node, Pack
from runtime.tier_climb import run_node as _run_node
from runtime.tiers import Tier, check_answer, check_tiers
from runtime.tools import Registry, Tool
from runtime.trace import EdgeTaken, RunStatus, Step, Trace
from runtime.walk import RunOptions as RunOptions
from runtime.walk import RunResult as RunResult
from runtime.walk import Walk as Walk
from runtime.walk import unjournaled

log = logging.getLogger("packforge.run")


def run_pack(
    pack: Pack,
    input: dict[str, Any],
    *,
    backend: Backend,
    tools: Mapping[str, Tool] | None = None,
    store: CheckpointStore | None = None,
    run_id: str | None = None,
    case_id: str | None = None,
    answers: Mapping[str, dict[str, Any]] | None = None,
    options: RunOptions | None = None,
    cancel: threading.Event | None = None,
    tiers: Sequence[Tier] | None = None,
    answered_by: str | None = None,
) -> RunResult:
    """Walk `pack` on `input` from its entry node. Checkpoints every step to `store`.

    `tiers`: model tiers, small to large (docs/tiers.md); tier 0 answers first and a
    generate node that fails, is unsure, or keeps failing its assert climbs to the next.
    Callers pass `backend=tiers[0].backend`. `answered_by`: who gave `answers`
    ("human:<user>"), the provenance of what they commit."""
    if tiers is not None:
        check_tiers(list(tiers))
    store = store if store is not None else MemoryStore()
    run_id = run_id or uuid.uuid4().hex[:12]
    fence = store.begin(run_id, pack=pack.name, digest=pack.digest, input=input, case_id=case_id)
    walk = _new_walk(pack, backend, tools, store, run_id, fence, input, case_id, options, cancel, answers)
    walk.tiers, walk.answered_by = list(tiers or []), answered_by
    walk.trace.ladder = [t.name for t in walk.tiers]
    log.info("run.start", extra={"fields": {"run_id": run_id, "pack": pack.name, "entry": pack.entry}})
    return _walk(walk, pack.entry)


def resume_run(
    pack: Pack,
    run_id: str,
    *,
    backend: Backend,
    store: CheckpointStore,
    tools: Mapping[str, Tool] | None = None,
    answers: Mapping[str, dict[str, Any]] | None = None,
    options: RunOptions | None = None,
    cancel: threading.Event | None = None,
    tiers: Sequence[Tier] | None = None,
    answered_by: str | None = None,
) -> RunResult:
    """Continue a killed, failed-on-backend or waiting run. Finished steps are replayed
    from the journal, not re-run; a tool result journaled before the kill is reused; a
    node killed mid-escalation continues on the tier it had climbed to.

    `answers`: for a run waiting at a node (a human node, or a generate node escalated
    past the last tier), {node: answer}. The answer is checked first (schema with the
    state's `choices`, the node's assert): a bad one raises OutputRejected (`reasons`)
    and the run stays waiting, nothing journaled. A good one is committed with
    provenance `answered_by` ("human:<user>"; "human" when None)."""
    if tiers is not None:
        check_tiers(list(tiers))
    record = store.get(run_id)
    if record.status == RunStatus.DONE or (
        record.status == RunStatus.FAILED and (record.result or {}).get("error_kind") != "backend"
    ):
        raise RunStateError(f"run '{run_id}' already finished ({record.status}); nothing to resume")
    if record.digest != pack.digest:
        raise RunStateError(f"run '{run_id}' was started with a different version of pack '{record.pack}'")
    fence, record, journal = store.take_over(run_id)
    walk = _new_walk(pack, backend, tools, store, run_id, fence, record.input, record.case_id, options, cancel, answers)
    walk.tiers, walk.answered_by = list(tiers or []), answered_by
    walk.trace.ladder = [t.name for t in walk.tiers]
    current = _replay(walk, journal)
    if walk.waiting is not None and current == walk.waiting.node and current in walk.answers:
        reasons = check_answer(pack, current, walk.view(), walk.answers[current])
        if reasons:  # the run stays waiting: nothing journaled, its status untouched
            raise OutputRejected("answer", "; ".join(reasons), reasons)
    if current is None:  # killed after its last step was journaled, before its status was
        last = walk.trace.steps[-1] if walk.trace.steps else None
        if last is not None and last.status == "end":
            walk.trace.end_node = last.node
            return _finish(walk, RunStatus.DONE, None)
        return _finish(walk, RunStatus.FAILED, f"{last.node}: {last.reason}" if last else "nothing was journaled")
    store.set_status(run_id, fence, RunStatus.RUNNING)
    log.info("run.resume", extra={"fields": {"run_id": run_id, "at": current, "replayed_steps": walk.step}})
    return _walk(walk, current)


def _new_walk(
    pack: Pack,
    backend: Backend,
    tools: Mapping[str, Tool] | None,
    store: CheckpointStore,
    run_id: str,
    fence: int,
    input: dict[str, Any],
    case_id: str | None,
    options: RunOptions | None,
    cancel: threading.Event | None,
    answers: Mapping[str, dict[str, Any]] | None,
) -> Walk:
    walk = Walk(
        pack=pack,
        backend=backend,
        tools=Registry.of(tools),
        store=store,
        run_id=run_id,
        fence=fence,
        input=input,
        case_id=case_id,
        options=options or RunOptions(),
        cancel=cancel,
        trace=Trace(run_id=run_id, pack=pack.name, case_id=case_id),
        answers=dict(answers or {}),
        budget_left=pack.retry.budget,
    )
    depth = getattr(backend, "lookahead", 0)
    if isinstance(depth, int) and depth > 0:
        walk.lookahead = Lookahead(backend, depth)
    return walk


def _walk(walk: Walk, current: str) -> RunResult:
    pack = walk.pack
    max_steps = walk.options.max_steps or pack.max_steps
    try:
        return _steps(walk, pack, current, max_steps)
    finally:
        if walk.lookahead is not None:  # also when the run ends by an error (FencedOut, a host's)
            walk.lookahead.close(walk)


def _steps(walk: Walk, pack: Pack, current: str, max_steps: int) -> RunResult:
    try:
        while True:
            if walk.cancel is not None and walk.cancel.is_set():
                raise Cancelled("run cancelled")
            if walk.step >= max_steps:
                by = f", {walk.options.max_steps_by}" if walk.options.max_steps and walk.options.max_steps_by else ""
                return _finish(
                    walk, RunStatus.FAILED, f"step bound reached ({max_steps} steps{by}); the graph may be looping"
                )
            if walk.options.pacer is not None and walk.options.pacer.hold(walk.cancel):
                raise Cancelled("run cancelled")
            node = pack.nodes[current]
            if walk.lookahead is not None:
                walk.lookahead.before(walk, node)
            walk.step += 1
            outcome, extra = _run_node(walk, node)
            if outcome.status == "wait":
                why = outcome.reason or "human"
                wait = WaitPayload(
                    node=node.id,
                    question=outcome.prompt,
                    reason=why,
                    tier=extra.get("tier"),
                    escalations=extra.get("escalations"),
                    candidates=extra.get("candidates"),
                    attempts=unjournaled(walk),
                    budget_left=walk.budget_left,
                )
                walk.store.append(walk.run_id, walk.fence, "wait", node.id, walk.step, wait.to_payload())
                walk.step -= 1  # the node's step is taken when its answer arrives
                walk.trace.steps.append(
                    Step(node.id, walk.step + 1, node.kind, "wait", prompt=outcome.prompt, reason=why, **extra)
                )
                return _finish(
                    walk, RunStatus.WAITING, None, waiting_at=node.id, question=outcome.prompt, waiting_reason=why
                )
            edge = _route(pack, node, outcome, walk)
            step = Step(
                node=node.id,
                step=walk.step,
                kind=node.kind,
                status=outcome.status,
                writes=outcome.writes if outcome.status == "ok" else {},
                attempt=outcome.attempt,
                reason=outcome.reason,
                prompt=outcome.prompt,
                edge=EdgeTaken(edge.index, edge.kind, edge.target) if edge else None,
                confidence=outcome.confidence,
                prior=outcome.prior,
                notes=outcome.notes,
                tool_stats=outcome.tool_stats,
                **extra,
            )
            if outcome.status == "ok":
                walk.state.update(outcome.writes)
            walk.trace.steps.append(step)
            entry = StepPayload(step=step, attempts=unjournaled(walk), budget_left=walk.budget_left)
            walk.store.append(walk.run_id, walk.fence, "step", node.id, walk.step, entry.to_payload())
            log.info(
                "node.done",
                extra={"fields": {"node": node.id, "status": outcome.status, "attempts": len(entry.attempts)}},
            )
            if walk.options.on_step is not None:
                walk.options.on_step(step)
            if outcome.status == "end":
                walk.trace.end_node = node.id
                return _finish(walk, RunStatus.DONE, None)
            if edge is None:
                why = outcome.reason if outcome.status != "ok" else f"no edge out of '{node.id}' matched"
                return _finish(walk, RunStatus.FAILED, f"{node.id}: {why}")
            current = edge.target
    except Cancelled:
        return _finish(walk, RunStatus.CANCELLED, "run cancelled")
    except BackendError as exc:
        return _finish(walk, RunStatus.FAILED, f"model backend: {exc}", error_kind="backend")


def _route(pack: Pack, node: Node, outcome: Outcome, walk: Walk) -> Edge | None:
    """Choose the next edge from the graph. The model's answer only enters through
    `when:` expressions evaluated on committed state (docs/invariants.md, 3)."""
    if outcome.status == "end":
        return None
    if outcome.status == "unsure":
        return pack.edge_out(node.id, "on_unsure") or pack.edge_out(node.id, "on_fail")
    if outcome.status == "fail":
        return pack.edge_out(node.id, "on_fail")
    view = {**walk.state, **outcome.writes, "input": walk.input}
    for edge in pack.outgoing(node.id):
        if edge.when is None:
            return edge
        try:
            if edge.when.truthy(view):
                return edge
        except ExprError:
            # A guard that cannot be evaluated here (say, a field this path never wrote)
            # is not satisfied; the next edge is tried.
            continue
    return None


def _finish(
    walk: Walk,
    status: RunStatus,
    error: str | None,
    *,
    waiting_at: str | None = None,
    error_kind: str | None = None,
    question: str = "",
    waiting_reason: str | None = None,
) -> RunResult:
    if walk.lookahead is not None:
        walk.lookahead.close(walk)
    walk.trace.status = status
    walk.trace.error = error
    output = _output(walk) if status == RunStatus.DONE else {}
    result: dict[str, Any] = {"output": output, "error": error, "tier": walk.trace.tier}
    if error_kind:
        result["error_kind"] = error_kind
    if waiting_at:
        result["waiting_at"] = waiting_at
        result["question"] = question
        result["waiting_reason"] = waiting_reason
    if walk.tiers:
        result["settled_by"] = walk.trace.settled_by
    walk.store.set_status(walk.run_id, walk.fence, status, result)
    log.info(
        "run.end",
        extra={
            "fields": {
                "run_id": walk.run_id,
                "status": status,
                "steps": walk.step,
                "generations": walk.trace.generations,
                "tier": walk.trace.tier,
            }
        },
    )
    return RunResult(
        run_id=walk.run_id,
        status=status,
        output=output,
        state=dict(walk.state),
        trace=walk.trace,
        waiting_at=waiting_at,
        waiting_reason=waiting_reason,
    )


def _output(walk: Walk) -> dict[str, Any]:
    end = walk.pack.nodes.get(walk.trace.end_node or "")
    fields = (end.output if end is not None else None) or walk.pack.output
    if fields is None:
        return dict(walk.state)
    return {f: walk.state[f] for f in fields if f in walk.state}
