"""Host scorers in the studio (PACKFORGE_SCORERS, studio.host_tools.scorer_registry): an
eval scores a `compare: scorer:NAME` field with the host's function and the case page
shows its score and reason; without a registry the eval is refused saying which setting
to set; a name the registry does not hold is a problem in the editor's validation."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.contrib.auth.models import User
from django.test import Client

from studio import host_tools
from studio.evals.models import EvalCase
from studio.evals.start import EvalRefused
from studio.projects.models import Project, create_project
from studio.projects.validation import validate_files
from tests.support.scorers import EXAMPLE, ITEMS_SCHEMA, WANT
from tests.support.studio import run_all, start

MISREAD = [WANT[0], {"description": "Paper", "quantity": 4, "amount": 9.0}]


def _files(compare: str = "scorer:line_items") -> dict[str, bytes]:
    manifest = {
        "name": "items",
        "version": 1,
        "entry": "read",
        "model": "fake:fakes/scripted.json",
        "fields": {"items": {"compare": compare}},
    }
    graph = {
        "nodes": {"read": {"kind": "generate", "reads": ["input.text"], "writes": ["items"]}, "done": {"kind": "end"}},
        "edges": [{"from": "read", "to": "done"}],
    }
    case = {"id": "c1", "input": {"text": "an invoice"}, "expected": {"items": WANT}}
    return {
        "manifest.yaml": yaml.safe_dump(manifest).encode(),
        "graph.yaml": yaml.safe_dump(graph).encode(),
        "prompts/read.txt": b"Read the items: {{ input.text }}\n",
        "grammars/read.json": json.dumps(ITEMS_SCHEMA).encode(),
        "fakes/scripted.json": json.dumps({"nodes": {"read": {"items": MISREAD}}}).encode(),
        "evalset.jsonl": (json.dumps(case) + "\n").encode(),
    }


@pytest.fixture
def scorers(settings: Any) -> None:
    settings.PACKFORGE_SCORERS = EXAMPLE
    host_tools.forget()
    yield
    host_tools.forget()


def _project(owner: User) -> Project:
    return create_project(slug="items", name="Items", owner=owner, pack_files=_files(), message="items")


def test_an_eval_scores_with_the_hosts_scorer_and_the_case_page_shows_its_reason(
    owner: User, as_owner: Client, scorers: None
) -> None:
    ev = start(_project(owner), owner)
    assert run_all(ev) == ["failed"]
    case = EvalCase.objects.get(eval=ev)
    assert case.diffs[0]["score"] == 0.5 and case.diffs[0]["reason"].startswith("1 of 2 line items match")
    page = as_owner.get(f"/p/items/evals/{ev.pk}/cases/c1/0").content.decode()
    assert "score 0.50: 1 of 2 line items match; not found: &#x27;Paper&#x27;" in page


def test_without_a_registry_the_eval_is_refused_naming_the_setting(owner: User, settings: Any) -> None:
    settings.PACKFORGE_SCORERS = ""
    host_tools.forget()
    with pytest.raises(EvalRefused, match=r"items \(scorer:line_items\) with host scorers .* PACKFORGE_SCORERS"):
        start(_project(owner), owner)


def test_an_unknown_scorer_name_is_a_problem_in_validation(scorers: None, db: None) -> None:
    pack, problems = validate_files(_files("scorer:line_itemz"))
    assert pack is None
    assert [p.message for p in problems] == [
        "fields.items: unknown scorer 'line_itemz'; the host registers: line_items"
    ]


def test_the_one_command_start_registers_the_example_scorers() -> None:
    start_script = (Path(__file__).resolve().parents[3] / "scripts" / "start").read_text()
    assert 'PACKFORGE_SCORERS="${PACKFORGE_SCORERS-packs/invoice_extract/scorers.py:SCORERS}"' in start_script
