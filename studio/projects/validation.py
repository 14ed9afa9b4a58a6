"""The studio's calls into the runtime for packs: validate files (the editor and the
pages; loading a version to run it is studio.packs)."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

from runtime import Pack, PackInvalid, load_pack
from studio.packs import PACK_PREFIX, materialize

__all__ = ["PACK_PREFIX", "Problem", "materialize", "validate_files"]


@dataclass
class Problem:
    file: str
    line: int | None
    message: str


def validate_files(files: dict[str, bytes], tools: set[str] | None = None) -> tuple[Pack | None, list[Problem]]:
    """Load the pack made of `files` (paths relative to the pack root). Tools are
    checked against the manifest only, unless `tools` names the host's registry."""
    with tempfile.TemporaryDirectory(prefix="pf-validate-") as tmp:
        try:
            pack = load_pack(materialize(files, Path(tmp)), tools=tools)
        except PackInvalid as exc:
            return None, [Problem(i.file, i.line, i.message) for i in exc.issues]
    return pack, []
