"""Packforge compiler: a spec (task in words, inputs, outputs, rules) and gold cases in,
a pack that passes them out. Imports the runtime's public API only (`from runtime
import ...`), never the studio.

What it holds (docs/compiler.md): the spec loader, schema induction, the planners and
their plan format, the emitter, the offline structure check, the attempts loop, and the
search and verdict on the target model (splits, trials, the target cache). This module is
the compiler's public API; tests/compiler/test_exported_members.py pins the list."""

from compiler.errors import CompilerError, PlanInvalid, SpecInvalid
from compiler.induce import Constraint, InducedField, Induction, induce
from compiler.induce_score import InductionScore, score_against_grammars
from compiler.loop import AttemptRecord, BuildResult, Progress, build
from compiler.offline import offline_script
from compiler.plan import PLAN_SCHEMA, Plan, PlanEdge, PlanNode, parse_plan
from compiler.planners import (
    Feedback,
    ModelPlanner,
    Planner,
    PlannerFailed,
    PlanRequest,
    PlanResult,
    RecordedPlanner,
    RulesPlanner,
    make_planner,
)
from compiler.spec import FIELD_TYPES, GOLD_FILE, SPEC_FILE, Budgets, FieldSpec, GoldCase, Rule, Spec, load_spec
from compiler.tools import ToolSpec, catalogue

__all__ = [
    "FIELD_TYPES",
    "GOLD_FILE",
    "PLAN_SCHEMA",
    "SPEC_FILE",
    "AttemptRecord",
    "Budgets",
    "BuildResult",
    "CompilerError",
    "Constraint",
    "Feedback",
    "FieldSpec",
    "GoldCase",
    "InducedField",
    "Induction",
    "InductionScore",
    "ModelPlanner",
    "Plan",
    "PlanEdge",
    "PlanInvalid",
    "PlanNode",
    "PlanRequest",
    "PlanResult",
    "Planner",
    "PlannerFailed",
    "Progress",
    "RecordedPlanner",
    "Rule",
    "RulesPlanner",
    "Spec",
    "SpecInvalid",
    "ToolSpec",
    "build",
    "catalogue",
    "induce",
    "load_spec",
    "make_planner",
    "offline_script",
    "parse_plan",
    "score_against_grammars",
]
