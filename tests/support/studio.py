"""Studio test helpers shared across test modules: personas and their clients, API calls
with a token, a project's head, evals started and run in this process."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.contrib.auth.models import User
from django.test import Client

from studio.accounts.models import ApiToken
from studio.endpoints.models import Endpoint
from studio.evals import worker
from studio.evals.models import Eval, EvalCase
from studio.evals.start import start_eval
from studio.projects.models import Project
from studio.projects.storage import PackRepo

PASSWORD = "correct horse battery staple"


# A try-it run's rejected model text: shown to authors only.
REJECTED_TEXT = "I think this one is about billing, honestly"


def make_user(name: str, **extra: Any) -> User:
    return User.objects.create_user(name, f"{name}@example.com", PASSWORD, **extra)


def make_colleague(name: str, of: User) -> User:
    """A user who shares a project with `of` (a viewer of `of`'s project "<name>-side"), so
    `of`, as an author, may add them to another project (studio.accounts.members.addable_user)."""
    from studio.accounts.models import Membership, Role

    user = make_user(name)
    side = Project.objects.create(slug=f"{name}-side", name="Side", created_by=of)
    Membership.objects.create(user=of, project=side, role=Role.AUTHOR)
    Membership.objects.create(user=user, project=side, role=Role.VIEWER)
    return user


def client_for(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def bearer(user: User) -> Client:
    """A client that authenticates with a fresh API token, like the CLI and CI do."""
    _, token = ApiToken.issue(user, "test")
    return Client(headers={"Authorization": f"Bearer {token}"})


def send(client: Client, method: str, url: str, body: Any = None) -> Any:
    return getattr(client, method)(url, body, content_type="application/json")


def head_of(project: Project) -> str:
    head = PackRepo(project.repo_path).head()
    assert head is not None
    return head


def scripted_endpoint(tmp_path: Path, owner: User, script: dict[str, Any], name: str = "scripted") -> Endpoint:
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(script))
    return Endpoint.objects.create(name=name, spec=f"fake:{path}", created_by=owner, concurrency=2)


def start(project: Project, user: User, **options: Any) -> Eval:
    evals = start_eval(project, user=user, **options)
    return evals[0]


def run_all(ev: Eval) -> list[str | None]:
    """Deliver every case of `ev` once, in this process."""
    return [
        worker.run_eval_case(pk) for pk in EvalCase.objects.filter(eval=ev).order_by("pk").values_list("pk", flat=True)
    ]


# -- project pages: the htmx header, a file's text, a teammate's save behind the page's back --

HTMX = {"HX-Request": "true"}


def pack_text(repo: PackRepo, path: str, version: str | None = None) -> str:
    return repo.files(version, prefix="pack/")[path].decode()


def teammate_saves(repo: PackRepo, path: str, text: str, message: str = "Teammate's change") -> str:
    return repo.save(
        {f"pack/{path}": text.encode()},
        base=repo.head(),
        author="Tess Teammate",
        email="tess@example.com",
        message=message,
    )


# A support_triage evalset case's input (st-01): the pack's own scripted model answers it.
CHARGED_TWICE = {
    "ticket": "Hi, I was charged TWICE for order ORD-48213 ($59.98 each time). I want one of the charges "
    "reversed today or I'm disputing it with my bank."
}


def approve_and_merge(number: int, author: Client, reviewer: Client, slug: str = "triage") -> Any:
    """A proposal through review: a teammate approves it, its author merges it; the merge's answer."""
    url = f"/api/projects/{slug}/proposals/{number}"
    approved = send(reviewer, "post", f"{url}/approve", {})
    assert approved.status_code == 200, approved.content
    merged = send(author, "post", f"{url}/merge")
    assert merged.status_code == 200, merged.content
    return merged.json()
