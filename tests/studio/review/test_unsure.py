"""A run of refund_desk whose `approve` draws disagree takes its `on_unsure` edge to
the `review` human node and waits: its item says `unsure`, shows the three draws of
`approve` as candidates, where they disagree, and pre-fills the review node's form."""

from __future__ import annotations

import json

from django.conf import settings
from django.contrib.auth.models import User

from runtime import load_pack, load_tools, open_backend, run_pack
from studio.deployments import service
from studio.deployments.models import ServedRun
from studio.endpoints.models import Endpoint
from studio.projects.models import create_project
from studio.projects.views import example_files
from studio.review.items import open_item

PACK = settings.EXAMPLE_PACKS / "refund_desk"
CASE = json.loads((PACK / "evalset.jsonl").read_text().splitlines()[7])  # rd-08: the draws all differ


def test_it_shows_the_unsure_nodes_draws_at_the_human_node(owner: User, scripted: Endpoint) -> None:
    pack = load_pack(PACK)
    backend = open_backend(f"fake:{PACK / 'fakes' / 'scripted.json'}")
    result = run_pack(
        pack, CASE["input"], backend=backend, tools=load_tools(f"{PACK}/tools.py:registry"), case_id="rd-08"
    )
    assert (result.status, result.waiting_at, result.waiting_reason) == ("waiting", "review", "human")

    project = create_project(slug="refunds", name="refunds", owner=owner, pack_files=example_files("refund_desk"))
    deployment = service.create_deployment(project, user=owner, name="refunds", version=None, tiers=[scripted.pk])
    run = ServedRun.objects.create(
        deployment=deployment,
        run_id="u1",
        input=CASE["input"],
        input_digest=service.input_digest(CASE["input"]),
        version=deployment.version,
        status=ServedRun.Status.WAITING,
        waiting_at="review",
        waiting_reason="human",
        state={**result.state, "input": CASE["input"]},
        trace=result.trace.to_dict(),
    )
    item = open_item(run)
    assert item is not None
    assert (item.node, item.reason) == ("review", "unsure")
    assert [(c["node"], c["status"], c["answer"]) for c in item.candidates] == [
        ("approve", "unsure", {"decision": "approve", "refund_usd": 129.0}),
        ("approve", "unsure", {"decision": "approve", "refund_usd": 64.5}),
        ("approve", "unsure", {"decision": "decline", "refund_usd": 0}),
    ]
    assert item.disagreement == ["decision", "refund_usd"]
    assert item.best == {"decision": "decline", "refund_usd": 0}  # all differ: the latest
    assert item.schema is not None and "reviewer_note" in item.schema["properties"]
    assert "A refund request needs your decision" in item.question
