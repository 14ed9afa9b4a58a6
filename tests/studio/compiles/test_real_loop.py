"""The compile worker with the real loop (compiler.loop.build), in this process: a recorded
planner endpoint (staff-configured; plan documents replayed, no network) compiles the
example spec, the attempt is adopted, and an eval of the adopted version on the pack's
own model (the offline test model the compiler put in it) passes every gold case.

With a target endpoint (a `fake:` script standing in for the target model: it answers
the plan's nodes for the gold cases, and nothing else), the loop judges the plan on it:
the judged pack is kept in the compile's row, and adopting it commits a pack whose model
is the target, never the offline test model. An adoption is a proposal (docs/proposals.md),
evaluated here at its head."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from django.conf import settings
from django.contrib.auth.models import User

from compiler import load_spec, offline_script, parse_plan
from studio.compiles import worker
from studio.compiles.models import CompileAttempt
from studio.compiles.start import adopt_attempt, adopt_judged, start_compile
from studio.endpoints.models import Endpoint
from studio.evals.models import EvalCase
from studio.projects.models import Project
from studio.projects.storage import PackRepo
from tests.support.studio import run_all, start

PLANS = Path(settings.BASE_DIR) / "specs" / "support_triage" / "plans"


def recorded_planner(staff: User, tmp_path: Path) -> Endpoint:
    recorded = tmp_path / "plans"
    recorded.mkdir()
    (recorded / "1.json").write_text((PLANS / "1.json").read_text())
    return Endpoint.objects.create(name="recorded", spec=f"recorded:{recorded}", created_by=staff)


def target_endpoint(staff: User, tmp_path: Path) -> Endpoint:
    """A `fake:` target answering the recorded plan's nodes right for each gold case (by
    case id; a scripted model answers only the cases it has)."""
    spec = load_spec(PLANS.parent)
    script = offline_script(parse_plan(json.loads((PLANS / "1.json").read_text()), spec), spec)
    path = tmp_path / "target.json"
    path.write_text(json.dumps({"cases": script["cases"]}))
    return Endpoint.objects.create(name="target", spec=f"fake:{path}", created_by=staff)


def test_it_compiles_adopts_and_evaluates_the_new_version(
    project: Project, owner: User, staff: User, tmp_path: Path
) -> None:
    good = json.loads((PLANS / "1.json").read_text())
    c = start_compile(project, user=owner, planner=recorded_planner(staff, tmp_path))

    assert worker.run_compile(c.pk) == "done"

    c.refresh_from_db()
    assert (c.status, c.best_attempt, c.full_marks, c.offline_score) == ("done", 1, True, 1.0), c.error
    attempt = CompileAttempt.objects.get(compile=c, number=1)
    assert attempt.status == "ok" and attempt.pack_files is not None
    assert attempt.pack_files["evalset.jsonl"] == (PLANS.parent / "gold.jsonl").read_text()  # gold, byte for byte
    assert attempt.evals["offline"]["passed"] == attempt.evals["offline"]["total"] == 15
    assert attempt.plan == good

    sha = adopt_attempt(attempt, user=owner).head  # a proposal's head (docs/proposals.md)

    repo = PackRepo(project.repo_path)
    assert repo.head("proposals/1") == sha
    assert repo.files(sha, prefix="pack/")["evalset.jsonl"] == (PLANS.parent / "gold.jsonl").read_bytes()  # invariant 6
    ev = start(project, owner, version=sha)
    assert set(run_all(ev)) == {"passed"}
    assert EvalCase.objects.filter(eval=ev, status="passed").count() == 15


def test_it_keeps_the_pack_judged_on_the_target_and_adopts_it_on_the_target(
    project: Project, owner: User, staff: User, tmp_path: Path
) -> None:
    target = target_endpoint(staff, tmp_path)
    c = start_compile(project, user=owner, planner=recorded_planner(staff, tmp_path), target=target)

    assert worker.run_compile(c.pk) == "done"

    c.refresh_from_db()
    assert c.status == "done" and c.judged_pack_files is not None, (c.error, c.judged_sentence)
    assert (c.judged_arm, c.judged_model) == ("pack", target.spec)
    assert c.judged_sentence.startswith("the pack wins on validation")
    manifest = yaml.safe_load(c.judged_pack_files["manifest.yaml"])
    assert manifest["model"] == target.spec and manifest["model"] != "fake:fakes/offline.json"
    attempt = CompileAttempt.objects.get(compile=c, number=1)
    assert attempt.pack_files is not None
    assert yaml.safe_load(attempt.pack_files["manifest.yaml"])["model"] == "fake:fakes/offline.json"

    sha = adopt_judged(c, user=owner).head

    repo = PackRepo(project.repo_path)
    adopted = repo.files(sha, prefix="pack/")
    assert {p: d.decode() for p, d in adopted.items()} == c.judged_pack_files
    assert yaml.safe_load(adopted["manifest.yaml"])["model"] == target.spec
    assert "fakes/offline.json" in adopted  # the offline test model rides along, for structure tests only
