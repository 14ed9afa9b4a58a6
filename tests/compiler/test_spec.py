"""The spec loader: the example specs load, gold is kept byte for byte, and every mistake
is reported with its file and line, all at once."""

from __future__ import annotations

from pathlib import Path

import pytest

from compiler import Budgets, FieldSpec, GoldCase, Rule, SpecInvalid, load_spec
from runtime import FieldRule, load_pack

ROOT = Path(__file__).resolve().parents[2]
TOOLS = ["lookup_order", "issue_refund", "add", "subtract", "multiply", "divide", "convert"]  # refund_desk, calculator
EXAMPLES = sorted(p.name for p in (ROOT / "packs").iterdir() if (p / "manifest.yaml").is_file())

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


@pytest.mark.parametrize("name", EXAMPLES)
def test_it_loads_every_example_spec(name: str) -> None:
    spec = load_spec(ROOT / "specs" / name)
    assert spec.name == name
    assert spec.task.strip() and spec.inputs and spec.outputs and spec.gold
    assert all(f.description for f in [*spec.inputs.values(), *spec.outputs.values()])


@pytest.mark.parametrize("name", EXAMPLES)
def test_it_keeps_the_gold_bytes_of_the_packs_evalset(name: str) -> None:
    spec = load_spec(ROOT / "specs" / name)
    assert spec.gold_bytes == (ROOT / "packs" / name / "evalset.jsonl").read_bytes()
    assert spec.gold_bytes == (ROOT / "specs" / name / "gold.jsonl").read_bytes()


@pytest.mark.parametrize("name", EXAMPLES)
def test_it_declares_what_the_example_pack_declares(name: str) -> None:
    """Each example spec names its pack's inputs, outputs and tools, and its unsure end
    is one of the pack's nodes (taken by on_fail or on_unsure)."""
    spec, pack = load_spec(ROOT / "specs" / name), load_pack(ROOT / "packs" / name, tools=TOOLS)
    assert (tuple(spec.inputs), tuple(spec.outputs), spec.tools) == (pack.inputs, pack.output, pack.tools)
    if spec.unsure_end is not None:
        assert spec.unsure_end in {e.target for e in pack.edges if e.kind in ("on_fail", "on_unsure")}


def test_it_loads_the_example_in_the_docs(tmp_path: Path) -> None:
    doc = (ROOT / "docs" / "compiler.md").read_text()
    example = doc.split("```yaml\n", 1)[1].split("```", 1)[0]
    gold = '{"input": {"ticket": "x"}, "expected": {"amount_usd": 700, "priority": "p1"}}\n'
    assert load_spec(_write(tmp_path, example, gold)).name == "support_triage"


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
    assert spec.gold[1] == GoldCase(
        "b", {"ticket": "Where is my parcel?"}, {"category": "other", "amount_usd": None}, None, None, (), 2
    )
    assert spec.gold_bytes == GOLD.encode()


def test_it_reads_budgets_and_model(tmp_path: Path) -> None:
    extra = "model: openai:http://127.0.0.1:8080/v1#qwen\nbudgets: {attempts: 3, cost_usd: 0}\n"
    spec = load_spec(_write(tmp_path, SPEC + extra))
    assert spec.model == "openai:http://127.0.0.1:8080/v1#qwen"
    assert spec.budgets == Budgets(attempts=3, planner_tokens=Budgets().planner_tokens, cost_usd=0.0)


def test_it_lets_a_case_at_the_unsure_end_break_a_rule(tmp_path: Path) -> None:
    gold = (
        GOLD
        + '{"id": "c", "input": {"ticket": "?"}, "expected": {"category": "other", "amount_usd": 900}, "end": "manual_triage"}\n'
    )
    assert len(load_spec(_write(tmp_path, gold=gold)).gold) == 3


def test_it_checks_a_rule_only_on_cases_that_have_its_fields(tmp_path: Path) -> None:
    gold = GOLD + '{"id": "c", "input": {"ticket": "?"}, "expected": {"amount_usd": 900}}\n'
    assert len(load_spec(_write(tmp_path, gold=gold)).gold) == 3


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
