"""A save interrupted by a crash leaves a 0-byte `objects/xx/<sha>.lock` (dulwich writes
each object through one); the next save of the same content clears it when it is stale
(old, and no process has it open) and succeeds. A lock a live writer holds stays."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from dulwich.objects import Blob

from studio.projects.stale_locks import STALE_LOCK_S
from studio.projects.storage import PackRepo, StorageError

CONTENT = b"the same words, saved twice\n"


@pytest.fixture
def repo(tmp_path: Path) -> PackRepo:
    return PackRepo.create(tmp_path / "r.git", {"pack/a.txt": b"one\n"}, author="a", email="", message="Start")


@pytest.fixture
def lock(repo: PackRepo) -> Path:
    """The lock file a writer killed while writing CONTENT's blob leaves behind."""
    sha = Blob.from_string(CONTENT).id.decode()
    path = repo.path / "objects" / sha[:2] / f"{sha[2:]}.lock"
    path.parent.mkdir(exist_ok=True)
    path.touch()
    return path


def _age(path: Path, seconds: float) -> None:
    then = time.time() - seconds
    os.utime(path, (then, then))


@pytest.fixture
def held(lock: Path) -> Iterator[int]:
    """The lock, open in this (live) process, as a dulwich writer holds it mid-write."""
    fd = os.open(lock, os.O_RDWR)
    yield fd
    os.close(fd)


def _save(repo: PackRepo) -> str:
    return repo.save({"pack/b.txt": CONTENT}, base=repo.head(), author="a", email="", message="Add b")


def test_it_clears_a_stale_lock_and_saves(repo: PackRepo, lock: Path) -> None:
    _age(lock, STALE_LOCK_S + 5)
    sha = _save(repo)
    assert repo.head() == sha and repo.files()["pack/b.txt"] == CONTENT
    assert not lock.exists()


def test_it_keeps_a_fresh_lock(repo: PackRepo, lock: Path) -> None:
    head = repo.head()
    with pytest.raises(StorageError, match="try again"):
        _save(repo)
    assert lock.exists() and repo.head() == head


def test_it_keeps_an_old_lock_a_live_writer_holds_open(repo: PackRepo, lock: Path, held: int) -> None:
    _age(lock, STALE_LOCK_S + 5)
    with pytest.raises(StorageError, match="try again"):
        _save(repo)
    assert lock.exists()
