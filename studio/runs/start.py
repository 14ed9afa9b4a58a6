"""Starting a try-it run, in the web process: `prepare` checks everything that can be
known before a run is queued (studio.packs: the version exists, the pack at that version
loads, its tools can be served, there is a model to ask); `new_try_run` saves the queued
run (worker.py walks it).

Tools: a pack that names tools runs only when the studio has a tool registry
(`PACKFORGE_TOOLS=MODULE:REGISTRY` or `path/to/tools.py:REGISTRY`, the CLI's `--tools`
syntax); the pack is then loaded against that registry, so it reaches only the tools
the host registered (docs/invariants.md)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import User

from runtime import Pack
from studio import packs
from studio.endpoints.backends import spec_for
from studio.endpoints.models import Endpoint
from studio.errors import Refused
from studio.projects.models import Project
from studio.runs.models import TryRun


class TryRefused(Refused):
    """The run cannot start; the message says why and what to do."""


@dataclass
class Prepared:
    sha: str
    pack: Pack
    problem: str | None  # why it cannot be tried (tools, no model), or None
    case_keyed: bool = False  # the pack's own model is a script that answers per evalset case id


def scripted_by_case(pack: Pack) -> bool:
    """Whether the pack's own model is a scripted one (`fake:FILE`) whose answers are
    keyed by evalset case id: it has no answer for any other input (the run fails, saying
    so), so a try-it run is worth starting from an evalset case (see `case_for_input`)."""
    spec = pack.model or ""
    if not spec.startswith("fake:"):
        return False
    root = pack.root.resolve()
    script = (root / spec.removeprefix("fake:")).resolve()
    if not script.is_relative_to(root):  # the runtime refuses it too; nothing to read here
        return False
    try:
        data = json.loads(script.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and bool(data.get("cases"))


def case_for_input(pack: Pack, input: object) -> str | None:
    """The id of the evalset case whose input this is, exactly; the run is walked as that
    case, so a scripted model keyed by case id answers as it does in an eval."""
    return next((case.id for case in pack.cases if dict(case.input) == input), None)


def prepare(project: Project, version: str | None, endpoint: Endpoint | None) -> Prepared:
    """Resolve `version` and load the pack at it; `problem` says why it cannot be tried.
    Raises TryRefused when the version does not exist or the pack does not load."""
    try:
        with packs.loaded(project, version, own_model=endpoint is None) as got:
            return Prepared(
                got.sha,
                got.pack,
                "; ".join(got.problems) or None,
                case_keyed=endpoint is None and scripted_by_case(got.pack),
            )
    except packs.PackUnrunnable as exc:
        raise TryRefused(str(exc)) from None


def first_case_input(pack: Pack) -> dict[str, Any] | None:
    return dict(pack.cases[0].input) if pack.cases else None


def new_try_run(
    project: Project, *, user: User, version: str | None, endpoint: Endpoint | None, input: object
) -> TryRun:
    """Check and save a queued TryRun; the caller enqueues it (on commit)."""
    if not isinstance(input, dict):
        raise TryRefused('the input must be a JSON object, e.g. {"ticket": "..."}')
    prepared = prepare(project, version, endpoint)
    if prepared.problem:
        raise TryRefused(prepared.problem)
    model_spec = spec_for(endpoint) if endpoint is not None else (prepared.pack.model or "")
    return TryRun.objects.create(
        project=project, version=prepared.sha, endpoint=endpoint, input=input, model_spec=model_spec, created_by=user
    )
