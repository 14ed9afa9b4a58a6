"""Credentials are redacted at the formatter; rejected text stays at DEBUG."""

from __future__ import annotations

import io
import json
import logging
from pathlib import Path

import pytest

from runtime.logs import JsonFormatter, TextFormatter, configure_logging, redact, register_secret
from tests.support.runtime_packs import ENUM_SCHEMA, pf, write_pack

KEY = "sk-live-4f9a8b7c6d5e4f3a2b1c"


def leaky_pack(tmp_path: Path) -> Path:
    return write_pack(
        tmp_path / "p",
        nodes={
            "classify": {"kind": "generate", "reads": ["input.ticket"], "writes": ["category"]},
            "done": {"kind": "end"},
        },
        edges=[{"from": "classify", "to": "done"}],
        grammars={"classify": ENUM_SCHEMA},
        script={"nodes": {"classify": [f"REJECTED-MARKER {KEY}", {"category": "billing"}]}},
    )


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_it_never_prints_a_key_from_the_environment(tmp_path: Path, fmt: str) -> None:
    out = pf(
        "--log-level",
        "debug",
        "--log-format",
        fmt,
        "run",
        str(leaky_pack(tmp_path)),
        "--input",
        json.dumps({"ticket": f"my key is {KEY}"}),
        "--trace",
        str(tmp_path / "t.json"),
        env={"PROVIDER_API_KEY": KEY},
    )
    assert out.returncode == 0, out.stderr
    assert "REJECTED-MARKER" in out.stderr  # the debug line was written ...
    assert KEY not in out.stderr  # ... with the key redacted
    assert "[REDACTED]" in out.stderr


def test_it_keeps_rejected_text_out_of_logs_above_debug(tmp_path: Path) -> None:
    out = pf("--log-level", "info", "run", str(leaky_pack(tmp_path)), "--input", '{"ticket": "x"}')
    assert out.returncode == 0
    assert "node.rejected" in out.stderr
    assert "REJECTED-MARKER" not in out.stderr


@pytest.mark.parametrize("formatter", [TextFormatter(), JsonFormatter()])
def test_it_redacts_every_path_into_a_record(formatter: logging.Formatter) -> None:
    secret = "registered-secret-value-123"
    register_secret(secret)
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(formatter)
    logger = logging.getLogger("packforge.test.redact")
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    try:
        logger.info("message %s", secret)
        logger.info("fields", extra={"fields": {"header": f"Authorization: Bearer {secret}", "k": KEY}})
        try:
            raise RuntimeError(f"failed with api_key={secret}")
        except RuntimeError:
            logger.exception("boom")
    finally:
        logger.removeHandler(handler)
    text = stream.getvalue()
    assert secret not in text and KEY not in text
    assert text.count("[REDACTED]") >= 4


def test_redact_masks_bearer_tokens_and_key_assignments() -> None:
    assert redact("Authorization: Bearer abc.def-123456") == "Authorization: Bearer [REDACTED]"
    assert redact('{"api_key": "zzzz9999"}') == '{"api_key": "[REDACTED]"}'
    assert redact("nothing to hide") == "nothing to hide"


def test_configure_logging_refuses_an_unknown_format() -> None:
    with pytest.raises(ValueError):
        configure_logging("info", "xml")


def test_it_redacts_every_string_of_stored_data() -> None:
    from runtime import redact_data

    register_secret("pk-stored-0123456789")
    data = {
        "answer": "you sent Bearer pk-stored-0123456789",
        "n": 3,
        "ok": True,
        "steps": [{"pk-stored-0123456789": None}],
    }
    assert redact_data(data) == {
        "answer": "you sent Bearer [REDACTED]",
        "n": 3,
        "ok": True,
        "steps": [{"[REDACTED]": None}],
    }
