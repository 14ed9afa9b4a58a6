"""The compile worker with the real loop (compiler.loop.build), in this process: a recorded
planner endpoint (staff-configured; plan documents replayed, no network) compiles the
example spec, the attempt is adopted, and an eval of the adopted version on the pack's
own model (the offline test model the compiler put in it) passes every gold case."""

from __future__ import annotations

import json
from pathlib import Path

from django.conf import settings
from django.contrib.auth.models import User

from studio.compiles import worker
from studio.compiles.models import CompileAttempt
from studio.compiles.start import adopt_attempt, start_compile
from studio.endpoints.models import Endpoint
from studio.evals.models import EvalCase
from studio.projects.models import Project
from studio.projects.storage import PackRepo
from tests.support.studio import run_all, start

PLANS = Path(settings.BASE_DIR) / "specs" / "support_triage" / "plans"


def test_it_compiles_adopts_and_evaluates_the_new_version(
    project: Project, owner: User, staff: User, tmp_path: Path
) -> None:
    good = json.loads((PLANS / "1.json").read_text())
    recorded = tmp_path / "plans"
    recorded.mkdir()
    (recorded / "1.json").write_text(json.dumps(good))
    planner = Endpoint.objects.create(name="recorded", spec=f"recorded:{recorded}", created_by=staff)
    c = start_compile(project, user=owner, planner=planner)

    assert worker.run_compile(c.pk) == "done"

    c.refresh_from_db()
    assert (c.status, c.best_attempt, c.full_marks, c.offline_score) == ("done", 1, True, 1.0), c.error
    attempt = CompileAttempt.objects.get(compile=c, number=1)
    assert attempt.status == "ok" and attempt.pack_files is not None
    assert attempt.pack_files["evalset.jsonl"] == (PLANS.parent / "gold.jsonl").read_text()  # gold, byte for byte
    assert attempt.evals["offline"]["passed"] == attempt.evals["offline"]["total"] == 15
    assert attempt.plan == good

    sha = adopt_attempt(attempt, user=owner)

    repo = PackRepo(project.repo_path)
    assert repo.head() == sha
    assert repo.files(sha, prefix="pack/")["evalset.jsonl"] == (PLANS.parent / "gold.jsonl").read_bytes()  # invariant 6
    ev = start(project, owner, version=sha)
    assert set(run_all(ev)) == {"passed"}
    assert EvalCase.objects.filter(eval=ev, status="passed").count() == 15
