"""The Spec tab (/p/<slug>/spec/): spec.yaml and gold.jsonl in the editor with live
validation, the gold cases as a table, the induction report; saving; the empty state."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.conf import settings
from django.test import Client

from studio.projects.models import Project, create_project
from studio.projects.specs import spec_files
from studio.projects.storage import PackRepo
from tests.support.studio import HTMX, teammate_saves

SPEC_DIR = Path(settings.BASE_DIR) / "specs" / "support_triage"


def spec_text(repo: PackRepo, name: str = "spec.yaml", version: str | None = None) -> str:
    """A spec file as the compiler reads it: gold.jsonl is the pack's evalset (one gold)."""
    return spec_files(repo, version)[name].decode()


@pytest.fixture
def with_spec(project: Project, repo: PackRepo) -> PackRepo:
    """The support_triage project with its example spec under spec/."""
    repo.save(
        {"spec/spec.yaml": (SPEC_DIR / "spec.yaml").read_bytes()},  # its gold is the evalset already
        base=repo.head(),
        author="Olive",
        email="olive@example.com",
        message="Add the spec",
    )
    return repo


def save(
    client: Client, content: str, base: str | None, message: str = "Say more", url: str = "/p/triage/spec/"
) -> object:
    return client.post(url, {"content": content, "base": base, "message": message})


def test_it_shows_spec_yaml_in_the_editor_with_live_validation(as_viewer: Client, with_spec: PackRepo) -> None:
    page = as_viewer.get("/p/triage/spec/")
    assert page.status_code == 200
    html = page.content.decode()
    assert "Triage one customer-support ticket" in html  # spec.yaml, in the textarea
    assert 'hx-post="/p/triage/spec/validate"' not in html  # a viewer gets it read-only
    assert "readonly" in html and "✓ The spec loads" in html
    assert 'class="active" aria-current="page">Spec</a>' in html  # the tab, marked


def test_it_gives_an_author_an_editor_that_validates_as_they_type(as_owner: Client, with_spec: PackRepo) -> None:
    html = as_owner.get("/p/triage/spec/").content.decode()
    assert f'<input type="hidden" name="base" value="{with_spec.head()}">' in html
    assert 'hx-post="/p/triage/spec/validate"' in html and 'hx-trigger="input changed delay:400ms"' in html
    assert '<input type="hidden" name="file" value="spec.yaml">' in html


def test_it_lists_the_gold_cases_as_a_table(as_viewer: Client, with_spec: PackRepo) -> None:
    html = as_viewer.get("/p/triage/spec/").content.decode()
    cases = [json.loads(line) for line in (SPEC_DIR / "gold.jsonl").read_text().splitlines()]
    assert f"{len(cases)} in" in html
    for case in cases:
        assert f'<td class="mono">{case["id"]}</td>' in html
    assert "billing_ops" in html  # an end


def test_it_shows_the_induction_report_with_evidence_counts(as_viewer: Client, with_spec: PackRepo) -> None:
    html = as_viewer.get("/p/triage/spec/").content.decode()
    assert 'id="induction"' in html and 'id="field-category"' in html
    assert '<span class="badge">enum</span>' in html and '<span class="badge">pattern</span>' in html
    assert "^ORD-[0-9]{5}$" in html  # the order id's induced pattern
    assert "violations 0" in html  # evidence counts


def test_it_saves_spec_yaml_as_a_commit(as_owner: Client, project: Project, with_spec: PackRepo) -> None:
    base = with_spec.head()
    text = spec_text(with_spec).replace("Triage one", "Triage exactly one")
    page = save(as_owner, text.replace("\n", "\r\n"), base, "Say exactly one")  # browsers send CRLF
    assert page.status_code == 302 and page["Location"] == "/p/triage/spec/"
    assert spec_text(with_spec) == text
    log = with_spec.log(limit=1)[0]
    assert log.message == "Say exactly one" and log.author.startswith("olive <")
    project.refresh_from_db()
    assert project.head == with_spec.head() != base


def test_it_saves_gold_jsonl_from_its_own_editor(as_owner: Client, with_spec: PackRepo) -> None:
    gold = spec_text(with_spec, "gold.jsonl")
    first = gold.splitlines()[0]
    page = save(as_owner, first + "\n", with_spec.head(), "One case", url="/p/triage/spec/gold/")
    assert page.status_code == 302 and page["Location"] == "/p/triage/spec/gold/"
    assert spec_text(with_spec, "gold.jsonl") == first + "\n"


def test_it_saves_an_invalid_spec_and_shows_its_problems_with_lines(as_owner: Client, with_spec: PackRepo) -> None:
    text = spec_text(with_spec).replace("unsure_end: manual_triage", "unsure_end: manual_triage\ncolour: blue")
    page = save(as_owner, text, with_spec.head(), "WIP")
    assert page.status_code == 302
    assert "colour: blue" in spec_text(with_spec)
    html = as_owner.get(page["Location"]).content.decode()
    assert "saved anyway" in html
    line = text.splitlines().index("colour: blue") + 1
    assert f'data-line="{line}"' in html and "unknown key &#x27;colour&#x27;" in html


def test_it_validates_the_typed_text_without_saving(as_viewer: Client, with_spec: PackRepo) -> None:
    head = with_spec.head()
    text = spec_text(with_spec).replace("name: support_triage", "name: [1, 2")
    page = as_viewer.post("/p/triage/spec/validate", {"file": "spec.yaml", "content": text, "base": head}, headers=HTMX)
    assert page.status_code == 200
    html = page.content.decode()
    assert html.lstrip().startswith('<aside id="problems"')
    assert 'data-line="' in html and "spec/" not in html.split("</aside>")[1]  # the fragment only
    assert with_spec.head() == head


def test_it_shows_gold_problems_against_their_line(as_owner: Client, with_spec: PackRepo) -> None:
    gold = spec_text(with_spec, "gold.jsonl").splitlines()
    gold[2] = gold[2].replace('"expected": {', '"expected": {"mood": "x", ')
    page = as_owner.post(
        "/p/triage/spec/validate",
        {"file": "gold.jsonl", "content": "\n".join(gold) + "\n", "base": with_spec.head()},
        headers=HTMX,
    )
    html = page.content.decode()
    assert 'data-line="3"' in html and "expected.mood is not one of the declared outputs" in html


def test_it_refuses_a_stale_save_with_the_diff_and_keeps_the_text(as_owner: Client, with_spec: PackRepo) -> None:
    base = with_spec.head()
    theirs = spec_text(with_spec).replace("Triage one", "Teammate's triage of one")
    with_spec.save({"spec/spec.yaml": theirs.encode()}, base=base, author="Tess", email="t@e.com", message="Theirs")
    newer = with_spec.head()
    mine = spec_text(with_spec, version=base).replace("Triage one", "My triage of one")
    page = save(as_owner, mine, base, "Mine")
    assert page.status_code == 409
    html = page.content.decode()
    assert "Not saved: the project moved on" in html
    assert "Teammate&#x27;s triage of one" in html  # the newer version, in the diff
    assert "My triage of one" in html  # the user's text, kept
    assert f'name="base" value="{newer}"' in html
    assert with_spec.head() == newer and "Teammate's" in spec_text(with_spec)


def test_it_refuses_a_save_without_a_message(as_owner: Client, with_spec: PackRepo) -> None:
    head = with_spec.head()
    page = save(as_owner, "name: x\n", head, message=" ")
    assert page.status_code == 400 and b"Write a commit message" in page.content
    assert with_spec.head() == head


@pytest.mark.parametrize("persona", ["as_viewer", "as_reviewer"])
def test_it_refuses_a_save_by_a_member_who_is_not_an_author(
    persona: str, request: pytest.FixtureRequest, with_spec: PackRepo
) -> None:
    client: Client = request.getfixturevalue(persona)
    head = with_spec.head()
    assert save(client, "name: x\n", head).status_code == 403
    assert client.post("/p/triage/spec/create", {"base": head}).status_code == 403
    assert with_spec.head() == head


def test_it_requires_login(with_spec: PackRepo) -> None:
    for page in (Client().get("/p/triage/spec/"), Client().post("/p/triage/spec/validate", {"content": "x"})):
        assert page.status_code == 302 and page["Location"].startswith("/login/")


def test_it_hides_the_project_from_a_stranger(as_stranger: Client, with_spec: PackRepo) -> None:
    assert as_stranger.get("/p/triage/spec/").status_code == 404
    assert as_stranger.post("/p/triage/spec/validate", {"content": "x", "base": with_spec.head()}).status_code == 404


def test_it_escapes_spec_text_and_gold_values(as_owner: Client, with_spec: PackRepo) -> None:
    gold = spec_text(with_spec, "gold.jsonl").splitlines()
    case = json.loads(gold[0])
    case["input"]["ticket"] = "<script>alert('gold')</script>"
    gold[0] = json.dumps(case)
    text = spec_text(with_spec).replace("task: >", "# <img src=x onerror=alert(1)>\ntask: >")
    with_spec.save(
        {"pack/evalset.jsonl": ("\n".join(gold) + "\n").encode(), "spec/spec.yaml": text.encode()},
        base=with_spec.head(),
        author="Tess",
        email="t@e.com",
        message="Hostile text",
    )
    html = as_owner.get("/p/triage/spec/").content.decode()
    assert "<script>alert(" not in html and "<img src=x" not in html
    assert "&lt;script&gt;alert(" in html and "&lt;img src=x onerror=alert(1)&gt;" in html


def test_it_answers_an_htmx_tab_swap_with_the_section(as_owner: Client, with_spec: PackRepo) -> None:
    html = as_owner.get("/p/triage/spec/", headers=HTMX).content.decode()
    assert html.lstrip().startswith('<div id="project-page">') and "<html" not in html


def test_it_offers_a_skeleton_spec_built_from_the_pack_evalset(
    as_owner: Client, project: Project, repo: PackRepo
) -> None:
    html = as_owner.get("/p/triage/spec/").content.decode()
    assert 'id="spec-empty"' in html and "Create a skeleton spec" in html and "evalset.jsonl</span> as the gold" in html
    page = as_owner.post("/p/triage/spec/create", {"base": repo.head()})
    assert page.status_code == 302 and page["Location"] == "/p/triage/spec/"
    evalset = repo.files(prefix="pack/")["evalset.jsonl"]
    spec = repo.files(prefix="spec/")
    assert set(spec) == {"spec.yaml"}  # one gold: its cases are the evalset, left as it was
    assert spec_files(repo)["gold.jsonl"] == evalset == repo.files(repo.log()[1].sha, prefix="pack/")["evalset.jsonl"]
    assert "  ticket:\n" in spec["spec.yaml"].decode() and "  priority:\n" in spec["spec.yaml"].decode()
    assert repo.log(limit=1)[0].message == "Create a skeleton spec from the pack's evalset"
    assert "✓ The spec loads" in as_owner.get("/p/triage/spec/").content.decode()


def test_it_offers_a_placeholder_skeleton_to_an_empty_project(as_owner: Client, owner: object) -> None:
    create_project(slug="blank", name="blank", owner=owner, pack_files={})  # as the API's empty project
    html = as_owner.get("/p/blank/spec/").content.decode()
    assert "one gold case to replace" in html
    repo = PackRepo(Project.objects.get(slug="blank").repo_path)
    assert as_owner.post("/p/blank/spec/create", {"base": repo.head()}).status_code == 302
    assert set(repo.files(prefix="spec/")) == {"spec.yaml"}
    assert b"replace-me" in repo.files(prefix="pack/")["evalset.jsonl"]  # the placeholder case, in the one gold
    html = as_owner.get("/p/blank/spec/").content.decode()
    assert "✓ The spec loads" in html and "replace-me" in html


def test_it_refuses_a_skeleton_on_a_stale_base(as_owner: Client, project: Project, repo: PackRepo) -> None:
    base = repo.head()
    teammate_saves(repo, "prompts/classify.txt", "Newer {{ input.ticket }}\n")
    page = as_owner.post("/p/triage/spec/create", {"base": base})
    assert page.status_code == 302
    assert repo.files(prefix="spec/") == {}
    assert "the project moved on" in as_owner.get(page["Location"]).content.decode()


def test_it_shows_the_empty_state_read_only_to_a_viewer(as_viewer: Client, project: Project) -> None:
    html = as_viewer.get("/p/triage/spec/").content.decode()
    assert 'id="spec-empty"' in html and "Create a skeleton spec" not in html


def test_it_leaves_an_existing_spec_alone_when_asked_for_a_skeleton(as_owner: Client, with_spec: PackRepo) -> None:
    head = with_spec.head()
    page = as_owner.post("/p/triage/spec/create", {"base": head})
    assert page.status_code == 302
    assert with_spec.head() == head


@pytest.mark.parametrize("base", ["", "zzzz", "0" * 40])
def test_it_refuses_a_save_on_a_base_that_is_not_a_version(
    as_owner: Client, project: Project, repo: PackRepo, base: str
) -> None:
    head = repo.head()
    page = save(as_owner, "name: x\n", base)
    assert page.status_code == 400
    assert repo.head() == head and repo.files(prefix="spec/") == {}


def test_it_shows_a_saved_gold_problem_under_its_row(as_viewer: Client, with_spec: PackRepo) -> None:
    gold = spec_text(with_spec, "gold.jsonl").splitlines()
    gold[1] = gold[1].replace('"expected": {', '"expected": {"mood": "x", ')
    gold[3] = "not json"
    with_spec.save(
        {"pack/evalset.jsonl": ("\n".join(gold) + "\n").encode()},
        base=with_spec.head(),
        author="Tess",
        email="t@e.com",
        message="Two bad lines",
    )
    html = as_viewer.get("/p/triage/spec/gold/").content.decode()
    assert '<tr id="gold-2" class="bad-row">' in html and "line 2: case &#x27;st-02&#x27;: expected.mood" in html
    assert '<tr id="gold-4" class="bad-row">' in html and "Line 4 is not valid JSON" in html
    assert "does not load at" in html  # no induction until it loads


def test_it_checks_without_javascript_and_keeps_the_text(as_owner: Client, with_spec: PackRepo) -> None:
    head = with_spec.head()
    text = spec_text(with_spec) + "colour: blue\n"
    page = as_owner.post(
        "/p/triage/spec/validate", {"file": "spec.yaml", "content": text, "base": head, "message": "m"}
    )
    assert page.status_code == 200
    html = page.content.decode()
    assert "<html" in html and "colour: blue" in html and "unknown key &#x27;colour&#x27;" in html
    assert with_spec.head() == head
