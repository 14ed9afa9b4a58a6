"""The studio's calls into the compiler for a project's spec: read `spec/` at a version,
load it with the compiler's strict loader (`compiler.load_spec`, which takes a folder, so
the two files are written into a temporary one), induce the output schemas from its gold
cases, and the skeleton a project without a spec starts from.

The repository's `spec/` folder holds `spec.yaml`; the gold cases the compiler reads as
`gold.jsonl` are the pack's `evalset.jsonl` (one gold per project: docs/proposals.md).
The example projects get `specs/<name>/spec.yaml` there when they are created."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from django.conf import settings

from compiler import GOLD_FILE, SPEC_FILE, Induction, Spec, SpecInvalid, induce, load_spec
from runtime import BadSpec
from studio.host_tools import scorer_registry
from studio.projects.storage import PackRepo
from studio.projects.validation import Problem

__all__ = [
    "GOLD_FILE",
    "GOLD_PATH",
    "SPEC_FILE",
    "SPEC_FILES",
    "SPEC_PREFIX",
    "check_spec",
    "example_spec_files",
    "induction_of",
    "skeleton_files",
    "spec_files",
    "spec_repo_path",
]

SPEC_PREFIX = "spec/"  # where a project's spec lives in its repository
SPEC_FILES = (SPEC_FILE, GOLD_FILE)  # what the studio reads and edits there
# One gold per project (docs/proposals.md, "One gold"): the spec's gold cases are the
# pack's evalset, one file in the repository. The compiler's `gold.jsonl` is read from,
# and saved to, the pack's `evalset.jsonl`; `spec/` holds `spec.yaml` only.
GOLD_PATH = "pack/evalset.jsonl"


def spec_repo_path(name: str) -> str:
    """Where the spec file `name` (spec.yaml or gold.jsonl) is kept in the repository."""
    return GOLD_PATH if name == GOLD_FILE else SPEC_PREFIX + name


def spec_files(repo: PackRepo, version: str | None = None) -> dict[str, bytes]:
    """`spec.yaml` and `gold.jsonl` (the pack's evalset) at `version` (the head by
    default); nothing when the project has no spec.yaml, and no gold.jsonl when the pack
    has no evalset."""
    sha = repo.resolve(version)
    spec = repo.files(sha, prefix=SPEC_PREFIX)
    if SPEC_FILE not in spec:
        return {}
    out = {SPEC_FILE: spec[SPEC_FILE]}
    gold = repo.files(sha, prefix="pack/").get("evalset.jsonl")
    if gold is not None:
        out[GOLD_FILE] = gold
    return out


def check_spec(files: Mapping[str, bytes]) -> tuple[Spec | None, list[Problem]]:
    """Load the spec made of `files` (`spec.yaml`, `gold.jsonl`) with the compiler's
    loader: the spec, or None and every problem with its file and line. The returned
    Spec's `root` is a folder that no longer exists; everything else is in memory."""
    with tempfile.TemporaryDirectory(prefix="pf-spec-") as tmp:
        root = Path(tmp)
        for name in SPEC_FILES:
            if name in files:
                (root / name).write_bytes(files[name])
        try:
            spec = load_spec(root, scorers=_scorers())
        except SpecInvalid as exc:
            return None, [Problem(i.file, i.line, i.message) for i in exc.issues]
    return spec, []


def induction_of(spec: Spec) -> Induction:
    """What the gold cases say about each declared output (compiler.induce)."""
    return induce(
        [(case.input, case.expected) for case in spec.gold], outputs=list(spec.outputs), declared=spec.declared_values()
    )


def example_spec_files(name: str) -> dict[str, bytes]:
    """The spec written for the example pack `name` (specs/<name>/ beside packs/), or
    nothing when it has none."""
    root = Path(settings.BASE_DIR) / "specs" / name
    return {n: (root / n).read_bytes() for n in SPEC_FILES if (root / n).is_file()}


_SKELETON_HEAD = """\
# What the pack must do, in words; the compiler builds a pack from it and the gold cases
# (docs/compiler.md, "The spec"). Rewrite the task and each description.
"""
_TASK = "Say in plain words what the pack does, what comes in and what must come out."
# When the pack has no evalset to start from: one case so the skeleton loads, tagged to
# say it must be replaced (gold cases become the pack's evalset byte for byte).
_PLACEHOLDER_GOLD = (
    '{"id": "example-1", "input": {"text": "Replace this with a real input."}, '
    '"expected": {"label": "the answer it must give"}, "tags": ["replace-me"]}\n'
)


def skeleton_files(name: str, evalset: bytes | None = None) -> dict[str, bytes]:
    """A skeleton spec named `name`: a task to rewrite and the inputs and outputs.

    With the pack's `evalset` (evalset.jsonl bytes) holding cases, the gold cases are a
    byte copy of it and the spec declares the input and expected keys its cases use, in
    the order first seen (and, when cases hold answers for one human node, that node as
    the unsure end). Otherwise: one input `text`, one output `label` and one placeholder
    case tagged `replace-me`. Either way the author rewrites the words; a key that is not
    a valid field name shows up as a problem on the Spec tab."""
    inputs, outputs, human = _evalset_keys(evalset or b"")
    if not inputs or not outputs:
        inputs, outputs, human, gold = ["text"], ["label"], [], _PLACEHOLDER_GOLD.encode()
    else:
        assert evalset is not None
        gold = evalset
    doc: dict[str, Any] = {
        "name": name,
        "task": _TASK,
        "inputs": {k: {"description": f"What {k} holds, in words."} for k in inputs},
        "outputs": {k: {"description": f"What {k} must hold, in words."} for k in outputs},
    }
    if inputs == ["text"] and outputs == ["label"]:
        doc["inputs"]["text"]["type"] = doc["outputs"]["label"]["type"] = "string"
    if len(human) == 1:
        doc["unsure_end"] = human[0]
    text = _SKELETON_HEAD + yaml.safe_dump(doc, sort_keys=False, allow_unicode=True, width=88)
    return {SPEC_FILE: text.encode(), GOLD_FILE: gold}


def _evalset_keys(data: bytes) -> tuple[list[str], list[str], list[str]]:
    """The input keys, expected keys and human-answer nodes of the cases in `data`, in
    the order first seen; lines that are not JSON objects are skipped."""
    inputs: dict[str, None] = {}
    outputs: dict[str, None] = {}
    human: dict[str, None] = {}
    for raw in data.decode("utf-8", errors="replace").splitlines():
        try:
            case = json.loads(raw)
        except json.JSONDecodeError:
            continue
        if not isinstance(case, dict):
            continue
        for part, seen in (("input", inputs), ("expected", outputs), ("human", human)):
            value = case.get(part)
            if isinstance(value, dict):
                seen.update(dict.fromkeys(str(k) for k in value))
    return list(inputs), list(outputs), list(human)


def _scorers() -> dict[str, Any] | None:
    """The host's scorers, so a spec naming one it lacks is a problem in the editor; None
    (names unchecked, as `packforge check` without --scorers) when none is configured or
    the configured registry does not import (a compile says so when it starts)."""
    try:
        return scorer_registry()
    except BadSpec:
        return None
