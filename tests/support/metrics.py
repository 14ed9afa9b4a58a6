"""Reading GET /metrics in tests: a scrape as {family sample name: {labels: value}}."""

from __future__ import annotations

from typing import Any

from django.test import Client
from prometheus_client.parser import text_string_to_metric_families


def scrape(client: Client) -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
    """name -> {sorted labels: value} for every sample of the answer."""
    answer = client.get("/metrics")
    assert answer.status_code == 200, answer.content
    assert answer["Content-Type"].startswith("text/plain; version=")
    types = [line.split()[2] for line in answer.content.decode().splitlines() if line.startswith("# TYPE ")]
    assert len(types) == len(set(types)), "a family is written once"
    samples: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
    for family in text_string_to_metric_families(answer.content.decode()):
        for s in family.samples:
            samples.setdefault(s.name, {})[tuple(sorted(s.labels.items()))] = s.value
    return samples


def value(samples: dict[str, Any], name: str, **labels: str) -> float:
    return samples.get(name, {}).get(tuple(sorted(labels.items())), 0.0)  # type: ignore[no-any-return]
