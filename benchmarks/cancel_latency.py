"""How long a cancelled model call takes to give up: the latency the endpoint tests used to
bound with wall-clock asserts, measured here instead (tests assert what the server saw).

Two cases against the tests' loopback fault server, each --runs times:
  retry_wait   the server answered 503 with Retry-After 30; cancel 0.2 s later, while the
               backend waits to retry
  mid_stream   a slow stream (about 2 s); cancel 0.3 s in

Prints seconds from cancel to the Cancelled error (p50, p95, max) beside what the wait or
the stream would have taken uncancelled. Raw rows: benchmarks/results/cancel_latency.jsonl.

    .venv/bin/python benchmarks/cancel_latency.py [--runs 20]
"""

from __future__ import annotations

import argparse
import copy
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._rows import write_rows
from runtime import Cancelled, ModelCall, open_backend, percentile
from tests.support.fault_server import FaultServer

RESULTS = Path(__file__).resolve().parent / "results" / "cancel_latency.jsonl"
CASES = {
    # name: (fault server configuration, seconds before cancel, uncancelled seconds)
    "retry_wait": ({"script": ["503"], "retry_after": "30"}, 0.2, 30.0),
    "mid_stream": ({"answer": "x" * 400, "token_delay": 0.02}, 0.3, 2.0),
}


def one(case: str) -> float:
    faults, after, _ = CASES[case]
    with FaultServer() as fault:
        fault.configure(**copy.deepcopy(faults))  # the server pops its script as it serves
        backend = open_backend(fault.spec())
        cancel = threading.Event()
        cancelled_at: list[float] = []

        def fire() -> None:
            cancelled_at.append(time.monotonic())
            cancel.set()

        threading.Timer(after, fire).start()
        call = ModelCall("bench", "rate", 1, [{"role": "user", "content": "Rate."}], None, cancel=cancel)
        try:
            backend.complete(call)
        except Cancelled:
            return time.monotonic() - cancelled_at[0]
        finally:
            backend.close()
    raise RuntimeError(f"{case}: the call finished instead of being cancelled")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args(argv)
    rows: list[dict[str, Any]] = []
    print(f"{'case':<11} {'runs':>5} {'p50 s':>8} {'p95 s':>8} {'max s':>8} {'uncancelled s':>14}")
    for case, (_, _, uncancelled) in CASES.items():
        took = [one(case) for _ in range(args.runs)]
        rows += [{"case": case, "run": i, "cancel_to_error_s": round(s, 4)} for i, s in enumerate(took)]
        print(
            f"{case:<11} {len(took):>5} {percentile(took, 50):8.3f} {percentile(took, 95):8.3f} "
            f"{max(took):8.3f} {uncancelled:14.1f}"
        )
    write_rows(RESULTS, rows)
    print(f"raw rows: {RESULTS}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
