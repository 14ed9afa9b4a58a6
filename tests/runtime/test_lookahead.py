"""Independent nodes side by side (runtime.lookahead), against the fault server on
loopback: what the server saw at once, what the trace keeps, what is dropped."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from runtime import load_pack, resume_run, run_pack
from runtime.backends import Backend
from runtime.backends.base import ModelCall, ModelReply
from runtime.backends.openai import EndpointUnavailable
from runtime.checkpoint import SQLiteStore
from runtime.errors import BadSpec, HostFailed, NoSpareSlot
from runtime.lookahead import UNUSED, depends
from tests.support.fault_server import FaultServer
from tests.support.model_servers import Opener, opened_backends
from tests.support.runtime_packs import write_pack
from tests.support.waiting import wait_until

NAME = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
CITY = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}


def _pack(tmp_path: Path, *, second_reads: str = "input.email", guarded: bool = False) -> Path:
    """who -> where -> done; `where` reads the input (independent) or `who`'s name."""
    edge: dict[str, Any] = {"from": "who", "to": "where"}
    if guarded:
        edge["when"] = "name != ''"
    return write_pack(
        tmp_path / "pack",
        nodes={
            "who": {"kind": "generate", "reads": ["input.email"], "writes": ["name"]},
            "where": {"kind": "generate", "reads": [second_reads], "writes": ["city"]},
            "done": {"kind": "end"},
            "held": {"kind": "end"},
        },
        edges=[edge, {"from": "who", "on_fail": "held"}, {"from": "where", "to": "done"}],
        grammars={"who": NAME, "where": CITY},
        manifest={"retry": {"resamples": 2, "feedback": 0}},
    )


def _for_where(body: Any) -> bool:
    return '"city"' in json.dumps((body or {}).get("response_format", {}))


def _answer(body: dict[str, Any]) -> str:
    """`who` gets a name, `where` a city (told apart by the grammar each call sends)."""
    return json.dumps({"city": "Lyon"} if _for_where(body) else {"name": "Ana"})


def _meet(server: FaultServer) -> Any:
    """An `answer=` under which neither call is answered before the other has arrived:
    they are in flight together, whatever the machine's speed (no wait past 10 s)."""

    def both() -> bool:
        kinds = {_for_where(r.body) for r in list(server.requests)}
        return kinds == {True, False}

    def answer(body: dict[str, Any]) -> str:
        wait_until(both, timeout=10, message="calls for who and where in flight together", interval=0.01)
        return _answer(body)

    return answer


def _who_waits(server: FaultServer, who: str) -> Any:
    """An `answer=` under which `who`'s calls are answered only once the call for `where`
    has been answered: its reply is in whatever the machine's speed (no wait past 10 s)."""

    def seen() -> bool:
        return any(_for_where(r.body) and r.ended is not None for r in list(server.requests))

    def answer(body: dict[str, Any]) -> str:
        if _for_where(body):
            return _answer(body)
        wait_until(seen, timeout=10, message="the call for where answered", interval=0.01)
        return who

    return answer


@pytest.fixture
def server() -> Any:
    with FaultServer(latency=0.3, answer=_answer) as fault:
        yield fault


@pytest.fixture
def opened() -> Iterator[Opener]:
    yield from opened_backends()


def test_an_independent_node_is_asked_while_the_one_before_it_runs(
    tmp_path: Path, server: FaultServer, opened: Opener
) -> None:
    server.configure(latency=0.0, answer=_meet(server))
    pack = load_pack(_pack(tmp_path))
    backend = opened(server.spec("lookahead=1"))
    result = run_pack(pack, {"email": "Ana, 3 rue Neuve, Lyon"}, backend=backend)
    assert result.status == "done"
    assert result.output == {"name": "Ana", "city": "Lyon"}
    assert server.max_in_flight == 2
    assert len(server.completions()) == 2  # nothing asked twice
    ids = {a.node: a.request_id for a in result.trace.attempts}
    assert ids["who"].endswith(".who.1") and ids["where"].endswith(".where.1a")  # made ahead, then used
    assert [a.stage for a in result.trace.attempts] == ["sample", "sample"]
    assert [s.node for s in result.trace.steps] == ["who", "where", "done"]  # graph order, unchanged


def test_without_lookahead_the_calls_go_one_after_the_other(
    tmp_path: Path, server: FaultServer, opened: Opener
) -> None:
    pack = load_pack(_pack(tmp_path))
    result = run_pack(pack, {"email": "x"}, backend=opened(server.spec()))
    assert result.status == "done"
    assert server.max_in_flight == 1


@pytest.mark.parametrize(
    ("second_reads", "guarded"),
    [("name", False), ("input.email", True)],
    ids=["reads-the-first-nodes-write", "edge-has-a-when"],
)
def test_a_node_that_may_depend_on_the_one_before_waits(
    tmp_path: Path, server: FaultServer, opened: Opener, second_reads: str, guarded: bool
) -> None:
    pack = load_pack(_pack(tmp_path, second_reads=second_reads, guarded=guarded))
    result = run_pack(pack, {"email": "x"}, backend=opened(server.spec("lookahead=1")))
    assert result.status == "done"
    assert server.max_in_flight == 1
    assert not any(a.request_id.endswith("a") for a in result.trace.attempts)


def test_a_run_that_leaves_the_path_keeps_the_unused_reply_in_its_cost(
    tmp_path: Path, server: FaultServer, opened: Opener
) -> None:
    """`who` is rejected three times (its ladder: a sample, two resamples) and takes on_fail;
    the reply made ahead for `where` (answered before `who`'s first) is not committed,
    and its tokens are in the trace, though not as an answer the run judged."""
    server.configure(latency=0.0, answer=_who_waits(server, who="not json"))
    pack = load_pack(_pack(tmp_path))
    result = run_pack(pack, {"email": "x"}, backend=opened(server.spec("lookahead=1")))
    assert result.status == "done" and result.trace.end_node == "held"
    assert "city" not in result.state
    unused = [a for a in result.trace.attempts if a.stage == "lookahead"]
    assert len(unused) == 1
    assert unused[0].node == "where" and unused[0].category == "unused" and unused[0].reason == UNUSED
    assert unused[0].completion_tokens > 0 and json.loads(unused[0].text) == {"city": "Lyon"}
    assert [s.node for s in result.trace.steps] == ["who", "held"]
    assert result.trace.generations == 3 and result.trace.totals()["model_calls"] == 4


class _FailsAhead:
    """The fault server's backend, but a call made ahead fails as an endpoint that
    gave up would (the order in which two concurrent requests reach a real server is
    not ours to choose, so the fault is injected here)."""

    def __init__(self, inner: Backend) -> None:
        self.inner, self.spec, self.lookahead = inner, inner.spec, 1

    def complete(self, call: ModelCall) -> ModelReply:
        if call.spare:
            raise EndpointUnavailable("gave up", request_id=call.request_id)
        return self.inner.complete(call)

    def close(self) -> None:
        self.inner.close()


def test_a_failed_call_made_ahead_is_made_again_in_turn(tmp_path: Path, server: FaultServer, opened: Opener) -> None:
    pack = load_pack(_pack(tmp_path))
    result = run_pack(pack, {"email": "x"}, backend=_FailsAhead(opened(server.spec("lookahead=1"))))
    assert result.status == "done", result.trace.error
    assert result.output == {"name": "Ana", "city": "Lyon"}
    assert len(server.completions()) == 2
    assert server.max_in_flight == 1
    assert [a.request_id.rsplit(".", 2)[-2:] for a in result.trace.attempts] == [["who", "1"], ["where", "1"]]


def test_a_resumed_run_replays_what_lookahead_made(tmp_path: Path, server: FaultServer, opened: Opener) -> None:
    """who -> where -> review (a person) -> done: the run waits with both model steps
    journaled in graph order; resumed with the person's answer, it replays them and
    asks the model nothing more."""
    root = _pack(tmp_path)
    graph = yaml.safe_load((root / "graph.yaml").read_text())
    graph["nodes"]["review"] = {"kind": "human", "reads": ["city"], "writes": ["approved"]}
    graph["edges"] = [e if e.get("from") != "where" else {"from": "where", "to": "review"} for e in graph["edges"]]
    graph["edges"].append({"from": "review", "to": "done"})
    (root / "graph.yaml").write_text(yaml.safe_dump(graph, sort_keys=False))
    (root / "grammars" / "review.json").write_text(json.dumps({"type": "object", "required": ["approved"]}))
    pack = load_pack(root)
    store = SQLiteStore(tmp_path / "runs.db")
    backend = opened(server.spec("lookahead=1"))
    waiting = run_pack(pack, {"email": "x"}, backend=backend, store=store)
    assert waiting.status == "waiting" and waiting.waiting_at == "review"
    made = len(server.completions())
    assert made == 2 and server.max_in_flight == 2
    done = resume_run(pack, waiting.run_id, backend=backend, store=store, answers={"review": {"approved": True}})
    assert done.status == "done"
    assert done.output == {"name": "Ana", "city": "Lyon", "approved": True}
    assert len(server.completions()) == made
    _, _, journal = store.take_over(waiting.run_id)
    assert [(e.kind, e.node) for e in journal if e.kind != "tool"] == [
        ("step", "who"),
        ("step", "where"),
        ("wait", "review"),
        ("step", "review"),
        ("step", "done"),
    ]


def test_a_call_made_ahead_never_queues_for_a_slot(server: FaultServer, opened: Opener) -> None:
    """With every slot of the endpoint's cap taken, a spare call fails at once."""
    server.configure(latency=0.5, answer=_answer)
    backend = opened(server.spec("concurrency=2;lookahead=1"))
    busy = [
        threading.Thread(
            target=backend.complete, args=(ModelCall(run_id=f"r{i}", node="who", attempt=1, messages=[], schema=NAME),)
        )
        for i in range(2)
    ]
    for thread in busy:
        thread.start()
    while server.max_in_flight < 2:
        threading.Event().wait(0.01)
    with pytest.raises(NoSpareSlot, match="no free slot of concurrency=2"):
        backend.complete(ModelCall(run_id="r", node="where", attempt=1, messages=[], schema=CITY, spare=True))
    for thread in busy:
        thread.join()
    assert len(server.completions()) == 2


def test_lookahead_needs_a_slot_left_for_the_runs_own_call(opened: Opener) -> None:
    with pytest.raises(BadSpec, match="lookahead=2 must be below concurrency=2"):
        opened("openai:http://127.0.0.1:9/v1#m;concurrency=2;lookahead=2")


def test_depends_sees_paths_above_and_below() -> None:
    pack_node = type("N", (), {"reads": ("address.city",)})()
    assert depends(pack_node, {"address"})  # type: ignore[arg-type]
    assert not depends(pack_node, {"name", "address_line"})  # type: ignore[arg-type]
    above = type("N", (), {"reads": ("address",)})()
    assert depends(above, {"address.city"})  # type: ignore[arg-type]


def test_calls_made_ahead_at_once_go_to_different_server_slots(
    tmp_path: Path, server: FaultServer, opened: Opener
) -> None:
    """a -> b -> c -> d, all reading the input, lookahead=2 over slots=4: no two calls
    that may be in flight together are pinned to one llama-server slot."""
    names = ["a", "b", "c", "d"]
    root = write_pack(
        tmp_path / "p4",
        nodes={
            **{n: {"kind": "generate", "reads": ["input.email"], "writes": [f"f_{n}"]} for n in names},
            "end": {"kind": "end"},
        },
        edges=[{"from": x, "to": y} for x, y in zip(names, [*names[1:], "end"], strict=True)],
    )
    server.configure(latency=0.05, answer=None)
    result = run_pack(load_pack(root), {"email": "x"}, backend=opened(server.spec("concurrency=3;slots=4;lookahead=2")))
    assert result.status == "done", result.trace.error
    slot = {
        r.body["messages"][-1]["content"].split(":")[0].split()[-1]: r.body["id_slot"] for r in server.completions()
    }
    assert len(server.completions()) == 4
    assert slot["b"] != slot["a"] and slot["c"] not in (slot["a"], slot["b"])
    assert slot["d"] != slot["c"]  # d is sent while c's call made ahead may still run


def test_a_run_stopped_by_its_host_stops_what_it_made_ahead(
    tmp_path: Path, server: FaultServer, opened: Opener
) -> None:
    """A tool node whose host fails (HostFailed) ends the run with an error; the call
    made ahead for the node after it is stopped, not left streaming."""
    root = write_pack(
        tmp_path / "p",
        manifest={"tools": ["look"]},
        nodes={
            "look": {
                "kind": "tool",
                "tool": "look",
                "reads": ["input.email"],
                "args": {"q": "input.email"},
                "writes": ["seen"],
            },
            "where": {"kind": "generate", "reads": ["input.email"], "writes": ["city"]},
            "done": {"kind": "end"},
        },
        edges=[{"from": "look", "to": "where"}, {"from": "where", "to": "done"}],
        grammars={"where": CITY},
    )
    server.configure(latency=0.0, token_delay=0.2, chunk_chars=1, answer=_answer)

    def look(q: str) -> dict[str, Any]:
        wait_until(lambda: server.completions(), timeout=10, message="the call made ahead", interval=0.01)
        raise HostFailed("the host's store went away")

    backend = opened(server.spec("lookahead=1"))
    with pytest.raises(HostFailed):
        run_pack(load_pack(root, tools={"look"}), {"email": "x"}, backend=backend, tools={"look": look})
    made = server.completions()[0]
    wait_until(lambda: made.ended, timeout=10, message="the call made ahead to end")
    assert made.outcome == "disconnected"  # stopped by the client mid-stream, not streamed to its end
