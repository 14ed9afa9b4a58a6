"""Planners: spec + induction + tool catalogue -> a plan document (docs/compiler.md,
"The planners"). `make_planner("rules" | "recorded:PATH" | "openai:URL#MODEL")`."""

from compiler.planners.base import Feedback, Planner, PlannerFailed, PlanRequest, PlanResult, make_planner
from compiler.planners.model import ModelPlanner
from compiler.planners.recorded import RecordedPlanner
from compiler.planners.rules import RulesPlanner, rules_plan

__all__ = [
    "Feedback",
    "ModelPlanner",
    "PlanRequest",
    "PlanResult",
    "Planner",
    "PlannerFailed",
    "RecordedPlanner",
    "RulesPlanner",
    "make_planner",
    "rules_plan",
]
