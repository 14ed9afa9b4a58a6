"""A run in progress (Walk): its state and journal position, the model calls and the
tool calls its node kinds make through it (Walk.call_tool, the one tool call path);
the run's options (RunOptions) and result (RunResult)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from runtime.backends.base import Backend, ModelCall, ModelReply
from runtime.checkpoint import CheckpointStore
from runtime.errors import Cancelled, FencedOut, HostFailed
from runtime.journal import EscalatePayload, ToolPayload, WaitPayload
from runtime.lookahead import Lookahead
from runtime.pacing import StepPacer
from runtime.pack.model import Node, Pack
from runtime.tiers import Tier
from runtime.tools import (
    Divergence,
    RecordedFailure,
    Registry,
    TapeHook,
    ToolOutcome,
    ToolOutcomeKind,
    idempotency_key,
    result_problem,
)
from runtime.tools.calls import args_problem, same_call
from runtime.trace import Attempt, Step, Trace

log = logging.getLogger("packforge.run")

StepHook = Callable[[Step], None]
EscalationHook = Callable[[dict[str, Any]], None]


@dataclass
class RunOptions:
    max_steps: int | None = None  # overrides the manifest's max_steps
    max_steps_by: str = ""  # who set max_steps, for the message when a run reaches it (a host's cap)
    verify: bool = True  # False only for measuring what verification buys (benchmarks)
    on_step: StepHook | None = None  # called after each step is checkpointed
    on_escalate: EscalationHook | None = None  # called with each escalation as it is decided (docs/tiers.md)
    tape: TapeHook | None = None  # records or replays tool results (runtime.recordings, docs/tools.md)
    pacer: StepPacer | None = None  # a host's cap on steps per second (runtime.pacing); None: unpaced


@dataclass(kw_only=True)
class RunResult:
    run_id: str
    # A RunStatus: done | failed | waiting | cancelled. Typed str so that hosts with their
    # own status enum (the studio's TextChoices) compare with it.
    status: str
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
    # within its step (a tier climb), instead of calling the tool again (docs/invariants.md, 4).
    pending_tools: dict[tuple[str, int], list[ToolPayload]] = field(default_factory=dict)
    calls: dict[str, int] = field(default_factory=dict)  # model calls per node, for attempt numbers
    budget_left: int | None = None
    tiers: list[Tier] = field(default_factory=list)  # [] : every model call goes to `backend`
    tier_index: int = 0  # the tier the node being run asks
    journaled: int = 0  # trace.attempts[:journaled] are in the journal
    pending: EscalatePayload | None = None  # an escalation journaled before a kill, for the node it was at
    waiting: WaitPayload | None = None  # the wait the run was resumed from
    answered_by: str | None = None  # who gave `answers` ("human:<user>"): the provenance of their commits
    lookahead: Lookahead | None = None  # the calls made ahead for independent nodes; None: none are

    @property
    def verify(self) -> bool:
        return self.options.verify

    @property
    def tier_name(self) -> str | None:
        return self.tiers[self.tier_index].name if self.tiers else None

    def view(self) -> dict[str, Any]:
        return {**self.state, "input": self.input}

    def call_for(
        self,
        node: Node,
        messages: list[dict[str, str]],
        schema: dict[str, Any] | None,
        attempt: int,
        purpose: str = "answer",
        *,
        logprobs: bool = False,
        given: dict[str, Any] | None = None,
    ) -> ModelCall:
        """The request for one call of `node` in this run (Walk.ask makes it;
        runtime.lookahead sends one ahead of the node)."""
        return ModelCall(
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
            given=given,
        )

    def ask(
        self,
        node: Node,
        messages: list[dict[str, str]],
        schema: dict[str, Any] | None,
        stage: str,
        purpose: str = "answer",
        *,
        logprobs: bool = False,
        given: dict[str, Any] | None = None,
    ) -> tuple[ModelReply, int]:
        """Call the model once; return the reply and this call's attempt number."""
        if self.cancel is not None and self.cancel.is_set():
            raise Cancelled("run cancelled")
        if purpose == "answer":
            self.calls[node.id] = self.calls.get(node.id, 0) + 1
        attempt = self.calls.get(node.id, 0) + (1 if purpose == "reasoning" else 0)
        call = self.call_for(node, messages, schema, attempt, purpose, logprobs=logprobs, given=given)
        started = time.perf_counter()
        backend = self.tiers[self.tier_index].backend if self.tiers else self.backend
        ahead = self.lookahead.take(self, call) if self.lookahead is not None and self.tier_index == 0 else None
        reply = ahead if ahead is not None else backend.complete(call)
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
                    "cached_tokens": reply.cached_tokens,
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
        given: dict[str, Any] | None = None,
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
                given=given,
                prompt_tokens=reply.prompt_tokens,
                cached_tokens=reply.cached_tokens or 0,
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
        so a resumed run replays it instead of calling the tool again (docs/invariants.md, 4)."""
        payload = ToolPayload(tool=tool, args=args, result=result, latency_s=latency_s, key=key)
        self.store.append(self.run_id, self.fence, "tool", node.id, self.step, payload.to_payload())
        self.pending_tools.setdefault((node.id, self.step), []).append(payload)
        self.trace.tool_calls.append(payload.call(node.id, self.step, replayed=replayed))

    def call_tool(self, node: Node, tool_name: str, args: dict[str, Any]) -> ToolOutcome:
        """Call the host tool `tool_name` with `args` for `node`: the one path every tool
        call in a run takes (docs/tools.md). In order: a call already journaled at this
        node and step is replayed, never made again (docs/invariants.md, 4); a replaying tape
        answers instead of the tool; an unknown or unavailable tool, arguments that break
        its schema or its own check, a raise, and a result that breaks its schema are
        failed outcomes (the node's on_fail); a side-effecting tool gets
        `idempotency_key=`; the result is journaled before this returns, then taped."""
        if self.cancel is not None and self.cancel.is_set():
            raise Cancelled("run cancelled")
        made = self.pending_tools.get((node.id, self.step), [])
        for entry in made:
            if same_call(entry.tool, entry.args, tool_name, args):
                return ToolOutcome(
                    ok=True, result=entry.result, reason=None, replayed=True, kind=ToolOutcomeKind.OK, key=entry.key
                )
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
                return ToolOutcome.failed(ToolOutcomeKind.BAD_ARGS, problem)
            recorded = tape.lookup(self.case_id, node.id, len(self.trace.tool_calls), tool_name, args)
            if isinstance(recorded, Divergence):
                return ToolOutcome.failed(
                    ToolOutcomeKind.DIVERGED, f"tool '{tool_name}' diverged from the recording: {recorded.reason}"
                )
            if isinstance(recorded, RecordedFailure):
                return ToolOutcome(
                    ok=False, result=None, reason=recorded.reason, replayed=True, kind=recorded.kind, key=key
                )
            self.record_tool(node, tool_name, args, recorded, 0.0, key=key, replayed=True)
            return ToolOutcome(ok=True, result=recorded, reason=None, replayed=True, kind=ToolOutcomeKind.OK, key=key)
        if found is None:  # load_pack(tools=...) refuses this; a host that skipped it lands here
            return ToolOutcome.failed(ToolOutcomeKind.UNKNOWN, f"tool '{tool_name}' is not registered")
        if not found.available:
            return ToolOutcome.failed(ToolOutcomeKind.UNAVAILABLE, f"tool '{tool_name}' is {found.state}")
        problem = args_problem(found, args)
        if problem is not None:
            return ToolOutcome.failed(ToolOutcomeKind.BAD_ARGS, problem)
        kwargs = dict(args) if key is None else {**args, "idempotency_key": key}
        index = len(self.trace.tool_calls)
        started = time.perf_counter()
        try:
            result = found.function(**kwargs)
        except (HostFailed, FencedOut, Cancelled):  # the host's trouble, not the tool's: the run stops
            raise
        except Exception as exc:  # a tool's failure is the node's failure, not the runtime's
            return self._tool_failed(
                tape,
                node,
                index,
                tool_name,
                args,
                ToolOutcomeKind.RAISED,
                f"tool '{tool_name}' raised {type(exc).__name__}: {exc}",
            )
        latency_s = time.perf_counter() - started
        problem = result_problem(found, result)
        if problem is not None:
            return self._tool_failed(tape, node, index, tool_name, args, ToolOutcomeKind.BAD_RESULT, problem)
        self.record_tool(node, tool_name, args, result, latency_s, key=key)
        if tape is not None and tape.mode == "record":
            tape.record(self.case_id, node.id, index, tool_name, args, result)
        return ToolOutcome(ok=True, result=result, reason=None, replayed=False, kind=ToolOutcomeKind.OK, key=key)

    def _tool_failed(
        self,
        tape: TapeHook | None,
        node: Node,
        index: int,
        tool: str,
        args: dict[str, Any],
        kind: ToolOutcomeKind,
        reason: str,
    ) -> ToolOutcome:
        """A live call that failed; a recording tape keeps the failure for its replays."""
        if tape is not None and tape.mode == "record":
            tape.record_failure(self.case_id, node.id, index, tool, args, kind, reason)
        return ToolOutcome.failed(kind, reason)

    def _visit(self, node_id: str) -> int:
        """How many times this run has entered `node_id`, this time included (1-based).
        Counted from the journaled steps, so a resumed run counts as the killed one did."""
        return 1 + sum(1 for s in self.trace.steps if s.node == node_id and s.status != "wait" and s.step < self.step)


def unjournaled(walk: Walk) -> list[Attempt]:
    """The attempts not yet journaled; they count as journaled now."""
    out = walk.trace.attempts[walk.journaled :]
    walk.journaled = len(walk.trace.attempts)
    return out
