from __future__ import annotations

import pytest
from django.test import Client

from studio.endpoints.models import Endpoint


def test_it_lists_endpoints_to_anyone_logged_in(as_viewer: Client, scripted: Endpoint) -> None:
    page = as_viewer.get("/endpoints/")
    assert page.status_code == 200
    assert b"scripted" in page.content and scripted.spec.encode() in page.content
    assert b"New endpoint" not in page.content  # only staff manage endpoints


def test_it_shows_staff_the_manage_actions(as_staff: Client, scripted: Endpoint) -> None:
    page = as_staff.get("/endpoints/")
    assert b"New endpoint" in page.content
    assert f"/endpoints/{scripted.pk}/edit".encode() in page.content


def test_it_names_the_key_variable_but_never_shows_its_value(
    as_viewer: Client, scripted: Endpoint, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PACKFORGE_KEY_TEST", "sk-very-secret-value")
    Endpoint.objects.create(
        name="hosted",
        spec="openai:https://api.example.com/v1#m",
        key_env="PACKFORGE_KEY_TEST",
        created_by=scripted.created_by,
    )
    page = as_viewer.get("/endpoints/")
    assert b"PACKFORGE_KEY_TEST" in page.content and b"set here" in page.content
    assert b"sk-very-secret-value" not in page.content


def test_it_answers_htmx_with_the_table_fragment(as_viewer: Client, scripted: Endpoint) -> None:
    page = as_viewer.get("/endpoints/", headers={"HX-Request": "true"})
    assert page.status_code == 200
    assert page.content.lstrip().startswith(b'<table id="endpoints-table"')
    assert b"<html" not in page.content


def test_it_requires_login(db: None) -> None:
    page = Client().get("/endpoints/")
    assert page.status_code == 302 and page["Location"].startswith("/login/")
