"""Serving test helpers (tests/studio/deployments/): support_triage's first scripted
ticket, scripted endpoints that answer it, some nodes changed (to make a tier fail), and
a run's event kinds in order."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User

from studio.deployments.models import RunEvent, ServedRun
from studio.endpoints.models import Endpoint

SCRIPT = settings.EXAMPLE_PACKS / "support_triage" / "fakes" / "scripted.json"
TICKET: dict[str, Any] = json.loads(SCRIPT.read_text())["inputs"][0]["match"]


def scripted_tier(tmp_path: Path, staff: User, name: str, change: dict[str, Any] | None = None) -> Endpoint:
    """An endpoint answering support_triage's scripted tickets, with `change` (node ->
    answer; a string that is not JSON makes that node's answers unparsable)."""
    script = json.loads(SCRIPT.read_text())
    for entry in script["inputs"]:
        entry["answers"].update(change or {})
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(script))
    return Endpoint.objects.create(name=name, spec=f"fake:{path}", created_by=staff)


def kinds(run: ServedRun) -> list[str]:
    """The kinds of `run`'s events, in their order."""
    return list(RunEvent.objects.filter(run=run).order_by("seq").values_list("kind", flat=True))
