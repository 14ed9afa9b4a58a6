"""The compiler's public API is what `compiler/__init__.py` exports; the studio and the
`build` command import these names from `compiler`. Changing the list is a decision:
change it here too."""

from __future__ import annotations

import types

import compiler

PINNED = [
    # the spec (issue 11, first slice)
    "FIELD_TYPES",
    "GOLD_FILE",
    "SPEC_FILE",
    "Budgets",
    "CompilerError",
    "FieldSpec",
    "GoldCase",
    "Rule",
    "Spec",
    "SpecInvalid",
    "load_spec",
    # schema induction (issue 11, stage 1)
    "Constraint",
    "InducedField",
    "Induction",
    "InductionScore",
    "induce",
    "score_against_grammars",
    # the plan document (issue 11, stage 2)
    "PLAN_SCHEMA",
    "Plan",
    "PlanEdge",
    "PlanInvalid",
    "PlanNode",
    "parse_plan",
    # the tools catalogue (issue 11, planners)
    "ToolSpec",
    "catalogue",
    # the planners (issue 11, stage 2)
    "Feedback",
    "ModelPlanner",
    "PlanRequest",
    "PlanResult",
    "Planner",
    "PlannerFailed",
    "RecordedPlanner",
    "RulesPlanner",
    "make_planner",
    # the offline test model, the compile loop (issue 11, loop)
    "offline_script",
    "AttemptRecord",
    "BuildResult",
    "Progress",
    "build",
]


def test_it_exports_exactly_the_pinned_names() -> None:
    assert sorted(compiler.__all__) == sorted(PINNED)
    assert len(set(compiler.__all__)) == len(compiler.__all__)


def test_it_exports_every_public_name_it_imports() -> None:
    public = [name for name, value in vars(compiler).items() if not name.startswith("_")]
    assert sorted(compiler.__all__) == sorted(n for n in public if not isinstance(vars(compiler)[n], types.ModuleType))


def test_it_resolves_every_exported_name() -> None:
    assert [name for name in compiler.__all__ if not hasattr(compiler, name)] == []
