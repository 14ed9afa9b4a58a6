"""Browser-test (tests/e2e) helpers for serving, free of Django (the studio runs in its
own processes): support_triage's scripted tickets, and a scripted tier's script file
with some of one ticket's answers made unparsable."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.support.started import ROOT

SCRIPT = ROOT / "packs" / "support_triage" / "fakes" / "scripted.json"


def tickets() -> list[dict[str, Any]]:
    """The scripted tickets' inputs, in the script's order."""
    return [entry["match"] for entry in json.loads(SCRIPT.read_text())["inputs"]]


def scripted_answers(ticket: int) -> dict[str, Any]:
    """The scripted (right) answers of ticket number `ticket`, node -> answer."""
    return dict(json.loads(SCRIPT.read_text())["inputs"][ticket]["answers"])


def script_breaking(path: Path, ticket: int, nodes: list[str]) -> Path:
    """Write a copy of the script at `path` whose answers for `nodes` of ticket number
    `ticket` are not JSON (that tier fails those nodes for that ticket only)."""
    script = json.loads(SCRIPT.read_text())
    for node in nodes:
        script["inputs"][ticket]["answers"][node] = "this is not JSON"
    path.write_text(json.dumps(script))
    return path
