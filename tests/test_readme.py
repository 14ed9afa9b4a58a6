"""The README's `packforge` commands work as written after `scripts/start` or `scripts/test`:
both leave the project installed in .venv, and the README says to activate it before its
first `packforge` command (the start script's final block says so too)."""

from __future__ import annotations

import re
import subprocess

from tests.support.started import ROOT

README = (ROOT / "README.md").read_text()
ACTIVATE = "source .venv/bin/activate"


def _shell_lines() -> list[str]:
    """Every line of the README's ```sh / ```console blocks, in order."""
    blocks = re.findall(r"^```(?:sh|console)\n(.*?)^```$", README, re.M | re.S)
    return [line for block in blocks for line in block.splitlines()]


def _in_activated_shell(command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-c", f"{ACTIVATE} && {command}"], cwd=ROOT, capture_output=True, text=True, timeout=120
    )


def test_it_activates_the_venv_before_the_first_packforge_command() -> None:
    lines = _shell_lines()
    first_cli = next(i for i, line in enumerate(lines) if re.match(r"(\$ )?packforge ", line))
    assert ACTIVATE in lines[:first_cli], lines[: first_cli + 1]
    assert (ROOT / ".venv" / "bin" / "packforge").exists()


def test_it_runs_the_quickstart_validate_as_written() -> None:
    lines = _shell_lines()
    at = lines.index("$ packforge validate packs/support_triage")
    done = _in_activated_shell("packforge validate packs/support_triage")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == lines[at + 1]


def test_it_finds_every_readme_subcommand_in_the_activated_venv() -> None:
    commands = {m.group(1) for line in _shell_lines() if (m := re.match(r"(?:\$ )?packforge (\w+)", line))}
    assert {"validate", "run", "eval", "graph", "build", "pull"} <= commands
    for command in sorted(commands):
        done = _in_activated_shell(f"packforge {command} --help")
        assert done.returncode == 0, (command, done.stderr)


def test_it_pulls_with_the_token_from_the_environment_into_a_folder_outside_the_repository() -> None:
    """Followed from the repository's root, a pull writes nothing into the repository, and
    the token stays out of the process list (the CLI reads $PACKFORGE_TOKEN)."""
    texts = {"README.md": README, "docs/api.md": (ROOT / "docs" / "api.md").read_text()}
    pulls = [
        (name, line) for name, text in texts.items() for line in text.splitlines() if "packforge pull http" in line
    ]
    assert {name for name, _ in pulls} == set(texts)
    for name, line in pulls:
        assert "--token" not in line, (name, line)
        out = re.search(r"--out (\S+)", line)
        assert out is not None and out.group(1).startswith("/") and not out.group(1).startswith(str(ROOT)), line
    lines = _shell_lines()
    pull = next(i for i, line in enumerate(lines) if line.startswith("packforge pull"))
    assert any(line.startswith("export PACKFORGE_TOKEN=") for line in lines[:pull])
