"""Concurrent saves from two OS processes never corrupt a repository or lose a commit."""

from __future__ import annotations

import itertools
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.conf import settings
from dulwich.object_store import iter_tree_contents
from dulwich.objects import Blob, Commit

from studio.projects.storage import PackRepo, StaleBase, StorageError

SAVES = 25

# Each worker waits for the starting gun, then saves SAVES commits, every one from the
# head it last read; on StaleBase it re-reads the head and tries again.
WORKER = (
    """
import json, sys, time
from pathlib import Path
from studio.projects.storage import PackRepo, StaleBase

path, name, gun = sys.argv[1], sys.argv[2], Path(sys.argv[3])
while not gun.exists():
    time.sleep(0.001)
repo = PackRepo(Path(path))
made, refused = [], 0
base = repo.head()
for i in range(%d):
    while True:
        try:
            sha = repo.save({f"pack/{name}/{i}.txt": f"{name} {i}\\n".encode(),
                             "pack/shared.txt": f"last written by {name} ({i})\\n".encode()},
                            base=base, author=name, email=f"{name}@example.com", message=f"{name} save {i}")
        except StaleBase as stale:
            refused += 1
            base = stale.head
            continue
        made.append(sha)
        base = sha
        break
print(json.dumps({"made": made, "refused": refused}))
"""
    % SAVES
)


def test_it_keeps_every_commit_from_two_processes_saving_at_once(tmp_path: Path) -> None:
    repo = PackRepo.create(
        tmp_path / "race.git",
        {"pack/shared.txt": b"start\n"},
        author="olive",
        email="olive@example.com",
        message="Start",
    )
    start = repo.head()
    gun = tmp_path / "go"
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, str(repo.path), name, str(gun)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=settings.BASE_DIR,
        )
        for name in ("ann", "bob")
    ]
    time.sleep(0.5)  # both imported and waiting
    gun.touch()
    results = []
    for worker in workers:
        out, err = worker.communicate(timeout=120)
        assert worker.returncode == 0, err
        results.append(json.loads(out))

    made = results[0]["made"] + results[1]["made"]
    assert len(made) == len(set(made)) == 2 * SAVES

    log = PackRepo(repo.path).log(limit=1000)
    assert len(log) == 2 * SAVES + 1  # exactly 50 new commits
    assert log[-1].sha == start
    assert set(made) == {v.sha for v in log[:-1]}  # no commit lost
    store = repo.repo.object_store
    for newer, older in itertools.pairwise(log):  # linear: each commit's only parent is the next
        commit = repo.repo[newer.sha.encode()]
        assert isinstance(commit, Commit) and commit.parents == [older.sha.encode()]
    for version in log:  # fsck-like: every tree and blob of every commit reads back
        commit = repo.repo[version.sha.encode()]
        assert isinstance(commit, Commit)
        for entry in iter_tree_contents(store, commit.tree):
            assert isinstance(repo.repo[entry.sha], Blob)
    final = repo.files(prefix="pack/")
    assert {f"{n}/{i}.txt" for n in ("ann", "bob") for i in range(SAVES)} <= set(final)
    if shutil.which("git"):
        fsck = subprocess.run(["git", "fsck", "--full", "--strict"], cwd=repo.path, capture_output=True, text=True)
        assert fsck.returncode == 0, fsck.stdout + fsck.stderr


def test_it_refuses_a_save_on_a_stale_base_with_the_diff(tmp_path: Path) -> None:
    repo = PackRepo.create(tmp_path / "r.git", {"pack/a.txt": b"one\n"}, author="a", email="", message="Start")
    base = repo.head()
    newer = repo.save({"pack/a.txt": b"two\n"}, base=base, author="b", email="", message="Two")
    with pytest.raises(StaleBase) as refused:
        repo.save({"pack/a.txt": b"three\n"}, base=base, author="c", email="", message="Three")
    assert refused.value.head == newer and [c.path for c in refused.value.changes] == ["pack/a.txt"]
    assert repo.files(prefix="pack/") == {"a.txt": b"two\n"}


def test_it_refuses_to_delete_a_file_that_is_not_there(tmp_path: Path) -> None:
    repo = PackRepo.create(tmp_path / "r.git", {"pack/a.txt": b"one\n"}, author="a", email="", message="Start")
    with pytest.raises(StorageError, match="no such file"):
        repo.save({"pack/b.txt": None}, base=repo.head(), author="a", email="", message="Delete b")
