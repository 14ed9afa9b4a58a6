"""The studio's caps on one run, for every user (staff included), whatever a pack asks
for (docs/studio.md, "Limits"):

- steps per run: PACKFORGE_MAX_STEPS (10,000). A save whose manifest asks for more is
  refused naming the cap (`manifest_problem`, called by the project's repository on
  every save); a run of a pack saved before the cap is walked under it (`run_options`),
  and one that reaches it fails saying so."""

from __future__ import annotations

from typing import Any

import yaml

from runtime import Pack, RunOptions
from studio.work.settings import setting

MANIFEST = "pack/manifest.yaml"
MANIFEST_BYTES_READ = 1 << 20  # a manifest larger than this is not read for its max_steps here


def max_steps() -> int:
    return int(setting("PACKFORGE_MAX_STEPS"))


def manifest_problem(data: bytes) -> str | None:
    """Why a pack manifest (its bytes) cannot be saved under the caps, or None."""
    try:
        doc = yaml.safe_load(data[:MANIFEST_BYTES_READ])
    except yaml.YAMLError:
        return None  # the loader says what is wrong with it; the cap only reads a number
    asked = doc.get("max_steps") if isinstance(doc, dict) else None
    cap = max_steps()
    if isinstance(asked, int) and not isinstance(asked, bool) and asked > cap:
        return (
            f"{MANIFEST}: max_steps {asked} is above the studio's cap of {cap} steps per run "
            f"(PACKFORGE_MAX_STEPS); lower it to {cap} or less"
        )
    return None


def run_options(pack: Pack, **given: Any) -> RunOptions:
    """RunOptions for a walk of `pack` in the studio: `given`, and the step cap when the
    pack asks for more than it."""
    cap = max_steps()
    if pack.max_steps > cap:
        given.update(max_steps=cap, max_steps_by="the studio's cap, PACKFORGE_MAX_STEPS")
    return RunOptions(**given)
