"""Try-it fixtures: the endpoint fixtures (staff, a scripted endpoint, a real model
server on loopback, inline tasks) and a scripted endpoint whose first answer to
`classify` is rejected, so a trace has a rejected attempt to show."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings

from studio.endpoints.models import Endpoint
from tests.support.studio import REJECTED_TEXT


@pytest.fixture(autouse=True)
def no_watcher(settings: Any) -> None:
    # No lease-watcher thread in unit tests: a thread would hold its own connection,
    # outside the test's transaction; tests call recovery.sweep() where they need it.
    settings.PACKFORGE_WORK_WATCH = False


@pytest.fixture
def stumbling(staff: object, tmp_path: Path) -> Endpoint:
    """support_triage's script, with one malformed first answer for `classify`."""
    script = json.loads((settings.EXAMPLE_PACKS / "support_triage" / "fakes" / "scripted.json").read_text())
    for entry in script["inputs"]:
        entry["answers"]["classify"] = [REJECTED_TEXT, entry["answers"]["classify"]]
    path = tmp_path / "stumbling.json"
    path.write_text(json.dumps(script))
    return Endpoint.objects.create(name="stumbling", spec=f"fake:{path}", created_by=staff)
