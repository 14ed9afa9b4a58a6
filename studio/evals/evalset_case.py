"""Add to evalset: an input and its corrected output become a new case of the project's
evalset, as one commit by the author, from a case's drill-down (an eval's run) or from
a try-it run. Committed as the review queue's add-to-gold commits (studio/review/gold.py):
appended as one line of pack/evalset.jsonl on the head, checked first so a case that
would make the pack fail to load is refused with nothing committed, retried when the
head moved under the save.

The new case's id is the one asked for, else one made from where it came from
(`<case>-fix`, `try-<run>`), made unique against the evalset's ids; its note says
where it came from."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import User
from django.utils import timezone

from studio.errors import Refused
from studio.projects.evalset import FILE, append_line, case_line, parse_rows
from studio.projects.models import Project
from studio.projects.storage import PackRepo, StaleBase, StorageError
from studio.projects.validation import validate_files
from studio.proposals import service as proposals
from studio.proposals.models import Proposal

__all__ = ["CaseRefused", "Saved", "add_case", "commit_case", "fresh_id"]

CASE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,199}$")


class CaseRefused(Refused):
    """The case was not committed; the message says why. `status` is the HTTP answer."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message, status=status)


@dataclass(frozen=True)
class Saved:
    sha: str
    case_id: str
    proposal: int | None = None  # the proposal it opened, when asked to propose


def fresh_id(wanted: str, taken: set[str]) -> str:
    case_id, n = wanted, 2
    while case_id in taken:
        case_id, n = f"{wanted}-{n}", n + 1
    return case_id


def add_case(
    project: Project,
    user: User,
    *,
    input: Any,
    expected: Any,
    case_id: str = "",
    default_id: str = "case",
    tags: list[str] | None = None,
    note: str = "",
    message: str = "",
) -> Saved:
    """Commit {id, input, expected, tags, note} as a new line of the evalset; CaseRefused
    when the input or output is not a JSON object, the id is taken or malformed, or the
    case would not load."""
    if not isinstance(input, dict):
        raise CaseRefused("the input must be a JSON object")
    if not isinstance(expected, dict):
        raise CaseRefused("the corrected output must be a JSON object")
    case_id = case_id.strip()
    if case_id and not CASE_ID.match(case_id):
        raise CaseRefused(f"case id {case_id!r}: use letters, digits and - _ . : (at most 200)")

    def make(taken: set[str]) -> dict[str, Any]:
        if case_id and case_id in taken:
            raise CaseRefused(f"the evalset already has a case {case_id!r}; choose another id", 409)
        case: dict[str, Any] = {"id": case_id or fresh_id(default_id, taken), "input": input, "expected": expected}
        if tags:
            case["tags"] = [str(t) for t in tags if str(t).strip()]
        if note:
            case["note"] = note
        return case

    return commit_case(project, user, make, lambda case: message.strip() or f"Add case {case['id']} to the evalset")


def commit_case(
    project: Project,
    user: User,
    make: Callable[[set[str]], dict[str, Any]],
    subject: Callable[[dict[str, Any]], str],
    *,
    propose: bool = False,
) -> Saved:
    """Append `make(ids already in the evalset)` to pack/evalset.jsonl on the head as one
    commit by `user` with message `subject(case)`. Checked first: a case that would make
    the pack fail to load is refused (CaseRefused 400) with nothing committed. When the
    head moved under the save, the evalset is read again and the case made again (up to
    three times). The review queue's add-to-gold commits through this too. With `propose`,
    the commit opens a proposal on main's head instead (docs/proposals.md)."""
    try:
        repo = PackRepo(project.repo_path)
    except StorageError as exc:
        raise CaseRefused(str(exc), 409) from None
    name = user.get_full_name() or user.username
    for _ in range(3):  # the evalset moved under us: re-read and append again
        head = repo.head()
        files = repo.files(head, prefix="pack/") if head else {}
        text = files.get(FILE, b"").decode("utf-8", errors="replace")
        case = make({r.id for r in parse_rows(text)})
        new_text = append_line(text, case_line(case))
        before = {p.message for p in validate_files(files)[1]}
        added = [p.message for p in validate_files({**files, FILE: new_text.encode()})[1] if p.message not in before]
        if added:  # a new case must never be what breaks the pack
            raise CaseRefused(f"the case would not load: {'; '.join(added[:3])}")
        if propose:
            try:
                made = proposals.open_proposal(
                    project,
                    user=user,
                    title=subject(case).splitlines()[0],
                    changes={f"pack/{FILE}": new_text.encode()},
                    base=head,
                    source=Proposal.Source.REVIEW,
                    message=subject(case),
                )
            except Refused as exc:
                raise CaseRefused(f"not proposed: {exc}", 409) from None
            return Saved(made.head, case["id"], made.number)
        try:
            sha = repo.save(
                {f"pack/{FILE}": new_text.encode()},
                base=head,
                author=name,
                email=user.email,
                message=subject(case),
            )
        except StaleBase:
            continue
        except StorageError as exc:
            raise CaseRefused(f"not saved: {exc}", 409) from None
        Project.objects.filter(pk=project.pk).update(head=repo.head() or "", updated_at=timezone.now())
        return Saved(sha, case["id"])
    raise CaseRefused("the evalset kept changing while it was being saved; try again", 409)
