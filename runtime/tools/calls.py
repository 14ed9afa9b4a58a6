"""What one tool call in a run produces (`ToolOutcome`), and the pieces of the one call
path (runtime.walk.Walk.call_tool) that need no run: the idempotency key, argument and
result validation, and the recording hook's contract (`TapeHook`).

The order of a call (Walk.call_tool): journal replay -> recording replay (the tape) ->
registry lookup (unknown / unavailable) -> arguments against the `args` schema -> the
tool's own `check` -> the call (with `idempotency_key=` when it has side effects) ->
the result against the `result` schema -> journal -> recording (the tape)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Protocol

from jsonschema.exceptions import best_match

from runtime.tools.registry import ToolDef
from runtime.verify import describe_schema_error

__all__ = [
    "OUTCOME_KINDS",
    "Divergence",
    "RecordedFailure",
    "TapeHook",
    "ToolOutcome",
    "ToolOutcomeKind",
    "args_problem",
    "idempotency_key",
    "result_problem",
    "same_call",
]


class ToolOutcomeKind(StrEnum):
    """What became of a tool call (ToolOutcome.kind). OK: the tool returned a valid result
    (or one was replayed). The rest fail the node. Members compare equal to their values."""

    OK = "ok"
    UNAVAILABLE = "unavailable"  # a dependency missing
    UNKNOWN = "unknown"  # not in the registry
    BAD_ARGS = "bad_args"  # the `args` schema or the tool's check refused the arguments
    BAD_RESULT = "bad_result"  # the result broke the declared schema
    RAISED = "raised"  # the tool raised, or returned something not JSON
    DIVERGED = "diverged"  # a replayed recording has no such call


OUTCOME_KINDS = tuple(k.value for k in ToolOutcomeKind)


@dataclass(frozen=True, kw_only=True)
class ToolOutcome:
    """What a tool call produced. `ok` False is a node failure (the node's on_fail);
    `reason` then says why, in words for an author. `replayed`: the result came from the
    run's journal or a recording, not from calling the tool. `key`: the idempotency key
    the call had (side-effecting tools only)."""

    ok: bool
    result: Any
    reason: str | None
    replayed: bool
    kind: str  # a ToolOutcomeKind; a RecordedFailure replays the kind its recording names
    key: str | None = None

    @classmethod
    def failed(cls, kind: ToolOutcomeKind, reason: str) -> ToolOutcome:
        return cls(ok=False, result=None, reason=reason, replayed=False, kind=kind)


@dataclass(frozen=True)
class Divergence:
    """A recording replay found no recorded call matching this one (another tool, other
    arguments, or none at this index): the call is not made live."""

    reason: str


@dataclass(frozen=True)
class RecordedFailure:
    """A recording replay's answer for a call that failed when it was recorded (the tool
    raised, or its result broke the schema): the same failure again, the tool not called."""

    kind: str  # raised | bad_result
    reason: str


class TapeHook(Protocol):
    """The recordings hook on RunOptions.tape (runtime.recordings.ToolTape meets it).
    `mode` "record": every call made live is passed to `record` after it is journaled.
    `mode` "replay": `lookup` answers every call instead of the tool: the recorded
    result, a RecordedFailure, or a Divergence. `index` is the call's position among the
    run's journaled tool calls (0-based; a failed call is not journaled, so it shares
    its index with the next call). `record_failure`: a call made live that failed
    (raised, bad_result), so a replay fails it the same way."""

    mode: str

    def lookup(self, case_id: str | None, node: str, index: int, tool: str, args: dict[str, Any]) -> Any: ...

    def record(
        self, case_id: str | None, node: str, index: int, tool: str, args: dict[str, Any], result: Any
    ) -> None: ...

    def record_failure(
        self, case_id: str | None, node: str, index: int, tool: str, args: dict[str, Any], kind: str, reason: str
    ) -> None: ...


def idempotency_key(run_id: str, node_id: str, visit: int, call: int = 1) -> str:
    """`run:node:visit`, where visit counts this run's entries into the node (1-based);
    the n-th call within one visit (a choose_tool loop, n > 1) adds `:n`. Deterministic
    on resume, so a call re-executed after a kill gets the key it had before."""
    key = f"{run_id}:{node_id}:{visit}"
    return key if call == 1 else f"{key}:{call}"


def args_problem(tool: ToolDef, args: dict[str, Any]) -> str | None:
    """Why `args` may not be passed to `tool` (its schema, then its own check), or None."""
    error = best_match(tool.args_validator.iter_errors(args))
    if error is not None:
        return f"tool '{tool.name}' was given bad arguments: {_where(describe_schema_error(error), 'the arguments')}"
    if tool.check is not None:
        try:
            problem = tool.check(dict(args))
        except Exception as exc:  # a broken check refuses the call rather than crashing the run
            return f"tool '{tool.name}': its argument check raised {type(exc).__name__}: {exc}"
        if problem:
            return f"tool '{tool.name}' refused the arguments: {problem}"
    return None


def result_problem(tool: ToolDef, result: Any) -> str | None:
    """Why `result` breaks `tool`'s declared result schema (or is not JSON), or None."""
    try:
        json.dumps(result)
    except (TypeError, ValueError) as exc:
        return f"tool '{tool.name}' returned something that is not JSON: {exc}"
    error = best_match(tool.result_validator.iter_errors(result))
    if error is not None:
        return f"tool '{tool.name}' returned a bad result: {_where(describe_schema_error(error), 'the result')}"
    return None


def same_call(a_tool: str, a_args: dict[str, Any], b_tool: str, b_args: dict[str, Any]) -> bool:
    """Whether two calls are the same call: one tool, equal arguments as JSON."""
    return a_tool == b_tool and _canonical(a_args) == _canonical(b_args)


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def _where(sentence: str, whole: str) -> str:
    return sentence.replace("the answer", whole, 1)
