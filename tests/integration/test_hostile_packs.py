"""Hostile packs end to end (issue 9, items 2, 3, 5, 6, 7): an attacker with an account
tries what the issue describes against a real studio on loopback, a real `packforge
pull` process and the real `git` command, or a real Celery worker; each test fails on the
code before the fix.

- item 3: a pack carrying `.git/config` with `core.fsmonitor = <command>`, uploaded or
  saved, and then pulled by someone who runs `git status`: the command must never run;
- items 5-7: uploads that ended in 500 and left a repository blocking the slug;
- item 2: a run whose edge pattern backtracks for ever in Python's `re` finishes.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import httpx
import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.test import Client
from dulwich.object_store import commit_tree_changes
from dulwich.objects import Blob, Commit

from studio.accounts.models import ApiToken
from studio.projects.models import create_project
from studio.projects.storage import PackRepo
from studio.projects.views import example_files
from studio.runs.models import TryRun
from tests.support.eval_workers import Worker
from tests.support.waiting import wait_until

ROOT = Path(__file__).resolve().parents[2]
HX = {"HX-Request": "true"}


def git_dir_members(marker: Path) -> dict[str, bytes]:
    """What makes a folder a git repository whose next `git status` runs a command."""
    return {
        ".git/HEAD": b"ref: refs/heads/main\n",
        ".git/config": f"[core]\n\trepositoryformatversion = 0\n\tfsmonitor = touch {marker}\n".encode(),
        ".git/objects/info/packs": b"",
        ".git/refs/heads/keep": b"",
    }


def zip_of(members: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return buf.getvalue()


def pull(url: str, token: str, out: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "PACKFORGE_TOKEN"} | {"PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "runtime", "pull", url, "--out", str(out), "--token", token],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def git_status(folder: Path) -> None:
    if folder.is_dir():
        subprocess.run(["git", "status"], cwd=folder, capture_output=True, timeout=60)


@pytest.fixture
def studio(live_server: Any, settings: Any, tmp_path: Path) -> tuple[str, str]:
    """A studio on loopback; (its url, a signed-in author's API token)."""
    settings.GIT_ROOT = tmp_path / "git"
    author = User.objects.create_user("mallory", "mallory@example.com", "pw")
    create_project(slug="triage", name="Triage", owner=author, pack_files=example_files("support_triage"))
    _, token = ApiToken.issue(author, "cli")
    return str(live_server.url), token


@pytest.mark.skipif(shutil.which("git") is None, reason="needs the git command")
def test_it_never_lets_a_pulled_pack_run_a_command_through_git(studio: tuple[str, str], tmp_path: Path) -> None:
    url, token = studio
    marker = tmp_path / "fsmonitor-ran"
    auth = {"Authorization": f"Bearer {token}"}
    evil = {"evil/manifest.yaml": b"name: evil\n"} | {f"evil/{k}": v for k, v in git_dir_members(marker).items()}
    with httpx.Client(base_url=url, headers=auth, timeout=60) as http:
        uploaded = http.post(
            "/api/projects/upload", data={"slug": "evil"}, files={"archive": ("evil.zip", zip_of(evil))}
        )
        head = http.get("/api/projects/triage").json()["head"]
        saved = http.put(
            "/api/projects/triage/files",
            json={"base": head, "message": "add", "files": {k: v.decode() for k, v in git_dir_members(marker).items()}},
        )
    # and a repository written before the fix, holding the same files
    legacy = create_project(slug="legacy", name="Legacy", owner=User.objects.get(), pack_files={"manifest.yaml": b"x"})
    commit_behind_storage(PackRepo(legacy.repo_path), {f"pack/{k}": v for k, v in git_dir_members(marker).items()})

    pulled = {slug: pull(f"{url}/{slug}", token, tmp_path / slug) for slug in ("evil", "triage", "legacy")}
    for slug in pulled:
        git_status(tmp_path / slug)
    assert not marker.exists(), "a pulled pack ran a command through git"
    assert uploaded.status_code == 400 and "git's own folder" in uploaded.json()["detail"]
    assert saved.status_code == 400 and "git's own folder" in saved.json()["detail"]
    assert pulled["evil"].returncode != 0 and not (tmp_path / "evil").exists()
    assert pulled["triage"].returncode == 0 and not (tmp_path / "triage" / ".git").exists()
    assert pulled["legacy"].returncode != 0 and "unsafe to unpack" in pulled["legacy"].stderr
    assert not (tmp_path / "legacy").exists()


def commit_behind_storage(repo: PackRepo, files: dict[str, bytes]) -> None:
    """Commit `files` with dulwich directly, past the storage layer's path checks."""
    store = repo.repo.object_store
    head = repo.repo.refs[b"refs/heads/main"]
    root = store[head].tree  # type: ignore[attr-defined]
    entries = []
    for path, data in files.items():
        blob = Blob.from_string(data)
        store.add_object(blob)
        entries.append((path.encode(), 0o100644, blob.id))
    commit = Commit()
    commit.tree = commit_tree_changes(store, root, entries)
    commit.parents = [head]
    commit.author = commit.committer = b"m <m@example.com>"
    commit.author_time = commit.commit_time = 0
    commit.author_timezone = commit.commit_timezone = 0
    commit.message = b"sneaked in\n"
    store.add_object(commit)
    repo.repo.refs[b"refs/heads/main"] = commit.id


def test_it_leaves_no_repository_and_no_server_path_after_uploads_that_ended_in_500(
    studio: tuple[str, str], tmp_path: Path
) -> None:
    url, token = studio
    deep = "/".join(["d"] * 2100)
    attacks = {
        "deep": zip_of({"p/manifest.yaml": b"x", f"p/{deep}/f.txt": b"x"}),
        "long": zip_of({"p/manifest.yaml": b"x", "p/prompts/" + "é" * 150 + ".txt": b"x"}),
        "dupes": b"",
    }
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("p/a.txt", "first")
        with pytest.warns(UserWarning, match="Duplicate name"):
            zf.writestr("p/a.txt", "second")
    attacks["dupes"] = buf.getvalue()
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=120) as http:
        for slug, data in attacks.items():
            answer = http.post("/api/projects/upload", data={"slug": slug}, files={"archive": ("p.zip", data)})
            assert answer.status_code == 400, (slug, answer.status_code, answer.text[:300])
            assert str(settings.GIT_ROOT) not in answer.text
            assert not (Path(settings.GIT_ROOT) / f"{slug}.git").exists()
            again = http.post(
                "/api/projects/upload", data={"slug": slug}, files={"archive": ("p.zip", zip_of({"p/m.yaml": b"x"}))}
            )
            assert again.status_code == 201, (slug, again.text[:300])


def _ticket_of_first_case() -> dict[str, Any]:
    line = (settings.EXAMPLE_PACKS / "support_triage" / "evalset.jsonl").read_text().splitlines()[0]
    return dict(json.loads(line)["input"])


def test_it_finishes_a_run_whose_edge_pattern_backtracks_for_ever_in_python_re(live: Worker) -> None:
    """`(a|a)*b` against 40 a's is about 2**40 steps for a backtracking engine: the worker
    would be pinned and the run never finish. On RE2 the edge is simply not taken."""
    client = Client()
    author = User.objects.create_user("olive", "olive@example.com", "pw")
    client.force_login(author)
    files = example_files("support_triage")
    trap = "  - {from: prioritise, to: general, when: \"matches(upper(category) + '" + "a" * 40 + "', '(a|a)*b')\"}\n"
    graph = files["graph.yaml"].decode()
    files["graph.yaml"] = graph.replace(
        "  - {from: prioritise, to: billing_ops", trap + "  - {from: prioritise, to: billing_ops"
    ).encode()
    project = create_project(slug="trap", name="Trap", owner=author, pack_files=files)
    started = client.post(
        "/p/trap/runs/new",
        {"version": project.head, "endpoint": "", "input": json.dumps(_ticket_of_first_case())},
    )
    assert started.status_code == 302, started.content
    run = TryRun.objects.get()
    # The poller answers 286 once the run is final. The timeout is a guard against a hang,
    # not a bound on speed: benchmarks/expr_eval.py times these patterns on RE2 against `re`.
    wait_until(
        lambda: client.get(f"/p/trap/runs/{run.pk}", headers=HX).status_code != 200,
        timeout=600,
        message=lambda: f"the run did not finish; worker log:\n{live.output()}",
    )
    run.refresh_from_db()
    assert run.status == "done", (run.error, live.output())
    assert run.trace["path"][-1] == "billing_ops", run.trace["path"]
