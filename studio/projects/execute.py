"""The studio's calls into the runtime for packs: validate files, load a version."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

from runtime import PackInvalid, load_pack
from runtime.pack import Pack

PACK_PREFIX = "pack/"


@dataclass
class Problem:
    file: str
    line: int | None
    message: str


def materialize(files: dict[str, bytes], root: Path) -> Path:
    for name, data in files.items():
        target = root / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    return root


def validate_files(files: dict[str, bytes], tools: set[str] | None = None) -> tuple[Pack | None, list[Problem]]:
    """Load the pack made of `files` (paths relative to the pack root). Tools are
    checked against the manifest only, unless `tools` names the host's registry."""
    with tempfile.TemporaryDirectory(prefix="pf-validate-") as tmp:
        try:
            pack = load_pack(materialize(files, Path(tmp)), tools=tools)
        except PackInvalid as exc:
            return None, [Problem(i.file, i.line, i.message) for i in exc.issues]
    return pack, []


def own_model_problem(pack: Pack) -> str | None:
    """Why the studio will not run this pack on its manifest's own model, or None.

    In the studio a pack's own model must be a scripted model inside the pack. A pack is
    written by any author, and an `openai:` spec in it could name any server and any
    environment variable as its key (the studio's SECRET_KEY, say); real servers are
    endpoints, set up by staff. A scripted file outside the pack would read the server's
    disk."""
    from runtime.backends.scripted import parse_sim_spec
    from runtime.errors import BadSpec

    spec = pack.model or ""
    scheme, _, body = spec.partition(":")
    if scheme not in ("fake", "sim"):
        return (
            f"the manifest's model {spec!r} is not a scripted model; in the studio a pack's own model must be "
            "fake:FILE or sim:... inside the pack; run it on a real server through an endpoint"
        )
    try:
        path = body if scheme == "fake" else parse_sim_spec(body).get("base", "")
    except BadSpec as exc:
        return f"the manifest's model {spec!r} is not valid: {exc}"
    root = Path(pack.root).resolve()
    if not path or not (root / path).resolve().is_relative_to(root):
        return f"the manifest's model {spec!r} names a file outside the pack; scripted models live in the pack"
    return None
