"""Whitespace inside JSON answers: what each grammar mode spends on layout.

Starts the cached `llama-server` (tests/support/model_servers.py; never builds it here)
on stories260K, asks the same constrained question CALLS times per arm at temperature
0 and 1, and counts completion tokens and whitespace characters outside strings per
answer. Arms: grammar=json_schema (the server's own converter), grammar=gbnf with
compact=false (one optional space between tokens), grammar=gbnf (compact, the default).

    PACKFORGE_BUILD_CACHE=/path/to/var/cache .venv/bin/python benchmarks/compact_grammar.py [--calls N]
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

from runtime.backends import open_backend
from runtime.backends.base import ModelCall

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support import model_servers
from tests.support.model_servers import llama_server_binary, spec, start_llama_server

# Closed fields only: every answer has the same content, so tokens differ by layout alone.
CLOSED: dict[str, Any] = {
    "type": "object",
    "properties": {
        "mood": {"enum": ["happy", "sad", "calm"]},
        "stars": {"type": "integer", "minimum": 1, "maximum": 5},
        "ending": {"type": "boolean"},
        "tags": {"type": "array", "items": {"enum": ["cat", "dog", "sun"]}, "maxItems": 3},
    },
    "required": ["mood", "stars", "ending", "tags"],
}
# With free strings: content varies too, so the token counts mix content and layout.
OPEN: dict[str, Any] = {
    "type": "object",
    "properties": {
        "title": {"type": "string", "maxLength": 24},
        "mood": {"enum": ["happy", "sad", "calm"]},
        "characters": {"type": "array", "items": {"type": "string", "maxLength": 12}, "maxItems": 3},
        "stars": {"type": "integer", "minimum": 1, "maximum": 5},
    },
    "required": ["title", "mood", "characters", "stars"],
}
ARMS = {
    "json_schema": "grammar=json_schema",
    "gbnf (spaces)": "grammar=gbnf;compact=false",
    "gbnf compact": "grammar=gbnf",
}


def layout_chars(text: str) -> int:
    """Whitespace characters outside JSON strings."""
    count, in_string, escaped = 0, False, False
    for ch in text:
        if in_string:
            escaped = not escaped and ch == "\\"
            in_string = escaped or ch != '"'
        elif ch == '"':
            in_string = True
        elif ch in " \t\r\n":
            count += 1
    return count


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--model", type=Path, default=model_servers.MODEL, help="a GGUF file (default stories260K)")
    args = parser.parse_args(argv)
    model_servers.MODEL = args.model  # what start_llama_server serves
    if not llama_server_binary().exists():
        print(f"no llama-server at {llama_server_binary()}; set PACKFORGE_BUILD_CACHE", file=sys.stderr)
        return 2
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        server = start_llama_server(Path(tmp), parallel=1)
        try:
            for (schema_name, schema), (arm, options) in itertools.product(
                (("closed", CLOSED), ("open", OPEN)), ARMS.items()
            ):
                backend = open_backend(spec(server, options + ";concurrency=1;deadline=1800;timeout=1800"))
                for temperature in (0.0, 1.0):
                    tokens, spaces, valid = [], [], 0
                    for i in range(args.calls):
                        call = ModelCall(
                            run_id=f"b{i}",
                            node="story",
                            attempt=1,
                            messages=[{"role": "user", "content": "Describe a story about a cat as JSON."}],
                            schema=schema,
                            max_tokens=200,
                            temperature=temperature,
                        )
                        reply = backend.complete(call)
                        tokens.append(reply.completion_tokens)
                        spaces.append(layout_chars(reply.text))
                        try:
                            json.loads(reply.text)
                            valid += 1
                        except json.JSONDecodeError:
                            pass
                    rows.append(
                        (schema_name, arm, temperature, statistics.mean(tokens), statistics.mean(spaces), valid)
                    )
                    print(*rows[-1], file=sys.stderr, flush=True)
                backend.close()
        finally:
            server.stop()
    print(f"model: {args.model.name}")
    print(f"{'schema':<8}{'arm':<16}{'temp':>6}{'tokens/answer':>15}{'layout ws/answer':>18}{'valid':>7}")
    for name, arm, temperature, tok, ws, valid in rows:
        print(f"{name:<8}{arm:<16}{temperature:>6.1f}{tok:>15.1f}{ws:>18.1f}{valid:>5}/{args.calls}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
