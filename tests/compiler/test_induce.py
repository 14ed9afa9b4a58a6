"""Schema induction (compiler/induce.py): each constraint kind, soundness under hypothesis,
and the five example packs against their hand-written grammars."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import jsonschema
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compiler.induce import Induction, generalise, induce
from compiler.induce_score import SCORED_KINDS, score_against_grammars

ROOT = Path(__file__).resolve().parents[2]
PACKS = sorted(p.parent for p in ROOT.glob("packs/*/evalset.jsonl"))


def gold(*expected: dict[str, Any], text: str = "") -> list[tuple[dict[str, Any], dict[str, Any]]]:
    return [({"text": text}, e) for e in expected]


def kinds(ind: Induction, name: str) -> dict[str, dict[str, Any]]:
    return {c.kind: c.detail for c in ind.fields[name].constraints}


def valid(schema: dict[str, Any], value: Any) -> bool:
    return jsonschema.Draft202012Validator(schema).is_valid(value)


def test_it_induces_types_and_nullability() -> None:
    ind = induce(gold({"n": 1, "x": 1.5, "s": "a", "b": True}, {"n": None, "x": 2, "s": "b", "b": False}))
    assert ind.fields["n"].types == ("integer",) and ind.fields["n"].nullable
    assert ind.fields["x"].types == ("number",) and not ind.fields["x"].nullable
    assert ind.fields["n"].schema()["type"] == ["integer", "null"]
    assert ind.fields["s"].schema()["type"] == "string"
    assert ind.fields["b"].schema()["type"] == "boolean"
    assert kinds(ind, "n")["type"] == {"types": ["integer"], "nullable": True}


def test_it_closes_an_enum_by_the_frequency_rule() -> None:
    values = ["Low Risk", "High Risk", "Low Risk", "High Risk", "Low Risk", "Low Risk"]
    ind = induce(gold(*({"r": v} for v in values)))
    (enum,) = [c for c in ind.fields["r"].constraints if c.kind == "enum"]
    assert enum.detail["rule"] == "frequency"
    assert set(enum.detail["values"]) == {"Low Risk", "High Risk"}
    assert enum.evidence == {"values": 6, "distinct": 2, "singletons": 0, "violations": 0}
    assert ind.fields["r"].schema()["enum"] == ["Low Risk", "High Risk"]


def test_it_closes_an_enum_of_labels_with_a_singleton() -> None:
    ind = induce(gold(*({"v": v} for v in ["allow", "remove", "remove", "restrict", "restrict", "restrict"])))
    assert kinds(ind, "v")["enum"]["rule"] == "label"


def test_it_leaves_free_text_and_sparse_values_open() -> None:
    names = ["Acme Ltd", "Brightline Supply", "Acme Ltd", "Kestrel Hosting", "Harbor Coffee", "Pine Co"]
    ind = induce(gold(*({"vendor": v} for v in names)))
    assert "enum" not in kinds(ind, "vendor")
    few = induce(gold({"v": "a"}, {"v": "b"}, {"v": "a"}))  # under ENUM_MIN_VALUES
    assert "enum" not in kinds(few, "v")
    spread = induce(gold(*({"v": v} for v in ["a", "b", "c", "d", "e", "a"])))  # 5 distinct of 6
    assert "enum" not in kinds(spread, "v")


def test_it_generalises_a_string_pattern() -> None:
    ids = ["ORD-48213", "ORD-10001", "ORD-20931", "ORD-77120", "ORD-50032"]
    ind = induce(gold(*({"order_id": v} for v in ids), {"order_id": None}))
    assert kinds(ind, "order_id")["pattern"] == {"pattern": "^ORD-[0-9]{5}$"}
    assert ind.fields["order_id"].schema()["pattern"] == "^ORD-[0-9]{5}$"
    assert generalise(["AB-1", "XYZ-22"]) == "^[A-Z]{2,3}-[0-9]{1,2}$"
    assert generalise(["a.b", "c.d"]) == "^[a-z]\\.[a-z]$"


def test_it_gives_no_pattern_without_evidence_or_shared_shape() -> None:
    four = induce(gold(*({"id": f"ORD-1000{i}"} for i in range(4))))
    assert "pattern" not in kinds(four, "id")
    mixed = induce(
        gold(*({"id": v} for v in ["BOS-2024-0117", "KCH-55102", "FA-2024-0381", "TOJ/2024/051", "PL-0932"]))
    )
    assert "pattern" not in kinds(mixed, "id")
    assert generalise(["two words", "and more"]) is None


def test_it_recognises_date_and_email_formats() -> None:
    ind = induce(
        gold(
            {"d": "2024-05-14", "e": "ann@example.com"},
            {"d": "2024-02-29", "e": "bo.b@mail.example.org"},
            {"d": "2023-12-01", "e": "c@x.io"},
        )
    )
    assert kinds(ind, "d")["format"] == {"format": "date"}
    assert kinds(ind, "e")["format"] == {"format": "email"}
    bad = induce(gold({"d": "2024-02-30"}, {"d": "2024-01-01"}, {"d": "2024-03-01"}))
    assert "format" not in kinds(bad, "d")


def test_it_reports_numeric_ranges_and_bounds_only_the_sign() -> None:
    ind = induce(gold(*({"q": v} for v in [3, 0, 12, 7, 1])))
    k = kinds(ind, "q")
    assert k["range"] == {"min": 0, "max": 12}
    schema = ind.fields["q"].schema()
    assert schema == {"type": "integer", "minimum": 0}
    neg = induce(gold(*({"q": v} for v in [3, -1, 12, 7, 1])))
    assert "non_negative" not in kinds(neg, "q")


def test_it_induces_arrays_with_item_enums_and_item_counts() -> None:
    tags = [["a", "b"], ["a"], ["b", "c"], ["c", "a"], ["b"]]
    ind = induce(gold(*({"tags": t} for t in tags)))
    f = ind.fields["tags"]
    assert kinds(ind, "tags")["items_range"] == {"min": 1, "max": 2}
    assert f.items is not None and {c.kind for c in f.items.constraints} >= {"enum"}
    schema = f.schema()
    assert schema["minItems"] == 1 and set(schema["items"]["enum"]) == {"a", "b", "c"}


def test_it_induces_objects_inside_arrays() -> None:
    rows = [[{"d": "x", "n": 1}, {"d": "y", "n": 2, "extra": True}]] * 3
    ind = induce(gold(*({"items": r} for r in rows)))
    items = ind.fields["items"].items
    assert items is not None and items.required == ("d", "n")
    assert set(items.properties) == {"d", "n", "extra"}


def test_it_finds_conditional_presence_as_a_branch() -> None:
    cases = gold(
        {"intent": "buy", "budget": 10},
        {"intent": "buy", "budget": 20},
        {"intent": "spam", "budget": None},
        {"intent": "job"},
        {"intent": "buy", "budget": 5},
    )
    ind = induce(cases)
    (branch,) = ind.branches
    assert branch.field == "budget"
    assert branch.detail == {"field": "intent", "values": ["job", "spam"], "missing_as": ["absent", "null"]}
    assert branch.evidence == {"cases": 5, "missing": 2, "present": 3, "violations": 0}


def test_it_reports_fields_written_together() -> None:
    ind = induce(gold({"a": "x", "b": 1.5}, {}, {"a": "z", "b": 2}, {"a": None, "b": None}))
    assert kinds(ind, "a")["present_with"] == {"field": "b", "missing_as": ["absent", "null"]}
    assert kinds(ind, "b")["present_with"]["field"] == "a"
    assert ind.branches == []


def test_it_finds_relations_that_always_hold() -> None:
    cases = gold(
        *({"sub": s, "tax": t, "total": s + t, "copy": s} for s, t in [(10, 1), (20, 0), (5, 2), (7, 3), (9, 9)])
    )
    rels = {(c.detail["left"], c.detail["op"], c.detail["right"]) for c in induce(cases).relations}
    assert ("sub", "<=", "total") in rels
    assert ("copy", "==", "sub") in rels
    assert ("sub + tax", "==", "total") in rels
    assert ("total", "<=", "sub") not in rels


def test_it_finds_a_string_contained_in_another() -> None:
    cases = gold(*({"o": f"ORD-{i}", "r": f"R-ORD-{i}"} for i in range(5)))
    rels = [c for c in induce(cases).relations if c.detail["op"] == "in"]
    assert [(c.detail["left"], c.detail["right"]) for c in rels] == [("o", "r")]


def test_it_marks_values_copied_from_the_input() -> None:
    cases: list[tuple[dict[str, Any], dict[str, Any]]] = [
        ({"ticket": "order ORD-1 broke", "n": 3}, {"order_id": "ORD-1", "cat": "billing"}),
        ({"ticket": "see ORD-22 please", "n": 4}, {"order_id": "ORD-22", "cat": "other"}),
        ({"ticket": "nothing", "n": 5}, {"order_id": None, "cat": "other"}),
    ]
    ind = induce(cases)
    assert ind.copied == {"order_id": "ticket"}
    assert kinds(ind, "order_id")["copied"] == {"input": "ticket"}


def test_it_limits_fields_to_the_named_outputs() -> None:
    ind = induce(gold({"a": 1, "b": 2}), outputs=["b", "never"])
    assert list(ind.fields) == ["b", "never"]
    assert ind.fields["never"].schema() == {} and ind.fields["never"].present == 0


def test_it_serialises_and_reports_with_evidence() -> None:
    ind = induce(gold(*({"r": v} for v in ["low", "high", "low", "high"])))
    d = ind.to_dict()
    json.dumps(d)
    assert d["fields"]["r"]["schema"]["enum"] == ["high", "low"]
    lines = ind.report()
    assert any("enum" in line and "distinct 2" in line and "violations 0" in line for line in lines)


# -- hypothesis: never induces a constraint a gold value violates --------------------------

labels = st.sampled_from(["low", "high", "none", "p1", "p2", "ORD-1", "ORD-12345", "a b", ""])
codes = st.builds(lambda p, n: f"{p}-{n}", st.sampled_from(["ORD", "INV", "ab"]), st.integers(0, 99999))
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-1000, 10**6),
    st.floats(allow_nan=False, allow_infinity=False, width=32),
    labels,
    codes,
    st.text(max_size=8),
    st.sampled_from(["2024-05-14", "2023-01-31", "x@y.com"]),
)


def containers(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.sampled_from("abc"), inner, max_size=3))


values = st.recursive(scalars, containers, max_leaves=8)
expected = st.dictionaries(st.sampled_from(["f1", "f2", "f3", "f4", "f5"]), values, max_size=5)
# Field-wise homogeneous sets too, so enums, patterns and relations actually get induced.
column = st.one_of(
    st.lists(labels, min_size=8, max_size=8),
    st.lists(codes, min_size=8, max_size=8),
    st.lists(st.one_of(st.none(), st.integers(0, 50)), min_size=8, max_size=8),
    st.lists(st.floats(0, 100, allow_nan=False), min_size=8, max_size=8),
    st.lists(st.lists(labels, max_size=3), min_size=8, max_size=8),
)


@st.composite
def gold_sets(draw: st.DrawFn) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    if draw(st.booleans()):
        exps = draw(st.lists(expected, min_size=1, max_size=12))
    else:
        cols: dict[str, list[Any]] = {f"c{i}": draw(column) for i in range(draw(st.integers(1, 4)))}
        if draw(st.booleans()):  # related columns: lo <= hi, lo + hi == tot, id in ref
            lo = draw(st.lists(st.integers(0, 100), min_size=8, max_size=8))
            gap = draw(st.lists(st.one_of(st.integers(0, 9), st.floats(0, 9, allow_nan=False)), min_size=8, max_size=8))
            nums = draw(st.lists(st.integers(10000, 99999), min_size=8, max_size=8))
            cols["lo"] = lo
            hi = [a + g for a, g in zip(lo, gap, strict=True)]
            cols["hi"] = hi
            cols["tot"] = [a + b for a, b in zip(lo, hi, strict=True)]
            cols["id"] = [f"ORD-{n}" for n in nums]
            cols["ref"] = [f"R-ORD-{n}" for n in nums]
        exps = [{k: col[i] for k, col in cols.items() if draw(st.booleans()) or i % 2} for i in range(8)]
    out = []
    for e in exps:
        strings = [v for v in e.values() if isinstance(v, str)]
        text = draw(st.sampled_from(["", " ".join(strings), "x".join(strings[:1])]))
        out.append(({"text": text, "n": 1}, e))
    return out


def check(ind: Induction, cases: list[tuple[dict[str, Any], dict[str, Any]]]) -> None:
    for name, f in ind.fields.items():
        schema = f.schema()
        jsonschema.Draft202012Validator.check_schema(schema)
        for _, exp in cases:
            if name in exp:
                assert valid(schema, exp[name]), (name, schema, exp[name])
        for c in f.all_constraints():
            assert c.evidence["violations"] == 0
    for rel in ind.relations:
        d = rel.detail
        for _, e in cases:
            if (
                d["op"] == "<="
                and isinstance(e.get(d["left"]), int | float)
                and isinstance(e.get(d["right"]), int | float)
            ):
                assert e[d["left"]] <= e[d["right"]]
            elif d["op"] == "in" and isinstance(e.get(d["left"]), str) and isinstance(e.get(d["right"]), str):
                assert e[d["left"]] in e[d["right"]]
            elif d["op"] == "==" and "+" in d["left"]:
                a, b = d["left"].split(" + ")
                if all(
                    isinstance(e.get(k), int | float) and not isinstance(e.get(k), bool) for k in (a, b, d["right"])
                ):
                    assert abs(e[a] + e[b] - e[d["right"]]) <= d["tolerance"]
            elif d["op"] == "==" and d["left"] in e and d["right"] in e:
                same_kind = type(e[d["left"]]) is type(e[d["right"]])
                if same_kind and e[d["left"]] is not None and not isinstance(e[d["left"]], bool):
                    assert e[d["left"]] == e[d["right"]]
    for out, inp in ind.copied.items():
        for i, e in cases:
            if e.get(out) is not None:
                assert e[out] in i[inp]
    for f in ind.fields.values():
        for c in f.constraints:
            if c.kind == "present_with":
                assert all((e.get(c.field) is None) == (e.get(c.detail["field"]) is None) for _, e in cases)
    for b in ind.branches:
        other = b.detail["field"]
        for _, e in cases:
            key = (
                "<no value>"
                if e.get(other) is None
                else e[other]
                if isinstance(e[other], str)
                else str(e[other]).lower()
            )
            assert (e.get(b.field) is None) == (key in b.detail["values"])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(gold_sets())
def test_it_never_induces_a_constraint_a_gold_value_violates(
    cases: list[tuple[dict[str, Any], dict[str, Any]]],
) -> None:
    check(induce(cases), cases)


@settings(max_examples=100, deadline=None)
@given(st.one_of(st.lists(codes, min_size=1, max_size=10), st.lists(st.text(min_size=1, max_size=12), max_size=6)))
def test_it_generalises_patterns_every_value_fits(vals: list[str]) -> None:
    pattern = generalise(vals)
    if vals and all(v.startswith("ORD-") for v in vals):
        assert pattern is not None  # same shape: always a pattern
    if pattern is not None:
        assert all(re.search(pattern, v) for v in vals)


# -- the example packs ------------------------------------------------------------------------


def pack_cases(pack: Path) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    rows = [json.loads(line) for line in (pack / "evalset.jsonl").read_text().splitlines() if line.strip()]
    return [(r["input"], r["expected"]) for r in rows]


def test_it_induces_sound_schemas_for_every_example_pack() -> None:
    assert len(PACKS) == 6
    for pack in PACKS:
        cases = pack_cases(pack)
        check(induce(cases), cases)


def test_it_agrees_with_the_hand_written_grammars_of_the_example_packs() -> None:
    totals = {k: {"induced": 0, "hand": 0, "matched": 0} for k in SCORED_KINDS}
    for pack in PACKS:
        grammars = [json.loads(g.read_text()) for g in sorted((pack / "grammars").glob("*.json"))]
        score = score_against_grammars(induce(pack_cases(pack)), grammars)
        for k in SCORED_KINDS:
            for m in ("induced", "hand", "matched"):
                totals[k][m] += score.kinds[k][m]
    # Measured 2026-12-01 (benchmarks/induction.py has the per-pack table; calculator,
    # added later, adds one type, matched): every induced
    # enum and pattern is one the hand grammars have; a miss is an enum gold shows too
    # sparsely (moderation's policy, lead_qualifier's use_case_fit) or integer vs number.
    assert totals["enum"]["matched"] == totals["enum"]["induced"] == 10
    assert totals["enum"]["hand"] == 12
    assert totals["pattern"]["matched"] == totals["pattern"]["hand"] == 3
    assert totals["type"]["hand"] == 31 and totals["type"]["matched"] == 29
    ref = induce(pack_cases(ROOT / "packs" / "refund_desk"))
    assert ref.fields["order_id"].schema()["pattern"] == "^ORD-[0-9]{5}$"
    assert ref.copied == {"order_id": "message"}


def test_it_closes_a_field_to_its_declared_values() -> None:
    cases = gold(*({"cur": v, "fit": f} for v, f in zip(["USD", "EUR"] * 3, ["strong", None, "none"] * 2, strict=True)))
    ind = induce(cases, declared={"cur": ["USD", "EUR", "AUD"], "fit": ["strong", "partial", "none"]})
    assert ind.fields["cur"].schema() == {"type": "string", "enum": ["USD", "EUR", "AUD"]}
    assert ind.fields["fit"].schema()["enum"] == ["strong", "partial", "none", None]
    declared = kinds(ind, "fit")["enum"]
    assert declared["rule"] == "declared"
    assert "fit: enum ['strong', 'partial', 'none'] (declared in the spec)" in "\n".join(ind.report())
    assert all(valid(ind.fields[n].schema(), e[n]) for _, e in cases for n in ("cur", "fit"))
