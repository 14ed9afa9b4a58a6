"""Try-it fixtures: the endpoint fixtures (staff, a scripted endpoint, a real model
server on loopback, inline tasks) and a scripted endpoint whose first answer to
`classify` is rejected, so a trace has a rejected attempt to show."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.conf import settings

from studio.endpoints.models import Endpoint
from tests.support.studio import REJECTED_TEXT


@pytest.fixture
def stumbling(staff: object, tmp_path: Path) -> Endpoint:
    """support_triage's script, with one malformed first answer for `classify`."""
    script = json.loads((settings.EXAMPLE_PACKS / "support_triage" / "fakes" / "scripted.json").read_text())
    for entry in script["inputs"]:
        entry["answers"]["classify"] = [REJECTED_TEXT, entry["answers"]["classify"]]
    path = tmp_path / "stumbling.json"
    path.write_text(json.dumps(script))
    return Endpoint.objects.create(name="stumbling", spec=f"fake:{path}", created_by=staff)
