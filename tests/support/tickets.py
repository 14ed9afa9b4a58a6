"""A small two-field classification spec (topic, urgency) and a prompt-sensitive target
for the compile-against-the-target tests (tests/compiler/test_judge.py, test_verdict.py):
the target is right on a case only when the request it is sent passes a rule (no few-shot
turns, a grammar of one field), else it answers the most frequent value of each field."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

TOPICS = ("billing", "shipping", "account")
URGENCY = ("high", "low")
CASE_ID = re.compile(r"ticket-(\d{3})")


def gold_cases(n: int = 48) -> list[dict[str, Any]]:
    cases = []
    for i in range(n):
        topic = TOPICS[0] if i % 5 < 3 else TOPICS[1 + i % 2]  # billing is the most frequent
        urgency = URGENCY[i % 2]
        text = f"ticket-{i:03d}: a customer writes about {topic} matters, {urgency} urgency, word{i}"
        cases.append({"id": f"c{i:03d}", "input": {"message": text}, "expected": {"topic": topic, "urgency": urgency}})
    return cases


def write_spec(root: Path, cases: list[dict[str, Any]], extra: str = "") -> Path:
    root.mkdir(parents=True)
    (root / "spec.yaml").write_text(
        "name: tickets\n"
        "task: Classify one support ticket by its topic and its urgency.\n"
        "inputs:\n  message: {description: The ticket text.}\n"
        "outputs:\n"
        "  topic: {description: What the ticket is about., values: [billing, shipping, account]}\n"
        "  urgency: {description: How urgent it is., values: [high, low]}\n" + extra
    )
    (root / "gold.jsonl").write_text("".join(json.dumps(c) + "\n" for c in cases))
    return root


class Target:
    """The answers a prompt-sensitive target gives: right on a case when `rule` says so
    for the request it was sent, else the most frequent value of each field."""

    def __init__(self, cases: list[dict[str, Any]], rule: Callable[[dict[str, Any]], bool]) -> None:
        self.gold = {int(c["id"][1:]): c["expected"] for c in cases}
        self.rule = rule
        self.requests: list[dict[str, Any]] = []

    def __call__(self, body: dict[str, Any]) -> str:
        self.requests.append(body)
        props = list(((request_schema(body) or {}).get("properties") or {}).keys())
        asked = asked_case(body)
        expected = self.gold[asked] if asked is not None else {}
        right = self.rule(body)
        answer = {}
        for name in props:
            wrong = "billing" if name == "topic" else "high"
            answer[name] = expected.get(name, wrong) if right else wrong
        return json.dumps(answer)


def request_index(body: dict[str, Any], pattern: re.Pattern[str] = CASE_ID) -> int | None:
    """The index of the message that asks about the case: the last user message naming
    one (with `two_stage`, the reasoning turns come after it; examples come before it)."""
    for i in range(len(body["messages"]) - 1, -1, -1):
        m = body["messages"][i]
        if m["role"] == "user" and pattern.search(str(m["content"])):
            return i
    return None


def asked_case(body: dict[str, Any], pattern: re.Pattern[str] = CASE_ID) -> int | None:
    """The number of the case a request asks about (None: it names none)."""
    i = request_index(body, pattern)
    return None if i is None else int(pattern.findall(str(body["messages"][i]["content"]))[-1])


def request_schema(body: dict[str, Any]) -> dict[str, Any] | None:
    fmt = body.get("response_format") or {}
    return (fmt.get("json_schema") or {}).get("schema") or fmt.get("schema")


def no_examples(body: dict[str, Any]) -> bool:
    """Right only when the request carries no few-shot turns (before the case's message)."""
    i = request_index(body)
    return not any(m["role"] == "assistant" for m in body["messages"][: i if i is not None else len(body["messages"])])


def one_field(body: dict[str, Any]) -> bool:
    """Right only on a narrow step (a grammar of one field) with no few-shot turns."""
    return no_examples(body) and len((request_schema(body) or {}).get("properties") or {}) == 1
