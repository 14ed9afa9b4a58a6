"""The studio's calls into the runtime for packs: validate files (the editor and the
pages; loading a version to run it is studio.packs)."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

from runtime import BadSpec, Pack, PackInvalid, enum_problems, load_pack
from studio.host_tools import scorer_registry
from studio.packs import PACK_PREFIX, materialize, own_model_problem

__all__ = ["PACK_PREFIX", "Problem", "materialize", "validate_files"]


@dataclass
class Problem:
    file: str
    line: int | None
    message: str


def validate_files(files: dict[str, bytes], tools: set[str] | None = None) -> tuple[Pack | None, list[Problem]]:
    """Load the pack made of `files` (paths relative to the pack root). Tools are
    checked against the manifest only, unless `tools` names the host's registry;
    scorer names against the studio's scorer registry when it has one."""
    try:
        scorers = scorer_registry()
    except BadSpec:
        scorers = None  # a broken registry is said where a run needs it (studio.packs)
    with tempfile.TemporaryDirectory(prefix="pf-validate-") as tmp:
        try:
            pack = load_pack(materialize(files, Path(tmp)), tools=tools, scorers=scorers)
        except PackInvalid as exc:
            return None, [Problem(i.file, i.line, i.message) for i in exc.issues]
        # Problems of a pack that loads, which the editor shows beside the others: values a
        # grammar no longer allows, still used by an edge or the evalset (runtime
        # enum_problems); a scripted own model outside the pack (fake:/etc/passwd; an eval
        # on an endpoint never opens it; other specs are a run's business, studio.packs).
        found = [Problem(i.file, i.line, i.message) for i in enum_problems(pack)]
        if (pack.model or "").startswith("fake:"):
            refused = own_model_problem(pack)
            if refused is not None and "outside the pack" in refused:
                found.append(Problem("manifest.yaml", None, refused))
    return pack, found
