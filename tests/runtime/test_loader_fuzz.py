"""Fuzzing the pack loader: thousands of generated packs, each either loads or is refused
with PackInvalid whose every issue names a file of the pack. Any other exception (a
traceback an author would see) fails the test.

The packs start from the worked examples under packs/ (so most of the loader's paths
are reached, not only "manifest.yaml is not YAML"), then take one to four mutations:
a value anywhere in the manifest, the graph, a grammar or an evalset line replaced by a
generated one (wrong types, unicode, deep nesting, huge numbers), a file replaced by
generated text or bytes, truncated, deleted, or added under a generated name."""

from __future__ import annotations

import copy
import json
import tempfile
from pathlib import Path, PurePosixPath

import pytest
import yaml
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from runtime import PackInvalid, load_pack
from tests.support.mutation import places, put

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = {
    pack.name: {
        str(path.relative_to(pack)): path.read_bytes()
        for path in sorted(pack.rglob("*"))
        if path.is_file() and path.suffix in (".yaml", ".json", ".jsonl", ".txt")
    }
    for pack in sorted((ROOT / "packs").iterdir())
    if (pack / "manifest.yaml").is_file()
}
FUZZ = settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# -- generated values ----------------------------------------------------------------------

text = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=40)
names = (
    st.sampled_from(
        [
            "name",
            "version",
            "entry",
            "model",
            "kind",
            "reads",
            "writes",
            "when",
            "to",
            "from",
            "on_fail",
            "on_unsure",
            "samples",
            "agree",
            "tool",
            "args",
            "assert",
            "retry",
            "resamples",
            "feedback",
            "nodes",
            "edges",
            "inputs",
            "output",
            "tools",
            "type",
            "properties",
            "required",
            "enum",
            "pattern",
            "input",
            "expected",
            "id",
            "end",
            "path",
            "human",
            "$ref",
            "items",
            "minimum",
            "tier",
            "description",
            "fields",
            "compare",
            "tolerance",
            "agree_on",
            "set",
            "number",
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
    | st.dates()  # what YAML makes of `version: 2024-01-01`
    | st.binary(max_size=4)  # and of `!!binary`
    | st.sampled_from(
        [
            "classify",
            "end",
            "input.ticket",
            "category == 'billing'",
            "matches(x, '(a|a)*b')",
            "..",
            "../../etc/passwd",
            "/abs",
            "prompts/x.txt",
            "{{ x }}",
            "fake:../secret",
            "$ref",
            "",
        ]
    )
)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(names, inner, max_size=4),
    max_leaves=12,
)


@st.composite
def structured(draw: st.DrawFn, data: bytes, kind: str) -> bytes:
    """`data` parsed, one value in it replaced, deleted or its key renamed, written back."""
    if kind == "jsonl":
        lines = data.decode().splitlines() or ["{}"]
        i = draw(st.integers(0, len(lines) - 1))
        lines[i] = draw(structured(lines[i].encode(), "json")).decode()
        return "\n".join(lines).encode()
    doc = copy.deepcopy(yaml.safe_load(data) if kind == "yaml" else json.loads(data))
    path = draw(st.sampled_from(places(doc)))
    doc = put(doc, path, draw(values), draw(st.sampled_from(["set", "set", "delete", "rename"])) if path else "set")
    if kind == "yaml":
        return yaml.safe_dump(doc, allow_unicode=True).encode()
    return json.dumps(doc, ensure_ascii=draw(st.booleans()), default=str).encode()


@st.composite
def mutated(draw: st.DrawFn, files: dict[str, bytes]) -> dict[str, bytes]:
    name = draw(st.sampled_from(sorted(files)))
    data = files[name]
    kind = {".yaml": "yaml", ".json": "json", ".jsonl": "jsonl"}.get(PurePosixPath(name).suffix)
    how = draw(st.sampled_from(["structure"] * 6 + ["text", "bytes", "truncate", "delete", "add", "yaml", "deep"]))
    files = dict(files)
    if how == "structure" and kind is not None:
        try:
            files[name] = draw(structured(data, kind))
        except (
            yaml.YAMLError,
            json.JSONDecodeError,
            UnicodeDecodeError,
            IndexError,
            KeyError,
            TypeError,
            ValueError,  # PyYAML's int constructor on `0x_`
            RecursionError,
        ):
            files[name] = data  # already broken by an earlier mutation: leave it
    elif how == "text":
        files[name] = draw(text).encode()
    elif how == "bytes":
        files[name] = draw(st.binary(max_size=64))
    elif how == "truncate":
        files[name] = data[: draw(st.integers(0, len(data)))]
    elif how == "delete":
        del files[name]
    elif how == "add":
        folder = draw(st.sampled_from(["prompts/", "grammars/", "", "fakes/", "tools/"]))
        stem = draw(
            st.text(
                st.characters(codec="utf-8", exclude_categories=["Cs"], exclude_characters="/\0"),
                min_size=1,
                max_size=12,
            )
        )
        if stem not in (".", ".."):
            files[folder + stem + draw(st.sampled_from([".txt", ".json", ".yaml", ""]))] = draw(text).encode()
    elif how == "deep":  # nesting past any stack: '[[[[...]]]]' in the file's own syntax
        depth = draw(st.sampled_from([70, 1200, 5000]))
        inner = "[" * depth + "]" * depth
        files[name] = (f'{{"id": "deep", "input": {inner}}}' if kind == "jsonl" else f'{{"a": {inner}}}').encode()
    else:  # a YAML document that parses to something odd: anchors, tags, a scalar, a list
        files[name] = draw(
            st.sampled_from(
                [
                    b"- a\n- b\n",
                    b"42",
                    b"!!python/object:os.system ls",
                    b"a: &x [*x]",
                    b"a: b: c",
                    b"\xef\xbb\xbfname: x",
                    b"{",
                    b"null",
                    b"a: !!binary AAAA",
                    b"version: 2024-01-01",
                    b"a: !!int x",
                    b"a: !!set {b: 1}",
                ]
            )
        )
    return files


@st.composite
def packs(draw: st.DrawFn) -> dict[str, bytes]:
    files = EXAMPLES[draw(st.sampled_from(sorted(EXAMPLES)))]
    for _ in range(draw(st.integers(1, 4))):
        files = draw(mutated(files))
    return files


def _write(root: Path, files: dict[str, bytes]) -> None:
    for name, data in files.items():
        target = root / name
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        except OSError:  # a generated name the filesystem cannot hold: not the loader's concern
            pass


def _check_loads_or_names_files(root: Path, tools: list[str] | None) -> None:
    try:
        load_pack(root, tools=tools)
        event("loaded")
    except PackInvalid as exc:
        event(f"refused ({len(exc.issues)} issues)" if len(exc.issues) < 3 else "refused (3+ issues)")
        assert exc.issues, "PackInvalid without issues"
        for issue in exc.issues:
            assert isinstance(issue.file, str) and issue.file.strip(), f"an issue names no file: {issue!r}"
            where = PurePosixPath(issue.file)
            assert not where.is_absolute() and ".." not in where.parts, f"an issue names no pack file: {issue!r}"
            assert issue.message.strip(), f"an issue says nothing: {issue!r}"


# A generated pack can be tens of kB: Hypothesis warns that printing it is costly, which
# says nothing about the loader (pyproject turns warnings into errors).
@pytest.mark.filterwarnings("ignore:Generating overly large repr")
@FUZZ
@given(packs(), st.sampled_from([None, [], ["lookup_order", "issue_refund"], ["x"]]))
def test_it_loads_or_refuses_every_generated_pack_naming_a_file(
    files: dict[str, bytes], tools: list[str] | None
) -> None:
    with tempfile.TemporaryDirectory(prefix="pf-fuzz-pack-") as tmp:
        _write(Path(tmp), files)
        _check_loads_or_names_files(Path(tmp), tools)


def test_it_loads_every_example_unmutated() -> None:
    """The fuzz's starting points are valid packs, so a mutation is what the loader sees."""
    for name, files in EXAMPLES.items():
        with tempfile.TemporaryDirectory(prefix="pf-fuzz-pack-") as tmp:
            _write(Path(tmp), files)
            assert load_pack(Path(tmp)).name == name


# -- what the fuzz found, kept as plain cases (each raised something other than PackInvalid) --

_NEST = "[" * 5000 + "]" * 5000
_LAUGHS = "a: &a [1]\n" + "".join(
    f"{b}: &{b} [{', '.join([f'*{a}'] * 9)}]\n" for a, b in zip("abcdefg", "bcdefgh", strict=True)
)
FOUND = [
    ("graph.yaml", "edges", "- {from: [classify], to: extract}\n", "graph.yaml"),
    ("graph.yaml", "edges", "- {from: classify, to: {a: 1}}\n", "graph.yaml"),
    ("graph.yaml", "nodes", "classify: {kind: [generate]}\n", "graph.yaml"),
    ("manifest.yaml", None, "name: !!python/object:os.system ls\n", "manifest.yaml"),
    ("manifest.yaml", None, "name: !!int abc\n", "manifest.yaml"),
    ("manifest.yaml", None, "name: &x [*x]\n", "manifest.yaml"),
    ("graph.yaml", None, _LAUGHS, "graph.yaml"),
    ("graph.yaml", None, "nodes: " + _NEST + "\n", "graph.yaml"),
    ("grammars/classify.json", None, _NEST, "grammars/classify.json"),
    ("evalset.jsonl", None, '{"id": "x", "input": ' + _NEST + "}\n", "evalset.jsonl"),
]


def _with(files: dict[str, bytes], name: str, key: str | None, text: str) -> dict[str, bytes]:
    if key is None:
        return {**files, name: text.encode()}
    doc = yaml.safe_load(files[name])
    doc[key] = yaml.safe_load(text)
    return {**files, name: yaml.safe_dump(doc).encode()}


def test_it_refuses_what_the_fuzz_found_naming_the_file() -> None:
    for name, key, text, file in FOUND:
        with tempfile.TemporaryDirectory(prefix="pf-fuzz-pack-") as tmp:
            _write(Path(tmp), _with(EXAMPLES["support_triage"], name, key, text))
            try:
                load_pack(Path(tmp))
            except PackInvalid as exc:
                assert file in {i.file for i in exc.issues}, (name, text[:40], [str(i) for i in exc.issues])
            else:
                raise AssertionError(f"loaded with {text[:40]!r} in {name}")
