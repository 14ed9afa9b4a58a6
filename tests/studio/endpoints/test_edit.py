from __future__ import annotations

from django.test import Client

from studio.endpoints.models import Endpoint


def _form(endpoint: Endpoint, **changes: str) -> dict[str, str]:
    form = {
        "name": endpoint.name,
        "spec": endpoint.spec,
        "key_env": endpoint.key_env,
        "price_in": str(endpoint.price_in),
        "price_out": str(endpoint.price_out),
        "concurrency": str(endpoint.concurrency),
    }
    return {**form, **changes}


def test_it_edits_an_endpoint(as_staff: Client, scripted: Endpoint) -> None:
    page = as_staff.post(f"/endpoints/{scripted.pk}/edit", _form(scripted, name="renamed", price_in="1.5"))
    assert page.status_code == 302
    scripted.refresh_from_db()
    assert scripted.name == "renamed" and float(scripted.price_in) == 1.5


def test_it_forgets_the_last_check_when_the_spec_changes(as_staff: Client, scripted: Endpoint) -> None:
    scripted.last_check = {"state": "done", "ok": True}
    scripted.save()
    page = as_staff.post(f"/endpoints/{scripted.pk}/edit", _form(scripted, spec="openai:http://127.0.0.1:9/v1#m"))
    assert page.status_code == 302
    scripted.refresh_from_db()
    assert scripted.last_check is None


def test_it_refuses_a_bad_spec(as_staff: Client, scripted: Endpoint) -> None:
    page = as_staff.post(f"/endpoints/{scripted.pk}/edit", _form(scripted, spec="fake:/no/such/script.json"))
    assert page.status_code == 400 and b"scripted model file not found" in page.content


def test_it_forbids_non_staff(as_owner: Client, scripted: Endpoint) -> None:
    assert as_owner.get(f"/endpoints/{scripted.pk}/edit").status_code == 403
    assert as_owner.post(f"/endpoints/{scripted.pk}/edit", _form(scripted, name="x")).status_code == 403


def test_it_answers_404_for_a_missing_endpoint(as_staff: Client) -> None:
    assert as_staff.get("/endpoints/999/edit").status_code == 404


def test_it_requires_login(scripted: Endpoint) -> None:
    assert Client().get(f"/endpoints/{scripted.pk}/edit").status_code == 302
