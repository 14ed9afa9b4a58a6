"""The host's tools: the registry (runtime.tools.registry) and what one call produces
(runtime.tools.calls). The call itself is runtime.walk.Walk.call_tool, the one path
every tool call in a run takes (docs/tools.md)."""

from runtime.tools.calls import (
    OUTCOME_KINDS,
    Divergence,
    RecordedFailure,
    TapeHook,
    ToolOutcome,
    ToolOutcomeKind,
    args_problem,
    idempotency_key,
    result_problem,
    same_call,
)
from runtime.tools.registry import DECLARATION, Registry, Tool, ToolDef, load_tools, tool, tool_def

__all__ = [
    "DECLARATION",
    "OUTCOME_KINDS",
    "Divergence",
    "RecordedFailure",
    "Registry",
    "TapeHook",
    "Tool",
    "ToolDef",
    "ToolOutcome",
    "ToolOutcomeKind",
    "args_problem",
    "idempotency_key",
    "load_tools",
    "result_problem",
    "same_call",
    "tool",
    "tool_def",
]
