"""`manage.py check --deploy` is clean with the production settings (docs/deploy.md,
"Production settings"): behind a TLS proxy, with a SECRET_KEY of its own and DEBUG off."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _check_deploy(tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    environ.update(
        PACKFORGE_VAR=str(tmp_path),
        SECRET_KEY="k" * 20 + "production-secret-not-a-default",
        DEBUG="0",
        DJANGO_SETTINGS_MODULE="studio.settings",
        **env,
    )
    return subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT,
        env=environ,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_it_is_clean_with_the_production_settings(tmp_path: Path) -> None:
    done = _check_deploy(tmp_path, BEHIND_TLS_PROXY="1")
    assert done.returncode == 0, done.stderr
    assert "no issues" in done.stdout


def test_it_names_what_is_missing_without_tls(tmp_path: Path) -> None:
    done = _check_deploy(tmp_path, BEHIND_TLS_PROXY="0")
    assert done.returncode != 0
    assert "security.W004" in done.stderr and "security.W012" in done.stderr
