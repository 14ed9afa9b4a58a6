"""runtime/ stays light: it imports no Django, Celery or studio code."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

PROBE = """
import importlib.abc, sys
BLOCKED = ("django", "celery", "studio", "compiler", "ninja", "redis", "psycopg")
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ImportError("blocked: " + name)
        return None
sys.meta_path.insert(0, Block())
import pkgutil, importlib, runtime
for mod in pkgutil.walk_packages(runtime.__path__, "runtime."):
    if mod.name == "runtime.__main__":
        continue
    importlib.import_module(mod.name)
from runtime.cli import main
assert main(["validate", "packs/support_triage"]) == 0
leaked = sorted(m for m in sys.modules if m.split(".")[0] in BLOCKED)
print("LEAKED", leaked)
"""


def test_it_imports_and_runs_with_django_and_celery_blocked() -> None:
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "LEAKED []" in out.stdout
