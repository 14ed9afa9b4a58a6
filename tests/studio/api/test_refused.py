"""studio.errors.install: an operation lets a Refused propagate and the one handler
answers it with its status and `{"detail": message}`; the studio's own refusal classes
keep the statuses their operations gave by hand before."""

from __future__ import annotations

import pytest
from django.test import Client
from ninja import NinjaAPI
from ninja.testing import TestClient

from studio import errors
from studio.accounts.members import MemberConflict
from studio.compiles.start import CompileRefused
from studio.deployments import service
from studio.evals.evalset_case import CaseRefused
from studio.evals.results.cases import BadFilter
from studio.evals.results.compare import NotComparable
from studio.evals.start import EvalRefused
from studio.packs import PackUnrunnable
from studio.projects.archives import ArchiveRefused
from studio.projects.branches import MergeConflict
from studio.projects.models import Project
from studio.projects.storage import StaleBase, StorageError, UnsafePath
from studio.proposals.service import ProposalRefused
from studio.review.decide import DecisionRefused
from studio.review.gold import GoldRefused
from studio.runs.start import TryRefused


def _client() -> TestClient:
    api = NinjaAPI(urls_namespace="refused-test")
    errors.install(api)

    @api.get("/not-found")
    def not_found(request: object) -> None:
        raise errors.NotFound("no compile 7")

    @api.get("/conflict")
    def conflict(request: object) -> None:
        raise MemberConflict("a user named 'ana' exists")

    @api.get("/per-instance")
    def per_instance(request: object) -> None:
        raise CompileRefused("attempt 2 produced no pack to adopt", status=409)

    @api.get("/with-reasons")
    def with_reasons(request: object) -> None:
        raise DecisionRefused("the answer fails verification", status=400, reasons=["label: not one of a, b"])

    @api.get("/server-fault")
    def server_fault(request: object) -> None:
        raise StorageError("the project's repository is missing", status=500)

    return TestClient(api)


def test_it_answers_a_refusal_with_its_status_and_detail() -> None:
    client = _client()
    got = client.get("/not-found")
    assert got.status_code == 404 and got.json() == {"detail": "no compile 7"}
    got = client.get("/conflict")
    assert got.status_code == 409 and got.json() == {"detail": "a user named 'ana' exists"}
    got = client.get("/per-instance")
    assert got.status_code == 409 and got.json() == {"detail": "attempt 2 produced no pack to adopt"}


def test_it_adds_what_a_refusal_class_adds_to_its_answer() -> None:
    got = _client().get("/with-reasons")
    assert got.status_code == 400
    assert got.json() == {"detail": "the answer fails verification", "reasons": ["label: not one of a, b"]}


def test_it_leaves_a_server_fault_to_the_server_error_handling() -> None:
    with pytest.raises(StorageError, match="repository is missing"):
        _client().get("/server-fault")


@pytest.mark.parametrize(
    ("refusal", "status"),
    [
        (TryRefused("x"), 400),
        (EvalRefused("x"), 400),
        (CompileRefused("x"), 400),
        (ProposalRefused("x"), 400),
        (ProposalRefused("x", status=403), 403),
        (MergeConflict(["pack/a"], []), 409),
        (DecisionRefused("x"), 409),
        (GoldRefused("x"), 409),
        (GoldRefused("x", 400), 400),
        (CaseRefused("x"), 400),
        (CaseRefused("x", 404), 404),
        (NotComparable("x"), 400),
        (BadFilter("x"), 400),
        (ArchiveRefused("x"), 400),
        (StorageError("x"), 400),
        (UnsafePath("x"), 400),
        (StaleBase("a" * 40, "b" * 40, []), 409),
        (PackUnrunnable(["x", "y"]), 400),
        (MemberConflict("x"), 409),
        (service.Refused("x"), 400),
        (service.Conflict("x"), 409),
    ],
)
def test_every_studio_refusal_is_a_refused_with_its_status(refusal: errors.Refused, status: int) -> None:
    assert isinstance(refusal, errors.Refused)
    assert refusal.status == status
    assert refusal.message == str(refusal)


def test_a_studio_operation_answers_a_refusal_it_lets_through(owner_token: Client, project: Project) -> None:
    got = owner_token.post(
        "/api/runs",
        {"project": project.slug, "version": "no-such-version", "input": {}},
        content_type="application/json",
    )
    assert got.status_code == 400
    assert "no-such-version" in got.json()["detail"]
