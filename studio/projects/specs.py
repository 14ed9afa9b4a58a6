"""The studio's calls into the compiler for a project's spec: read `spec/` at a version,
load it with the compiler's strict loader (`compiler.load_spec`, which takes a folder, so
the two files are written into a temporary one), induce the output schemas from its gold
cases, and the skeleton a project without a spec starts from.

The repository's `spec/` folder holds `spec.yaml` and `gold.jsonl` (docs/compiler.md,
"The spec"); the example projects get `specs/<name>/` there when they are created."""

from __future__ import annotations

import tempfile
from collections.abc import Mapping
from pathlib import Path

from django.conf import settings

from compiler import GOLD_FILE, SPEC_FILE, Induction, Spec, SpecInvalid, induce, load_spec
from studio.projects.execute import Problem
from studio.projects.storage import PackRepo

__all__ = [
    "GOLD_FILE",
    "SPEC_FILE",
    "SPEC_FILES",
    "SPEC_PREFIX",
    "check_spec",
    "example_spec_files",
    "induction_of",
    "skeleton_files",
    "spec_files",
]

SPEC_PREFIX = "spec/"  # where a project's spec lives in its repository
SPEC_FILES = (SPEC_FILE, GOLD_FILE)  # what the studio reads and edits there


def spec_files(repo: PackRepo, version: str | None = None) -> dict[str, bytes]:
    """`spec.yaml` and `gold.jsonl` at `version` (the head by default), those that exist."""
    files = repo.files(version, prefix=SPEC_PREFIX)
    return {name: files[name] for name in SPEC_FILES if name in files}


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
            spec = load_spec(root)
        except SpecInvalid as exc:
            return None, [Problem(i.file, i.line, i.message) for i in exc.issues]
    return spec, []


def induction_of(spec: Spec) -> Induction:
    """What the gold cases say about each declared output (compiler.induce)."""
    return induce([(case.input, case.expected) for case in spec.gold], outputs=list(spec.outputs))


def example_spec_files(name: str) -> dict[str, bytes]:
    """The spec written for the example pack `name` (specs/<name>/ beside packs/), or
    nothing when it has none."""
    root = Path(settings.BASE_DIR) / "specs" / name
    return {n: (root / n).read_bytes() for n in SPEC_FILES if (root / n).is_file()}


_SKELETON_YAML = """\
# What the pack must do, in words; the compiler builds a pack from it and the gold cases
# (docs/compiler.md, "The spec").
name: "{name}"
task: >
  Say in plain words what the pack does: what comes in, what must come out, and how
  to decide between the answers.
inputs:
  text:
    description: What the pack reads, in words.
    type: string
outputs:
  label:
    description: What the pack must answer, in words.
    type: string
"""
# One case so the skeleton loads; its tag says to replace it. Gold cases become the
# pack's evalset byte for byte, so the author writes the real ones.
_SKELETON_GOLD = (
    '{"id": "example-1", "input": {"text": "Replace this with a real input."}, '
    '"expected": {"label": "the answer it must give"}, "tags": ["replace-me"]}\n'
)


def skeleton_files(name: str) -> dict[str, bytes]:
    """A spec that loads: a name, a task to rewrite, one input, one output, one gold
    case tagged `replace-me`. `name` is a project slug (safe as a plain YAML scalar)."""
    return {SPEC_FILE: _SKELETON_YAML.format(name=name).encode(), GOLD_FILE: _SKELETON_GOLD.encode()}
