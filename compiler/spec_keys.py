"""spec.yaml's keys other than the fields: name and task, tools, rules, the unsure end,
the model, the budgets, the split tags and seeded split rule, and the auto tier's
accuracy. Each problem becomes an issue at its key's line (docs/compiler.md, "The spec")."""

from __future__ import annotations

from typing import Any

from compiler.spec_fields import FieldReader, is_number
from compiler.spec_types import (
    AUTO_ACCURACY,
    BUDGET_KEYS,
    NODE_ID,
    RULE_KEYS,
    SPLIT_KEYS,
    SPLIT_TAG_KEYS,
    Budgets,
    Rule,
    SplitRule,
)
from runtime import BadSpec, ExprError, Expression, compile_expr, nearest_key, parse_backend_spec

_SPLIT_WORDS = {
    "train": "the train split (few-shot examples come from it only)",
    "validation": "the validation split (it scores the search's choices)",
    "test": "the test split (reported, never used for a choice)",
}


class SpecReader(FieldReader):
    """Reads the parts of spec.yaml; each problem becomes an issue at its key's line."""

    def text(self, doc: dict[str, Any] | None, key: str) -> str | None:
        if doc is None:
            return None
        if key not in doc:
            self.error(f"'{key}' is required; add it", kind="missing")
            return None
        value = doc[key]
        if not isinstance(value, str) or not value.strip():
            self.error(f"'{key}' must be non-empty text", key)
            return None
        return value.strip() if key == "name" else value

    def tools(self, doc: dict[str, Any] | None) -> tuple[str, ...]:
        value = (doc or {}).get("tools")
        if value is None:
            return ()
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            self.error("'tools' must be a list of tool names (the host registers them)", "tools")
            return ()
        for i, name in enumerate(value):
            if name in value[:i]:
                self.error(f"tool '{name}' is named twice; keep one", "tools", i)
        return tuple(dict.fromkeys(value))

    def rules(
        self, doc: dict[str, Any] | None, inputs: set[str] | None, outputs: set[str] | None
    ) -> list[tuple[Rule, Expression | None]]:
        value = (doc or {}).get("rules")
        if value is None:
            return []
        if not isinstance(value, list):
            self.error("'rules' must be a list of {text: ..., expr: ...}", "rules")
            return []
        found: list[tuple[Rule, Expression | None]] = []
        for i, entry in enumerate(value):
            at = ("rules", i)
            if not isinstance(entry, dict):
                self.error(f"rules[{i}] must be a mapping {{text: ..., expr: ...}} (expr is optional)", *at)
                continue
            self.unknown_keys(entry, RULE_KEYS, f"rules[{i}]", *at)
            text = entry.get("text")
            if not isinstance(text, str) or not text.strip():
                self.error(f"rules[{i}] needs 'text': the rule in words", *at)
                text = None
            source, expression = entry.get("expr"), None
            if source is not None:
                expression = self.expression(source, inputs, outputs, *at, "expr")
            if text is not None and (source is None or expression is not None):
                found.append((Rule(text, source), expression))
        return found

    def expression(
        self, source: Any, inputs: set[str] | None, outputs: set[str] | None, *at: str | int
    ) -> Expression | None:
        if not isinstance(source, str):
            self.error(f"expected an expression string, got {type(source).__name__}", *at)
            return None
        try:
            expression = compile_expr(source)
        except ExprError as exc:
            self.error(f"bad expression {source!r}: {exc}", *at, kind="syntax")
            return None
        ok = True
        for ref in sorted(expression.references):
            root, _, rest = ref.partition(".")
            if root == "input":
                name = rest.partition(".")[0]
                if not name:
                    self.error("a rule reads input fields one by one: write input.<name>", *at, kind="reference")
                    ok = False
                elif inputs is not None and name not in inputs:
                    hint = nearest_key(name, inputs)
                    self.error(f"'input.{name}' is not a declared input; {hint}", *at, kind="reference")
                    ok = False
            elif outputs is not None and root not in outputs:
                hint = nearest_key(root, outputs)
                self.error(
                    f"'{root}' is not a declared output (a rule reads outputs and input.<name> only); {hint}",
                    *at,
                    kind="reference",
                )
                ok = False
        return expression if ok else None

    def unsure_end(self, doc: dict[str, Any] | None) -> str | None:
        value = (doc or {}).get("unsure_end")
        if value is None:
            return None
        if not isinstance(value, str) or not NODE_ID.fullmatch(value):
            self.error(
                "'unsure_end' names the end a case goes to when the model cannot decide: "
                "lowercase letters, digits and '_', like needs_review",
                "unsure_end",
            )
            return None
        return value

    def split_tags(self, doc: dict[str, Any] | None) -> dict[str, str | None]:
        """`train`, `validation`, `test`: each the tag its split's gold cases carry (None
        when not named). Two keys naming one tag is an error at the second."""
        found: dict[str, str | None] = {}
        for key in SPLIT_TAG_KEYS:
            value = (doc or {}).get(key)
            if value is None:
                found[key] = None
            elif not isinstance(value, str) or not value.strip():
                self.error(f"'{key}' names the tag of the gold cases that are {_SPLIT_WORDS[key]}, e.g. {key}", key)
                found[key] = None
            elif value in found.values():
                other = next(k for k, v in found.items() if v == value)
                self.error(f"'{key}': the tag '{value}' already names the {other} split; give each split its tag", key)
                found[key] = None
            else:
                found[key] = value
        return found

    def split(self, doc: dict[str, Any] | None) -> SplitRule:
        """`split: {seed, validation, test}`: the seeded split's seed and shares."""
        value = (doc or {}).get("split")
        if value is None:
            return SplitRule()
        if not isinstance(value, dict):
            self.error("'split' must be a mapping {seed: N, validation: 0.25, test: 0.25}", "split")
            return SplitRule()
        self.unknown_keys(value, SPLIT_KEYS, "split", "split")
        found: dict[str, Any] = {}
        before = len(self.issues)
        seed = value.get("seed")
        if seed is not None:
            if not isinstance(seed, int) or isinstance(seed, bool):
                self.error(f"split.seed must be a whole number, got {seed!r}", "split", "seed")
            else:
                found["seed"] = seed
        for key in ("validation", "test"):
            share = value.get(key)
            if share is None:
                continue
            if not is_number(share) or not 0 < share < 1:
                self.error(
                    f"split.{key} is the share of gold cases in the {key} split: a fraction > 0 and < 1, got {share!r}",
                    "split",
                    key,
                )
            else:
                found[key] = float(share)
        rule = SplitRule(**found)
        if len(self.issues) == before and rule.validation + rule.test >= 1:
            self.error(
                f"split: validation {rule.validation} + test {rule.test} leave no gold cases to train on; "
                "their sum must be < 1",
                "split",
            )
            return SplitRule()
        return rule

    def auto_accuracy(self, doc: dict[str, Any] | None) -> float:
        """`auto_accuracy`: the accuracy the auto tier must reach (its lower confidence bound)."""
        value = (doc or {}).get("auto_accuracy")
        if value is None:
            return AUTO_ACCURACY
        if not is_number(value) or not 0 < value < 1:
            self.error(
                f"'auto_accuracy' is the accuracy the auto tier must reach: a fraction > 0 and < 1 "
                f"like 0.9, got {value!r}",
                "auto_accuracy",
            )
            return AUTO_ACCURACY
        return float(value)

    def model(self, doc: dict[str, Any] | None) -> str | None:
        value = (doc or {}).get("model")
        if value is None:
            return None
        if not isinstance(value, str):
            self.error("'model' must be a model spec string like openai:URL#MODEL", "model")
            return None
        try:
            parse_backend_spec(value)
        except BadSpec as exc:
            self.error(f"'model': {exc}", "model")
            return None
        return value

    def budgets(self, doc: dict[str, Any] | None) -> Budgets:
        value = (doc or {}).get("budgets")
        if value is None:
            return Budgets()
        if not isinstance(value, dict):
            self.error(
                "'budgets' must be a mapping {attempts: N, planner_tokens: N, cost_usd: X, target_calls: N}", "budgets"
            )
            return Budgets()
        self.unknown_keys(value, BUDGET_KEYS, "budgets", "budgets")
        found: dict[str, Any] = {}
        for key in ("attempts", "planner_tokens", "target_calls"):
            n = value.get(key)
            if n is None:
                continue
            if not isinstance(n, int) or isinstance(n, bool) or n < 1:
                self.error(f"budgets.{key} must be a whole number >= 1", "budgets", key)
            else:
                found[key] = n
        cost = value.get("cost_usd")
        if cost is not None:
            if not is_number(cost) or cost < 0:
                self.error("budgets.cost_usd must be a number of dollars >= 0", "budgets", "cost_usd")
            else:
                found["cost_usd"] = float(cost)
        return Budgets(**found)
