"""A served run's events as its walk emits them (RunEvent; each one's `at` is when it
happened, its number the order): run.start, node.start (when the walk moves to a node),
model.call (each call, after it: `EventBackend`), attempt.rejected (each refused attempt,
as journaled), escalated (the runtime's on_escalate), tool.call / tool.result (around each
real tool call: `tool_with_events`; a replayed tool result is not called, so has none),
waiting, run.end. tool.call and escalated are written at once (a client sees a slow tool
or a climb while it happens), the others with their step (served_store.ServedStore)."""

from __future__ import annotations

import time
from typing import Any, Protocol

from django.db import InterfaceError, OperationalError

from runtime import Backend, BackendError, HostFailed, ModelCall, ModelReply, Tool
from studio.deployments import events


class EventWriter(Protocol):
    """What writes a run's pending events in a transaction of its own, fence checked
    (served_store.ServedStore)."""

    fence: int | None

    def write_events(self) -> None: ...


class Recorder:
    """One run's events (an events.Batch): held until the transaction of the next
    checkpoint write, which writes them with it (ServedStore); `now` ones (a tool about
    to be called, an escalation) are written at once, in a transaction of their own that
    checks the fence. Knows the node the walk is at (for model and tool events)."""

    def __init__(self, run_pk: int) -> None:
        self.run_pk = run_pk
        self.node: str | None = None
        self.step = 0
        self.batch = events.Batch(run_pk)
        self.store: EventWriter | None = None

    def emit(self, kind: str, data: dict[str, Any], *, now: bool = False) -> None:
        self.batch.add(kind, data)
        if now and self.store is not None and self.store.fence is not None:
            self.store.write_events()

    def node_start(self, node: str, step: int) -> None:
        self.node, self.step = node, step
        self.emit("node.start", {"node": node, "step": step})


class EventBackend:
    """A tier's backend, writing a model.call event for each call (after it)."""

    def __init__(self, inner: Backend, tier: str, recorder: Recorder) -> None:
        self.inner, self.tier, self.recorder = inner, tier, recorder
        self.spec = inner.spec

    def complete(self, call: ModelCall) -> ModelReply:
        started = time.monotonic()
        data: dict[str, Any] = {
            "node": call.node,
            "attempt": call.attempt,
            "tier": self.tier,
            "request_id": call.request_id,
            "purpose": call.purpose,
        }
        try:
            reply = self.inner.complete(call)
        except BackendError as exc:
            self.recorder.emit(
                "model.call", {**data, "ok": False, "error": str(exc), "latency_s": time.monotonic() - started}
            )
            raise
        self.recorder.emit(
            "model.call",
            {
                **data,
                "ok": True,
                "latency_s": round(reply.latency_s or time.monotonic() - started, 4),
                "prompt_tokens": reply.prompt_tokens,
                "completion_tokens": reply.completion_tokens,
                "finish_reason": reply.finish_reason,
            },
        )
        return reply

    def close(self) -> None:  # the runner owns the inner backend
        pass


def tool_with_events(name: str, fn: Tool, recorder: Recorder) -> Tool:
    def emit(kind: str, data: dict[str, Any], *, now: bool = False) -> None:
        # The database failing here is the host's trouble, not the tool's: HostFailed
        # stops the run unjournaled (run_served releases it for another delivery)
        # instead of failing the node and taking its on_fail.
        try:
            recorder.emit(kind, data, now=now)
        except (OperationalError, InterfaceError) as exc:
            raise HostFailed(f"writing the {kind} event failed: {exc}") from exc

    def call(**kwargs: Any) -> Any:
        emit("tool.call", {"node": recorder.node, "tool": name, "args": kwargs}, now=True)
        started = time.monotonic()
        try:
            result = fn(**kwargs)
        except Exception as exc:
            emit(
                "tool.result",
                {"node": recorder.node, "tool": name, "ok": False, "error": f"{type(exc).__name__}: {exc}"},
            )
            raise
        emit(
            "tool.result",
            {
                "node": recorder.node,
                "tool": name,
                "ok": True,
                "result": result,
                "latency_s": round(time.monotonic() - started, 4),
            },
        )
        return result

    return call
