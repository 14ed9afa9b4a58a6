"""The endpoint seam into the runtime: the spec the runtime opens, validation on save,
and checks against a real OpenAI-compatible server on loopback."""

from __future__ import annotations

import socket
from decimal import Decimal

import pytest

from studio.endpoints import backends
from studio.endpoints.models import Endpoint
from tests.support.fault_server import FaultServer


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_it_adds_the_rows_fields_to_an_openai_spec() -> None:
    spec = backends.opening_spec(
        "openai:http://h/v1#m;grammar=gbnf",
        key_env="MY_KEY",
        price_in=Decimal("0.1500"),
        price_out=Decimal("2"),
        concurrency=3,
    )
    assert spec == "openai:http://h/v1#m;grammar=gbnf;key_env=MY_KEY;concurrency=3;price_in=0.15;price_out=2"


def test_it_leaves_a_scripted_spec_alone() -> None:
    assert backends.opening_spec("fake:/x.json", key_env="", concurrency=4) == "fake:/x.json"


@pytest.mark.parametrize(
    ("spec", "key_env", "says"),
    [
        ("openai:http://h/v1", "", "needs a model after"),
        ("openai:ftp://h/v1#m", "", "must start with http"),
        ("openai:http://h/v1#m;grammar=regex", "", "grammar"),
        ("openai:http://h/v1#m;concurrency=2", "", "'Concurrency' field"),
        ("fake:/no/such/file.json", "", "not found"),
        ("fake:/no/such/file.json", "MY_KEY", "only openai: endpoints take a key"),
        ("nope", "", "needs a scheme"),
    ],
)
def test_it_says_why_a_spec_cannot_be_saved(spec: str, key_env: str, says: str) -> None:
    problem = backends.spec_problem(spec, key_env)
    assert problem is not None and says in problem


def test_lookahead_is_checked_against_the_rows_concurrency() -> None:
    spec = "openai:http://h/v1#m;lookahead=2"
    assert backends.spec_problem(spec, "", 3) is None
    problem = backends.spec_problem(spec, "", 2)
    assert problem is not None and "lookahead=2 must be below concurrency=2" in problem


def test_it_accepts_a_good_spec_without_holding_its_key() -> None:
    assert (
        backends.spec_problem("openai:http://127.0.0.1:8080/v1#m;grammar=gbnf", "PACKFORGE_KEY_UNSET_IN_TESTS") is None
    )


def test_it_checks_an_endpoint_and_stores_the_reading(staff: object, fault: FaultServer) -> None:
    endpoint = Endpoint.objects.create(name="e", spec=fault.spec(), created_by=staff)
    result = backends.check(endpoint.pk)
    endpoint.refresh_from_db()
    assert endpoint.last_check == result
    assert result is not None and result["ok"] and result["honoured"] and result["state"] == "done"


def test_it_reports_an_endpoint_that_does_not_answer(staff: object) -> None:
    spec = f"openai:http://127.0.0.1:{_closed_port()}/v1#m;backoff=0"
    endpoint = Endpoint.objects.create(name="dead", spec=spec, created_by=staff)
    result = backends.check(endpoint.pk)
    assert result is not None and result["ok"] is False and result["answered"] is False and result["error"]


def test_it_sends_the_key_from_the_named_variable_and_stores_no_key(
    staff: object, fault: FaultServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PACKFORGE_KEY_TEST", "sk-test-secret-0123456789")
    endpoint = Endpoint.objects.create(name="keyed", spec=fault.spec(), key_env="PACKFORGE_KEY_TEST", created_by=staff)
    backends.check(endpoint.pk)
    assert fault.completions()[0].headers["authorization"] == "Bearer sk-test-secret-0123456789"
    endpoint.refresh_from_db()
    assert "sk-test-secret" not in str(endpoint.last_check)


def test_it_reports_a_key_variable_that_is_not_set(
    staff: object, fault: FaultServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PACKFORGE_KEY_UNSET_IN_TESTS", raising=False)
    endpoint = Endpoint.objects.create(
        name="keyed", spec=fault.spec(), key_env="PACKFORGE_KEY_UNSET_IN_TESTS", created_by=staff
    )
    result = backends.check(endpoint.pk)
    assert result is not None and result["ok"] is False
    assert "PACKFORGE_KEY_UNSET_IN_TESTS" in result["error"] and fault.completions() == []


def test_it_does_nothing_for_a_deleted_endpoint(db: None) -> None:
    assert backends.check(12345) is None
