"""API test helpers: JSON calls through the full middleware stack, and bearer clients."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client

from tests.support.studio import bearer


@pytest.fixture
def anonymous(db: None) -> Client:
    return Client()


@pytest.fixture
def owner_token(owner: User) -> Client:
    return bearer(owner)
