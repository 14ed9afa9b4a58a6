"""API test helpers: JSON calls through the full middleware stack, and bearer clients."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from studio.accounts.models import ApiToken
from studio.projects.models import Project
from studio.projects.storage import PackRepo


def bearer(user: User) -> Client:
    """A client that authenticates with a fresh API token, like the CLI and CI do."""
    _, token = ApiToken.issue(user, "test")
    return Client(headers={"Authorization": f"Bearer {token}"})


def send(client: Client, method: str, url: str, body: Any = None) -> Any:
    return getattr(client, method)(url, body, content_type="application/json")


def head_of(project: Project) -> str:
    head = PackRepo(project.repo_path).head()
    assert head is not None
    return head


@pytest.fixture
def anonymous(db: None) -> Client:
    return Client()


@pytest.fixture
def owner_token(owner: User) -> Client:
    return bearer(owner)
