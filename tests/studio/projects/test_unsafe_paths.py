"""Paths a pack may not hold (issue 9, items 3, 5, 6 and 7), refused wherever they enter:
an upload (the API and the /new page), a `PUT .../files` save, the storage layer itself;
and checked, as git's fsck would, on what is already stored before a download hands it
out. A refused upload leaves nothing behind and never shows a server path."""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import tarfile
import time
import warnings
import zipfile
from pathlib import Path
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command
from django.test import Client
from dulwich.objects import Blob, Commit, Tree
from dulwich.repo import Repo

from runtime.paths import git_special, path_problem
from studio.projects.models import Project
from studio.projects.storage import ORPHAN_AGE_S, PackRepo, StorageError, UnsafePath
from tests.support.studio import head_of, send

MANIFEST = ("pack/manifest.yaml", b"name: x\nversion: 1\nentry: a\n")
FSMONITOR = b"[core]\n\tfsmonitor = touch /tmp/pwned\n"
LONG_NAME = "prompts/" + "é" * 150 + ".txt"  # 162 characters, 304 bytes in UTF-8
DEEP = "/".join(["d"] * 2100) + "/f.txt"  # deeper than Python's recursion limit


def zip_of(*members: tuple[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # zipfile warns about a duplicate name, and writes it
        for name, data in members:
            zf.writestr(name, data)
    return buf.getvalue()


def tar_of(*members: tuple[str | bytes, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", format=tarfile.GNU_FORMAT) as tf:
        for name, data in members:
            info = tarfile.TarInfo(name.decode("utf-8", "surrogateescape") if isinstance(name, bytes) else name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def upload(client: Client, filename: str, data: bytes, slug: str = "up") -> Any:
    archive = SimpleUploadedFile(filename, data, content_type="application/octet-stream")
    return client.post("/api/projects/upload", {"slug": slug, "archive": archive})


# Each: (archive name, bytes, what the refusal says). Every one is accepted, or ends in a
# 500, on the code before issue 9.
UNSAFE: dict[str, tuple[str, Any, str]] = {
    "zip_git_config": ("p.zip", lambda: zip_of(MANIFEST, ("pack/.git/config", FSMONITOR)), "git's own folder"),
    "tar_git_config": ("p.tar.gz", lambda: tar_of(MANIFEST, ("pack/.git/config", FSMONITOR)), "git's own folder"),
    "git_in_capitals_deep_down": ("p.zip", lambda: zip_of(MANIFEST, ("pack/a/b/.GIT/config", FSMONITOR)), ".git"),
    "git_with_a_trailing_dot": ("p.zip", lambda: zip_of(MANIFEST, ("pack/.git./config", FSMONITOR)), ".git"),
    "git_with_a_trailing_space": ("p.zip", lambda: zip_of(MANIFEST, ("pack/.GIT /config", FSMONITOR)), ".git"),
    "git_short_name": ("p.zip", lambda: zip_of(MANIFEST, ("pack/git~1/config", FSMONITOR)), ".git"),
    "git_with_an_ignorable": ("p.zip", lambda: zip_of(MANIFEST, ("pack/.g\u200cit/config", FSMONITOR)), ".git"),
    "gitmodules": ("p.zip", lambda: zip_of(MANIFEST, ("pack/.gitmodules", b"[submodule]")), ".gitmodules"),
    "gitattributes": ("p.zip", lambda: zip_of(MANIFEST, ("pack/.gitattributes", b"* filter=x")), ".gitattributes"),
    "git_as_the_top_folder": ("p.zip", lambda: zip_of((".git/config", FSMONITOR), (".git/HEAD", b"x")), ".git"),
    "empty_git_folder": ("p.zip", lambda: zip_of(MANIFEST, ("pack/.git/", b"")), "git's own folder"),
    "name_over_255_bytes": ("p.zip", lambda: zip_of(MANIFEST, (f"pack/{LONG_NAME}", b"x")), "at most 255"),
    "nested_2100_folders": ("p.zip", lambda: zip_of(MANIFEST, (f"pack/{DEEP}", b"x")), "folders deep"),
    "tar_name_not_utf8": ("p.tar.gz", lambda: tar_of(MANIFEST, (b"pack/caf\xe9.txt", b"x")), "not valid UTF-8"),
    "zip_duplicate_member": (
        "p.zip",
        lambda: zip_of(MANIFEST, ("pack/a.txt", b"first"), ("pack/a.txt", b"second")),
        "appears twice",
    ),
    "tar_duplicate_member": (
        "p.tar.gz",
        lambda: tar_of(MANIFEST, ("pack/a.txt", b"first"), ("pack/a.txt", b"second")),
        "appears twice",
    ),
    "tar_duplicate_after_normalising": (
        "p.tar.gz",
        lambda: tar_of(MANIFEST, ("pack/a.txt", b"first"), ("pack/./a.txt", b"second")),
        "appears twice",
    ),
    "file_and_folder_of_one_name": (
        "p.zip",
        lambda: zip_of(MANIFEST, ("pack/a", b"file"), ("pack/a/b.txt", b"x")),
        "both a file and a folder",
    ),
}


@pytest.mark.parametrize("case", sorted(UNSAFE))
def test_it_refuses_an_unsafe_upload_and_leaves_nothing_behind(
    case: str, as_owner: Client, git_root: Path, owner: Any
) -> None:
    filename, build, message = UNSAFE[case]
    answer = upload(as_owner, filename, build())
    assert answer.status_code == 400, answer.content[:300]
    detail = answer.json()["detail"]
    assert message in detail and "Nothing was stored" in detail
    assert str(git_root) not in detail
    assert not Project.objects.filter(slug="up").exists()
    assert not (git_root / "up.git").exists()
    # the slug is not blocked: a good upload under it works
    assert upload(as_owner, "p.zip", zip_of(MANIFEST)).status_code == 201


@pytest.mark.parametrize("case", ["nested_2100_folders", "tar_name_not_utf8", "zip_git_config"])
def test_it_refuses_an_unsafe_upload_on_the_new_page_without_a_server_path(
    case: str, as_owner: Client, git_root: Path
) -> None:
    filename, build, _ = UNSAFE[case]
    archive = SimpleUploadedFile(filename, build(), content_type="application/octet-stream")
    page = as_owner.post("/new", {"slug": "up", "archive": archive})
    assert page.status_code == 400
    html = page.content.decode()
    assert "Nothing was stored" in html and str(git_root) not in html and str(git_root.parent) not in html
    assert not (git_root / "up.git").exists()
    again = SimpleUploadedFile("p.zip", zip_of(MANIFEST), content_type="application/zip")
    assert as_owner.post("/new", {"slug": "up", "archive": again}).status_code == 302


def test_it_accepts_names_near_the_limits_and_dot_files_git_does_not_read(as_owner: Client) -> None:
    members = [
        MANIFEST,
        ("pack/prompts/" + "é" * 125 + ".txt", b"x"),  # a name of 254 bytes
        ("pack/.gitkeep", b""),
        ("pack/.github/notes.md", b"x"),
        ("pack/" + "/".join(["d"] * 29) + "/f.txt", b"x"),
    ]
    answer = upload(as_owner, "p.zip", zip_of(*members))
    assert answer.status_code == 201, answer.json()


@pytest.mark.parametrize(
    "path, message",
    [
        (".git/config", "git's own folder"),
        ("prompts/.Git/hooks/pre-commit", ".git"),
        ("GIT~1/config", ".git"),
        (".gitmodules", ".gitmodules"),
        (LONG_NAME, "at most 255"),
        ("/".join(["d"] * 40) + "/f.txt", "folders deep"),
    ],
)
def test_it_refuses_to_save_an_unsafe_path(path: str, message: str, as_owner: Client, project: Project) -> None:
    base = head_of(project)
    body = {"base": base, "message": "Add a file", "files": {path: "[core]\n\tfsmonitor = touch /tmp/pwned\n"}}
    answer = send(as_owner, "put", "/api/projects/triage/files", body)
    assert answer.status_code == 400
    assert message in answer.json()["detail"]
    assert head_of(project) == base
    # and every page that lists the files still works
    assert as_owner.get("/p/triage/").status_code == 200
    assert as_owner.get("/p/triage/files/").status_code == 200


# -- the storage layer, on its own ---------------------------------------------------------------


def test_it_refuses_to_store_a_git_folder_below_the_api(tmp_path: Path) -> None:
    repo = PackRepo.create(tmp_path / "r.git", {"pack/a.txt": b"x"}, author="a", email="", message="first")
    with pytest.raises(UnsafePath, match="git's own folder"):
        repo.save({"pack/.git/config": FSMONITOR}, base=repo.head(), author="a", email="", message="evil")
    assert len(repo.log()) == 1


@pytest.mark.parametrize("files", [{f"pack/{DEEP}": b"x"}, {"pack/\udce9.txt": b"x"}, {f"pack/{LONG_NAME}": b"x"}])
def test_it_leaves_no_repository_when_a_create_is_refused(tmp_path: Path, files: dict[str, bytes]) -> None:
    with pytest.raises(UnsafePath) as info:
        PackRepo.create(tmp_path / "r.git", files, author="a", email="", message="first")
    assert not (tmp_path / "r.git").exists()
    assert str(tmp_path) not in str(info.value)


def test_it_removes_the_repository_when_the_first_save_fails(tmp_path: Path) -> None:
    with pytest.raises(Exception, match="needs a message"):
        PackRepo.create(tmp_path / "r.git", {"pack/a.txt": b"x"}, author="a", email="", message=" ")
    assert not (tmp_path / "r.git").exists()
    PackRepo.create(tmp_path / "r.git", {"pack/a.txt": b"x"}, author="a", email="", message="first")


def commit_behind_storage(repo: PackRepo, names: list[bytes], message: str = "sneaked in") -> str:
    """A commit whose pack/ folder holds `names` (each a file), made with dulwich directly,
    as a repository written before these paths were refused would hold."""
    store = repo.repo.object_store
    blob = Blob.from_string(FSMONITOR)
    store.add_object(blob)
    pack = Tree()
    for name in names:
        pack.add(name, 0o100644, blob.id)
    store.add_object(pack)
    root = Tree()
    root.add(b"pack", 0o040000, pack.id)
    store.add_object(root)
    commit = Commit()
    commit.tree = root.id
    head = repo.head()
    commit.parents = [head.encode()] if head else []
    commit.author = commit.committer = b"a <a@example.com>"
    commit.author_time = commit.commit_time = 0
    commit.author_timezone = commit.commit_timezone = 0
    commit.message = message.encode()
    store.add_object(commit)
    repo.repo.refs[b"refs/heads/main"] = commit.id
    return commit.id.decode()


def test_it_finds_unsafe_paths_in_every_stored_commit(tmp_path: Path) -> None:
    repo = PackRepo.create(tmp_path / "r.git", {"pack/a.txt": b"x"}, author="a", email="", message="first")
    bad = commit_behind_storage(repo, [b".GIT.", b"ok.txt"])
    repo.save({"pack/ok.txt": None, "pack/b.txt": b"y"}, base=bad, author="a", email="", message="later")
    assert repo.tree_problems(bad) == [
        "pack/.GIT.: git's own folder cannot be part of a pack ('.GIT.' is .git to git on some systems)"
    ]
    problems = repo.fsck()  # the head still holds .GIT.: two commits with it, the first one clean
    assert len(problems) == 2 and all(".GIT." in p for p in problems)


def test_it_refuses_to_download_a_stored_version_holding_git(as_owner: Client, project: Project) -> None:
    repo = PackRepo(project.repo_path)
    commit_behind_storage(repo, [b".git", b"manifest.yaml"])
    answer = as_owner.get("/api/projects/triage/download?format=zip")
    assert answer.status_code == 409
    assert "unsafe to unpack" in answer.json()["detail"] and "pack/.git" in answer.json()["detail"]
    page = as_owner.get("/p/triage/download/?format=tar.gz")
    assert page.status_code == 400


# -- the rule itself, against git's own fsck -------------------------------------------------------

# Spellings of .git that git's fsck flags (hasDotgit) because HFS+ or NTFS would open .git
# for them, and neighbours it does not flag.
NAMES = [
    ".git", ".GIT", ".Git.", ".git ", ".git. . ", "git~1", "GIT~1", ".git::$INDEX_ALLOCATION",
    ".g\u200cit", ".gi\u200dt", "\u206a.git", ".git\u202e", ".git\ufeff", "\u200c.\u200cgit", ".git\\x", "a\\.GIT",
    "\u200b.git", ".gitkeep", ".github", "git~2", "git", ".gi", "..git", ".git2", "gıt~1", "notes.md",
]  # fmt: skip


@pytest.mark.skipif(shutil.which("git") is None, reason="needs the git command")
def test_it_refuses_every_name_gits_fsck_flags(tmp_path: Path) -> None:
    flagged_by_git, flagged_by_us = set(), set()
    for i, name in enumerate(NAMES):
        repo = PackRepo.create(tmp_path / f"{i}.git", {"pack/a.txt": b"x"}, author="a", email="", message="first")
        commit_behind_storage(repo, [name.encode()])
        fsck = subprocess.run(["git", "-C", str(repo.path), "fsck", "--no-dangling"], capture_output=True, text=True)
        if "hasDotgit" in fsck.stdout + fsck.stderr:
            flagged_by_git.add(name)
        if repo.fsck():
            flagged_by_us.add(name)
        assert (path_problem(f"pack/{name}") is not None) == (name in flagged_by_us), name
    assert len(flagged_by_git) >= 15  # the git on this machine knows the HFS and NTFS spellings
    assert flagged_by_git <= flagged_by_us, sorted(flagged_by_git - flagged_by_us)
    assert not flagged_by_us & {
        "\u200b.git",
        ".gitkeep",
        ".github",
        "git~2",
        "git",
        ".gi",
        "..git",
        ".git2",
        "notes.md",
    }


@pytest.mark.parametrize(
    "name, special",
    [
        (".gitmodules", ".gitmodules"),
        (".GitModules .", ".gitmodules"),
        ("gitmod~1", ".gitmodules"),
        ("GI7EBA~1", ".gitmodules"),
        ("gi7eb~12", ".gitmodules"),
        ("gi7eba~12", None),
        (".gitattributes", ".gitattributes"),
        ("gitatt~2", ".gitattributes"),
        (".gitignore", ".gitignore"),
        (".mailmap", ".mailmap"),
        ("gitmod~5", None),
        (".gitmodule", None),
    ],
)
def test_it_knows_the_other_names_git_reads_in_their_short_spellings(name: str, special: str | None) -> None:
    assert git_special(name) == special


def test_it_reports_unsafe_stored_paths_from_the_fsck_command(project: Project) -> None:
    call_command("fsck_projects", stdout=io.StringIO())  # clean: no error
    commit_behind_storage(PackRepo(project.repo_path), [b"git~1"])
    out = io.StringIO()
    with pytest.raises(CommandError, match="1 problem"):
        call_command("fsck_projects", stdout=out)
    assert out.getvalue().startswith("triage: ") and "pack/git~1: git's own folder" in out.getvalue()


def test_it_reclaims_a_name_an_old_failed_create_left_blocked(tmp_path: Path) -> None:
    """What the code before issue 9 left after a 500: a repository with no commit."""
    orphan = tmp_path / "r.git"
    Repo.init_bare(str(orphan), mkdir=True)
    with pytest.raises(StorageError, match="already exists"):  # as young as a create in flight: left alone
        PackRepo.create(orphan, {"pack/a.txt": b"x"}, author="a", email="", message="first")
    old = time.time() - ORPHAN_AGE_S - 1
    os.utime(orphan, (old, old))
    repo = PackRepo.create(orphan, {"pack/a.txt": b"x"}, author="a", email="", message="first")
    assert repo.files(prefix="pack/") == {"a.txt": b"x"}


def test_it_never_reclaims_a_repository_with_commits(tmp_path: Path) -> None:
    repo = PackRepo.create(tmp_path / "r.git", {"pack/a.txt": b"x"}, author="a", email="", message="first")
    old = time.time() - ORPHAN_AGE_S - 1
    os.utime(repo.path, (old, old))
    with pytest.raises(StorageError, match="already exists"):
        PackRepo.create(tmp_path / "r.git", {"pack/b.txt": b"y"}, author="a", email="", message="again")
    assert PackRepo(tmp_path / "r.git").files(prefix="pack/") == {"a.txt": b"x"}


def test_it_lets_an_author_delete_an_unsafe_path_stored_before_the_rule(tmp_path: Path) -> None:
    repo = PackRepo.create(tmp_path / "r.git", {"pack/a.txt": b"x"}, author="a", email="", message="first")
    bad = commit_behind_storage(repo, [b".git", b"a.txt"])
    with pytest.raises(UnsafePath):
        repo.save({"pack/.git": b"again"}, base=bad, author="a", email="", message="write it")
    fixed = repo.save({"pack/.git": None}, base=bad, author="a", email="", message="remove it")
    assert repo.tree_problems(fixed) == [] and "pack/.git" not in repo.files(fixed)
