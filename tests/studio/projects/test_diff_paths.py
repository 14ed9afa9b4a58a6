"""The diff pages name files as the API does: the pack's files pack-relative
(`prompts/classify.txt`, not the repository's `pack/prompts/classify.txt`), the spec's
relative to the spec with a `spec` mark; the pack's first. On the history's diff and on
the diff a stale save is refused with."""

from __future__ import annotations

import re

from django.test import Client

from studio.projects.models import Project
from studio.projects.storage import PackRepo
from tests.support.studio import teammate_saves


def _shown(html: str) -> list[tuple[str, str]]:
    """(area mark or "", path) of every file heading of a diff."""
    headings = re.findall(r'<h3 class="mono"><span class="status [^"]+">\w+</span>(.*?)</h3>', html, re.S)
    out = []
    for heading in headings:
        area = re.search(r'<span class="area"[^>]*>(\w+)</span>', heading)
        out.append((area.group(1) if area else "", re.sub(r"<[^>]+>\w*</span>", "", heading).strip()))
    return out


def test_it_names_the_packs_files_as_the_api_does(as_owner: Client, project: Project, repo: PackRepo) -> None:
    old = repo.head()
    teammate_saves(repo, "prompts/classify.txt", "Classify: {{ input.ticket }}\n")
    new = teammate_saves(repo, "notes/why.md", "Because.\n")
    page = as_owner.get("/p/triage/diff/", {"a": old, "b": new})
    api = as_owner.get("/api/projects/triage/diff", {"a": old, "b": new}).json()
    assert _shown(page.content.decode()) == [("", f["path"]) for f in api["files"]]
    assert [path for _, path in _shown(page.content.decode())] == ["notes/why.md", "prompts/classify.txt"]


def test_it_marks_the_specs_files_and_lists_them_after_the_packs(
    as_owner: Client, project: Project, repo: PackRepo
) -> None:
    old = repo.head()
    new = repo.save(
        {"spec/spec.yaml": b"name: triage\n", "pack/prompts/classify.txt": b"Classify {{ input.ticket }}\n"},
        base=old,
        author="Tess",
        email="t@example.com",
        message="Spec and prompt",
    )
    html = as_owner.get("/p/triage/diff/", {"a": old, "b": new}).content.decode()
    assert _shown(html) == [("", "prompts/classify.txt"), ("spec", "spec.yaml")]
    assert "pack/" not in "".join(p for _, p in _shown(html))


def test_it_names_files_pack_relative_on_a_refused_stale_save(
    as_owner: Client, project: Project, repo: PackRepo
) -> None:
    base = repo.head()
    teammate_saves(repo, "prompts/classify.txt", "Teammate's prompt for {{ input.ticket }}\n")
    page = as_owner.post(
        "/p/triage/files/prompts/classify.txt",
        {"content": "Mine {{ input.ticket }}\n", "base": base, "message": "Mine"},
    )
    assert page.status_code == 409
    assert _shown(page.content.decode()) == [("", "prompts/classify.txt")]
