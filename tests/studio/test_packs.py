"""Loading a pack at a version in the studio (studio.packs): every reason it cannot
run is one PackUnrunnable, carrying the reasons."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User

from studio import host_tools, packs
from studio.projects.models import Project, create_project
from studio.projects.views import example_files

ROOT = Path(__file__).resolve().parents[2]
REFUND_TOOLS = f"{ROOT / 'packs' / 'refund_desk' / 'tools.py'}:registry"


@pytest.fixture(autouse=True)
def no_registry(settings: Any) -> Any:
    settings.PACKFORGE_TOOLS = ""
    host_tools.forget()
    yield
    host_tools.forget()


def _project(owner: User, example: str, model: str | None = "keep", **changes: bytes) -> Project:
    files = example_files(example)
    manifest = files["manifest.yaml"].decode()
    if model != "keep":
        lines = [line for line in manifest.splitlines() if not line.startswith("model:")]
        if model is not None:
            lines.append(f"model: {model}")
        files["manifest.yaml"] = ("\n".join(lines) + "\n").encode()
    files.update(changes)
    return create_project(slug=example.replace("_", "-"), name=example, owner=owner, pack_files=files)


def _reasons(project: Project, version: str | None = None, *, own_model: bool = True) -> list[str]:
    with pytest.raises(packs.PackUnrunnable) as caught, packs.loaded(project, version, own_model=own_model) as got:
        got.ensure_runnable()
    assert str(caught.value) == "; ".join(caught.value.reasons)
    return caught.value.reasons


def test_it_loads_a_pack_at_a_version(project: Project) -> None:
    with packs.loaded(project, None, own_model=True) as got:
        assert got.ensure_runnable() is got
        assert (got.pack.name, got.problems, got.tools, len(got.sha)) == ("support_triage", [], None, 40)


def test_it_says_a_version_does_not_exist(project: Project) -> None:
    (reason,) = _reasons(project, "0" * 40)
    assert "0000000000" in reason


def test_it_says_the_pack_does_not_load(owner: User) -> None:
    broken = _project(owner, "support_triage", **{"graph.yaml": b"nodes: [\n"})
    (reason,) = _reasons(broken)
    assert reason.startswith("the pack at ") and "does not load" in reason and "graph.yaml" in reason


def test_it_says_the_studio_has_no_tools_for_the_pack(owner: User) -> None:
    refunds = _project(owner, "refund_desk")
    (reason,) = _reasons(refunds)
    assert "calls host tools" in reason and "PACKFORGE_TOOLS" in reason


def test_it_loads_a_pack_with_the_hosts_tools(owner: User, settings: Any) -> None:
    settings.PACKFORGE_TOOLS = REFUND_TOOLS
    refunds = _project(owner, "refund_desk")
    with packs.loaded(refunds, None, own_model=True) as got:
        assert got.problems == [] and got.tools is not None and set(got.pack.tools) <= set(got.tools)


def test_it_says_the_tool_registry_does_not_load(project: Project, settings: Any) -> None:
    settings.PACKFORGE_TOOLS = "no_such_module_here:registry"
    (reason,) = _reasons(project)
    assert reason.startswith("the studio's tool registry (PACKFORGE_TOOLS) does not load")


def test_it_says_the_pack_names_no_model_only_when_its_own_model_is_wanted(owner: User) -> None:
    modelless = _project(owner, "support_triage", model=None)
    assert _reasons(modelless) == [packs.NO_MODEL]
    with packs.loaded(modelless, None, own_model=False) as got:
        assert got.ensure_runnable().problems == []


def test_it_refuses_an_own_model_that_is_not_scripted_inside_the_pack(owner: User) -> None:
    served = _project(owner, "support_triage", model="openai:http://127.0.0.1:9/v1#m")
    (reason,) = _reasons(served)
    assert "is not a scripted model" in reason


def test_it_refuses_a_scripted_model_outside_the_pack(owner: User) -> None:
    outside = _project(owner, "support_triage", model="fake:../../etc/passwd")
    (reason,) = _reasons(outside)
    assert "outside the pack" in reason


def test_it_carries_every_reason_at_once(owner: User) -> None:
    refunds = _project(owner, "refund_desk", model="openai:http://127.0.0.1:9/v1#m")
    reasons = _reasons(refunds)
    assert len(reasons) == 2 and "calls host tools" in reasons[0] and "not a scripted model" in reasons[1]


def test_it_never_resolves_a_packs_scripted_model_against_the_workers_folder(
    owner: User, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A server file of the right shape at the worker's current directory.
    (tmp_path / "var").mkdir()
    (tmp_path / "var" / "secret_key").write_text('{"nodes": {}}')
    monkeypatch.chdir(tmp_path)
    probing = _project(owner, "support_triage", model="fake:var/secret_key")
    (reason,) = _reasons(probing)
    assert (
        reason == "the manifest's model 'fake:var/secret_key' names 'var/secret_key', which is not a file of the pack"
    )
    # and a file that is not there at all reads the same: nothing says which server files exist
    missing = _project(owner, "moderation", model="fake:var/no_such_file")
    assert _reasons(missing) == [
        "the manifest's model 'fake:var/no_such_file' names 'var/no_such_file', which is not a file of the pack"
    ]


def test_it_never_writes_a_stored_name_outside_the_pack_folder(tmp_path: Path) -> None:
    root = tmp_path / "pack"
    root.mkdir()
    with pytest.raises(packs.PackUnrunnable, match=r"\.\./escaped\.txt"):
        packs.materialize({"manifest.yaml": b"name: x\n", "../escaped.txt": b"x"}, root)
    assert not (tmp_path / "escaped.txt").exists()
