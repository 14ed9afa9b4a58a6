"""Eval test helpers: the refund_desk project (a pack with host tools), a scripted
endpoint, and running an eval's cases in this process, as a worker would."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.cache import cache

from studio.accounts.models import Membership, Role
from studio.evals import shared, worker
from studio.projects.models import Project, create_project
from studio.projects.views import example_files

ROOT = Path(__file__).resolve().parents[3]
REFUND_TOOLS = f"{ROOT / 'packs' / 'refund_desk' / 'tools.py'}:registry"


@pytest.fixture(autouse=True)
def eval_settings(settings: Any) -> Iterator[None]:
    # No watcher thread in unit tests: the tests call Watcher.tick() where they need it
    # (a thread would hold its own connection, outside the test's transaction).
    settings.PACKFORGE_WORK_WATCH = False
    settings.PACKFORGE_TOOLS = ""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]  # personas, made fast
    cache.clear()  # result pages cache per eval: each test starts cold
    worker.forget_runners()
    yield
    worker.forget_runners()


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The case ids sent to the broker (nothing reaches a real broker)."""
    ids: list[int] = []
    monkeypatch.setattr(shared, "enqueue_cases", lambda case_ids: ids.extend(case_ids))
    return ids


@pytest.fixture
def refunds(owner: User, viewer: User, settings: Any) -> Project:
    """refund_desk, owned by `owner` (with `viewer`), with its host tools registered."""
    settings.PACKFORGE_TOOLS = REFUND_TOOLS
    made = create_project(
        slug="refunds",
        name="Refund desk",
        owner=owner,
        pack_files=example_files("refund_desk"),
        message="Create from example",
    )
    Membership.objects.create(user=viewer, project=made, role=Role.VIEWER)
    return made


# -- host tools that count their real calls ------------------------------------------------


def _load_refund_tools() -> dict[str, Any]:
    from runtime.cli import load_tools

    return load_tools(REFUND_TOOLS) or {}


TOOL_CALLS: list[tuple[str, str]] = []  # (tool, its arguments as JSON), one per real call


def _counted(name: str, fn: Any) -> Any:
    def call(**kwargs: Any) -> Any:
        TOOL_CALLS.append((name, json.dumps(kwargs, sort_keys=True)))
        return fn(**kwargs)

    return call


COUNTED_TOOLS = {name: _counted(name, fn) for name, fn in _load_refund_tools().items()}


@pytest.fixture
def tool_calls(refunds: Project, settings: Any) -> list[tuple[str, str]]:
    """refund_desk's tools, each real call recorded (PACKFORGE_TOOLS names this module)."""
    settings.PACKFORGE_TOOLS = "tests.studio.evals.conftest:COUNTED_TOOLS"
    TOOL_CALLS.clear()
    return TOOL_CALLS
