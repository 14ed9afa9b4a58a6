"""The database checkpoint store behaves like the runtime's own stores."""

from __future__ import annotations

import pytest

from runtime import load_pack, open_backend, resume_run, run_pack
from runtime.errors import FencedOut, RunStateError
from runtime.walker import RunOptions
from studio.evals.store import DatabaseStore
from tests.runtime.test_packs import PACKS


class Killed(Exception):
    pass


@pytest.mark.django_db
def test_it_refuses_a_write_from_a_fenced_out_worker() -> None:
    store = DatabaseStore()
    old = store.begin("r1", pack="p", digest="d", input={}, case_id="c")
    new, record, journal = store.take_over("r1")
    assert (new, record.case_id, journal) == (old + 1, "c", [])
    with pytest.raises(FencedOut):
        store.append("r1", old, "step", "a", 1, {})
    with pytest.raises(FencedOut):
        store.set_status("r1", old, "done")
    store.append("r1", new, "step", "a", 1, {"x": 1})
    assert [e.payload for e in store.take_over("r1")[2]] == [{"x": 1}]
    with pytest.raises(RunStateError):
        store.begin("r1", pack="p", digest="d", input={}, case_id=None)


@pytest.mark.django_db
def test_a_killed_run_resumes_from_the_database_without_repeating_calls() -> None:
    pack = load_pack(PACKS / "support_triage")
    case = pack.cases[0]
    store = DatabaseStore()

    def die_after_first_step(step: object) -> None:
        raise Killed()

    with pytest.raises(Killed):
        run_pack(
            pack,
            case.input,
            backend=open_backend(pack.model or "", base_dir=pack.root),
            store=store,
            run_id="c1",
            case_id=case.id,
            options=RunOptions(on_step=die_after_first_step),
        )
    result = resume_run(pack, "c1", backend=open_backend(pack.model or "", base_dir=pack.root), store=store)
    assert result.status == "done"
    assert result.trace.steps[0].replayed and not result.trace.steps[1].replayed
    assert all(result.state[k] == v for k, v in case.expected.items())
    assert store.get("c1").status == "done"
