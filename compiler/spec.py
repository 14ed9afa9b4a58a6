"""A spec folder: what a pack must do (`spec.yaml`) and the cases it must pass (`gold.jsonl`).

Loaded as strictly as a pack (runtime's load_pack): every problem at once, each a runtime
PackIssue naming its file and line and saying what to do; unknown keys are refused with a
"did you mean". The YAML source map, the evalset line parser and the expression compiler
are the runtime's own, so a spec and a pack report the same mistake in the same words.

The gold file's exact bytes are kept (`Spec.gold_bytes`): they become the pack's
evalset.jsonl byte for byte, and no compiler step edits, drops or reorders a case
(docs/invariants.md, 6). docs/compiler.md, "The spec", is the format reference.

The loader's parts: compiler/spec_types.py (the types and keys), spec_fields.py (inputs
and outputs), spec_keys.py (every other spec.yaml key), spec_gold.py (gold.jsonl)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from compiler.errors import SpecInvalid
from compiler.spec_gold import check_rules, check_splits, read_gold
from compiler.spec_keys import SpecReader
from compiler.spec_types import (
    BUDGET_KEYS,
    FIELD_KEYS,
    FIELD_TYPES,
    GOLD_FILE,
    RULE_KEYS,
    SPEC_FILE,
    SPEC_KEYS,
    SPLIT_KEYS,
    Budgets,
    FieldSpec,
    GoldCase,
    Rule,
    Spec,
    SplitRule,
)
from runtime import PackIssue, Scorer, SourceMap, load_yaml, nearest_key

__all__ = [
    "BUDGET_KEYS",
    "FIELD_KEYS",
    "FIELD_TYPES",
    "GOLD_FILE",
    "RULE_KEYS",
    "SPEC_FILE",
    "SPEC_KEYS",
    "SPLIT_KEYS",
    "Budgets",
    "FieldSpec",
    "GoldCase",
    "Rule",
    "Spec",
    "SplitRule",
    "load_spec",
]


def load_spec(root: str | Path, *, scorers: Mapping[str, Scorer] | None = None) -> Spec:
    """Load and check the spec folder at `root` (spec.yaml + gold.jsonl). Raises
    SpecInvalid listing every issue, each naming its file and line. `scorers`: the host's
    scorer registry; an output's `compare: scorer:NAME` that it does not hold is an issue
    (None: the names are not checked, as `packforge validate` without --scorers)."""
    root = Path(root)
    if not root.is_dir():
        raise SpecInvalid(
            [PackIssue(str(root), f"not a spec folder; it must hold {SPEC_FILE} and {GOLD_FILE}", kind="missing")]
        )
    issues: list[PackIssue] = []
    src = SourceMap(SPEC_FILE)
    doc = _document(_read(root, SPEC_FILE, issues, "every spec has one: name, task, inputs, outputs"), src, issues)
    spec = SpecReader(src, issues, scorers)
    for key in doc or {}:
        if key not in SPEC_KEYS:
            spec.error(f"unknown key '{key}'; {nearest_key(key, SPEC_KEYS)}", key, kind="unknown_key")
    name = spec.text(doc, "name")
    task = spec.text(doc, "task")
    inputs, input_names = spec.fields(doc, "inputs")
    outputs, output_names = spec.fields(doc, "outputs")
    tools = spec.tools(doc)
    rules = spec.rules(doc, input_names, output_names)
    unsure_end = spec.unsure_end(doc)
    model = spec.model(doc)
    budgets = spec.budgets(doc)
    tags = spec.split_tags(doc)
    split = spec.split(doc)
    auto_accuracy = spec.auto_accuracy(doc)

    gold_bytes = _read_bytes(root, GOLD_FILE, issues, "every spec has gold cases, one JSON object per line")
    gold: list[GoldCase] = []
    text = None if gold_bytes is None else _decode(gold_bytes, GOLD_FILE, issues)
    if text is not None:
        gold = read_gold(text, issues, inputs, input_names, outputs, output_names, unsure_end)
        check_rules(rules, gold, unsure_end, src, issues)
        check_splits(tags, gold, src, issues)
    if issues:
        raise SpecInvalid(issues)
    assert name is not None and task is not None and gold_bytes is not None  # each would be an issue
    return Spec(
        root=root,
        name=name,
        task=task,
        inputs=inputs,
        outputs=outputs,
        tools=tools,
        rules=tuple(rule for rule, _ in rules),
        unsure_end=unsure_end,
        model=model,
        budgets=budgets,
        gold=tuple(gold),
        gold_bytes=gold_bytes,
        train=tags["train"],
        validation=tags["validation"],
        test=tags["test"],
        split=split,
        auto_accuracy=auto_accuracy,
    )


def _read_bytes(root: Path, rel: str, issues: list[PackIssue], why: str) -> bytes | None:
    path = root / rel
    if not path.is_file():
        issues.append(PackIssue(rel, f"missing file: {why}; create it", kind="missing"))
        return None
    return path.read_bytes()


def _decode(data: bytes, rel: str, issues: list[PackIssue]) -> str | None:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        issues.append(PackIssue(rel, f"not UTF-8 text (byte {exc.start}); save it as UTF-8", kind="syntax"))
        return None


def _read(root: Path, rel: str, issues: list[PackIssue], why: str) -> str | None:
    data = _read_bytes(root, rel, issues, why)
    return None if data is None else _decode(data, rel, issues)


def _document(text: str | None, src: SourceMap, issues: list[PackIssue]) -> dict[str, Any] | None:
    if text is None:
        return None
    before = len(issues)
    value = load_yaml(text, src, issues)
    if len(issues) > before:
        return None
    if not isinstance(value, dict):
        issues.append(src.issue(f"{SPEC_FILE} must be a mapping with name, task, inputs and outputs"))
        return None
    return value
