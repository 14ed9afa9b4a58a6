"""What the pages and the API do to proposals (docs/proposals.md): open one (a branch at a
commit of main plus a row), update it (a save on its branch), comment, approve or ask for
changes, merge it into main, close and reopen it. Every step is one ProposalEvent.

Rules, in one place: authors open, update, merge and close; reviewers and authors review
and comment; nobody approves their own proposal; an approval counts only for the head it
was given on, so an update asks for review again; a merge needs the project's number of
approvals (and a passing gate when the project asks for one) and is refused on conflict
with what main changed meanwhile."""

from __future__ import annotations

from collections.abc import Mapping

from django.contrib.auth.models import User
from django.db import IntegrityError, transaction
from django.db.models import Max
from django.utils import timezone

from studio.accounts.models import Role
from studio.deployments import promotion
from studio.deployments.models import Deployment
from studio.errors import Refused
from studio.projects import branches
from studio.projects.models import Project
from studio.projects.storage import PackRepo, StorageError, branch_ref
from studio.proposals import checks
from studio.proposals.models import Proposal, ProposalEvent
from studio.review.models import ReviewItem

S = Proposal.Status
K = ProposalEvent.Kind
OPEN_STATES = (S.OPEN, S.APPROVED, S.CHANGES_REQUESTED)
MAX_TITLE = 200
MAX_BODY = 20_000
MAX_APPROVALS = 10


class ProposalRefused(Refused):
    """The step cannot be taken; the message says why."""


def _who(user: User) -> tuple[str, str]:
    return user.get_full_name() or user.username, user.email or ""


def _event(proposal: Proposal, user: User, kind: str, body: str = "", path: str = "", line: int | None = None) -> None:
    ProposalEvent.objects.create(
        proposal=proposal, user=user, kind=kind, body=body[:MAX_BODY], head=proposal.head, path=path, line=line
    )


def _bounded(text: str, what: str) -> str:
    if "\x00" in text:
        raise ProposalRefused(f"the {what} holds a NUL character")
    if len(text) > MAX_BODY:
        raise ProposalRefused(f"the {what} is {len(text)} characters; at most {MAX_BODY}")
    return text


def _clean_title(title: str) -> str:
    title = " ".join(title.split())
    if not title:
        raise ProposalRefused("a proposal needs a title")
    if len(title) > MAX_TITLE:
        raise ProposalRefused(f"the title is {len(title)} characters; at most {MAX_TITLE}")
    return title


def open_proposal(
    project: Project,
    *,
    user: User,
    title: str,
    changes: Mapping[str, bytes | None],
    description: str = "",
    base: str | None = None,
    source: str = Proposal.Source.API,
    message: str = "",
    deployment: Deployment | None = None,
) -> Proposal:
    """A new proposal whose branch starts at `base` (main's tip when None; it must be on
    main) and holds `changes` (repository paths -> bytes, None to delete) as its first
    commit. Nothing is left behind when the save is refused (no row, no branch)."""
    title = _clean_title(title)
    description = _bounded(description, "description")
    if not changes:
        raise ProposalRefused("a proposal needs at least one changed file")
    if deployment is not None and deployment.project_id != project.pk:
        raise ProposalRefused(f"deployment {deployment.name} belongs to another project")
    repo = PackRepo(project.repo_path)
    try:
        base_sha = repo.resolve(base)
    except StorageError as exc:
        raise ProposalRefused(f"base: {exc}") from None
    if not branches.on_main(repo, base_sha):
        raise ProposalRefused(f"base {base_sha[:10]} is not on main; a proposal starts from a version of main")
    proposal = _new_row(project, user, title, description, base_sha, source, deployment)
    try:
        branches.open_branch(repo, proposal.branch, base_sha)
        head = repo.save(changes, base=base_sha, branch=proposal.branch, message=message or title, **_commit_by(user))
    except BaseException:
        _drop(repo, proposal)
        raise
    proposal.head = head
    proposal.save(update_fields=["head"])
    _event(proposal, user, K.OPENED, description)
    checks.start(proposal, user)
    return proposal


def _commit_by(user: User) -> dict[str, str]:
    author, email = _who(user)
    return {"author": author, "email": email}


def _new_row(
    project: Project,
    user: User,
    title: str,
    description: str,
    base: str,
    source: str,
    deployment: Deployment | None,
) -> Proposal:
    """The row with the project's next number; two opens at once take two numbers."""
    for _ in range(5):
        number = (Proposal.objects.filter(project=project).aggregate(n=Max("number"))["n"] or 0) + 1
        try:
            with transaction.atomic():
                return Proposal.objects.create(
                    project=project,
                    number=number,
                    title=title,
                    description=description[:MAX_BODY],
                    author=user,
                    source=source,
                    base=base,
                    head=base,
                    deployment=deployment,
                )
        except IntegrityError:
            continue
    raise ProposalRefused("too many proposals were opened at once; try again")


def _drop(repo: PackRepo, proposal: Proposal) -> None:
    """Undo a half-made open: the branch (if made) and the row."""
    with repo._locked():
        repo.repo.refs.remove_if_equals(branch_ref(proposal.branch), None)
    proposal.delete()


def update_proposal(
    proposal: Proposal, *, user: User, changes: Mapping[str, bytes | None], base: str, message: str
) -> str:
    """Save `changes` on the proposal's branch on top of `base` (its head as the client
    read it; StaleBase, a 409, when it moved). Earlier approvals stop counting."""
    _must_be_open(proposal)
    repo = PackRepo(proposal.project.repo_path)
    sha = repo.save(changes, base=base, branch=proposal.branch, message=message, **_commit_by(user))
    _moved(proposal, user, head=sha, base=proposal.base, message=message)
    return sha


def sync_proposal(proposal: Proposal, *, user: User, head: str, resolved: Mapping[str, bytes | None]) -> str:
    """Bring main into the proposal's branch (branches.sync), with `resolved` for the
    files both changed; its base becomes main's tip, so the merge is then a fast-forward."""
    _must_be_open(proposal)
    repo = PackRepo(proposal.project.repo_path)
    message = f"Bring main into proposal #{proposal.number}"
    new_head, new_base = branches.sync(
        repo, proposal.branch, base=proposal.base, head=head, resolved=resolved, message=message, **_commit_by(user)
    )
    _moved(proposal, user, head=new_head, base=new_base, message=message)
    return new_head


def _moved(proposal: Proposal, user: User, *, head: str, base: str, message: str) -> None:
    """The branch has a new head (and maybe base): the row follows, review starts over,
    the checks start again. A proposal merged or closed meanwhile stays as it is."""
    moved = Proposal.objects.filter(pk=proposal.pk, status__in=OPEN_STATES).update(
        head=head, base=base, status=S.OPEN, updated_at=timezone.now()
    )
    if not moved:
        proposal.refresh_from_db()
        raise ProposalRefused(
            f"proposal #{proposal.number} is {proposal.status}; the commit stays on its branch", status=409
        )
    proposal.head, proposal.base, proposal.status = head, base, S.OPEN
    _event(proposal, user, K.UPDATED, message)
    checks.start(proposal, user)


def _must_be_open(proposal: Proposal) -> None:
    if not proposal.is_open:
        raise ProposalRefused(f"proposal #{proposal.number} is {proposal.status}")


def comment(proposal: Proposal, *, user: User, body: str, path: str = "", line: int | None = None) -> None:
    body = _bounded(body.strip(), "comment")
    if not body:
        raise ProposalRefused("a comment needs text")
    if path and line is None:
        raise ProposalRefused("a comment on a file names its line")
    _bounded(path, "path")
    _event(proposal, user, K.COMMENT, body, path=path[:255], line=line)


def _latest_reviews_of(proposals: list[Proposal]) -> dict[int, dict[str, str]]:
    """Per proposal pk, each reviewer's latest review (approved or changes_requested) of
    its current head, by username; one query for any number of proposals."""
    heads = {p.pk: p.head for p in proposals}
    latest: dict[int, dict[str, str]] = {pk: {} for pk in heads}
    rows = ProposalEvent.objects.filter(proposal_id__in=heads, kind__in=(K.APPROVED, K.CHANGES_REQUESTED))
    for pk, head, username, kind in rows.order_by("at", "pk").values_list(
        "proposal_id", "head", "user__username", "kind"
    ):
        if head == heads[pk]:
            latest[pk][username] = kind
    return latest


def _latest_reviews(proposal: Proposal) -> dict[str, str]:
    return _latest_reviews_of([proposal])[proposal.pk]


def approvals(proposal: Proposal) -> list[str]:
    """Who approves the current head (an approval of an earlier head does not count)."""
    return approvals_of([proposal])[proposal.pk]


def approvals_of(proposals: list[Proposal]) -> dict[int, list[str]]:
    """`approvals` for many proposals in one query: proposal pk -> usernames."""
    return {
        pk: sorted(name for name, kind in reviews.items() if kind == K.APPROVED)
        for pk, reviews in _latest_reviews_of(proposals).items()
    }


def _status_after_review(proposal: Proposal) -> str:
    if K.CHANGES_REQUESTED in _latest_reviews(proposal).values():
        return S.CHANGES_REQUESTED
    if len(approvals(proposal)) >= proposal.project.approvals_required:
        return S.APPROVED
    return S.OPEN


def review(
    proposal: Proposal, *, user: User, role: Role, approve: bool, body: str = "", head: str | None = None
) -> None:
    """Approve the current head, or ask for changes to it. `head`: the head the reviewer
    read (the page and the API send it); refused when the proposal moved since."""
    _must_be_open(proposal)
    if role == Role.VIEWER:
        raise ProposalRefused("viewers read proposals; reviewers and authors review them", status=403)
    if (
        proposal.author_id == user.pk
        or ProposalEvent.objects.filter(proposal=proposal, user=user, kind__in=(K.OPENED, K.UPDATED)).exists()
    ):
        raise ProposalRefused("you wrote part of this proposal, so you cannot review it; ask a teammate", status=403)
    if head and head != proposal.head:
        raise ProposalRefused(
            f"the proposal moved to {proposal.head[:10]} since you read {head[:10]}; read it again", status=409
        )
    if not approve and not body.strip():
        raise ProposalRefused("say what should change")
    _bounded(body, "note")
    _event(proposal, user, K.APPROVED if approve else K.CHANGES_REQUESTED, body.strip())
    status = _status_after_review(proposal)
    Proposal.objects.filter(pk=proposal.pk, status__in=OPEN_STATES).update(status=status, updated_at=timezone.now())
    proposal.status = status


def merge_problems(proposal: Proposal) -> list[str]:
    """What stands between the proposal and a merge; [] when it may merge."""
    problems = []
    if not proposal.is_open:
        problems.append(f"proposal #{proposal.number} is {proposal.status}")
        return problems
    if proposal.head == proposal.base:
        problems.append("it changes nothing yet")
    if K.CHANGES_REQUESTED in _latest_reviews(proposal).values():
        problems.append("a reviewer asked for changes to this head")
    need, have = proposal.project.approvals_required, len(approvals(proposal))
    if have < need:
        problems.append(f"it has {have} approval(s) of its current head; the project needs {need}")
    if proposal.project.merge_needs_gate:
        verdict = checks.gate_verdict(proposal)
        if verdict is not True:
            problems.append(verdict or "its checks have not passed the gate")
    return problems


def merge_proposal(proposal: Proposal, *, user: User) -> branches.Merged:
    """Merge into main (branches.merge: fast-forward or merge commit, MergeConflict on a
    clash), then promote the deployments that follow main."""
    problems = merge_problems(proposal)
    if problems:
        raise ProposalRefused("cannot merge: " + "; ".join(problems), status=409)
    repo = PackRepo(proposal.project.repo_path)
    merged = branches.merge(
        repo,
        proposal.branch,
        base=proposal.base,
        head=proposal.head,
        message=f"Merge proposal #{proposal.number}: {proposal.title}",
        **_commit_by(user),
    )
    now = timezone.now()
    Proposal.objects.filter(pk=proposal.pk).update(
        status=S.MERGED, merged_sha=merged.sha, merged_by=user, updated_at=now
    )
    proposal.status, proposal.merged_sha, proposal.merged_by = S.MERGED, merged.sha, user
    Project.objects.filter(pk=proposal.project_id).update(head=repo.head() or "", updated_at=now)
    refused = promotion.follow_main(
        proposal.project, merged.sha, user=user, note=f"follows main: proposal #{proposal.number}"
    )
    _event(proposal, user, K.MERGED, "; ".join([merged.how, *refused]))
    return merged


def close(proposal: Proposal, *, user: User, body: str = "") -> None:
    """Close it unmerged. A review item whose case it proposed may be added to gold again."""
    _must_be_open(proposal)
    body = _bounded(body.strip(), "note")
    if not Proposal.objects.filter(pk=proposal.pk, status__in=OPEN_STATES).update(
        status=S.CLOSED, updated_at=timezone.now()
    ):
        proposal.refresh_from_db()
        raise ProposalRefused(f"proposal #{proposal.number} is {proposal.status}", status=409)
    proposal.status = S.CLOSED
    ReviewItem.objects.filter(project=proposal.project, gold_proposal=proposal.number).update(
        gold_commit="", gold_case="", gold_eval=None, gold_error="", gold_proposal=None
    )
    _event(proposal, user, K.CLOSED, body)


def reopen(proposal: Proposal, *, user: User) -> None:
    if proposal.status != S.CLOSED:
        raise ProposalRefused(f"proposal #{proposal.number} is {proposal.status}; only a closed one reopens")
    Proposal.objects.filter(pk=proposal.pk).update(status=S.OPEN, updated_at=timezone.now())
    proposal.status = S.OPEN
    _event(proposal, user, K.REOPENED)


def set_rules(project: Project, *, approvals_required: int | None, merge_needs_gate: bool | None) -> None:
    """Change what a merge needs in `project` (None: unchanged): 1 to MAX_APPROVALS approvals."""
    if approvals_required is not None:
        if not 1 <= approvals_required <= MAX_APPROVALS:
            raise ProposalRefused(f"approvals_required must be from 1 to {MAX_APPROVALS}, not {approvals_required}")
        project.approvals_required = approvals_required
    if merge_needs_gate is not None:
        project.merge_needs_gate = merge_needs_gate
    Project.objects.filter(pk=project.pk).update(
        approvals_required=project.approvals_required, merge_needs_gate=project.merge_needs_gate
    )
