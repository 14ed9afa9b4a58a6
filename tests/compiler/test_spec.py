"""The spec loader: the example specs load, gold is kept byte for byte, and every mistake
is reported with its file and line, all at once."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from compiler import Budgets, FieldSpec, GoldCase, Rule, SpecInvalid, load_spec
from compiler.spec import SplitRule
from runtime import FieldRule, load_pack

ROOT = Path(__file__).resolve().parents[2]
TOOLS = ["lookup_order", "issue_refund", "add", "subtract", "multiply", "divide", "convert"]  # refund_desk, calculator
EXAMPLES = sorted(p.name for p in (ROOT / "packs").iterdir() if (p / "manifest.yaml").is_file())
# benchmarks/specs/<task>: one spec per benchmark task (compiled against the target). A
# pack that lays out another pack's task differently shares that task's spec.
LAYOUTS = {"helpdesk_routing_flat": "helpdesk_routing", "shipping_details_gated": "shipping_details"}
BENCHMARK_PACKS = sorted(p.name for p in (ROOT / "benchmarks" / "packs").iterdir() if (p / "manifest.yaml").is_file())
BENCHMARKS = [name for name in BENCHMARK_PACKS if name not in LAYOUTS]

SPEC = """\
name: triage
task: Sort one support ticket and read the disputed amount.
inputs:
  ticket:
    description: The ticket, as written.
    type: string
outputs:
  category:
    description: billing or other.
  amount_usd:
    description: The disputed amount, or null.
    type: number
rules:
  - text: Big amounts are billing.
    expr: "amount_usd == null or amount_usd < 500 or category == 'billing'"
unsure_end: manual_triage
"""
GOLD = """\
{"id": "a", "input": {"ticket": "I was charged $600 twice"}, "expected": {"category": "billing", "amount_usd": 600}}
{"id": "b", "input": {"ticket": "Where is my parcel?"}, "expected": {"category": "other", "amount_usd": null}}
"""


def _write(root: Path, spec: str | None = SPEC, gold: str | bytes | None = GOLD) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    if spec is not None:
        (root / "spec.yaml").write_text(spec)
    if gold is not None:
        (root / "gold.jsonl").write_bytes(gold if isinstance(gold, bytes) else gold.encode())
    return root


# (spec folder, pack folder)
SPECS = [(f"specs/{name}", f"packs/{name}") for name in EXAMPLES] + [
    (f"benchmarks/specs/{LAYOUTS.get(name, name)}", f"benchmarks/packs/{name}") for name in BENCHMARK_PACKS
]
SPEC_IDS = [pack for _, pack in SPECS]


def test_it_has_a_benchmark_spec_for_each_benchmark_pack() -> None:
    assert BENCHMARKS == ["helpdesk_routing", "review_aspects", "shipping_details"]
    assert sorted([*BENCHMARKS, *LAYOUTS]) == BENCHMARK_PACKS
    assert sorted(p.name for p in (ROOT / "benchmarks" / "specs").iterdir() if p.is_dir()) == BENCHMARKS


@pytest.mark.parametrize(("specs", "packs"), SPECS, ids=SPEC_IDS)
def test_it_loads_every_example_spec(specs: str, packs: str) -> None:
    spec = load_spec(ROOT / specs)
    assert spec.name == Path(specs).name
    assert spec.task.strip() and spec.inputs and spec.outputs and spec.gold
    assert all(f.description for f in [*spec.inputs.values(), *spec.outputs.values()])


@pytest.mark.parametrize(("specs", "packs"), SPECS, ids=SPEC_IDS)
def test_it_keeps_the_gold_bytes_of_the_packs_evalset(specs: str, packs: str) -> None:
    spec = load_spec(ROOT / specs)
    assert spec.gold_bytes == (ROOT / packs / "evalset.jsonl").read_bytes()
    assert spec.gold_bytes == (ROOT / specs / "gold.jsonl").read_bytes()


@pytest.mark.parametrize(("specs", "packs"), SPECS, ids=SPEC_IDS)
def test_it_declares_what_the_example_pack_declares(specs: str, packs: str) -> None:
    """Each example spec names its pack's inputs, outputs and tools, and its unsure end
    is one of the pack's nodes (taken by on_fail or on_unsure)."""
    spec, pack = load_spec(ROOT / specs), load_pack(ROOT / packs, tools=TOOLS)
    assert (tuple(spec.inputs), tuple(spec.outputs), spec.tools) == (pack.inputs, pack.output, pack.tools)
    if spec.unsure_end is not None:
        assert spec.unsure_end in {e.target for e in pack.edges if e.kind in ("on_fail", "on_unsure")}


def test_it_loads_the_example_in_the_docs(tmp_path: Path) -> None:
    doc = (ROOT / "docs" / "compiler.md").read_text()
    example = doc.split("```yaml\n", 1)[1].split("```", 1)[0]
    gold = '{"input": {"ticket": "x"}, "expected": {"amount_usd": 700, "priority": "p1"}}\n'
    assert load_spec(_write(tmp_path, example, gold)).name == "support_triage"


def test_the_benchmark_specs_close_what_their_packs_close() -> None:
    """helpdesk_routing's labels are its grammars' enums, review_aspects' item set is its
    grammar's item enum, and none names split tags (the default seeded split applies)."""
    bench = ROOT / "benchmarks"
    helpdesk = load_spec(bench / "specs/helpdesk_routing")
    for name in ("department", "subissue"):
        grammar = json.loads((bench / f"packs/helpdesk_routing/grammars/{name}.json").read_text())
        assert helpdesk.declared_values()[name] == grammar["properties"][name]["enum"]
    labels = yaml.safe_load((bench / "packs/helpdesk_routing/labels/subissues.yaml").read_text())
    assert set(helpdesk.declared_values()["subissue"]) == {v for vs in labels.values() for v in vs}
    aspects = load_spec(bench / "specs/review_aspects")
    grammar = json.loads((bench / "packs/review_aspects/grammars/aspects.json").read_text())
    assert aspects.declared_values() == {"aspects[]": grammar["properties"]["aspects"]["items"]["enum"]}
    assert aspects.outputs["aspects"].item_set
    for name in BENCHMARKS:
        spec = load_spec(bench / "specs" / name)
        assert (spec.train, spec.validation, spec.test, spec.split, spec.model) == (None, None, None, SplitRule(), None)
    assert helpdesk.unsure_end == "review"


def test_it_gives_refund_desk_its_tools_and_its_human_end() -> None:
    spec = load_spec(ROOT / "specs" / "refund_desk")
    assert spec.tools == ("lookup_order", "issue_refund")
    assert spec.unsure_end == "review"
    assert any(case.human for case in spec.gold)


def test_it_loads_a_spec_into_its_parts(tmp_path: Path) -> None:
    spec = load_spec(_write(tmp_path))
    assert spec.root == tmp_path
    assert spec.inputs == {"ticket": FieldSpec("ticket", "The ticket, as written.", "string")}
    assert spec.outputs["category"] == FieldSpec("category", "billing or other.", None)
    assert spec.rules == (
        Rule("Big amounts are billing.", "amount_usd == null or amount_usd < 500 or category == 'billing'"),
    )
    assert (spec.tools, spec.unsure_end, spec.model, spec.budgets) == ((), "manual_triage", None, Budgets())
    assert (spec.train, spec.validation, spec.test, spec.split, spec.auto_accuracy) == (
        None,
        None,
        None,
        SplitRule(),
        0.9,
    )
    assert SplitRule() == SplitRule(seed=0, validation=0.25, test=0.25)
    assert Budgets().target_calls == 3000
    assert spec.gold[1] == GoldCase(
        "b", {"ticket": "Where is my parcel?"}, {"category": "other", "amount_usd": None}, None, None, (), 2
    )
    assert spec.gold_bytes == GOLD.encode()


def test_it_reads_budgets_and_model(tmp_path: Path) -> None:
    extra = "model: openai:http://127.0.0.1:8080/v1#qwen\nbudgets: {attempts: 3, cost_usd: 0}\n"
    spec = load_spec(_write(tmp_path, SPEC + extra))
    assert spec.model == "openai:http://127.0.0.1:8080/v1#qwen"
    assert spec.budgets == Budgets(attempts=3, planner_tokens=Budgets().planner_tokens, cost_usd=0.0)


def test_it_reads_the_split_tags_the_split_rule_and_the_target_keys(tmp_path: Path) -> None:
    extra = (
        "train: tr\nvalidation: va\ntest: te\nsplit: {seed: 7, validation: 0.2, test: 0.3}\n"
        "auto_accuracy: 0.95\nbudgets: {target_calls: 500}\n"
    )
    spec = load_spec(_write(tmp_path, SPEC + extra, TAGGED))
    assert (spec.train, spec.validation, spec.test) == ("tr", "va", "te")
    assert spec.split == SplitRule(seed=7, validation=0.2, test=0.3)
    assert spec.auto_accuracy == 0.95
    assert spec.budgets == Budgets(target_calls=500)


def test_it_reads_a_split_rule_in_part(tmp_path: Path) -> None:
    spec = load_spec(_write(tmp_path, SPEC + "split:\n  test: 0.5\n"))
    assert spec.split == SplitRule(seed=0, validation=0.25, test=0.5)


def test_it_reads_values_on_an_array_field_as_its_item_set(tmp_path: Path) -> None:
    spec = load_spec(_write(tmp_path, SPEC_ITEMS, GOLD_ITEMS))
    assert spec.outputs["labels"] == FieldSpec(
        "labels", "The labels.", "array", ("refund", "urgent", "vip"), FieldRule("set"), item_set=True
    )
    assert spec.declared_values() == {"labels[]": ["refund", "urgent", "vip"]}


def test_it_reads_values_on_an_untyped_field_whose_gold_values_are_lists_as_its_item_set(tmp_path: Path) -> None:
    spec = load_spec(_write(tmp_path, SPEC_ITEMS.replace("    type: array\n", ""), GOLD_ITEMS))
    assert spec.outputs["labels"].item_set and spec.outputs["labels"].type is None
    assert spec.declared_values() == {"labels[]": ["refund", "urgent", "vip"]}
    assert not load_spec(_write(tmp_path / "scalar")).outputs["category"].item_set


def test_it_lets_a_split_tag_sit_beside_other_tags(tmp_path: Path) -> None:
    gold = TAGGED.replace('"tags": ["tr"]', '"tags": ["tr", "hard"]')
    assert load_spec(_write(tmp_path, SPEC + "train: tr\n", gold)).train == "tr"


def test_it_lets_a_case_at_the_unsure_end_break_a_rule(tmp_path: Path) -> None:
    gold = (
        GOLD
        + '{"id": "c", "input": {"ticket": "?"}, "expected": {"category": "other", "amount_usd": 900}, "end": "manual_triage"}\n'
    )
    assert len(load_spec(_write(tmp_path, gold=gold)).gold) == 3


def test_it_checks_a_rule_only_on_cases_that_have_its_fields(tmp_path: Path) -> None:
    gold = GOLD + '{"id": "c", "input": {"ticket": "?"}, "expected": {"amount_usd": 900}}\n'
    assert len(load_spec(_write(tmp_path, gold=gold)).gold) == 3


# GOLD with a case per split tag (lines 1-3: tr, va, te) and an untagged one (line 4).
TAGGED = (
    GOLD.replace('"id": "a",', '"id": "a", "tags": ["tr"],').replace('"id": "b",', '"id": "b", "tags": ["va"],')
    + '{"id": "c", "tags": ["te"], "input": {"ticket": "Hello"}, "expected": {"category": "other", "amount_usd": null}}\n'
    + '{"id": "d", "input": {"ticket": "Hi"}, "expected": {"category": "other", "amount_usd": null}}\n'
)
# SPEC with a multi-label output (line 8: labels; its values on line 11) and GOLD with it.
SPEC_ITEMS = SPEC.replace(
    "outputs:\n",
    "outputs:\n  labels:\n    description: The labels.\n    type: array\n    values: [refund, urgent, vip]\n"
    "    compare: set\n",
)
GOLD_ITEMS = GOLD.replace('"category": "billing"', '"labels": ["urgent", "refund"], "category": "billing"').replace(
    '"category": "other"', '"labels": [], "category": "other"'
)

# (what is wrong, spec.yaml, gold.jsonl, the file and line it is reported at, words of the message)
MISTAKES = [
    ("unknown key", SPEC + "budget: {attempts: 3}\n", GOLD, "spec.yaml", 17, "did you mean 'budgets'?"),
    (
        "missing task",
        SPEC.replace("task: Sort one support ticket and read the disputed amount.\n", ""),
        GOLD,
        "spec.yaml",
        1,
        "'task' is required",
    ),
    ("empty name", SPEC.replace("name: triage", "name: ''"), GOLD, "spec.yaml", 1, "'name' must be non-empty text"),
    (
        "no inputs",
        SPEC.replace(
            "inputs:\n  ticket:\n    description: The ticket, as written.\n    type: string\n", "inputs: {}\n"
        ),
        GOLD,
        "spec.yaml",
        3,
        "'inputs' must map",
    ),
    (
        "field without a description",
        SPEC.replace("    description: billing or other.\n", "    type: string\n"),
        GOLD,
        "spec.yaml",
        8,
        "outputs.category needs a description",
    ),
    (
        "misspelt field key",
        SPEC.replace("    description: billing or other.\n", "    description: billing or other.\n    typ: string\n"),
        GOLD,
        "spec.yaml",
        10,
        "did you mean 'type'?",
    ),
    ("unknown type", SPEC.replace("type: number", "type: float"), GOLD, "spec.yaml", 12, "type must be one of"),
    (
        "field name that is a keyword",
        SPEC.replace("outputs:\n", "outputs:\n  lambda:\n    description: A keyword.\n"),
        GOLD,
        "spec.yaml",
        8,
        "'lambda' is a word of the expression language",
    ),
    (
        "rule that does not parse",
        SPEC.replace("amount_usd == null or", "amount_usd == or"),
        GOLD,
        "spec.yaml",
        15,
        "bad expression",
    ),
    (
        "rule reading an undeclared output",
        SPEC.replace("category == 'billing'", "categry == 'billing'"),
        GOLD,
        "spec.yaml",
        15,
        "'categry' is not a declared output (a rule reads outputs and input.<name> only); did you mean 'category'?",
    ),
    (
        "rule reading an undeclared input",
        SPEC.replace("amount_usd == null or", "input.tiket == '' or"),
        GOLD,
        "spec.yaml",
        15,
        "'input.tiket' is not a declared input; did you mean 'ticket'?",
    ),
    (
        "rule reading the whole input",
        SPEC.replace("amount_usd == null or", "input == {} or"),
        GOLD,
        "spec.yaml",
        15,
        "write input.<name>",
    ),
    (
        "rule without text",
        SPEC.replace("  - text: Big amounts are billing.\n    expr:", "  - expr:"),
        GOLD,
        "spec.yaml",
        14,
        "needs 'text'",
    ),
    (
        "rule as a plain string",
        SPEC.replace("rules:\n", "rules:\n  - Be nice.\n"),
        GOLD,
        "spec.yaml",
        14,
        "rules[0] must be a mapping",
    ),
    (
        "unsure end that is no node id",
        SPEC.replace("unsure_end: manual_triage", "unsure_end: Manual Triage"),
        GOLD,
        "spec.yaml",
        16,
        "lowercase letters",
    ),
    ("unknown model scheme", SPEC + "model: gpt:4\n", GOLD, "spec.yaml", 17, "unknown model scheme 'gpt'"),
    ("zero attempts", SPEC + "budgets:\n  attempts: 0\n", GOLD, "spec.yaml", 18, "budgets.attempts must be"),
    ("negative cost", SPEC + "budgets:\n  cost_usd: -1\n", GOLD, "spec.yaml", 18, "budgets.cost_usd must be"),
    ("unknown budget", SPEC + "budgets:\n  tokens: 10\n", GOLD, "spec.yaml", 18, "did you mean 'planner_tokens'?"),
    ("a tool named twice", SPEC + "tools:\n  - lookup\n  - lookup\n", GOLD, "spec.yaml", 19, "named twice"),
    ("YAML syntax", SPEC.replace("inputs:\n", "inputs: [\n"), GOLD, "spec.yaml", 5, "YAML syntax error"),
    ("not a mapping", "- name\n", GOLD, "spec.yaml", 1, "must be a mapping"),
    ("missing spec.yaml", None, GOLD, "spec.yaml", None, "missing file"),
    ("missing gold.jsonl", SPEC, None, "gold.jsonl", None, "missing file"),
    ("empty gold", SPEC, "\n", "gold.jsonl", None, "no gold cases"),
    ("gold not UTF-8", SPEC, b'{"id": "\xff"}\n', "gold.jsonl", None, "not UTF-8"),
    ("gold line not JSON", SPEC, GOLD + "{nope\n", "gold.jsonl", 3, "not valid JSON"),
    (
        "gold line with an unknown key",
        SPEC,
        GOLD.replace('"id": "b"', '"id": "b", "expect": {}'),
        "gold.jsonl",
        2,
        "did you mean 'expected'?",
    ),
    ("duplicate case id", SPEC, GOLD.replace('"id": "b"', '"id": "a"'), "gold.jsonl", 2, "duplicate case id 'a'"),
    (
        "undeclared input",
        SPEC,
        GOLD.replace('{"ticket": "Where', '{"tickt": "Where'),
        "gold.jsonl",
        2,
        "input.tickt is not one of the declared inputs; declare it in spec.yaml (did you mean 'ticket'?",
    ),
    (
        "undeclared output",
        SPEC,
        GOLD.replace('"category": "other"', '"priority": "p1"'),
        "gold.jsonl",
        2,
        "expected.priority is not one of the declared outputs",
    ),
    (
        "value of the wrong type",
        SPEC,
        GOLD.replace('"amount_usd": 600', '"amount_usd": "600"'),
        "gold.jsonl",
        1,
        "expected.amount_usd is a string, but outputs.amount_usd is declared number",
    ),
    (
        "case that breaks a rule",
        SPEC,
        GOLD.replace('"category": "billing"', '"category": "other"'),
        "gold.jsonl",
        1,
        "case 'a' breaks rules[0] (spec.yaml line 14)",
    ),
    (
        "rule that fails on a case",
        SPEC.replace("amount_usd == null or ", ""),
        GOLD,
        "gold.jsonl",
        2,
        "rules[0] (spec.yaml line 14) cannot be evaluated on it",
    ),
    (
        "values that are not a list",
        SPEC.replace(
            "    description: billing or other.\n", "    description: billing or other.\n    values: billing\n"
        ),
        GOLD,
        "spec.yaml",
        10,
        "outputs.category.values must be a non-empty list",
    ),
    (
        "a value of the wrong type",
        SPEC.replace("    type: number\n", "    type: number\n    values: [600, '600']\n"),
        GOLD,
        "spec.yaml",
        13,
        "outputs.amount_usd.values[1] is a string, but outputs.amount_usd is declared number",
    ),
    (
        "a null value",
        SPEC.replace(
            "    description: billing or other.\n", "    description: billing or other.\n    values: [billing, null]\n"
        ),
        GOLD,
        "spec.yaml",
        10,
        "outputs.category.values[1] is null; list the non-null values only",
    ),
    (
        "a value listed twice",
        SPEC.replace(
            "    description: billing or other.\n",
            "    description: billing or other.\n    values: [billing, billing]\n",
        ),
        GOLD,
        "spec.yaml",
        10,
        "'billing' is listed twice",
    ),
    (
        "gold value not in values",
        SPEC.replace(
            "    description: billing or other.\n", "    description: billing or other.\n    values: [billing]\n"
        ),
        GOLD,
        "gold.jsonl",
        2,
        "expected.category is 'other', which is not in outputs.category.values",
    ),
    (
        "unknown compare",
        SPEC.replace(
            "    description: billing or other.\n", "    description: billing or other.\n    compare: fuzzy\n"
        ),
        GOLD,
        "spec.yaml",
        10,
        "outputs.category.compare: unknown compare 'fuzzy'; use one of: exact, loose, set, number, text",
    ),
    (
        "tolerance without compare number",
        SPEC.replace(
            "    description: billing or other.\n",
            "    description: billing or other.\n    compare: text\n    tolerance: 0.1\n",
        ),
        GOLD,
        "spec.yaml",
        11,
        "outputs.category.tolerance applies to compare: number only, not 'text'",
    ),
    (
        "negative tolerance",
        SPEC.replace("    type: number\n", "    type: number\n    compare: number\n    tolerance: -1\n"),
        GOLD,
        "spec.yaml",
        14,
        "outputs.amount_usd.tolerance must be a number >= 0",
    ),
    (
        "compare on an input",
        SPEC.replace(
            "    description: The ticket, as written.\n",
            "    description: The ticket, as written.\n    compare: text\n",
        ),
        GOLD,
        "spec.yaml",
        6,
        "inputs.ticket.compare: inputs are not compared",
    ),
    (
        "gold value a set compare cannot compare",
        SPEC.replace("    type: number\n", "    type: number\n    compare: set\n"),
        GOLD,
        "gold.jsonl",
        1,
        "expected.amount_usd must be an array (outputs.amount_usd is compare: set)",
    ),
    (
        "split tag no case carries",
        SPEC + "train: tr\nvalidation: holdout\n",
        TAGGED,
        "spec.yaml",
        18,
        "'validation': no gold case has the tag 'holdout'",
    ),
    ("split tag that is no text", SPEC + "test: [te]\n", TAGGED, "spec.yaml", 17, "'test' names the tag"),
    (
        "one tag for two splits",
        SPEC + "train: tr\ntest: tr\n",
        TAGGED,
        "spec.yaml",
        18,
        "'test': the tag 'tr' already names the train split",
    ),
    (
        "case carrying two split tags",
        SPEC + "validation: va\ntest: te\n",
        TAGGED.replace('"tags": ["va"]', '"tags": ["va", "te"]'),
        "gold.jsonl",
        2,
        "case 'b' carries the split tags 'va' (validation) and 'te' (test); a case is in one split only",
    ),
    ("split that is not a mapping", SPEC + "split: 0.25\n", GOLD, "spec.yaml", 17, "'split' must be a mapping"),
    ("unknown split key", SPEC + "split:\n  sead: 1\n", GOLD, "spec.yaml", 18, "did you mean 'seed'?"),
    ("split seed that is no integer", SPEC + "split:\n  seed: 1.5\n", GOLD, "spec.yaml", 18, "split.seed must be"),
    (
        "split share of zero",
        SPEC + "split:\n  validation: 0\n",
        GOLD,
        "spec.yaml",
        18,
        "split.validation is the share of gold cases in the validation split: a fraction > 0 and < 1",
    ),
    ("split share of one", SPEC + "split:\n  test: 1\n", GOLD, "spec.yaml", 18, "a fraction > 0 and < 1, got 1"),
    (
        "split shares that leave nothing to train on",
        SPEC + "split:\n  validation: 0.5\n  test: 0.5\n",
        GOLD,
        "spec.yaml",
        17,
        "split: validation 0.5 + test 0.5 leave no gold cases to train on; their sum must be < 1",
    ),
    ("auto accuracy of one", SPEC + "auto_accuracy: 1\n", GOLD, "spec.yaml", 17, "'auto_accuracy' is the accuracy"),
    ("auto accuracy as text", SPEC + "auto_accuracy: high\n", GOLD, "spec.yaml", 17, "a fraction > 0 and < 1"),
    (
        "zero target calls",
        SPEC + "budgets:\n  target_calls: 0\n",
        GOLD,
        "spec.yaml",
        18,
        "budgets.target_calls must be",
    ),
    (
        "gold item not in the item set",
        SPEC_ITEMS,
        GOLD_ITEMS.replace('["urgent", "refund"]', '["urgent", "refnd"]'),
        "gold.jsonl",
        1,
        "expected.labels[1] is 'refnd', which is not in outputs.labels.values (the items the field's lists may hold)",
    ),
    (
        "gold item not in the item set of an untyped field",
        SPEC_ITEMS.replace("    type: array\n", ""),
        GOLD_ITEMS.replace('"labels": []', '"labels": ["spam"]'),
        "gold.jsonl",
        2,
        "expected.labels[0] is 'spam', which is not in outputs.labels.values",
    ),
    (
        "array field whose gold value is no list",
        SPEC_ITEMS,
        GOLD_ITEMS.replace('"labels": []', '"labels": "urgent"'),
        "gold.jsonl",
        2,
        "expected.labels is a string, but outputs.labels is declared array",
    ),
    (
        "item listed twice",
        SPEC_ITEMS.replace("[refund, urgent, vip]", "[refund, urgent, refund]"),
        GOLD_ITEMS,
        "spec.yaml",
        11,
        "outputs.labels.values[2] 'refund' is listed twice",
    ),
    (
        "human answer at another node",
        SPEC,
        GOLD.replace('"id": "b"', '"id": "b", "human": {"lead": {}}'),
        "gold.jsonl",
        2,
        "'human' answers node 'lead', but unsure_end is 'manual_triage'",
    ),
]


@pytest.mark.parametrize(
    ("spec", "gold", "file", "line", "words"), [m[1:] for m in MISTAKES], ids=[m[0] for m in MISTAKES]
)
def test_it_reports_each_mistake_at_its_file_and_line(
    tmp_path: Path, spec: str | None, gold: str | bytes | None, file: str, line: int | None, words: str
) -> None:
    with pytest.raises(SpecInvalid) as caught:
        load_spec(_write(tmp_path, spec, gold))
    assert [(i.file, i.line) for i in caught.value.issues] == [(file, line)], caught.value
    assert words in caught.value.issues[0].message


def test_it_reports_every_mistake_at_once(tmp_path: Path) -> None:
    spec = SPEC.replace("type: number", "type: float") + "colour: blue\n"
    gold = GOLD.replace('{"ticket": "Where', '{"tickt": "Where') + "{nope\n"
    with pytest.raises(SpecInvalid) as caught:
        load_spec(_write(tmp_path, spec, gold))
    assert [(i.file, i.line) for i in caught.value.issues] == [
        ("spec.yaml", 17),
        ("spec.yaml", 12),
        ("gold.jsonl", 3),
        ("gold.jsonl", 2),
    ]
    assert str(caught.value).splitlines()[0].startswith("spec.yaml:17: unknown key 'colour'")


def test_it_refuses_a_folder_that_is_not_there(tmp_path: Path) -> None:
    with pytest.raises(SpecInvalid) as caught:
        load_spec(tmp_path / "nowhere")
    assert [i.file for i in caught.value.issues] == [str(tmp_path / "nowhere")]


def test_it_reads_declared_values_and_compare_rules(tmp_path: Path) -> None:
    spec = load_spec(
        _write(
            tmp_path,
            SPEC.replace(
                "    description: billing or other.\n",
                "    description: billing or other.\n    values: [billing, other, refund]\n    compare: loose\n",
            ).replace("    type: number\n", "    type: number\n    compare: number\n    tolerance: 0.5\n"),
        )
    )
    assert spec.declared_values() == {"category": ["billing", "other", "refund"]}
    assert spec.compare_rules() == {"category": FieldRule("loose"), "amount_usd": FieldRule("number", 0.5)}
