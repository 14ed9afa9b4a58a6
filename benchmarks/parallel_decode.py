"""Do draws side by side save time on a CPU server? Three draws of one prompt on
SmolLM2-135M-Instruct (llama-server, -np 3, 2 threads), three ways:

  one after another   three requests, each waiting for the one before (what a quorum node
                      does today; the prompt is in the slot's cache after the first)
  one request, n=3    llama-server's n_cmpl: the prompt is read once, the three answers
                      are decoded in one batch
  three at once       three requests in flight together (continuous batching)

Every answer is exactly --tokens tokens (ignore_eos), so each way decodes the same work.
The table gives the median seconds over --repeat rounds and the ratio to one draw alone.
This is the measurement behind docs/pack-format.md's "Quorum draws": on this machine the
cores are busy with one sequence, so batching buys little and a draw not made is what saves
time.

    .venv/bin/python benchmarks/parallel_decode.py [--tokens 64] [--repeat 5] [--url http://127.0.0.1:PORT/v1]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._rows import write_rows

RESULTS = Path(__file__).resolve().parent / "results" / "parallel_decode.jsonl"
PROMPT = "Write a short story about a lighthouse keeper and a storm."


def _ask(client: httpx.Client, url: str, tokens: int, n: int) -> int:
    body: dict[str, Any] = {
        "messages": [{"role": "user", "content": PROMPT}],
        "max_tokens": tokens,
        "temperature": 0.8,
        "ignore_eos": True,
        "n": n,
        "cache_prompt": True,
    }
    answer = client.post(url + "/chat/completions", json=body, timeout=300)
    answer.raise_for_status()
    return len(answer.json()["choices"])


def one_round(client: httpx.Client, url: str, tokens: int) -> dict[str, float]:
    timed: dict[str, float] = {}
    started = time.perf_counter()
    _ask(client, url, tokens, 1)
    timed["one draw"] = time.perf_counter() - started
    started = time.perf_counter()
    for _ in range(3):
        _ask(client, url, tokens, 1)
    timed["one after another"] = time.perf_counter() - started
    started = time.perf_counter()
    assert _ask(client, url, tokens, 3) == 3, "the server answered n=3 with fewer choices"
    timed["one request, n=3"] = time.perf_counter() - started
    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=3) as pool:
        list(pool.map(lambda _: _ask(client, url, tokens, 1), range(3)))
    timed["three at once"] = time.perf_counter() - started
    return timed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--url", default=None, help="a running llama-server (…/v1) with at least 3 slots")
    args = parser.parse_args(argv)
    server = None
    url = args.url
    if url is None:
        from tests.support import model_servers

        log_dir = Path(tempfile.mkdtemp(prefix="parallel-decode-"))
        server = model_servers.start_llama_server(
            log_dir, 3, 6144, model=model_servers.smollm2_model(), name="llama-server-smollm2", threads=2
        )
        url = server.base_url
    rounds: list[dict[str, float]] = []
    try:
        with httpx.Client() as client:
            _ask(client, url, 8, 1)  # warm: the model's first batch is slower
            for _ in range(args.repeat):
                rounds.append(one_round(client, url, args.tokens))
    finally:
        if server is not None:
            server.stop()
    alone = statistics.median(r["one draw"] for r in rounds)
    print(f"\nthree draws of {args.tokens} tokens, median of {args.repeat} rounds (one draw alone: {alone:.2f} s)")
    print(f"  {'way':<20} {'seconds':>8} {'x one draw':>11}")
    for way in ("one after another", "one request, n=3", "three at once"):
        median = statistics.median(r[way] for r in rounds)
        print(f"  {way:<20} {median:8.2f} {median / alone:11.2f}")
    write_rows(RESULTS, [{"bench": "parallel_decode", "tokens": args.tokens, **r} for r in rounds])
    print(f"raw rows in {RESULTS.relative_to(Path(__file__).resolve().parent.parent)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
