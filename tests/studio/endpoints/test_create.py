from __future__ import annotations

from django.test import Client

from studio.endpoints.models import Endpoint

FORM = {
    "name": "local",
    "spec": "openai:http://127.0.0.1:8080/v1#qwen",
    "key_env": "",
    "price_in": "0.15",
    "price_out": "0.6",
    "concurrency": "2",
}


def test_it_creates_an_endpoint(as_staff: Client) -> None:
    page = as_staff.post("/endpoints/new", FORM)
    assert page.status_code == 302 and page["Location"] == "/endpoints/"
    endpoint = Endpoint.objects.get(name="local")
    assert endpoint.spec == "openai:http://127.0.0.1:8080/v1#qwen" and endpoint.concurrency == 2


def test_it_shows_the_form(as_staff: Client) -> None:
    page = as_staff.get("/endpoints/new")
    assert page.status_code == 200 and b'name="spec"' in page.content


def test_it_refuses_a_bad_spec_with_the_runtimes_message(as_staff: Client) -> None:
    page = as_staff.post("/endpoints/new", {**FORM, "spec": "openai:http://127.0.0.1:8080/v1"})
    assert page.status_code == 400
    assert b"needs a model after" in page.content
    assert not Endpoint.objects.exists()


def test_it_refuses_an_unknown_scheme(as_staff: Client) -> None:
    page = as_staff.post("/endpoints/new", {**FORM, "spec": "gopher:x"})
    assert page.status_code == 400 and b"unknown model scheme" in page.content


def test_it_refuses_a_key_given_in_the_spec(as_staff: Client) -> None:
    page = as_staff.post("/endpoints/new", {**FORM, "spec": FORM["spec"] + ";key_env=MY_KEY"})
    assert page.status_code == 400 and b"Key env var" in page.content


def test_it_refuses_a_key_value_in_place_of_a_variable_name(as_staff: Client) -> None:
    page = as_staff.post("/endpoints/new", {**FORM, "key_env": "sk-abc123"})
    assert page.status_code == 400 and b"an environment variable name" in page.content


def test_it_saves_a_key_variable_that_this_process_does_not_hold(as_staff: Client) -> None:
    # The worker that opens the endpoint needs the key, not the web process.
    page = as_staff.post("/endpoints/new", {**FORM, "key_env": "PACKFORGE_KEY_UNSET_IN_TESTS"})
    assert page.status_code == 302
    assert Endpoint.objects.get(name="local").key_env == "PACKFORGE_KEY_UNSET_IN_TESTS"


def test_it_forbids_non_staff(as_owner: Client) -> None:
    assert as_owner.get("/endpoints/new").status_code == 403
    assert as_owner.post("/endpoints/new", FORM).status_code == 403
    assert not Endpoint.objects.exists()


def test_it_requires_login(db: None) -> None:
    page = Client().post("/endpoints/new", FORM)
    assert page.status_code == 302 and page["Location"].startswith("/login/")


def test_it_refuses_a_key_variable_that_holds_a_studio_secret(as_staff: Client) -> None:
    for name in ("SECRET_KEY", "DATABASE_URL", "PACKFORGE_GIT_ROOT"):
        page = as_staff.post("/endpoints/new", {**FORM, "key_env": name})
        assert page.status_code == 400
        assert b"belongs to the studio itself" in page.content
    assert not Endpoint.objects.exists()
