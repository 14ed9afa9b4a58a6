"""Lookahead: independent nodes run side by side.

While the walker runs one node, the first model call of each coming `generate` node
that cannot depend on it is already on its way: the nodes are on the run's planned path
(each reached from the one before by its only `next` edge, which has no `when:`), and
none reads what a node before it in the window writes, nor `continues:` one. The walker
stays the only writer of the run: it still runs every node in graph order, and when a
node's first call is the one made ahead (the same messages, schema and settings) it
takes that reply instead of asking again, then verifies, retries and commits it as it
would have. A call that no longer matches (the state it was built on changed), or that
failed, is dropped and the call is made afresh; a run that leaves the planned path (a
node failed and took on_fail, a `when:` chose another edge) drops what it made ahead. A
dropped reply that had come stays in the trace as an attempt of stage `lookahead`
(category `unused`, journaled with the next step; not counted as an answer or a
rejection), so the run's tokens count it; a call stopped in flight leaves nothing (what
the server spent on it is not known).

Ahead-of-time calls never queue: they go out only on a free slot of the endpoint's cap
(`ModelCall.spare`), at most `lookahead` at once (the endpoint option,
docs/endpoints.md), each on its own llama-server slot (`ModelCall.lane`). A reply is
journaled only as the attempt the walker made of it, so a resumed run replays as one
without lookahead would (runtime.journal_replay skips `lookahead` attempts)."""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from runtime.backends.base import Backend, ModelCall, ModelReply
from runtime.errors import Cancelled
from runtime.nodes.base import covered
from runtime.nodes.generate import first_call
from runtime.trace import Attempt, Trace

if TYPE_CHECKING:
    from runtime.pack.model import Node, Pack

log = logging.getLogger("packforge.run")

MAX_CHAIN = 16  # nodes followed ahead of the current one, at most
UNUSED = "made ahead for this node; the run did not reach it with this call"


class Walk(Protocol):
    """What lookahead reads of the run in progress (runtime.walk.Walk)."""

    pack: Pack
    state: dict[str, Any]
    input: dict[str, Any]
    calls: dict[str, int]
    trace: Trace
    step: int

    @property
    def tier_name(self) -> str | None: ...

    def call_for(
        self,
        node: Node,
        messages: list[dict[str, str]],
        schema: dict[str, Any] | None,
        attempt: int,
        purpose: str = "answer",
        *,
        logprobs: bool = False,
    ) -> ModelCall: ...


@dataclass
class _Ahead:
    call: ModelCall
    future: Future[ModelReply]
    stop: threading.Event


def depends(node: Node, written: set[str]) -> bool:
    """Whether `node` may read something in `written` (or it under or above a path there)."""
    return any(covered(read, written) or any(covered(w, (read,)) for w in written) for read in node.reads)


def next_on_path(pack: Pack, node_id: str) -> str | None:
    """The node after `node_id` when it succeeds: its only `next` edge, without `when:`."""
    edges = pack.outgoing(node_id)
    if len(edges) != 1 or edges[0].when is not None:
        return None
    return edges[0].target


class Lookahead:
    """The calls made ahead for one run (runtime.walk.Walk.lookahead)."""

    def __init__(self, backend: Backend, depth: int) -> None:
        self.backend = backend
        self.depth = depth
        self.plan: list[str] = []  # the nodes after the current one, in the order the run will reach them
        self.pending: dict[str, _Ahead] = {}
        self._pool = ThreadPoolExecutor(max_workers=depth, thread_name_prefix="packforge-lookahead")
        self.made = self.used = self.dropped = 0
        self._closed = False

    def before(self, walk: Walk, node: Node) -> None:
        """The walker is about to run `node`: keep what was made for the path it is on,
        drop the rest, and send the first calls of the independent nodes ahead."""
        if self.plan and self.plan[0] == node.id:
            self.plan.pop(0)
        elif self.plan or self.pending:
            self.drop_all(walk)
        for stale in [n for n in self.pending if n != node.id and n not in self.plan]:
            self._drop(walk, self.pending.pop(stale))  # sent for a node the run passed without asking it
        tail = self.plan[-1] if self.plan else node.id
        written = {w for n in (node.id, *self.plan) for w in walk.pack.nodes[n].writes}
        for _ in range(MAX_CHAIN - len(self.plan)):
            target = next_on_path(walk.pack, tail)
            if target is None or target == node.id or target in self.plan:
                return
            ahead = walk.pack.nodes[target]
            if ahead.kind in ("end", "human") or ahead.continues is not None or depends(ahead, written):
                return
            sent = ahead.kind != "generate" or target in self.pending
            if not sent and (len(self.pending) >= self.depth or not self._send(walk, ahead)):
                return
            self.plan.append(target)
            written.update(ahead.writes)
            tail = target

    def _send(self, walk: Walk, node: Node) -> bool:
        first = first_call(node, walk.pack, walk.state, walk.input)
        if first is None:
            return False
        messages, schema, logprobs = first
        stop = threading.Event()
        call = dataclasses.replace(
            walk.call_for(node, messages, schema, walk.calls.get(node.id, 0) + 1, logprobs=logprobs),
            cancel=stop,  # its own: dropping it must not cancel the run
            lane=min(set(range(1, self.depth + 1)) - {a.call.lane for a in self.pending.values()}),
            spare=True,
        )
        self.pending[node.id] = _Ahead(call, self._pool.submit(self._complete, call), stop)
        self.made += 1
        return True

    def _complete(self, call: ModelCall) -> ModelReply:
        started = time.perf_counter()
        reply = self.backend.complete(call)
        if not reply.latency_s:
            reply.latency_s = time.perf_counter() - started
        return reply

    def take(self, walk: Walk, call: ModelCall) -> ModelReply | None:
        """The reply made ahead for `call`, waited for; None: ask afresh."""
        ahead = self.pending.pop(call.node, None)
        if ahead is None:
            return None
        if not _same(ahead.call, call):
            self._drop(walk, ahead)
            return None
        while not wait([ahead.future], timeout=0.05).done:
            if call.cancel is not None and call.cancel.is_set():
                ahead.stop.set()
                raise Cancelled("run cancelled")
        failure = ahead.future.exception()  # its failure is not the walk's: the call is made again
        if failure is not None:
            log.info("lookahead.failed", extra={"fields": {"node": call.node, "error": str(failure)[:200]}})
            self.dropped += 1
            return None
        self.used += 1
        return ahead.future.result()

    def drop_all(self, walk: Walk) -> None:
        for ahead in self.pending.values():
            self._drop(walk, ahead)
        self.pending.clear()
        self.plan.clear()

    def close(self, walk: Walk) -> None:
        """Stop and drop everything made ahead; the run is over. Safe to call twice."""
        self.drop_all(walk)
        self._pool.shutdown(wait=False, cancel_futures=True)
        if self.made and not self._closed:
            log.info(
                "lookahead.done",
                extra={"fields": {"made": self.made, "used": self.used, "dropped": self.dropped}},
            )
        self._closed = True

    def _drop(self, walk: Walk, ahead: _Ahead) -> None:
        """Stop a call made ahead; a reply that had already come is kept in the trace
        as an unused attempt (its tokens were spent)."""
        ahead.stop.set()
        self.dropped += 1
        if not ahead.future.done() or ahead.future.cancelled() or ahead.future.exception() is not None:
            return
        reply = ahead.future.result()
        walk.trace.attempts.append(
            Attempt(
                node=ahead.call.node,
                step=walk.step,
                attempt=ahead.call.attempt,
                stage="lookahead",
                ok=False,
                category="unused",
                reason=UNUSED,
                text=reply.text,
                prompt_tokens=reply.prompt_tokens,
                cached_tokens=reply.cached_tokens or 0,
                completion_tokens=reply.completion_tokens,
                latency_s=reply.latency_s,
                cost_usd=reply.cost_usd,
                request_id=reply.request_id or ahead.call.request_id,
                tier=walk.tier_name,
            )
        )


def _same(made: ModelCall, asked: ModelCall) -> bool:
    return (
        made.attempt == asked.attempt
        and made.purpose == asked.purpose
        and made.messages == asked.messages
        and made.schema == asked.schema
        and made.max_tokens == asked.max_tokens
        and made.temperature == asked.temperature
        and made.logprobs == asked.logprobs
        and made.given == asked.given
    )
