"""A real studio (scripts/start: gunicorn + a Celery worker process, on a fresh var/)
and a real browser (Debian's chromium driven by Playwright's Python package)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.services import free_port
from tests.support.started import ROOT, Started, Studio

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


@pytest.fixture(scope="session")
def studio(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Studio]:
    var = tmp_path_factory.mktemp("studio-var")
    port = free_port()
    env = {
        **os.environ,
        "PACKFORGE_VAR": str(var),
        "DATABASE_URL": f"sqlite:///{var}/studio.sqlite3",
        "PACKFORGE_GIT_ROOT": str(var / "git"),
        "PORT": str(port),
    }
    env.pop("REDIS_URL", None)
    proc = subprocess.Popen(
        [str(ROOT / "scripts" / "start")],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    started = Started(proc, port)
    try:
        password = started.wait_for(r"^admin password: (\S+)", timeout=120).group(1)
        started.wait_for(r"Packforge studio: http", timeout=60)
        yield Studio(f"http://127.0.0.1:{port}", password, var)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=30)
        started.close()


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    if not Path(CHROMIUM).exists():
        pytest.fail("chromium is not installed (apt-get install chromium); .ci/run installs it")
    with sync_playwright() as p:
        launched = p.chromium.launch(
            executable_path=CHROMIUM,
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
            ],
        )
        yield launched
        launched.close()


# Every page of every browser test runs under the studio's Content-Security-Policy; a
# violation (an inline script or handler, an inline style, a foreign source) is written
# to the console and fails the test that met it (docs/deploy.md, "Headers").
REPORT_CSP_VIOLATIONS = """document.addEventListener("securitypolicyviolation", (e) => {
  console.error(`CSP violation: ${e.violatedDirective} blocked ${e.blockedURI || "inline"} in ${e.sourceFile}:${e.lineNumber}`);
});"""


def csp_violations(messages: list[str]) -> list[str]:
    return [m for m in messages if "CSP violation" in m or "Content Security Policy" in m]


@pytest.fixture
def page(browser: Any, studio: Studio) -> Iterator[Any]:
    context = browser.new_context(accept_downloads=True, viewport={"width": 1400, "height": 1000})
    context.set_default_timeout(20_000)
    context.add_init_script(REPORT_CSP_VIOLATIONS)
    console: list[str] = []
    context.on("console", lambda message: console.append(message.text))
    tab = context.new_page()
    tab.goto(f"{studio.url}/login/")
    tab.fill("input[name=username]", "admin")
    tab.fill("input[name=password]", studio.password)
    tab.click("button[type=submit]")
    tab.wait_for_url(f"{studio.url}/")
    yield tab
    context.close()
    assert csp_violations(console) == [], "the page broke its Content-Security-Policy"
