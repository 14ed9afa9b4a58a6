"""The walker: runs a pack's graph against a model, one verified node at a time.

Per step: the node's kind produces an Outcome from a read-only view of state; only
then are its writes committed (with provenance), the next node chosen by the graph's
edges (never by the model), and the step appended to the checkpoint journal."""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from runtime.backends.base import Backend, ModelCall, ModelReply
from runtime.checkpoint import CheckpointStore, Entry, MemoryStore
from runtime.errors import BackendError, Cancelled, ExprError, FencedOut, HostFailed, OutputRejected, RunStateError
from runtime.nodes import NODE_KINDS
from runtime.nodes.base import Outcome
from runtime.pack.model import Edge, Node, Pack
from runtime.tiers import PERSON, Tier, candidates, check_answer, check_tiers, person_writes
from runtime.tools import (
    Divergence,
    RecordedFailure,
    Registry,
    TapeHook,
    Tool,
    ToolOutcome,
    idempotency_key,
    result_problem,
)
from runtime.tools.calls import args_problem, same_call
from runtime.trace import Attempt, EdgeTaken, Step, ToolCall, Trace

log = logging.getLogger("packforge.run")

StepHook = Callable[[Step], None]
EscalationHook = Callable[[dict[str, Any]], None]


@dataclass
class RunOptions:
    max_steps: int | None = None  # overrides the manifest's max_steps
    verify: bool = True  # False only for measuring what verification buys (benchmarks)
    on_step: StepHook | None = None  # called after each step is checkpointed
    on_escalate: EscalationHook | None = None  # called with each escalation as it is decided (docs/tiers.md)
    tape: TapeHook | None = None  # records or replays tool results (runtime.recordings, docs/tools.md)


@dataclass
class RunResult:
    run_id: str
    status: str  # done | failed | waiting | cancelled
    output: dict[str, Any]
    state: dict[str, Any]
    trace: Trace
    waiting_at: str | None = None
    waiting_reason: str | None = None  # "human" (a human node) | "escalated" (past the last model tier)

    @property
    def tier(self) -> str:
        return self.trace.tier

    @property
    def settled_by(self) -> str | None:
        """The model tier (or "person") the run needed at most; None without tiers."""
        return self.trace.settled_by


@dataclass
class Walk:
    """One run in progress. Node kinds read from it and ask the model through it; what
    they may use of it is runtime.nodes.base.RunContext."""

    pack: Pack
    backend: Backend
    tools: Registry
    store: CheckpointStore
    run_id: str
    fence: int
    input: dict[str, Any]
    case_id: str | None
    options: RunOptions
    trace: Trace
    cancel: threading.Event | None = None
    state: dict[str, Any] = field(default_factory=dict)
    step: int = 0
    answers: dict[str, dict[str, Any]] = field(default_factory=dict)  # human node answers
    # Tool calls journaled at (node, step): replayed on resume, and when a node re-runs
    # within its step (a tier climb), instead of calling the tool again (invariant 4).
    pending_tools: dict[tuple[str, int], list[dict[str, Any]]] = field(default_factory=dict)
    calls: dict[str, int] = field(default_factory=dict)  # model calls per node, for attempt numbers
    budget_left: int | None = None
    tiers: list[Tier] = field(default_factory=list)  # [] : every model call goes to `backend`
    tier_index: int = 0  # the tier the node being run asks
    journaled: int = 0  # trace.attempts[:journaled] are in the journal
    pending: dict[str, Any] | None = None  # an escalation journaled before a kill, for the node it was at
    waiting: dict[str, Any] | None = None  # the wait the run was resumed from (its journal payload + node)
    answered_by: str | None = None  # who gave `answers` ("human:<user>"): the provenance of their commits

    @property
    def verify(self) -> bool:
        return self.options.verify

    @property
    def tier_name(self) -> str | None:
        return self.tiers[self.tier_index].name if self.tiers else None

    def view(self) -> dict[str, Any]:
        return {**self.state, "input": self.input}

    def ask(
        self,
        node: Node,
        messages: list[dict[str, str]],
        schema: dict[str, Any] | None,
        stage: str,
        purpose: str = "answer",
        *,
        logprobs: bool = False,
    ) -> tuple[ModelReply, int]:
        """Call the model once; return the reply and this call's attempt number."""
        if self.cancel is not None and self.cancel.is_set():
            raise Cancelled("run cancelled")
        if purpose == "answer":
            self.calls[node.id] = self.calls.get(node.id, 0) + 1
        attempt = self.calls.get(node.id, 0) + (1 if purpose == "reasoning" else 0)
        call = ModelCall(
            run_id=self.run_id,
            node=node.id,
            attempt=attempt,
            messages=messages,
            schema=schema,
            max_tokens=node.max_tokens,
            temperature=node.temperature,
            case_id=self.case_id,
            input=self.input,
            purpose=purpose,
            cancel=self.cancel,
            logprobs=logprobs,
        )
        started = time.perf_counter()
        backend = self.tiers[self.tier_index].backend if self.tiers else self.backend
        reply = backend.complete(call)
        if not reply.latency_s:
            reply.latency_s = time.perf_counter() - started
        if not reply.request_id:
            reply.request_id = call.request_id
        log.info(
            "backend.response",
            extra={
                "fields": {
                    "request_id": reply.request_id,
                    "node": node.id,
                    "duration_ms": round(reply.latency_s * 1000, 1),
                    "prompt_tokens": reply.prompt_tokens,
                    "completion_tokens": reply.completion_tokens,
                    "reasoning_tokens": reply.reasoning_tokens,
                    "finish_reason": reply.finish_reason,
                    "tier": self.tier_name,
                }
            },
        )
        return reply, attempt

    def record(
        self,
        node: Node,
        reply: ModelReply,
        attempt: int,
        stage: str,
        ok: bool,
        category: str | None = None,
        reason: str | None = None,
    ) -> None:
        self.trace.attempts.append(
            Attempt(
                node=node.id,
                step=self.step,
                attempt=attempt,
                stage=stage,
                ok=ok,
                category=category,
                reason=reason,
                text=reply.text,
                prompt_tokens=reply.prompt_tokens,
                completion_tokens=reply.completion_tokens,
                reasoning_tokens=reply.reasoning_tokens,
                latency_s=reply.latency_s,
                ttft_s=reply.ttft_s,
                cost_usd=reply.cost_usd,
                request_id=reply.request_id,
                tier=self.tier_name,
            )
        )
        if not ok:
            log.info("node.rejected", extra={"fields": {"node": node.id, "attempt": attempt, "category": category}})
            log.debug("node.rejected.text", extra={"fields": {"node": node.id, "attempt": attempt, "text": reply.text}})

    def record_tool(
        self,
        node: Node,
        tool: str,
        args: dict[str, Any],
        result: Any,
        latency_s: float,
        *,
        key: str | None = None,
        replayed: bool = False,
    ) -> None:
        """Journal a tool's result the moment it returns, before anything is committed,
        so a resumed run replays it instead of calling the tool again (invariant 4)."""
        payload = {"tool": tool, "args": args, "result": result, "latency_s": latency_s, "key": key}
        self.store.append(self.run_id, self.fence, "tool", node.id, self.step, payload)
        self.pending_tools.setdefault((node.id, self.step), []).append(payload)
        self.trace.tool_calls.append(ToolCall(node.id, self.step, tool, args, result, latency_s, replayed, key))

    def call_tool(self, node: Node, tool_name: str, args: dict[str, Any]) -> ToolOutcome:
        """Call the host tool `tool_name` with `args` for `node`: the one path every tool
        call in a run takes (docs/tools.md). In order: a call already journaled at this
        node and step is replayed, never made again (invariant 4); a replaying tape
        answers instead of the tool; an unknown or unavailable tool, arguments that break
        its schema or its own check, a raise, and a result that breaks its schema are
        failed outcomes (the node's on_fail); a side-effecting tool gets
        `idempotency_key=`; the result is journaled before this returns, then taped."""
        if self.cancel is not None and self.cancel.is_set():
            raise Cancelled("run cancelled")
        made = self.pending_tools.get((node.id, self.step), [])
        for entry in made:
            if same_call(entry["tool"], entry["args"], tool_name, args):
                return ToolOutcome(True, entry["result"], None, True, "ok", entry.get("key"))
        found = self.tools.get(tool_name)
        key = None
        if found is not None and found.side_effects:
            key = idempotency_key(self.run_id, node.id, self._visit(node.id), len(made) + 1)
        tape = self.options.tape
        if tape is not None and tape.mode == "replay":
            # Arguments a registered tool refuses fail as they would live (the pack's
            # fault, not a divergence); an unregistered or unavailable tool is replayed.
            problem = args_problem(found, args) if found is not None and found.available else None
            if problem is not None:
                return ToolOutcome.failed("bad_args", problem)
            recorded = tape.lookup(self.case_id, node.id, len(self.trace.tool_calls), tool_name, args)
            if isinstance(recorded, Divergence):
                return ToolOutcome.failed(
                    "diverged", f"tool '{tool_name}' diverged from the recording: {recorded.reason}"
                )
            if isinstance(recorded, RecordedFailure):
                return ToolOutcome(False, None, recorded.reason, True, recorded.kind, key)
            self.record_tool(node, tool_name, args, recorded, 0.0, key=key, replayed=True)
            return ToolOutcome(True, recorded, None, True, "ok", key)
        if found is None:  # load_pack(tools=...) refuses this; a host that skipped it lands here
            return ToolOutcome.failed("unknown", f"tool '{tool_name}' is not registered")
        if not found.available:
            return ToolOutcome.failed("unavailable", f"tool '{tool_name}' is {found.state}")
        problem = args_problem(found, args)
        if problem is not None:
            return ToolOutcome.failed("bad_args", problem)
        kwargs = dict(args) if key is None else {**args, "idempotency_key": key}
        index = len(self.trace.tool_calls)
        started = time.perf_counter()
        try:
            result = found.function(**kwargs)
        except (HostFailed, FencedOut, Cancelled):  # the host's trouble, not the tool's: the run stops
            raise
        except Exception as exc:  # a tool's failure is the node's failure, not the runtime's
            return self._tool_failed(
                tape, node, index, tool_name, args, "raised", f"tool '{tool_name}' raised {type(exc).__name__}: {exc}"
            )
        latency_s = time.perf_counter() - started
        problem = result_problem(found, result)
        if problem is not None:
            return self._tool_failed(tape, node, index, tool_name, args, "bad_result", problem)
        self.record_tool(node, tool_name, args, result, latency_s, key=key)
        if tape is not None and tape.mode == "record":
            tape.record(self.case_id, node.id, index, tool_name, args, result)
        return ToolOutcome(True, result, None, False, "ok", key)

    def _tool_failed(
        self, tape: TapeHook | None, node: Node, index: int, tool: str, args: dict[str, Any], kind: str, reason: str
    ) -> ToolOutcome:
        """A live call that failed; a recording tape keeps the failure for its replays."""
        if tape is not None and tape.mode == "record":
            tape.record_failure(self.case_id, node.id, index, tool, args, kind, reason)
        return ToolOutcome.failed(kind, reason)

    def _visit(self, node_id: str) -> int:
        """How many times this run has entered `node_id`, this time included (1-based).
        Counted from the journaled steps, so a resumed run counts as the killed one did."""
        return 1 + sum(1 for s in self.trace.steps if s.node == node_id and s.status != "wait" and s.step < self.step)


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
    if record.status == "done" or (record.status == "failed" and (record.result or {}).get("error_kind") != "backend"):
        raise RunStateError(f"run '{run_id}' already finished ({record.status}); nothing to resume")
    if record.digest != pack.digest:
        raise RunStateError(f"run '{run_id}' was started with a different version of pack '{record.pack}'")
    fence, record, journal = store.take_over(run_id)
    walk = _new_walk(pack, backend, tools, store, run_id, fence, record.input, record.case_id, options, cancel, answers)
    walk.tiers, walk.answered_by = list(tiers or []), answered_by
    walk.trace.ladder = [t.name for t in walk.tiers]
    current = _replay(walk, journal)
    if walk.waiting is not None and current == walk.waiting["node"] and current in walk.answers:
        reasons = check_answer(pack, current, walk.view(), walk.answers[current])
        if reasons:  # the run stays waiting: nothing journaled, its status untouched
            raise OutputRejected("answer", "; ".join(reasons), reasons)
    if current is None:  # killed after its last step was journaled, before its status was
        last = walk.trace.steps[-1] if walk.trace.steps else None
        if last is not None and last.status == "end":
            walk.trace.end_node = last.node
            return _finish(walk, "done", None)
        return _finish(walk, "failed", f"{last.node}: {last.reason}" if last else "nothing was journaled")
    store.set_status(run_id, fence, "running")
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
    return walk


def _replay(walk: Walk, journal: list[Entry]) -> str | None:
    current: str | None = walk.pack.entry
    for entry in journal:
        payload = entry.payload
        if entry.kind == "tool":
            walk.pending_tools.setdefault((entry.node, entry.step), []).append(payload)
            walk.trace.tool_calls.append(
                ToolCall(
                    entry.node,
                    entry.step,
                    payload["tool"],
                    payload["args"],
                    payload["result"],
                    payload["latency_s"],
                    replayed=True,
                    key=payload.get("key"),
                )
            )
        elif entry.kind == "wait":
            current = entry.node
            _replay_attempts(walk, payload)
            walk.waiting, walk.pending = {**payload, "node": entry.node}, None
        elif entry.kind == "escalate":
            _replay_attempts(walk, payload)
            walk.pending = {**payload, "node": entry.node, "step": entry.step}
        elif entry.kind == "step":
            step = _step_from(payload)
            walk.trace.steps.append(step)
            _replay_attempts(walk, payload)
            if step.status == "ok":
                walk.state.update(step.writes)
            walk.step = entry.step
            walk.waiting = walk.pending = None
            current = step.edge.target if step.edge else None
    walk.journaled = len(walk.trace.attempts)
    return current


def _replay_attempts(walk: Walk, payload: dict[str, Any]) -> None:
    for a in payload.get("attempts", []):
        walk.trace.attempts.append(Attempt(**a))
        if a["stage"] != "reasoning":
            walk.calls[a["node"]] = max(walk.calls.get(a["node"], 0), a["attempt"])
    walk.budget_left = payload.get("budget_left", walk.budget_left)


def _step_from(payload: dict[str, Any]) -> Step:
    edge = payload["edge"]
    fields = {k: v for k, v in payload.items() if k not in ("attempts", "edge", "budget_left")}
    return Step(**fields, edge=EdgeTaken(**edge) if edge else None, replayed=True)


def _walk(walk: Walk, current: str) -> RunResult:
    pack = walk.pack
    max_steps = walk.options.max_steps or pack.max_steps
    try:
        while True:
            if walk.cancel is not None and walk.cancel.is_set():
                raise Cancelled("run cancelled")
            if walk.step >= max_steps:
                return _finish(walk, "failed", f"step bound reached ({max_steps} steps); the graph may be looping")
            node = pack.nodes[current]
            walk.step += 1
            outcome, extra = _run_node(walk, node)
            if outcome.status == "wait":
                why = outcome.reason or "human"
                payload = {"question": outcome.prompt, "reason": why, **extra, "attempts": _unjournaled(walk)}
                payload["budget_left"] = walk.budget_left
                walk.store.append(walk.run_id, walk.fence, "wait", node.id, walk.step, payload)
                walk.step -= 1  # the node's step is taken when its answer arrives
                walk.trace.steps.append(
                    Step(node.id, walk.step + 1, node.kind, "wait", prompt=outcome.prompt, reason=why, **extra)
                )
                return _finish(walk, "waiting", None, waiting_at=node.id, question=outcome.prompt, waiting_reason=why)
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
            # Shallow copies: asdict() deep-copies every value and was half the walker's time.
            payload = {**vars(step), "edge": vars(step.edge) if step.edge else None}
            payload.pop("replayed")
            payload["attempts"] = _unjournaled(walk)
            payload["budget_left"] = walk.budget_left
            walk.store.append(walk.run_id, walk.fence, "step", node.id, walk.step, payload)
            log.info(
                "node.done",
                extra={"fields": {"node": node.id, "status": outcome.status, "attempts": len(payload["attempts"])}},
            )
            if walk.options.on_step is not None:
                walk.options.on_step(step)
            if outcome.status == "end":
                walk.trace.end_node = node.id
                return _finish(walk, "done", None)
            if edge is None:
                why = outcome.reason if outcome.status != "ok" else f"no edge out of '{node.id}' matched"
                return _finish(walk, "failed", f"{node.id}: {why}")
            current = edge.target
    except Cancelled:
        return _finish(walk, "cancelled", "run cancelled")
    except BackendError as exc:
        return _finish(walk, "failed", f"model backend: {exc}", error_kind="backend")


def _unjournaled(walk: Walk) -> list[dict[str, Any]]:
    """The attempts not yet journaled, as journal data; they count as journaled now."""
    out = [vars(a) for a in walk.trace.attempts[walk.journaled :]]
    walk.journaled = len(walk.trace.attempts)
    return out


def _run_node(walk: Walk, node: Node) -> tuple[Outcome, dict[str, Any]]:
    """Run `node` (on the tiers, when the run has them and the node asks a model);
    the outcome and the Step fields it adds (tier, escalations, candidates, provenance)."""
    kind = NODE_KINDS[node.kind]
    waited = walk.waiting if walk.waiting is not None and walk.waiting["node"] == node.id else None
    walk.waiting = None
    if waited is not None and waited.get("reason") == "escalated":
        # Resumed at a node that waits for a person after the last model tier.
        extra = {k: waited.get(k, []) for k in ("escalations", "candidates")} | {"tier": waited.get("tier")}
        if node.id not in walk.answers:
            return Outcome("wait", reason="escalated", prompt=waited.get("question", "")), extra
        return _person(walk, node, waited.get("question", "")), {**extra, "tier": PERSON, **_provenance(walk)}
    if walk.tiers and kind.asks_model:
        return _climb(walk, node)
    outcome = kind.run(node, walk)
    return outcome, (_provenance(walk) if kind.waits and outcome.status == "ok" else {})


def _provenance(walk: Walk) -> dict[str, Any]:
    return {"provenance": walk.answered_by or "human"}


def _person(walk: Walk, node: Node, prompt: str) -> Outcome:
    """Commit a person's answer at a model node (checked as a model's answer is)."""
    answer = walk.answers.pop(node.id)
    try:
        writes = person_writes(walk.pack, node.id, walk.view(), answer)
    except OutputRejected as exc:
        return Outcome("fail", reason=f"human answer rejected: {exc.reason}", prompt=prompt)
    return Outcome("ok", writes=writes, prompt=prompt)


def _climb(walk: Walk, node: Node) -> tuple[Outcome, dict[str, Any]]:
    """Run a model node on tier 0, then on each next tier while it fails or is unsure
    (docs/tiers.md). Each climb is journaled before the next tier is asked, so a run
    killed meanwhile resumes on the tier it had reached."""
    kind = NODE_KINDS[node.kind]
    start = 0
    escalations: list[dict[str, Any]] = []
    found: list[dict[str, Any]] = []
    pending = walk.pending
    walk.pending = None
    if pending is not None and pending["node"] == node.id and pending["step"] == walk.step:
        # A resumed run given fewer tiers than it climbed stays on the last one it has.
        start = min(int(pending["tier_index"]), len(walk.tiers) - 1)
        escalations, found = list(pending["escalations"]), list(pending["candidates"])
    k = start
    try:
        while True:
            walk.tier_index = k
            tier = walk.tiers[k].name
            before = len(walk.trace.attempts)
            outcome = kind.run(node, walk)
            new = walk.trace.attempts[before:]
            found += candidates(new, node.id, tier, outcome.status, outcome.reason, outcome.writes)
            extra: dict[str, Any] = {"tier": tier, "escalations": escalations, "candidates": found}
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
            payload = {
                **escalation,
                "tier_index": k + 1,
                "escalations": escalations,
                "candidates": found,
                "attempts": _unjournaled(walk),
                "budget_left": walk.budget_left,
            }
            walk.store.append(walk.run_id, walk.fence, "escalate", node.id, walk.step, payload)
            if walk.options.on_escalate is not None:
                walk.options.on_escalate(escalation)
            k += 1
    finally:
        walk.tier_index = 0


def _route(pack: Pack, node: Node, outcome: Outcome, walk: Walk) -> Edge | None:
    """Choose the next edge from the graph. The model's answer only enters through
    `when:` expressions evaluated on committed state (invariant 3)."""
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
    status: str,
    error: str | None,
    *,
    waiting_at: str | None = None,
    error_kind: str | None = None,
    question: str = "",
    waiting_reason: str | None = None,
) -> RunResult:
    walk.trace.status = status
    walk.trace.error = error
    output = _output(walk) if status == "done" else {}
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
    return RunResult(walk.run_id, status, output, dict(walk.state), walk.trace, waiting_at, waiting_reason)


def _output(walk: Walk) -> dict[str, Any]:
    end = walk.pack.nodes.get(walk.trace.end_node or "")
    fields = (end.output if end is not None else None) or walk.pack.output
    if fields is None:
        return dict(walk.state)
    return {f: walk.state[f] for f in fields if f in walk.state}
