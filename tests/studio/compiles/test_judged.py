"""The pack judged on the target (compiler.judge stages it in the work dir's chosen/):
the worker keeps it in the compile's row with the final status; the compile's page shows
it, with the target model and the verdict's sentence, and adopts exactly its files; the
API reads and adopts it. An attempt's pack runs on the offline test model, and the pages
say so. The real loop's judging is in test_real_loop.py."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.contrib.auth.models import User
from django.test import Client

from studio.compiles import worker
from studio.compiles.models import Compile
from studio.compiles.shared import work_dir
from studio.compiles.start import start_compile
from studio.endpoints.models import Endpoint
from studio.projects.models import Project
from studio.projects.storage import PackRepo
from studio.proposals.models import Proposal
from tests.support.compile_stand_in import TWO_ATTEMPTS, Scripted, StandIn, triage_pack
from tests.support.studio import approve_and_merge, bearer

SENTENCE = "the pack wins on validation: 4/4 vs one call 0/4 and the trivial baseline 1/4"
OFFLINE = "fake:fakes/offline.json"


def judged_files(model: str) -> dict[str, bytes]:
    """The example pack as the judge stages it: its manifest's model is the target, and
    the offline test model rides along for structure tests."""
    files = triage_pack()
    manifest = files["manifest.yaml"].decode().replace("model: fake:fakes/scripted.json", f"model: {model}")
    assert f"model: {model}" in manifest
    files["manifest.yaml"] = manifest.encode()
    files["fakes/offline.json"] = json.dumps({"cases": {"st-01": {"classify": {"category": "billing"}}}}).encode()
    return files


def stage(work: Path, verdict: dict[str, Any], files: dict[str, bytes] | None) -> None:
    """What compiler.judge leaves: verdict.json, and the judged pack in chosen/."""
    work.mkdir(parents=True, exist_ok=True)
    (work / "verdict.json").write_text(json.dumps(verdict))
    for path, data in (files or {}).items():
        (work / "chosen" / path).parent.mkdir(parents=True, exist_ok=True)
        (work / "chosen" / path).write_bytes(data)


def compile_judged(
    project: Project,
    owner: User,
    stand_in: Callable[[list[Scripted]], StandIn],
    target: Endpoint | None,
    verdict: dict[str, Any],
    files: dict[str, bytes] | None,
) -> Compile:
    """A compile run by the stand-in loop, whose judging (after its last attempt) leaves
    `verdict` and `files` in the work dir."""
    c = start_compile(project, user=owner, target=target)
    last = TWO_ATTEMPTS[-1]
    stand_in(
        [
            TWO_ATTEMPTS[0],
            Scripted(last.score, last.failing, last.pack, after=lambda: stage(work_dir(c.pk), verdict, files)),
        ]
    )
    assert worker.run_compile(c.pk) == "done"
    c.refresh_from_db()
    return c


@pytest.fixture
def judged(project: Project, owner: User, stand_in: Callable[[list[Scripted]], StandIn], scripted: Endpoint) -> Compile:
    verdict = {"judged": True, "chosen": "pack", "pack": "chosen", "sentence": SENTENCE, "target": scripted.spec}
    return compile_judged(project, owner, stand_in, scripted, verdict, judged_files(scripted.spec))


def page_of(c: Compile) -> str:
    return f"/p/triage/compiles/{c.pk}/"


def pack_model(repo: PackRepo) -> str:
    return str(yaml.safe_load(repo.files(None, prefix="pack/")["manifest.yaml"])["model"])


# -- the worker keeps it -------------------------------------------------------------------------


def test_it_keeps_the_judged_pack_with_the_final_status(judged: Compile, scripted: Endpoint) -> None:
    assert judged.status == "done" and judged.lease_owner == ""
    want = {p: d.decode() for p, d in judged_files(scripted.spec).items()}
    assert judged.judged_pack_files == want
    assert (judged.judged_arm, judged.judged_model, judged.judged_sentence) == ("pack", scripted.spec, SENTENCE)
    assert yaml.safe_load(judged.judged_pack_files["manifest.yaml"])["model"] != OFFLINE


def test_it_keeps_no_pack_when_the_verdict_staged_none(
    project: Project, owner: User, stand_in: Callable[[list[Scripted]], StandIn], scripted: Endpoint
) -> None:
    sentence = "neither the pack (1/4) nor one call (0/4) beats the trivial baseline (2/4) on validation"
    # a chosen/ left by an earlier delivery is not this verdict's pack
    c = compile_judged(
        project, owner, stand_in, scripted, {"judged": True, "chosen": None, "sentence": sentence}, judged_files("x")
    )

    assert (c.judged_pack_files, c.judged_arm, c.judged_sentence) == (None, "", sentence)


def test_it_says_why_a_judged_pack_too_large_was_not_kept(
    project: Project,
    owner: User,
    stand_in: Callable[[list[Scripted]], StandIn],
    scripted: Endpoint,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(worker, "PACK_BYTES_KEPT", 2048)
    verdict = {"judged": True, "chosen": "one_call", "pack": "chosen", "sentence": SENTENCE}
    c = compile_judged(project, owner, stand_in, scripted, verdict, judged_files(scripted.spec))

    assert c.judged_pack_files is None and c.judged_arm == "one_call" and c.judged_model == scripted.spec
    assert "the judged pack was not kept: the pack is larger than 2048 bytes" in c.judged_sentence
    api = bearer(owner)
    assert api.get(f"/api/compiles/{c.pk}").json()["judged"]["pack"] is False
    assert api.get("/api/compiles?project=triage").json()[0]["judged"]["pack"] is False


def test_it_keeps_nothing_judged_when_the_loop_wrote_no_verdict(
    project: Project, owner: User, stand_in: Callable[[list[Scripted]], StandIn]
) -> None:
    stand_in(TWO_ATTEMPTS)
    c = start_compile(project, user=owner)
    assert worker.run_compile(c.pk) == "done"
    c.refresh_from_db()

    assert (c.judged_pack_files, c.judged_arm, c.judged_model, c.judged_sentence) == (None, "", "", "")


# -- the compile's page --------------------------------------------------------------------------


def test_the_page_shows_the_judged_pack_with_its_model_and_the_verdict(
    as_owner: Client, judged: Compile, scripted: Endpoint
) -> None:
    text = as_owner.get(page_of(judged)).content.decode()

    assert 'id="adopt-judged-form"' in text and "Adopt the judged pack" in text
    assert f'id="judged-model">{scripted.spec}<' in text and "endpoint scripted" in text
    assert SENTENCE in text and "chosen: the planned pack" in text
    assert f'name="base" value="{PackRepo(judged.project.repo_path).head()}"' in text
    assert 'id="judged-diff"' in text and "fakes/offline.json" in text


def test_the_page_escapes_the_verdicts_sentence(
    as_owner: Client, project: Project, owner: User, stand_in: Callable[[list[Scripted]], StandIn], scripted: Endpoint
) -> None:
    sentence = 'the pack wins <script>alert("x")</script>'
    verdict = {"chosen": "pack", "pack": "chosen", "sentence": sentence}
    c = compile_judged(project, owner, stand_in, scripted, verdict, judged_files(scripted.spec))

    text = as_owner.get(page_of(c)).content.decode()

    assert "<script>alert" not in text
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in text


def test_a_viewer_sees_the_judged_pack_but_no_adopt(as_viewer: Client, judged: Compile) -> None:
    text = as_viewer.get(page_of(judged)).content.decode()

    assert SENTENCE in text and 'id="adopt-judged-form"' not in text


def test_the_pages_say_an_unjudged_compiles_packs_are_for_structure_tests(
    as_owner: Client, project: Project, owner: User, stand_in: Callable[[list[Scripted]], StandIn]
) -> None:
    verdict = {"judged": False, "chosen": None, "sentence": "nothing was judged on a model"}
    c = compile_judged(project, owner, stand_in, None, verdict, None)

    text = as_owner.get(page_of(c)).content.decode()
    assert 'id="adopt-judged-form"' not in text and 'id="judged-not-judged"' in text
    assert "answers only the gold cases" in text and "Pick a target endpoint" in text
    attempt = as_owner.get(f"{page_of(c)}attempts/2/").content.decode()
    assert 'id="adopt-button"' in attempt and 'id="attempt-offline-note"' in attempt  # the button stays
    assert OFFLINE in attempt and "structure tests" in attempt and "pick a target endpoint" in attempt


def test_an_attempts_page_points_at_the_judged_pack(as_owner: Client, judged: Compile) -> None:
    text = as_owner.get(f"{page_of(judged)}attempts/2/").content.decode()

    assert 'id="attempt-offline-note"' in text and f"{page_of(judged)}#compile-judged" in text


# -- adopting it on the page -----------------------------------------------------------------------


def test_adopting_proposes_exactly_the_judged_pack_whose_model_is_the_target(
    as_owner: Client, as_reviewer: Client, project: Project, judged: Compile, scripted: Endpoint
) -> None:
    repo = PackRepo(project.repo_path)
    before = repo.head()
    evalset = repo.files(before, prefix="pack/")["evalset.jsonl"]

    response = as_owner.post(f"{page_of(judged)}adopt", {"base": before})

    assert response.status_code == 302 and response["Location"] == "/p/triage/proposals/1"
    proposal = Proposal.objects.get()
    assert repo.head() == before and proposal.source == "compile"
    message = repo.repo[proposal.head.encode()].message.decode()  # type: ignore[attr-defined]
    assert f"compile #{judged.pk}'s judged pack" in message and SENTENCE in message
    assert judged.version in message and "target endpoint: scripted" in message
    pack = repo.files(proposal.head, prefix="pack/")
    assert {p: d.decode() for p, d in pack.items()} == {**judged.judged_pack_files, "evalset.jsonl": evalset.decode()}
    approve_and_merge(1, as_owner, as_reviewer)
    assert pack_model(repo) == scripted.spec and pack_model(repo) != OFFLINE
    project.refresh_from_db()
    assert project.head == proposal.head == repo.head()


def test_only_authors_adopt_the_judged_pack(
    as_reviewer: Client, as_viewer: Client, as_stranger: Client, project: Project, judged: Compile
) -> None:
    head = PackRepo(project.repo_path).head()
    url = f"{page_of(judged)}adopt"

    assert as_reviewer.post(url).status_code == 403
    assert as_viewer.post(url).status_code == 403
    assert as_stranger.post(url).status_code == 404
    assert PackRepo(project.repo_path).head() == head


def test_adopting_the_judged_pack_never_overwrites_a_newer_save(
    as_owner: Client, project: Project, judged: Compile
) -> None:
    repo = PackRepo(project.repo_path)
    seen = repo.head()
    teammate = repo.save({"pack/notes.txt": b"mine\n"}, base=seen, author="Tess", email="t@x", message="Notes")

    response = as_owner.post(f"{page_of(judged)}adopt", {"base": seen})

    assert response.status_code == 302
    assert repo.head() == teammate and Proposal.objects.get().base == seen


def test_there_is_no_judged_pack_to_adopt_without_a_target(
    as_owner: Client, project: Project, owner: User, stand_in: Callable[[list[Scripted]], StandIn]
) -> None:
    stand_in(TWO_ATTEMPTS)
    c = start_compile(project, user=owner)
    assert worker.run_compile(c.pk) == "done"

    response = as_owner.post(f"{page_of(c)}adopt")

    assert response.status_code == 409 and "has no judged pack to adopt" in response.content.decode()
    assert as_owner.get(f"{page_of(c)}adopt").status_code == 405


# -- the API -----------------------------------------------------------------------------------------


def test_the_api_reads_and_adopts_the_judged_pack(
    owner: User, reviewer: User, project: Project, judged: Compile, scripted: Endpoint
) -> None:
    api = bearer(owner)
    got = api.get(f"/api/compiles/{judged.pk}").json()
    assert got["judged"] == {"arm": "pack", "model": scripted.spec, "sentence": SENTENCE, "pack": True}
    listed = api.get("/api/compiles?project=triage").json()
    assert listed[0]["judged"]["pack"] is True
    files = api.get(f"/api/compiles/{judged.pk}/judged").json()
    assert files["pack_files"] == judged.judged_pack_files

    adopted = api.post(f"/api/compiles/{judged.pk}/adopt")

    assert adopted.status_code == 200, adopted.content
    body = adopted.json()
    repo = PackRepo(project.repo_path)
    assert (body["proposal"], body["arm"], body["model"]) == (1, "pack", scripted.spec)
    assert body["version"] == repo.head("proposals/1")
    approve_and_merge(1, api, bearer(reviewer))
    assert pack_model(repo) == scripted.spec
    again = api.post(f"/api/compiles/{judged.pk}/adopt")
    assert again.status_code == 409 and "already the judged pack" in again.json()["detail"]


def test_the_api_lets_only_authors_adopt_and_starts_at_the_base_given(
    owner: User, reviewer: User, viewer: User, stranger: User, project: Project, judged: Compile
) -> None:
    url = f"/api/compiles/{judged.pk}/adopt"
    assert bearer(reviewer).post(url).status_code == 403
    assert bearer(viewer).post(url).status_code == 403
    assert bearer(stranger).post(url).status_code == 404
    assert bearer(viewer).get(f"/api/compiles/{judged.pk}/judged").status_code == 200  # members read
    repo = PackRepo(project.repo_path)
    seen = repo.head()
    repo.save({"pack/notes.txt": b"mine\n"}, base=seen, author="Tess", email="t@x", message="Notes")

    on_seen = bearer(owner).post(f"{url}?base={seen}")

    assert on_seen.status_code == 200
    assert Proposal.objects.get(number=on_seen.json()["proposal"]).base == seen


def test_the_api_says_when_a_compile_has_no_verdict(owner: User, project: Project) -> None:
    c = Compile.objects.create(project=project, version="a" * 40, created_by=owner, status="done")
    api = bearer(owner)

    assert api.get(f"/api/compiles/{c.pk}").json()["judged"] is None
    assert api.get(f"/api/compiles/{c.pk}/judged").status_code == 404
    refused = api.post(f"/api/compiles/{c.pk}/adopt")
    assert refused.status_code == 409 and "no judged pack to adopt" in refused.json()["detail"]
