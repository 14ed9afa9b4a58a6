"""Example projects start with their spec: specs/<name>/spec.yaml under the repository's
spec/ and its gold cases as the pack's evalset (one gold per project, no second file),
whether made by the create page, the API or `manage.py load_examples`."""

from __future__ import annotations

import io
from pathlib import Path

from django.conf import settings
from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import Client

from studio.projects.management.commands.load_examples import example_names
from studio.projects.models import Project
from studio.projects.specs import check_spec, skeleton_files, spec_files
from studio.projects.storage import PackRepo
from tests.support.studio import bearer, send

SPECS = Path(settings.BASE_DIR) / "specs"


def spec_of(slug: str) -> dict[str, bytes]:
    """spec/ as stored, and the gold the compiler reads (spec_files: the pack's evalset)."""
    repo = PackRepo(Project.objects.get(slug=slug).repo_path)
    stored = repo.files(prefix="spec/")
    assert "gold.jsonl" not in stored, "one gold: no second file of cases"
    return {**stored, **({"gold.jsonl": spec_files(repo)["gold.jsonl"]} if stored else {})}


def written(name: str) -> dict[str, bytes]:
    return {n: (SPECS / name / n).read_bytes() for n in ("spec.yaml", "gold.jsonl")}


def test_it_seeds_a_project_made_from_an_example_with_its_spec(as_owner: Client) -> None:
    page = as_owner.post("/new", {"slug": "rd", "example": "refund_desk"})
    assert page.status_code == 302
    assert spec_of("rd") == written("refund_desk")


def test_it_seeds_a_project_made_through_the_api_with_its_spec(owner: User) -> None:
    answer = send(bearer(owner), "post", "/api/projects", {"slug": "mod", "example": "moderation"})
    assert answer.status_code == 201
    assert spec_of("mod") == written("moderation")


def test_it_makes_an_empty_project_without_a_spec(as_owner: Client) -> None:
    assert as_owner.post("/new", {"slug": "blank"}).status_code == 302
    assert spec_of("blank") == {}


def test_it_loads_every_example_with_a_spec_that_loads(db: None) -> None:
    User.objects.create_superuser("admin", "admin@example.com", "x" * 20)
    call_command("load_examples", stdout=io.StringIO())
    for name in example_names():
        repo = PackRepo(Project.objects.get(slug=name).repo_path)
        assert spec_files(repo) == written(name)
        spec, problems = check_spec(spec_files(repo))
        assert problems == [] and spec is not None and spec.name == name
        assert len(repo.log()) == 1  # pack and spec in the first commit


def test_it_writes_a_skeleton_spec_that_loads_for_any_slug() -> None:
    for slug in ("triage", "123", "null", "true", "a-b_c"):
        spec, problems = check_spec(skeleton_files(slug))
        assert problems == [] and spec is not None and spec.name == slug


def test_it_writes_a_skeleton_from_an_evalset_that_loads_with_the_evalset_as_gold() -> None:
    for name in example_names():
        evalset = (Path(settings.EXAMPLE_PACKS) / name / "evalset.jsonl").read_bytes()
        files = skeleton_files("x", evalset)
        spec, problems = check_spec(files)
        assert problems == [] and spec is not None
        assert files["gold.jsonl"] == evalset
        assert set(spec.outputs) == set(check_spec(written(name))[0].outputs)  # type: ignore[union-attr]
