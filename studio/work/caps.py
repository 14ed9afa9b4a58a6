"""The studio's caps on one run, for every user (staff included), whatever a pack asks
for (docs/studio.md, "Limits"):

- steps per run: PACKFORGE_MAX_STEPS (10,000). A save whose manifest asks for more is
  refused naming the cap (`manifest_problem`, called by the project's repository on
  every save); a run of a pack saved before the cap is walked under it (`run_options`),
  and one that reaches it fails saying so.
- journal bytes per run: PACKFORGE_MAX_JOURNAL_BYTES (8 MiB). The run's checkpoint
  journal (every step's writes and attempts, model text included, and every tool
  result) is counted as it is written (`JournalBudget`); the entry that would pass the
  cap is not written, and the run fails naming the cap (`CapReached`). It bounds the
  database one run can fill and the trace a run's page or API answer carries.
- steps per second of one run: PACKFORGE_MAX_STEP_RATE (50) after a burst of
  PACKFORGE_STEP_BURST (200) steps (`run_options` gives every walk a StepPacer). A step
  that asks a model takes longer than that; a graph looping over steps that cost nothing
  is held to the rate, so it cannot write its journal into the shared database as fast
  as a core allows while other users save and run."""

from __future__ import annotations

import json
from typing import Any

import yaml

from runtime import Pack, RunOptions, StepPacer
from studio.work.settings import setting


class CapReached(Exception):
    """A run reached one of the studio's caps; the message names it. A delivery ends the
    row as failed with that message (studio.work.delivery)."""


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


def max_journal_bytes() -> int:
    return int(setting("PACKFORGE_MAX_JOURNAL_BYTES"))


class JournalBudget:
    """The bytes of journal entries one store wrote per run (entries taken over count
    too: `took_over`); `charge` raises CapReached before an entry would pass the cap."""

    def __init__(self) -> None:
        self.used: dict[str, int] = {}

    def took_over(self, run_id: str, payloads: list[Any]) -> None:
        self.used[run_id] = sum(len(json.dumps(p, default=str)) for p in payloads)

    def charge(self, run_id: str, payload: Any) -> None:
        size = len(json.dumps(payload, default=str))
        used = self.used.get(run_id, 0) + size
        cap = max_journal_bytes()
        if used > cap:
            raise CapReached(
                f"the run's journal reached the studio's cap of {cap} bytes (PACKFORGE_MAX_JOURNAL_BYTES): "
                f"its steps, model answers and tool results are too large to keep; the graph may be looping"
            )
        self.used[run_id] = used


def run_options(pack: Pack, **given: Any) -> RunOptions:
    """RunOptions for a walk of `pack` in the studio: `given`, the step cap when the pack
    asks for as many steps as it or more, and a fresh step pacer (one per walk)."""
    cap = max_steps()
    if pack.max_steps >= cap:  # the cap binds (a pack asking exactly the cap is told so too)
        given.update(max_steps=cap, max_steps_by="the studio's cap, PACKFORGE_MAX_STEPS")
    given.setdefault(
        "pacer", StepPacer(float(setting("PACKFORGE_MAX_STEP_RATE")), int(setting("PACKFORGE_STEP_BURST")))
    )
    return RunOptions(**given)
