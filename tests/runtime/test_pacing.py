"""A run's step rate (runtime.pacing.StepPacer, RunOptions.pacer): a burst goes through
at once, then steps are held to the rate; a paced run still cancels."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from runtime import RunOptions, StepPacer, load_pack, run_pack
from tests.support.runtime_packs import backend_for, write_pack


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_burst_goes_through_then_steps_wait_for_the_rate() -> None:
    clock = Clock()
    pacer = StepPacer(rate=10, burst=3, clock=clock)
    assert [pacer.delay() for _ in range(3)] == [0.0, 0.0, 0.0]
    assert pacer.delay() == pytest.approx(0.1)  # the 4th step waits a tenth of a second
    assert pacer.delay() == pytest.approx(0.2)  # the 5th, queued behind it, two tenths
    clock.now += 10.0  # idle long enough to refill the bucket, but never past its burst
    assert [pacer.delay() for _ in range(3)] == [0.0, 0.0, 0.0]
    assert pacer.delay() == pytest.approx(0.1)


def test_a_rate_or_burst_that_cannot_hold_is_refused() -> None:
    with pytest.raises(ValueError, match="above 0"):
        StepPacer(rate=0, burst=5)
    with pytest.raises(ValueError, match="burst at least 1"):
        StepPacer(rate=5, burst=0)


def test_a_held_step_wakes_as_soon_as_its_run_is_cancelled() -> None:
    """The real hold: a step that would wait 100 s returns True once the event is set."""
    pacer = StepPacer(rate=0.01, burst=1)
    pacer.delay()  # the burst is spent: the next step waits 100 s
    cancel = threading.Event()
    timer = threading.Timer(0.05, cancel.set)
    timer.start()
    try:
        assert pacer.hold(cancel) is True
    finally:
        timer.cancel()


class Recording(StepPacer):
    """Records each wait instead of sleeping; `cancel_after` holds: the run is cancelled."""

    def __init__(self, rate: float, burst: int, cancel_after: int | None = None) -> None:
        self.clock = Clock()
        super().__init__(rate, burst, clock=self.clock)
        self.waits: list[float] = []
        self.cancel_after = cancel_after

    def hold(self, cancel: threading.Event | None) -> bool:
        wait = self.delay()
        if wait > 0:
            self.waits.append(wait)
        return self.cancel_after is not None and len(self.waits) >= self.cancel_after


def _loop_pack(tmp_path: Path, max_steps: int) -> Path:
    return write_pack(
        tmp_path / "p",
        manifest={"max_steps": max_steps},
        nodes={"spin": {"kind": "assert", "expr": "true"}, "done": {"kind": "end"}},
        edges=[{"from": "spin", "to": "spin", "when": "true"}, {"from": "spin", "to": "done"}],
        script={"nodes": {}},
    )


def test_the_walker_holds_every_step_past_the_burst(tmp_path: Path) -> None:
    root = _loop_pack(tmp_path, 30)
    pacer = Recording(rate=50, burst=10)
    result = run_pack(load_pack(root), {}, backend=backend_for(root), options=RunOptions(pacer=pacer))
    assert result.status == "failed" and len(result.trace.steps) == 30
    assert len(pacer.waits) == 20  # one wait per step after the first 10 (the clock never moves)
    assert pacer.waits[-1] == pytest.approx(20 / 50)


def test_a_run_cancelled_while_held_ends_cancelled(tmp_path: Path) -> None:
    root = _loop_pack(tmp_path, 30)
    result = run_pack(
        load_pack(root), {}, backend=backend_for(root), options=RunOptions(pacer=Recording(50, 5, cancel_after=1))
    )
    assert result.status == "cancelled"
    assert len(result.trace.steps) == 5
