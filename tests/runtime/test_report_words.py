"""The eval report and the CLI's eval line name the no-answer tier as the studio does
("unanswered", runtime.TIER_WORDS); "failed" is left to cases whose answer was wrong."""

from __future__ import annotations

from pathlib import Path

from runtime import TIER_WORDS, evaluate, load_pack, load_tools, open_backend
from runtime.report import format_report

PACKS = Path(__file__).resolve().parents[2] / "packs"


def test_it_names_the_no_answer_tier_unanswered_in_the_report() -> None:
    pack = load_pack(PACKS / "refund_desk")
    tools = load_tools(f"{pack.root / 'tools.py'}:registry")
    report = evaluate(pack, open_backend(pack.model or "", base_dir=pack.root), tools=tools, concurrency=1)
    line = next(x for x in format_report(report).splitlines() if x.strip().startswith("tiers:"))
    assert f"unanswered {report.tiers()['failed']}" in line and "failed" not in line
    assert TIER_WORDS == {"auto": "auto", "escalated": "escalated", "failed": "unanswered"}
