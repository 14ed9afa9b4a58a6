"""benchmarks/packs/helpdesk_routing_flat writes helpdesk_routing's label map into its
`assert` expression. The two copies must not drift: the check allows a department and
sub-issue pair exactly when labels/subissues.yaml does, and holds any other answer."""

from __future__ import annotations

from pathlib import Path

import yaml

from runtime import load_pack

PACKS = Path(__file__).resolve().parents[1] / "benchmarks" / "packs"


def test_the_flat_packs_assert_allows_exactly_the_pairs_of_the_label_map() -> None:
    route = load_pack(PACKS / "helpdesk_routing_flat").nodes["route"]
    labels = yaml.safe_load((PACKS / "helpdesk_routing" / "labels" / "subissues.yaml").read_text())
    schema = route.schema or {}
    departments = schema["properties"]["department"]["enum"]
    subissues = schema["properties"]["subissue"]["enum"]
    assert route.check is not None and set(departments) == set(labels)
    for department in departments:
        for subissue in subissues:
            allowed = route.check.truthy({"department": department, "subissue": subissue, "input": {}})
            assert allowed == (subissue in labels[department]), (department, subissue)
    assert not route.check.truthy({"department": "sales", "subissue": "double_charge", "input": {}})
