"""A compile of a spec whose output is compared by a host scorer (studio.compiles.scorers):
the worker hands the loop the studio's scorer registry (PACKFORGE_SCORERS), so the real
loop passes answers only the scorer accepts; a start the registry cannot serve is
refused, naming the setting, and a worker that finds the registry gone fails the compile
saying so. The spec and its target: tests/support/scorer_specs.py."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.contrib.auth.models import User

from studio import host_tools
from studio.compiles import worker
from studio.compiles.models import CompileAttempt
from studio.compiles.start import CompileRefused, start_compile
from studio.endpoints.models import Endpoint
from studio.projects.models import Project, create_project
from studio.projects.specs import check_spec
from studio.projects.views import example_files
from tests.support.compile_stand_in import TWO_ATTEMPTS, Scripted, StandIn
from tests.support.scorer_specs import SCORER_RULE, SCORERS_REF, gold_cases, spec_yaml, write_plan, write_target


@pytest.fixture
def scorers(settings: Any) -> Iterator[None]:
    settings.PACKFORGE_SCORERS = SCORERS_REF
    host_tools.forget()
    yield
    host_tools.forget()


@pytest.fixture
def no_scorers(settings: Any) -> Iterator[None]:
    settings.PACKFORGE_SCORERS = ""
    host_tools.forget()
    yield
    host_tools.forget()


def items_project(owner: User, compare: str | None = None) -> Project:
    spec = spec_yaml() if compare is None else spec_yaml(compare)
    gold = "".join(json.dumps(c) + "\n" for c in gold_cases())
    return create_project(
        slug="items",
        name="Invoice items",
        owner=owner,
        pack_files={**example_files("support_triage"), "evalset.jsonl": gold.encode()},  # the project's one gold
        spec_files={"spec.yaml": spec.encode()},
        message="Create",
    )


def test_the_worker_hands_the_loop_the_studios_scorer_registry(
    owner: User, scorers: None, stand_in: Callable[[list[Scripted]], StandIn]
) -> None:
    fake = stand_in(TWO_ATTEMPTS)
    c = start_compile(items_project(owner), user=owner)

    assert worker.run_compile(c.pk) == "done"

    registry = fake.calls[0]["scorers"]
    assert registry is not None and registry is host_tools.scorer_registry()
    assert registry["line_items"].__name__ == "line_items"
    assert fake.calls[0]["spec"].scorers() == {"line_items": "line_items"}


def test_a_spec_without_a_scorer_compiles_without_the_registry(
    project: Project, owner: User, scorers: None, stand_in: Callable[[list[Scripted]], StandIn]
) -> None:
    fake = stand_in(TWO_ATTEMPTS)
    assert worker.run_compile(start_compile(project, user=owner).pk) == "done"
    assert fake.calls[0]["scorers"] is None


def test_a_start_without_a_registry_is_refused_naming_the_setting(owner: User, no_scorers: None) -> None:
    with pytest.raises(CompileRefused, match=r"outputs\.line_items \(scorer:line_items\).*PACKFORGE_SCORERS"):
        start_compile(items_project(owner), user=owner)


def test_a_start_whose_scorer_the_registry_lacks_is_refused(owner: User, scorers: None) -> None:
    project = items_project(owner, "    compare: scorer:line_itemz\n")
    with pytest.raises(CompileRefused, match="unknown scorer 'line_itemz'; the host registers: line_items"):
        start_compile(project, user=owner)


def test_a_worker_that_finds_the_registry_gone_fails_the_compile_saying_why(
    owner: User, scorers: None, settings: Any, stand_in: Callable[[list[Scripted]], StandIn]
) -> None:
    fake = stand_in(TWO_ATTEMPTS)
    c = start_compile(items_project(owner), user=owner)
    settings.PACKFORGE_SCORERS = ""
    host_tools.forget()

    assert worker.run_compile(c.pk) == "failed"

    c.refresh_from_db()
    assert "PACKFORGE_SCORERS" in c.error and "outputs.line_items" in c.error
    assert fake.calls == []


def test_the_real_loop_passes_answers_only_the_scorer_accepts(
    owner: User, staff: User, scorers: None, tmp_path: Path
) -> None:
    plan = write_plan(tmp_path / "plan.json")
    planner = Endpoint.objects.create(name="recorded", spec=f"recorded:{plan}", created_by=staff)
    target = Endpoint.objects.create(
        name="target", spec=write_target(tmp_path / "target.json", gold_cases()), created_by=staff
    )
    c = start_compile(items_project(owner), user=owner, planner=planner, target=target)

    assert worker.run_compile(c.pk) == "done"

    c.refresh_from_db()
    assert (c.status, c.best_attempt, c.offline_score, c.target_score) == ("done", 1, 1.0, 1.0), c.error
    assert c.judged_arm == "pack" and c.judged_pack_files is not None, c.judged_sentence
    assert yaml.safe_load(c.judged_pack_files["manifest.yaml"])["fields"] == {"line_items": SCORER_RULE}
    attempt = CompileAttempt.objects.get(compile=c, number=1)
    assert attempt.evals["offline"]["passed"] == attempt.evals["offline"]["total"] > 0


def test_the_spec_editor_names_a_scorer_the_registry_lacks(owner: User, scorers: None) -> None:
    spec, problems = check_spec({"spec.yaml": spec_yaml("    compare: scorer:line_itemz\n").encode()})
    assert spec is None
    assert any("unknown scorer 'line_itemz'" in p.message for p in problems), problems
    gold = "".join(json.dumps(c) + "\n" for c in gold_cases()).encode()
    good, none = check_spec({"spec.yaml": spec_yaml().encode(), "gold.jsonl": gold})
    assert good is not None and none == [], none
