"""What every planner shares: the request a planner answers, what it returns, and the
feedback the compile loop hands a re-plan (docs/compiler.md, "The planners").

A planner turns a spec, its induced schemas and the host's tool catalogue into a plan
document (compiler.plan). `make_planner` opens one from a spec string:
`rules` (model-free, compiler.planners.rules), `recorded:PATH` (replays plan documents,
compiler.planners.recorded), `openai:URL#MODEL` (asks a model, compiler.planners.model)."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from compiler.errors import CompilerError

if TYPE_CHECKING:
    from compiler.induce import Induction
    from compiler.spec import Spec
    from compiler.tools import ToolSpec


@dataclass(frozen=True)
class Feedback:
    """What the loop hands a re-plan about one attempt."""

    attempt: int  # the attempt this feedback is about
    plan: dict[str, Any]  # its plan document
    score: float  # offline (or target) pass rate, 0..1
    failing_nodes: tuple[str, ...]  # blamed nodes, most blamed first
    report: str  # blame table + failing cases, bounded to about 4k characters
    problems: tuple[str, ...] = ()  # PlanInvalid / PackInvalid messages when the plan did not load


@dataclass(frozen=True)
class PlanRequest:
    """Everything a planner may use for one attempt (1-based)."""

    spec: Spec
    induction: Induction
    catalogue: Mapping[str, ToolSpec]
    attempt: int
    feedback: Feedback | None = None


@dataclass(frozen=True)
class PlanResult:
    """A plan document (compiler.plan.parse_plan accepts it) and what it cost."""

    document: dict[str, Any]
    tokens: int = 0  # planner tokens used, prompt + completion
    cost_usd: float = 0.0


class Planner(Protocol):
    """Makes plan documents. `name` is the spec string it was opened from."""

    name: str

    def plan(self, request: PlanRequest, cancel: threading.Event | None = None) -> PlanResult: ...


class PlannerFailed(CompilerError):
    """A planner could not produce a plan document that passes parse_plan within its
    budget. `problems` are the last answer's problems; `tokens` / `cost_usd` what the
    tries cost, so the loop can still count them."""

    def __init__(self, message: str, problems: list[str], tokens: int = 0, cost_usd: float = 0.0) -> None:
        self.problems = list(problems)
        self.tokens = tokens
        self.cost_usd = cost_usd
        super().__init__(message + ("\n" + "\n".join(self.problems) if self.problems else ""))


def make_planner(spec: str, *, tools_ref: str | None = None) -> Planner:
    """The planner a spec string names: `rules`, `recorded:PATH` (a plan .json, or a
    folder of 1.json, 2.json, ...) or `openai:URL#MODEL` (any OpenAI-compatible endpoint,
    docs/endpoints.md). `tools_ref` is accepted for symmetry with `packforge build
    --tools`; planners get the tool catalogue in each PlanRequest."""
    del tools_ref
    if spec == "rules":
        from compiler.planners.rules import RulesPlanner

        return RulesPlanner()
    scheme, sep, rest = spec.partition(":")
    if sep and scheme == "recorded":
        from compiler.planners.recorded import RecordedPlanner

        return RecordedPlanner(rest)
    if sep and scheme == "openai":
        from compiler.planners.model import ModelPlanner

        return ModelPlanner(spec)
    raise CompilerError(f"unknown planner {spec!r}; use rules, recorded:PATH or openai:URL#MODEL")
