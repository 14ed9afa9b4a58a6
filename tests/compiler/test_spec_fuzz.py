"""Fuzzing the spec loader: generated spec folders either load or are refused with
SpecInvalid whose every issue names a file of the spec. Any other exception (a traceback
an author would see) fails the test.

The folders start from the example specs under specs/ and take one to three mutations:
a value anywhere in spec.yaml or in one gold line replaced by a generated one (wrong
types, unicode, nesting, huge numbers), deleted or its key renamed; a file replaced by
generated text or bytes, truncated, deleted, or made an odd YAML document."""

from __future__ import annotations

import copy
import json
import tempfile
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from compiler import GOLD_FILE, SPEC_FILE, SpecInvalid, load_spec
from tests.support.mutation import places, put

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = {
    spec.name: {name: (spec / name).read_bytes() for name in (SPEC_FILE, GOLD_FILE)}
    for spec in sorted((ROOT / "specs").iterdir())
    if (spec / SPEC_FILE).is_file()
}

text = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=30)
names = (
    st.sampled_from(
        [
            "name",
            "task",
            "inputs",
            "outputs",
            "description",
            "type",
            "tools",
            "rules",
            "text",
            "expr",
            "unsure_end",
            "model",
            "budgets",
            "attempts",
            "planner_tokens",
            "cost_usd",
            "id",
            "input",
            "expected",
            "end",
            "path",
            "human",
            "tags",
            "ticket",
            "category",
            "class",
            "null",
        ]
    )
    | text
)
scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | text
    | st.sampled_from(
        [
            *("string", "number", "array", "input.ticket", "category == 'billing'", "input", "x ==", "fake:x"),
            *("nope:x", "matches(x, '(a|a)*b')", "review", "Review Me", ""),
        ]
    )
)
values = st.recursive(
    scalars, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(names, inner, max_size=3), max_leaves=8
)


@st.composite
def restructured(draw: st.DrawFn, data: bytes, kind: str) -> bytes:
    if kind == "jsonl":
        lines = data.decode().splitlines() or ["{}"]
        i = draw(st.integers(0, len(lines) - 1))
        lines[i] = draw(restructured(lines[i].encode(), "json")).decode()
        return "\n".join(lines).encode()
    doc = copy.deepcopy(yaml.safe_load(data) if kind == "yaml" else json.loads(data))
    path = draw(st.sampled_from(places(doc)))
    how = draw(st.sampled_from(["set", "set", "delete", "rename"])) if path else "set"
    doc = put(doc, path, draw(values), how)
    if kind == "yaml":
        return yaml.safe_dump(doc, allow_unicode=True).encode()
    return json.dumps(doc, default=str).encode()


@st.composite
def mutated(draw: st.DrawFn, files: dict[str, bytes]) -> dict[str, bytes]:
    if not files:  # both deleted by earlier mutations
        return files
    name = draw(st.sampled_from(sorted(files)))
    data = files[name]
    how = draw(st.sampled_from(["structure"] * 6 + ["text", "bytes", "truncate", "delete", "yaml"]))
    files = dict(files)
    if how == "structure":
        try:
            files[name] = draw(restructured(data, "yaml" if name == SPEC_FILE else "jsonl"))
        except (
            yaml.YAMLError,
            json.JSONDecodeError,
            UnicodeDecodeError,
            IndexError,
            KeyError,
            TypeError,
            ValueError,
            RecursionError,
        ):
            files[name] = data  # already broken by an earlier mutation: leave it
    elif how == "text":
        files[name] = draw(text).encode()
    elif how == "bytes":
        files[name] = draw(st.binary(max_size=48))
    elif how == "truncate":
        files[name] = data[: draw(st.integers(0, len(data)))]
    elif how == "delete":
        del files[name]
    else:
        files[name] = draw(st.sampled_from([b"- a\n", b"42", b"!!python/object:os.system ls", b"a: &x [*x]", b"{"]))
    return files


@st.composite
def spec_folders(draw: st.DrawFn) -> dict[str, bytes]:
    files = EXAMPLES[draw(st.sampled_from(sorted(EXAMPLES)))]
    for _ in range(draw(st.integers(1, 3))):
        files = draw(mutated(files))
    return files


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
# A generated pack can be tens of kB: Hypothesis warns that printing it is costly, which
# says nothing about the loader (pyproject turns warnings into errors).
@pytest.mark.filterwarnings("ignore:Generating overly large repr")
@given(spec_folders())
def test_it_loads_or_refuses_a_mutated_spec_naming_a_file(files: dict[str, bytes]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for name, data in files.items():
            (root / name).write_bytes(data)
        try:
            spec = load_spec(root)
            event("loaded")
            assert spec.gold_bytes == files[GOLD_FILE]
        except SpecInvalid as exc:
            event("refused")
            assert exc.issues
            assert {issue.file for issue in exc.issues} <= {SPEC_FILE, GOLD_FILE}
            assert all(issue.message for issue in exc.issues)
