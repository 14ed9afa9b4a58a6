"""The parts of a loaded spec (docs/compiler.md, "The spec"): the types `load_spec`
returns and the keys spec.yaml may hold. `compiler.spec` re-exports them."""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runtime import FieldRule

SPEC_FILE = "spec.yaml"
GOLD_FILE = "gold.jsonl"
SPEC_KEYS = frozenset(
    {
        "name",
        "task",
        "inputs",
        "outputs",
        "tools",
        "rules",
        "unsure_end",
        "model",
        "budgets",
        "train",
        "validation",
        "test",
        "split",
        "auto_accuracy",
    }
)
FIELD_KEYS = frozenset({"description", "type", "values", "compare", "tolerance", "options", "pass"})
RULE_KEYS = frozenset({"text", "expr"})
BUDGET_KEYS = frozenset({"attempts", "planner_tokens", "cost_usd", "target_calls"})
SPLIT_KEYS = frozenset({"seed", "validation", "test"})
# The keys that name a split by the tag its gold cases carry, in the splits' order.
SPLIT_TAG_KEYS = ("train", "validation", "test")
# A declared type names the JSON type of a field's non-null values (null is always
# allowed: whether a field may be null is induced from the gold cases).
FIELD_TYPES = ("string", "number", "integer", "boolean", "array", "object")
# Fields become state fields and expression names: plain identifiers, none of the
# expression language's own words.
FIELD_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
RESERVED = frozenset({"input", "true", "false", "null"})
NODE_ID = re.compile(r"[a-z0-9_]+")
AUTO_ACCURACY = 0.9  # `auto_accuracy` when spec.yaml does not set it


@dataclass(frozen=True)
class FieldSpec:
    """One input or output: its name, what it holds in words, and optionally its JSON type."""

    name: str
    description: str
    type: str | None = None
    # `values`: the closed set of the field's allowed non-null values, as the author
    # states it (gold may show only some); `compare`: how the evalset compares it (the
    # pack manifest's `fields:` rule, a host scorer's with its `options` and `pass`;
    # outputs only).
    values: tuple[Any, ...] | None = None
    compare: FieldRule | None = None
    # `item_set`: `values` closes the items of the field's lists, not its whole values (a
    # multi-label field: declared `type: array`, or untyped with lists in every gold value).
    item_set: bool = False


@dataclass(frozen=True)
class Rule:
    """A rule in words, and optionally as an expression over outputs and `input.<name>`."""

    text: str
    expr: str | None = None


@dataclass(frozen=True)
class Budgets:
    """What one compile may spend: attempts (plan -> emit -> evaluate rounds), planner
    tokens (prompt + completion, all attempts together), dollars, and calls to the target
    model (the search's budget)."""

    attempts: int = 5
    planner_tokens: int = 200_000
    cost_usd: float = 5.0
    target_calls: int = 3000


@dataclass(frozen=True)
class SplitRule:
    """How the seeded split deals the gold cases when the spec names no split tags: the
    seed, and the shares of validation and test (train gets the rest)."""

    seed: int = 0
    validation: float = 0.25
    test: float = 0.25


@dataclass(frozen=True)
class GoldCase:
    """One line of gold.jsonl (the evalset's line format); `line` is its 1-based line.
    `human` holds the answers a person gives at the unsure end, when the case has them."""

    id: str
    input: dict[str, Any]
    expected: dict[str, Any]
    path: tuple[str, ...] | None
    end: str | None
    tags: tuple[str, ...]
    line: int
    human: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Spec:
    """A loaded spec folder. Build with `load_spec`."""

    root: Path
    name: str
    task: str
    inputs: dict[str, FieldSpec]
    outputs: dict[str, FieldSpec]
    tools: tuple[str, ...]
    rules: tuple[Rule, ...]
    unsure_end: str | None
    model: str | None
    budgets: Budgets
    gold: tuple[GoldCase, ...]
    gold_bytes: bytes
    train: str | None = None  # gold cases with this tag are the train split (few-shot examples)
    validation: str | None = None  # ... the validation split (scores the search's choices)
    test: str | None = None  # ... the test split (reported, never used for a choice)
    split: SplitRule = field(default_factory=SplitRule)  # the seeded split, used when no split tag is named
    auto_accuracy: float = AUTO_ACCURACY  # the accuracy (lower confidence bound) the auto tier must reach

    def declared_values(self) -> dict[str, list[Any]]:
        """The outputs that declare `values`: name -> the allowed non-null values; for a
        multi-label field (`item_set`) the key is `name[]` (its items' path) and the values
        are the item set. `induce(declared=...)` takes this as it is."""
        return {
            f"{name}[]" if f.item_set else name: list(f.values)
            for name, f in self.outputs.items()
            if f.values is not None
        }

    def compare_rules(self) -> dict[str, FieldRule]:
        """The outputs that declare `compare`: name -> their rule."""
        return {name: f.compare for name, f in self.outputs.items() if f.compare is not None}

    def scorers(self) -> dict[str, str]:
        """The outputs compared by a host scorer (`compare: scorer:NAME`): name -> NAME."""
        return {name: rule.scorer for name, rule in self.compare_rules().items() if rule.compare == "scorer"}


def rule_document(rule: FieldRule) -> dict[str, Any]:
    """A compare rule as a pack manifest's `fields:` holds it (docs/pack-format.md,
    "fields"): `{compare: scorer:NAME, options: {...}, pass: P}` for a host scorer."""
    if rule.compare == "scorer":
        body: dict[str, Any] = {"compare": f"scorer:{rule.scorer}"}
        if rule.options:
            body["options"] = {key: copy.deepcopy(value) for key, value in rule.options}
        body["pass"] = rule.pass_at
        return body
    body = {"compare": rule.compare}
    if rule.compare == "number" and rule.tolerance:
        body["tolerance"] = rule.tolerance
    return body
