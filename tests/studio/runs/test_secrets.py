"""A try-it run stores no key: a real loopback server that echoes the Authorization
header into every answer leaves the key in no stored text (trace, error, output)."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User

from studio.endpoints.models import Endpoint
from studio.projects.models import Project
from studio.runs import start, worker
from studio.runs.models import TryRun
from tests.support.fault_server import FaultServer

KEY_ENV = "PROVIDER_CREDS"  # a name the log redactor would not guess is a secret (so on the allowlist here)
KEY = "pk-live-0123456789abcdef"


@pytest.fixture(autouse=True)
def allowed(settings: Any) -> None:
    settings.ENDPOINT_KEY_VARS = [KEY_ENV]


def test_it_stores_no_key_a_server_echoes_into_its_answers(
    project: Project, owner: User, staff: User, fault: FaultServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)
    fault.configure(echo_auth=True)
    endpoint = Endpoint.objects.create(name="echo", spec=fault.spec(), key_env=KEY_ENV, created_by=staff)
    run = start.new_try_run(project, user=owner, version=None, endpoint=endpoint, input={"ticket": "Refund me"})
    worker.run_try(run.pk)
    run = TryRun.objects.get(pk=run.pk)
    texts = [a["text"] for a in run.trace["attempts"]]
    assert texts and all("Authorization: Bearer [REDACTED]" in t for t in texts)  # every answer echoed it
    assert KEY not in str(run.trace) + run.error + str(run.output)
