from __future__ import annotations

from django.test import Client

from studio.endpoints.models import Endpoint


def test_it_deletes_an_endpoint(as_staff: Client, scripted: Endpoint) -> None:
    page = as_staff.post(f"/endpoints/{scripted.pk}/delete")
    assert page.status_code == 302
    assert not Endpoint.objects.exists()


def test_it_only_deletes_on_post(as_staff: Client, scripted: Endpoint) -> None:
    assert as_staff.get(f"/endpoints/{scripted.pk}/delete").status_code == 405
    assert Endpoint.objects.exists()


def test_it_forbids_non_staff(as_owner: Client, scripted: Endpoint) -> None:
    assert as_owner.post(f"/endpoints/{scripted.pk}/delete").status_code == 403
    assert Endpoint.objects.exists()


def test_it_requires_login(scripted: Endpoint) -> None:
    assert Client().post(f"/endpoints/{scripted.pk}/delete").status_code == 302
    assert Endpoint.objects.exists()
