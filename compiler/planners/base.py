"""The planners' public base: the shared types (compiler.planners.shared) and
`make_planner`, which opens a planner from its name: `rules` (model-free,
compiler.planners.rules), `recorded:PATH` (replays plan documents,
compiler.planners.recorded), `openai:URL#MODEL` (asks a model, compiler.planners.model).
It imports every planner, so it sits above them; they import only `shared`."""

from __future__ import annotations

from compiler.errors import CompilerError
from compiler.planners.model import ModelPlanner
from compiler.planners.recorded import RecordedPlanner
from compiler.planners.rules import RulesPlanner
from compiler.planners.shared import Feedback, Planner, PlannerFailed, PlanRequest, PlanResult

__all__ = ["Feedback", "PlanRequest", "PlanResult", "Planner", "PlannerFailed", "make_planner"]


def make_planner(spec: str, *, tools_ref: str | None = None) -> Planner:
    """The planner a spec string names: `rules`, `recorded:PATH` (a plan .json, or a
    folder of 1.json, 2.json, ...) or `openai:URL#MODEL` (any OpenAI-compatible endpoint,
    docs/endpoints.md). `tools_ref` is accepted for symmetry with `packforge build
    --tools`; planners get the tool catalogue in each PlanRequest."""
    del tools_ref
    if spec == "rules":
        return RulesPlanner()
    scheme, sep, rest = spec.partition(":")
    if sep and scheme == "recorded":
        return RecordedPlanner(rest)
    if sep and scheme == "openai":
        return ModelPlanner(spec)
    raise CompilerError(f"unknown planner {spec!r}; use rules, recorded:PATH or openai:URL#MODEL")
