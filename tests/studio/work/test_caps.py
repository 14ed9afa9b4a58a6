"""The studio's caps on a run (studio.work.caps): steps per run (PACKFORGE_MAX_STEPS): a
save whose manifest asks for more is refused naming the cap, and nothing is stored; a
pack saved before the cap is walked under it, and a run that reaches it says which cap.
Journal bytes per run, and steps per second (PACKFORGE_MAX_STEP_RATE) past a burst."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from runtime import StepPacer, load_pack
from studio.projects.models import Project, create_project
from studio.projects.storage import PackRepo, StorageError
from studio.runs import start, worker
from studio.work import caps
from studio.work.caps import CapReached, JournalBudget
from studio.work.models import JournalEntry
from tests.support.runtime_packs import write_pack

LOOP_GRAPH = {  # spins until a step bound stops it
    "nodes": {"spin": {"kind": "assert", "expr": "true"}, "done": {"kind": "end"}},
    "edges": [{"from": "spin", "to": "spin", "when": "true"}, {"from": "spin", "to": "done"}],
}


def _manifest(project: Project, **changes: Any) -> bytes:
    repo = PackRepo(project.repo_path)
    doc = yaml.safe_load(repo.files(None)["pack/manifest.yaml"])
    return yaml.safe_dump({**doc, **changes}, sort_keys=False).encode()


def test_a_save_asking_for_more_steps_than_the_cap_is_refused_and_stores_nothing(project: Project) -> None:
    repo = PackRepo(project.repo_path)
    head = repo.head()
    with pytest.raises(
        StorageError, match=r"max_steps 100000000 is above the studio's cap of 10000 .*PACKFORGE_MAX_STEPS"
    ):
        repo.save(
            {"pack/manifest.yaml": _manifest(project, max_steps=100_000_000)},
            base=head,
            author="a",
            email="a@x",
            message="m",
        )
    assert repo.head() == head
    assert repo.save(
        {"pack/manifest.yaml": _manifest(project, max_steps=10_000)}, base=head, author="a", email="a@x", message="m"
    )


def test_the_files_api_answers_400_naming_the_cap(project: Project, as_owner: Client) -> None:
    head = PackRepo(project.repo_path).head()
    answer = as_owner.put(
        "/api/projects/triage/files",
        {
            "base": head,
            "message": "more steps",
            "files": {"manifest.yaml": _manifest(project, max_steps=20_000).decode()},
        },
        content_type="application/json",
    )
    assert answer.status_code == 400, answer.content
    assert "PACKFORGE_MAX_STEPS" in answer.json()["detail"] and "10000" in answer.json()["detail"]
    assert PackRepo(project.repo_path).head() == head


def _loop(owner: User, max_steps: int) -> Project:
    manifest = {"name": "loop", "version": 1, "entry": "spin", "max_steps": max_steps, "model": "fake:fakes/none.json"}
    files = {
        "manifest.yaml": yaml.safe_dump(manifest).encode(),
        "graph.yaml": yaml.safe_dump(LOOP_GRAPH).encode(),
        "fakes/none.json": b'{"inputs": []}',  # no node asks a model
    }
    return create_project(slug="loop", name="Loop", owner=owner, pack_files=files, message="a loop")


def test_a_run_whose_journal_would_pass_the_byte_cap_fails_naming_it(owner: User, settings: Any) -> None:
    settings.PACKFORGE_MAX_JOURNAL_BYTES = 4_000
    loop = _loop(owner, 10_000)
    run = start.new_try_run(loop, user=owner, version=None, endpoint=None, input={"ticket": "x" * 500})
    assert worker.run_try(run.pk) == "failed"
    run.refresh_from_db()
    assert run.error.startswith(
        "the run's journal reached the studio's cap of 4000 bytes (PACKFORGE_MAX_JOURNAL_BYTES)"
    )
    written = JournalEntry.objects.filter(run_id=f"try-{run.pk}").values_list("payload", flat=True)
    assert 0 < sum(len(json.dumps(p)) for p in written) <= 4_000  # the entry that would pass it was not written


def test_a_taken_over_journal_counts_against_the_cap(settings: Any) -> None:
    settings.PACKFORGE_MAX_JOURNAL_BYTES = 100
    budget = JournalBudget()
    budget.took_over("r", [{"x": "y" * 80}])
    with pytest.raises(CapReached, match="PACKFORGE_MAX_JOURNAL_BYTES"):
        budget.charge("r", {"x": "y" * 20})
    budget.charge("other", {"x": "y" * 20})


def test_a_run_of_a_pack_saved_before_the_cap_stops_at_the_cap_and_says_so(
    project: Project, owner: User, settings: Any
) -> None:
    loop = _loop(owner, 5_000)
    settings.PACKFORGE_MAX_STEPS = 25  # the operator lowered the cap since it was saved
    run = start.new_try_run(loop, user=owner, version=None, endpoint=None, input={"ticket": "hi"})
    assert worker.run_try(run.pk) == "failed"
    run.refresh_from_db()
    assert "step bound reached (25 steps, the studio's cap, PACKFORGE_MAX_STEPS)" in run.error
    assert len(run.trace["steps"]) == 25


@pytest.mark.parametrize(
    ("every_s", "stale_s", "later_writes"),
    [
        (1e9, 1e9, 0),  # the clock never due: no write between the 50th step and the end
        (0.0, 1e9, 7),  # growth always allowed: at 63, 79, 99, 124, 155, 194 and 243 steps
        (1e9, 0.0, 250),  # always stale: every later step is written (a slow run's page moves)
    ],
)
def test_a_long_run_writes_its_trace_to_the_row_a_bounded_number_of_times(
    owner: User, settings: Any, monkeypatch: pytest.MonkeyPatch, every_s: float, stale_s: float, later_writes: int
) -> None:
    """Each step's write of the whole trace would cost the square of the steps: after the
    first 50 steps the row gets the trace once it has grown by a quarter, at most once
    per PUBLISH_EVERY_S (log(300/50)/log(1.25) times here, not once a second), or once it
    is STALE_S old; and the final trace when the run ends."""
    settings.PACKFORGE_MAX_STEPS = 300
    monkeypatch.setattr(worker._Publishing, "PUBLISH_EVERY_S", every_s)
    monkeypatch.setattr(worker._Publishing, "STALE_S", stale_s)
    run = start.new_try_run(_loop(owner, 300), user=owner, version=None, endpoint=None, input={"ticket": "hi"})
    with CaptureQueriesContext(connection) as queries:
        assert worker.run_try(run.pk) == "failed"
    updates = [q["sql"] for q in queries if q["sql"].startswith('UPDATE "runs_tryrun"') and '"trace"' in q["sql"]]
    assert len(updates) == 50 + later_writes + 1  # the first 50 steps, the growths, then the end
    run.refresh_from_db()
    assert len(run.trace["steps"]) == 300


def test_every_walk_gets_its_own_pacer_at_the_settings_rate(settings: Any, tmp_path: Path) -> None:
    settings.PACKFORGE_MAX_STEP_RATE = 40
    settings.PACKFORGE_STEP_BURST = 7
    pack = load_pack(write_pack(tmp_path / "p", nodes={"done": {"kind": "end"}}, edges=[], script={"nodes": {}}))
    first, second = caps.run_options(pack), caps.run_options(pack)
    assert first.pacer is not None and second.pacer is not None and first.pacer is not second.pacer
    assert (first.pacer.rate, first.pacer.burst) == (40.0, 7)


def test_a_looping_try_run_is_held_to_the_step_rate_past_its_burst(
    owner: User, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    loop = _loop(owner, 5_000)
    settings.PACKFORGE_MAX_STEPS = 25
    settings.PACKFORGE_STEP_BURST = 5
    settings.PACKFORGE_MAX_STEP_RATE = 10_000  # waits of a ten-thousandth of a second each: counted, not timed
    init, delay = StepPacer.__init__, StepPacer.delay
    held: list[float] = []

    def frozen(self: StepPacer, rate: float, burst: int, clock: Any = None) -> None:
        init(self, rate, burst, clock=lambda: 0.0)  # the bucket never refills: every step past the burst waits

    def counting(self: StepPacer) -> float:
        wait = delay(self)
        if wait > 0:
            held.append(wait)
        return wait

    monkeypatch.setattr(StepPacer, "__init__", frozen)
    monkeypatch.setattr(StepPacer, "delay", counting)
    run = start.new_try_run(loop, user=owner, version=None, endpoint=None, input={"ticket": "hi"})
    assert worker.run_try(run.pk) == "failed"
    assert len(held) == 25 - 5  # every step past the burst, and no other
