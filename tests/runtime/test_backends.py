"""Scripted backends and spec strings."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runtime import (
    BACKEND_KINDS,
    Backend,
    BackendKind,
    BadSpec,
    FakeConfig,
    SimConfig,
    open_backend,
    parse_backend_spec,
)
from runtime.backends.base import ModelCall
from runtime.errors import BackendError


def call(
    node: str = "classify",
    attempt: int = 1,
    case_id: str | None = None,
    run_id: str = "r",
    input: dict[str, object] | None = None,
) -> ModelCall:
    return ModelCall(
        run_id=run_id,
        node=node,
        attempt=attempt,
        messages=[{"role": "user", "content": "hi"}],
        schema={"type": "object", "properties": {"category": {"enum": ["a", "b", "c"]}}},
        case_id=case_id,
        input=input or {},
    )


@pytest.fixture
def script(tmp_path: Path) -> Path:
    path = tmp_path / "s.json"
    path.write_text(
        json.dumps(
            {
                "nodes": {"classify": {"category": "a"}},
                "cases": {"c1": {"classify": [{"category": "b"}, "not json"]}},
                "inputs": [
                    {"match": {"ticket": "x"}, "answers": {"classify": {"category": "c"}}},
                    {"match": {"ticket": "y"}, "answers": {"extract": {"name": "y"}}},
                ],
                "prices": {"input": 1.0, "output": 1.0},
            }
        )
    )
    return path


KNOWN = {"ticket": "y"}  # an input the script knows whose entry leaves classify to its `nodes` default


def test_it_answers_by_case_then_input_then_node(script: Path) -> None:
    fake = open_backend(f"fake:{script}")
    assert json.loads(fake.complete(call(case_id="c1")).text) == {"category": "b"}
    assert fake.complete(call(case_id="c1", attempt=2)).text == "not json"
    assert fake.complete(call(case_id="c1", attempt=9)).text == "not json"  # the last item repeats
    assert json.loads(fake.complete(call(input={"ticket": "x"})).text) == {"category": "c"}
    assert json.loads(fake.complete(call(input=KNOWN)).text) == {"category": "a"}
    assert json.loads(fake.complete(call(case_id="c1", node="extract", input=KNOWN)).text) == {"name": "y"}


def test_a_script_keyed_by_case_or_input_refuses_an_input_it_has_no_answer_for(script: Path) -> None:
    fake = open_backend(f"fake:{script}")
    for unknown in (call(input={"ticket": "a real ticket"}), call(case_id="c9"), call()):
        with pytest.raises(BackendError) as caught:
            fake.complete(unknown)
        assert str(caught.value) == (
            "scripted model s.json has no answer for node 'classify': the input matches none of its 1 cases and "
            "2 inputs; a scripted model only answers the inputs it was written for (use a real model, e.g. "
            "--model openai:..., for other inputs)"
        )
    with pytest.raises(BackendError, match="matches none of its 1 cases and 2 inputs"):  # sim: too
        open_backend(f"sim:error=0,seed=1,base={script}").complete(call(input={"ticket": "a real ticket"}))


def test_a_script_with_only_nodes_is_a_constant_model(tmp_path: Path) -> None:
    path = tmp_path / "constant.json"
    path.write_text(json.dumps({"nodes": {"classify": {"category": "a"}}}))
    fake = open_backend(f"fake:{path}")
    for any_call in (call(), call(input={"ticket": "anything"}), call(case_id="c9", input={"x": 1})):
        assert json.loads(fake.complete(any_call).text) == {"category": "a"}


def test_it_prices_scripted_calls(script: Path) -> None:
    reply = open_backend(f"fake:{script}").complete(call(input=KNOWN))
    assert reply.cost_usd == pytest.approx((reply.prompt_tokens + reply.completion_tokens) / 1e6)
    assert reply.request_id == "r.classify.1"


def test_it_says_which_node_has_no_scripted_answer(script: Path) -> None:
    with pytest.raises(BackendError, match="no answer for node 'extract'"):
        open_backend(f"fake:{script}").complete(call(node="extract", case_id="c1"))


def test_sim_is_deterministic_in_seed_run_node_and_attempt(script: Path) -> None:
    spec = f"sim:error=0.5,seed=7,base={script}"
    a, b = open_backend(spec), open_backend(spec)
    texts = [a.complete(call(run_id=f"r{k}", attempt=n, input=KNOWN)).text for k in range(20) for n in (1, 2)]
    assert texts == [b.complete(call(run_id=f"r{k}", attempt=n, input=KNOWN)).text for k in range(20) for n in (1, 2)]
    wrong = sum(t != '{"category": "a"}' for t in texts)
    assert 8 <= wrong <= 32  # about half of 40
    other_seed = open_backend(f"sim:error=0.5,seed=8,base={script}")
    assert texts != [
        other_seed.complete(call(run_id=f"r{k}", attempt=n, input=KNOWN)).text for k in range(20) for n in (1, 2)
    ]


def test_sim_wrong_answers_keep_the_schema_shape(script: Path) -> None:
    sim = open_backend(f"sim:error=1,seed=1,invalid=0,base={script}")
    for k in range(20):
        answer = json.loads(sim.complete(call(run_id=f"r{k}", input=KNOWN)).text)
        assert answer["category"] in ("b", "c")


@pytest.mark.parametrize(
    "spec, message",
    [
        ("nocolon", "needs a scheme"),
        ("grpc:x", "unknown model scheme 'grpc'"),
        ("fake:", "needs a file"),
        ("sim:error=2,base=x.json", "between 0 and 1"),
        ("sim:error=0.1,colour=red", "unknown sim option(s) colour"),
        ("sim:error=0.1", "needs base=FILE"),
    ],
)
def test_it_refuses_bad_specs_with_a_clear_message(spec: str, message: str) -> None:
    with pytest.raises(BadSpec, match=message.replace("(", r"\(").replace(")", r"\)")):
        open_backend(spec)


@pytest.mark.parametrize(
    "spec",
    [
        "fake:fakes/scripted.json",
        "sim:error=0.3,seed=7,invalid=0.2",
        "sim:error=0.1,seed=0,invalid=0.5,base=answers.json",
        "openai:http://h:8080/v1#qwen2.5:0.5b",
        "openai:http://h/v1#m;grammar=gbnf;key_env=MY_KEY;concurrency=3;price_in=0.15;price_out=2",
    ],
)
def test_it_renders_a_config_back_to_the_spec_it_was_parsed_from(spec: str) -> None:
    config = parse_backend_spec(spec)
    assert config.spec == spec and parse_backend_spec(config.spec) == config


def test_it_opens_a_config_object_like_its_spec_string(script: Path) -> None:
    backend = open_backend(FakeConfig(str(script)))
    assert backend.spec == f"fake:{script}"
    assert json.loads(backend.complete(call(input=KNOWN)).text) == {"category": "a"}


def test_it_opens_every_kind_through_the_kinds_table(script: Path) -> None:
    opened: list[str] = []
    original = BACKEND_KINDS["fake"]

    def opener(config: FakeConfig, label: str, base_dir: Path | None, default: str | None) -> Backend:
        opened.append(label)
        return original.open(config, label, base_dir, default)

    BACKEND_KINDS["fake"] = BackendKind(FakeConfig, original.parse, opener)
    try:
        open_backend(f"fake:{script}")
    finally:
        BACKEND_KINDS["fake"] = original
    assert opened == [f"fake:{script}"]


def test_it_checks_sim_rates_when_a_config_is_built() -> None:
    with pytest.raises(BadSpec, match="between 0 and 1"):
        SimConfig(error=1.5)


def test_it_opens_a_packs_own_scripted_model_inside_the_pack_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from runtime import BadSpec, open_backend

    here, pack = tmp_path / "cwd", tmp_path / "pack"
    (here / "var").mkdir(parents=True)
    (here / "var" / "secret_key").write_text('{"nodes": {"n": {"answer": "served from the server"}}}')
    pack.mkdir()
    monkeypatch.chdir(here)
    own = "fake:var/secret_key"
    with pytest.raises(BadSpec) as refused:
        open_backend(own, base_dir=pack, default=own)
    assert str(refused.value) == "scripted model file not found: var/secret_key"  # no server folder named
    for escape in ("fake:../cwd/var/secret_key", f"fake:{here / 'var' / 'secret_key'}"):
        with pytest.raises(BadSpec, match="must name a file inside the pack"):
            open_backend(escape, base_dir=pack, default=escape)
    # the same spec given by the host (the CLI's --model), not the pack, still reads the current folder
    open_backend(own, base_dir=pack, default="fake:fakes/scripted.json").close()
