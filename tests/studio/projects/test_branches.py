"""Proposal branches: saves go to the branch and leave main alone; a merge fast-forwards
when main stood still, makes a merge commit when the sides changed different files, and is
refused with main's side of the diff when they changed the same one."""

from __future__ import annotations

from pathlib import Path

import pytest

from studio.projects.branches import MergeConflict, merge, on_main, open_branch, sync
from studio.projects.storage import PackRepo, StaleBase, StorageError

WHO = {"author": "ann", "email": "ann@example.com"}


def repo_at(tmp_path: Path) -> tuple[PackRepo, str]:
    repo = PackRepo.create(tmp_path / "p.git", {"pack/a.txt": b"a\n", "pack/b.txt": b"b\n"}, message="start", **WHO)
    base = repo.head()
    assert base is not None
    return repo, base


def test_a_save_on_a_branch_leaves_main_where_it_was(tmp_path: Path) -> None:
    repo, base = repo_at(tmp_path)
    open_branch(repo, "proposals/1", base)
    head = repo.save({"pack/a.txt": b"A\n"}, base=base, message="edit", branch="proposals/1", **WHO)
    assert repo.head() == base and repo.head("proposals/1") == head
    assert repo.files(head, prefix="pack/")["a.txt"] == b"A\n"
    assert not on_main(repo, head) and on_main(repo, base)
    with pytest.raises(StaleBase):
        repo.save({"pack/a.txt": b"again\n"}, base=base, message="stale", branch="proposals/1", **WHO)


def test_branch_names_are_main_or_a_numbered_proposal(tmp_path: Path) -> None:
    repo, base = repo_at(tmp_path)
    for name in ("feature", "proposals/x", "proposals/../main", "main/../x"):
        with pytest.raises(StorageError, match="no branch"):
            open_branch(repo, name, base)
    open_branch(repo, "proposals/2", base)
    with pytest.raises(StorageError, match="exists"):
        open_branch(repo, "proposals/2", base)
    with pytest.raises(StorageError, match="no branch"):
        repo.save({"pack/a.txt": b"x\n"}, base=base, message="m", branch="proposals/3", **WHO)


def test_merge_fast_forwards_when_main_stood_still(tmp_path: Path) -> None:
    repo, base = repo_at(tmp_path)
    open_branch(repo, "proposals/1", base)
    with pytest.raises(StorageError, match="changes nothing"):
        merge(repo, "proposals/1", base=base, head=base, message="merge", **WHO)
    head = repo.save({"pack/a.txt": b"A\n"}, base=base, message="edit", branch="proposals/1", **WHO)
    with pytest.raises(StorageError, match="moved to"):  # not what was reviewed
        merge(repo, "proposals/1", base=base, head=base, message="merge", **WHO)
    merged = merge(repo, "proposals/1", base=base, head=head, message="merge", **WHO)
    assert merged.how == "fast-forward" and merged.sha == head == repo.head()
    with pytest.raises(StorageError, match="on main already"):  # a second merge of the same head
        merge(repo, "proposals/1", base=base, head=head, message="merge", **WHO)
    assert repo.head() == head


def test_merge_commits_when_main_changed_other_files(tmp_path: Path) -> None:
    repo, base = repo_at(tmp_path)
    open_branch(repo, "proposals/1", base)
    head = repo.save(
        {"pack/a.txt": b"A\n", "pack/new.txt": b"n\n"}, base=base, message="edit", branch="proposals/1", **WHO
    )
    main = repo.save({"pack/b.txt": None}, base=base, message="drop b", **WHO)
    merged = merge(repo, "proposals/1", base=base, head=head, message="merge", **WHO)
    assert merged.how == "merge commit"
    assert repo.files(merged.sha, prefix="pack/") == {"a.txt": b"A\n", "new.txt": b"n\n"}
    assert on_main(repo, main) and on_main(repo, repo.head("proposals/1") or "")


def test_merge_is_refused_with_mains_diff_when_both_changed_a_file(tmp_path: Path) -> None:
    repo, base = repo_at(tmp_path)
    open_branch(repo, "proposals/1", base)
    head = repo.save({"pack/a.txt": b"theirs\n"}, base=base, message="edit", branch="proposals/1", **WHO)
    main = repo.save({"pack/a.txt": b"ours\n"}, base=base, message="edit on main", **WHO)
    with pytest.raises(MergeConflict) as refused:
        merge(repo, "proposals/1", base=base, head=head, message="merge", **WHO)
    assert refused.value.paths == ["pack/a.txt"] and refused.value.status == 409
    assert [(c.path, c.old, c.new) for c in refused.value.changes] == [("pack/a.txt", "a\n", "ours\n")]
    assert repo.head() == main, "a refused merge moves nothing"


def test_the_same_change_on_both_sides_is_not_a_conflict(tmp_path: Path) -> None:
    repo, base = repo_at(tmp_path)
    open_branch(repo, "proposals/1", base)
    head = repo.save({"pack/a.txt": b"same\n"}, base=base, message="edit", branch="proposals/1", **WHO)
    repo.save({"pack/a.txt": b"same\n", "pack/b.txt": b"B\n"}, base=base, message="edit on main", **WHO)
    merged = merge(repo, "proposals/1", base=base, head=head, message="merge", **WHO)
    assert repo.files(merged.sha, prefix="pack/") == {"a.txt": b"same\n", "b.txt": b"B\n"}


def test_sync_brings_main_in_with_the_authors_resolution(tmp_path: Path) -> None:
    repo, base = repo_at(tmp_path)
    open_branch(repo, "proposals/1", base)
    head = repo.save(
        {"pack/a.txt": b"theirs\n", "pack/c.txt": b"c\n"}, base=base, message="edit", branch="proposals/1", **WHO
    )
    main = repo.save({"pack/a.txt": b"ours\n", "pack/b.txt": b"B\n"}, base=base, message="edit on main", **WHO)
    with pytest.raises(MergeConflict) as unresolved:
        sync(repo, "proposals/1", base=base, head=head, resolved={}, message="sync", **WHO)
    assert unresolved.value.paths == ["pack/a.txt"] and repo.head("proposals/1") == head
    new_head, new_base = sync(
        repo, "proposals/1", base=base, head=head, resolved={"pack/a.txt": b"both\n"}, message="sync", **WHO
    )
    assert new_base == main and repo.head("proposals/1") == new_head
    assert repo.files(new_head, prefix="pack/") == {"a.txt": b"both\n", "b.txt": b"B\n", "c.txt": b"c\n"}
    merged = merge(repo, "proposals/1", base=new_base, head=new_head, message="merge", **WHO)
    assert merged.how == "fast-forward" and repo.head() == new_head
