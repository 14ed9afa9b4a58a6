"""Concurrent saves from two OS processes never corrupt a repository or lose a commit."""

from __future__ import annotations

import itertools
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings
from dulwich.object_store import iter_tree_contents
from dulwich.objects import Blob, Commit

from studio.projects.storage import PackRepo, StaleBase, StorageError
from tests.support.waiting import wait_until

SAVES = 25

# Each worker says it is ready, waits for the starting gun, then saves SAVES commits,
# every one from the head it last read; on StaleBase it re-reads the head and tries again.
# Its first save is held at the door: it marks that it entered save() and goes on only
# once the other worker has entered too, so both are inside save() at once, each with the
# start commit as its base: they overlap by construction, and one of them must be refused.
WORKER = """
import json, sys, time
from pathlib import Path
from studio.projects.storage import PackRepo, StaleBase

path, name, other, folder = sys.argv[1], sys.argv[2], sys.argv[3], Path(sys.argv[4])
SAVES = int(sys.argv[5])


def wait_for(marker):
    deadline = time.monotonic() + 60
    while not marker.exists():  # polling a file another process writes
        if time.monotonic() > deadline:
            sys.exit(f"{name}: no {marker.name} within 60 s")
        time.sleep(0.001)


save = PackRepo.save
def save_after_both_entered(self, *args, **kwargs):
    PackRepo.save = save  # only the first save waits at the door
    (folder / f"{name}.entered").touch()
    wait_for(folder / f"{other}.entered")
    try:
        return save(self, *args, **kwargs)
    finally:
        (folder / f"{name}.left").touch()
PackRepo.save = save_after_both_entered

repo = PackRepo(Path(path))
(folder / f"{name}.ready").touch()
wait_for(folder / "go")
made, refused = [], 0
base = repo.head()
for i in range(SAVES):
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


def test_it_keeps_every_commit_from_two_processes_saving_at_once(tmp_path: Path) -> None:
    repo = PackRepo.create(
        tmp_path / "race.git",
        {"pack/shared.txt": b"start\n"},
        author="olive",
        email="olive@example.com",
        message="Start",
    )
    start = repo.head()
    folder = tmp_path / "markers"
    folder.mkdir()
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, str(repo.path), name, other, str(folder), str(SAVES)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=settings.BASE_DIR,
        )
        for name, other in (("ann", "bob"), ("bob", "ann"))
    ]
    wait_until(
        lambda: all((folder / f"{n}.ready").exists() for n in ("ann", "bob")),
        timeout=60,
        message=lambda: f"workers not ready: {[w.poll() for w in workers]}",
    )
    (folder / "go").touch()
    results = []
    for worker in workers:
        out, err = worker.communicate(timeout=120)
        assert worker.returncode == 0, err
        results.append(json.loads(out))

    # They overlapped: both entered save() (each waited for the other there), and the one
    # that committed second found the branch moved under the base both had read.
    assert all((folder / f"{n}.entered").exists() and (folder / f"{n}.left").exists() for n in ("ann", "bob"))
    assert results[0]["refused"] + results[1]["refused"] >= 1
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
