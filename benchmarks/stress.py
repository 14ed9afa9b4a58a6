"""Stress: does the one-command studio hold N users working at once, and is anything
lost or left stuck?

Starts `scripts/start` as a user would (a fresh var/ in a temp folder; SQLite and the
embedded Redis broker unless DATABASE_URL / REDIS_URL are set, e.g. under
`scripts/with-services`), makes an API token, gives each client a project of its own
(a copy of the refund_desk example), then runs N clients for a bounded time. Each
client, in a closed loop (one operation at a time, as a person or a CI job would):

  run   (50%)  POST /api/runs (a try-it run of the refund desk), then GET it until final
  save  (35%)  GET a file, PUT /api/projects/<slug>/files on the version it read; a 200
               is an acknowledged save (its version and content are remembered), a 409
               a refused stale save (another client of the same project moved it)
  eval  (15%)  POST /api/evals (18 cases), then GET it until it has ended

Clients 2k and 2k+1 share a project, so saves also race. Then it stops the load, waits
(--drain seconds at most) for every run and eval it started to end, and checks:

- the worker never died: the start script's supervisor restarted nothing, the worker's
  main process is the one from the start, and no pool process was lost;
- nothing is left queued or running: every TryRun and EvalCase row in the database
  (read by `manage.py shell` on the studio's own settings) is final;
- every acknowledged save is in git: its version is in the project's history and holds
  the content that was saved;
- API latency under load: p50/p95/max per kind of request (nearest rank).

It prints a table and writes raw rows (one per request, then one summary row) to
benchmarks/results/stress-<label>.jsonl.

    .venv/bin/python benchmarks/stress.py [--clients 8] [--seconds 300] [--drain 300]
    scripts/with-services .venv/bin/python benchmarks/stress.py --seconds 120   # Postgres + Redis
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks._rows import write_rows  # noqa: E402
from runtime.stats import percentile  # noqa: E402
from tests.support.started import Started, worker_main_pids  # noqa: E402

REFUND_INPUTS = [
    json.loads(line)["input"]
    for line in (ROOT / "packs" / "refund_desk" / "evalset.jsonl").read_text().splitlines()
    if line.strip()
]
WEIGHTS = {"run": 50, "save": 35, "eval": 15}
OP_TIMEOUT_S = 300.0  # one run or eval still not ended after this: counted as stuck
POLL_S = 0.25


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# -- the studio ------------------------------------------------------------------------------


class Studio(Started):
    """scripts/start in its own session, its output collected (tests/support/started.py)."""

    def __init__(self, var: Path, env: dict[str, str]) -> None:
        self.var, self.env = var, env
        proc = subprocess.Popen(
            [str(ROOT / "scripts" / "start")],
            cwd=ROOT,
            env=env,
            text=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        super().__init__(proc, int(env["PORT"]))

    def worker_pids(self) -> set[int]:
        """The Celery worker's main process: a celery process whose parent is the start
        script (its supervisor)."""
        return worker_main_pids(self.proc.pid)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                pass
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait()
        self._reader.join(timeout=10)

    def shell(self, code: str) -> str:
        done = subprocess.run(
            [str(ROOT / ".venv" / "bin" / "python"), "manage.py", "shell", "-c", code],
            cwd=ROOT,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        if done.returncode != 0:
            raise SystemExit(f"manage.py shell failed:\n{done.stderr}")
        return done.stdout


# -- the clients -----------------------------------------------------------------------------


@dataclass
class Shared:
    url: str
    token: str
    stop_at: float
    rows: list[dict[str, Any]] = field(default_factory=list)
    runs: list[int] = field(default_factory=list)
    evals: list[int] = field(default_factory=list)
    saves: list[dict[str, str]] = field(default_factory=list)  # acknowledged: slug, version, path, content
    ops: dict[str, int] = field(default_factory=lambda: {"run": 0, "save": 0, "save 409": 0, "eval": 0, "stuck": 0})
    lock: threading.Lock = field(default_factory=threading.Lock)
    gone: threading.Event = field(default_factory=threading.Event)  # the studio stopped by itself


def kind_of(method: str, path: str) -> str:
    path = re.sub(r"/\d+", "/{id}", path.split("?", 1)[0])
    path = re.sub(r"^/api/projects/[^/]+", "/api/projects/{slug}", path)
    return f"{method} {path}"


class Client:
    def __init__(self, number: int, shared: Shared, slug: str) -> None:
        self.number, self.shared, self.slug = number, shared, slug
        self.http = httpx.Client(base_url=shared.url, timeout=60, headers={"Authorization": f"Bearer {shared.token}"})
        self.rng = random.Random(number)
        self.saves = 0

    def call(self, method: str, path: str, **kwargs: Any) -> httpx.Response | None:
        start = time.perf_counter()
        try:
            response = self.http.request(method, path, **kwargs)
            status = response.status_code
        except httpx.HTTPError as exc:
            response, status = None, 0
            error = f"{type(exc).__name__}: {exc}"
        else:
            error = "" if status < 500 else response.text[:300]
        ms = (time.perf_counter() - start) * 1000
        with self.shared.lock:
            self.shared.rows.append(
                {
                    "bench": "stress",
                    "client": self.number,
                    "kind": kind_of(method, path),
                    "status": status,
                    "ms": round(ms, 3),
                    "t": round(time.time(), 3),
                    **({"error": error} if error else {}),
                }
            )
        return response

    def wait_ended(self, path: str, ended: str) -> bool:
        deadline = time.monotonic() + OP_TIMEOUT_S
        while time.monotonic() < deadline and not self.shared.gone.is_set():
            got = self.call("GET", path)
            if got is not None and got.status_code == 200 and got.json()[ended]:
                return True
            time.sleep(POLL_S)
        with self.shared.lock:
            self.shared.ops["stuck"] += 1
        return False

    def run(self) -> None:
        body = {"project": self.slug, "input": self.rng.choice(REFUND_INPUTS)}
        made = self.call("POST", "/api/runs", json=body)
        if made is None or made.status_code != 201:
            return
        run_id = made.json()["id"]
        with self.shared.lock:
            self.shared.runs.append(run_id)
            self.shared.ops["run"] += 1
        self.wait_ended(f"/api/runs/{run_id}", "final")

    def save(self) -> None:
        path = "README.md"
        read = self.call("GET", f"/api/projects/{self.slug}/files/{path}")
        if read is None or read.status_code != 200:
            return
        self.saves += 1
        content = f"# Stress\n\nclient {self.number}, save {self.saves}, nonce {self.rng.getrandbits(64):x}\n"
        body = {
            "base": read.json()["version"],
            "message": f"stress save {self.number}.{self.saves}",
            "files": {path: content},
        }
        saved = self.call("PUT", f"/api/projects/{self.slug}/files", json=body)
        if saved is None:
            return
        with self.shared.lock:
            if saved.status_code == 200:
                self.shared.ops["save"] += 1
                self.shared.saves.append(
                    {"slug": self.slug, "version": saved.json()["version"], "path": path, "content": content}
                )
            elif saved.status_code == 409:
                self.shared.ops["save 409"] += 1

    def eval(self) -> None:
        made = self.call("POST", "/api/evals", json={"project": self.slug})
        if made is None or made.status_code != 201:
            return
        eval_id = made.json()["evals"][0]["id"]
        with self.shared.lock:
            self.shared.evals.append(eval_id)
            self.shared.ops["eval"] += 1
        self.wait_ended(f"/api/evals/{eval_id}", "ended")

    def loop(self) -> None:
        ops = list(WEIGHTS)
        weights = list(WEIGHTS.values())
        with self.http:
            while time.time() < self.shared.stop_at and not self.shared.gone.is_set():
                getattr(self, self.rng.choices(ops, weights)[0])()


# -- the checks ------------------------------------------------------------------------------

LEFT_OVER = """
from studio.runs.models import TryRun
from studio.evals.models import EvalCase, Eval
import json
live = ["queued", "running"]
print(json.dumps({
    "runs": TryRun.objects.count(),
    "runs_left": TryRun.objects.filter(status__in=live).count(),
    "cases": EvalCase.objects.count(),
    "cases_left": EvalCase.objects.filter(status__in=live).count(),
    "evals_left": Eval.objects.filter(status__in=live).count(),
}))
"""


def drain(http: httpx.Client, shared: Shared, seconds: float) -> None:
    """Wait for every run and eval the clients started to end (the clients stop waiting
    when the time is up)."""
    deadline = time.monotonic() + seconds
    runs, evals = set(shared.runs), set(shared.evals)
    while (runs or evals) and time.monotonic() < deadline:
        for run_id in sorted(runs):
            if http.get(f"/api/runs/{run_id}").json().get("final"):
                runs.discard(run_id)
        for eval_id in sorted(evals):
            if http.get(f"/api/evals/{eval_id}").json().get("ended"):
                evals.discard(eval_id)
        if runs or evals:
            time.sleep(1)


def saves_in_git(http: httpx.Client, saves: list[dict[str, str]]) -> tuple[int, list[str]]:
    history: dict[str, set[str]] = {}
    missing = []
    for save in saves:
        slug = save["slug"]
        if slug not in history:
            got = http.get(f"/api/projects/{slug}/versions", params={"limit": 10000})
            history[slug] = {v["sha"] for v in got.json()}
        read = http.get(f"/api/projects/{slug}/files/{save['path']}", params={"version": save["version"]})
        if save["version"] not in history[slug] or read.status_code != 200 or read.json()["content"] != save["content"]:
            missing.append(f"{slug}@{save['version'][:10]}")
    return len(saves) - len(missing), missing


# -- main ------------------------------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--clients", type=int, default=8, help="concurrent clients (default 8)")
    parser.add_argument("--seconds", type=float, default=300, help="how long the clients work (default 300)")
    parser.add_argument(
        "--drain", type=float, default=300, help="the longest wait afterwards for work to end (default 300)"
    )
    parser.add_argument(
        "--web-workers", type=int, default=2, help="gunicorn workers (scripts/start's WEB_WORKERS, default 2)"
    )
    parser.add_argument("--concurrency", type=int, default=2, help="worker processes (CELERY_CONCURRENCY, default 2)")
    parser.add_argument("--label", default="", help="names the rows file (default: sqlite-embedded or postgres-redis)")
    parser.add_argument("--rows", type=Path, help="the raw rows file (default benchmarks/results/stress-<label>.jsonl)")
    parser.add_argument("--keep", action="store_true", help="keep the temp folder (var/, logs)")
    args = parser.parse_args()

    postgres = os.environ.get("DATABASE_URL", "").startswith("postgres")
    redis = bool(os.environ.get("REDIS_URL"))
    setup = (
        f"{'Postgres' if postgres else 'SQLite'} + {'Redis (REDIS_URL)' if redis else 'embedded Redis (scripts/start)'}"
    )
    label = args.label or ("postgres-redis" if postgres else "sqlite-embedded")
    rows_file = args.rows or Path("benchmarks") / "results" / f"stress-{label}.jsonl"

    tmp = Path(tempfile.mkdtemp(prefix="pf-stress-"))
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("SECRET_KEY", "DEBUG", "CELERY_TASK_ALWAYS_EAGER")}
    env.update(
        PORT=str(port),
        HOST="127.0.0.1",
        PACKFORGE_VAR=str(tmp / "var"),
        PACKFORGE_GIT_ROOT=str(tmp / "var" / "git"),
        WEB_WORKERS=str(args.web_workers),
        CELERY_CONCURRENCY=str(args.concurrency),
        DJANGO_SETTINGS_MODULE="studio.settings",
    )
    if not postgres:
        env["DATABASE_URL"] = f"sqlite:///{tmp}/var/studio.sqlite3"
    if not redis:
        env["PACKFORGE_EMBEDDED_REDIS"] = "1"  # as scripts/start sets it, for `manage.py shell` below
    print(f"stress: {setup}, {args.clients} clients for {args.seconds:.0f} s, var in {tmp}", file=sys.stderr)
    studio = Studio(tmp / "var", env)
    try:
        url = studio.wait_for(r"^Packforge studio: (http://\S+)", timeout=300).group(1)
        password = studio.wait_for(r"^admin password: (\S+)$", timeout=1).group(1)
        studio.wait_for(r"\bready\.", timeout=120)
        workers_at_start = studio.worker_pids()
        if not redis and not re.search(r"^broker: Redis on unix://", studio.output, re.M):
            setup = setup.replace("embedded Redis (scripts/start)", "the start script's broker (not its Redis)")

        with httpx.Client(base_url=url, timeout=60) as browser:
            page = browser.get("/login/")
            csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
            assert csrf, page.text
            browser.post(
                "/login/", data={"csrfmiddlewaretoken": csrf.group(1), "username": "admin", "password": password}
            )
            made = browser.post(
                "/api/tokens", json={"name": "stress"}, headers={"X-CSRFToken": browser.cookies["csrftoken"]}
            )
            if made.status_code != 201:
                raise SystemExit(f"could not make a token: {made.status_code} {made.text}")
            token = made.json()["token"]
        http = httpx.Client(base_url=url, timeout=60, headers={"Authorization": f"Bearer {token}"})
        slugs = [f"stress-{i}" for i in range((args.clients + 1) // 2)]
        for slug in slugs:
            got = http.post("/api/projects", json={"slug": slug, "name": slug, "example": "refund_desk"})
            if got.status_code != 201:
                raise SystemExit(f"could not create {slug}: {got.status_code} {got.text}")

        shared = Shared(url=url, token=token, stop_at=time.time() + args.seconds)
        clients = [Client(i, shared, slugs[i // 2]) for i in range(args.clients)]
        threads = [threading.Thread(target=c.loop, daemon=True) for c in clients]
        started = time.monotonic()
        for thread in threads:
            thread.start()
        while any(t.is_alive() for t in threads):
            if studio.proc.poll() is not None:
                shared.gone.set()  # the studio stopped by itself (the old default did)
            time.sleep(0.5)
        loaded_s = time.monotonic() - started
        if not shared.gone.is_set():
            drain(http, shared, args.drain)
        workers_at_end = studio.worker_pids()
        gone = studio.proc.poll() is not None
        if not gone:
            acked_in_git, missing = saves_in_git(http, shared.saves)
        else:  # no API to ask: counted as not shown to be in git
            acked_in_git, missing = 0, ["not checked: the studio stopped"]
        http.close()
        left = json.loads(studio.shell(LEFT_OVER).strip().splitlines()[-1])  # the database, directly
        output = studio.output
    finally:
        studio.stop()
    restarts = output.count("supervisor: the Celery worker exited")
    lost_pool = len(re.findall(r"WorkerLostError|exited with 'signal", output))
    worker_died = restarts > 0 or lost_pool > 0 or workers_at_end != workers_at_start or not workers_at_start
    if gone:
        print("the studio stopped during the run; what it said about it:", file=sys.stderr)
        for line in output.splitlines():
            if re.search(r"Unrecoverable|Error|stopped", line):
                print("  " + line[:300], file=sys.stderr)

    rows = shared.rows
    api = [r["ms"] for r in rows]
    errors = [r for r in rows if r["status"] == 0 or r["status"] >= 500]
    kinds = sorted({r["kind"] for r in rows})
    summary = {
        "bench": "stress",
        "summary": True,
        "setup": setup,
        "clients": args.clients,
        "seconds": round(loaded_s, 1),
        "requests": len(rows),
        "errors_5xx_or_connection": len(errors),
        "runs": shared.ops["run"],
        "evals": shared.ops["eval"],
        "saves_acknowledged": shared.ops["save"],
        "saves_refused_stale": shared.ops["save 409"],
        "saves_in_git": acked_in_git,
        "saves_missing": missing,
        "client_waits_over_limit": shared.ops["stuck"],
        "worker_restarts": restarts,
        "pool_processes_lost": lost_pool,
        "worker_died": worker_died,
        "studio_stopped": gone,
        "left": left,
        "p50_ms": round(percentile(api, 50), 1),
        "p95_ms": round(percentile(api, 95), 1),
        "max_ms": round(max(api, default=0.0), 1),
        "load_average": os.getloadavg(),
    }
    write_rows(rows_file if rows_file.is_absolute() else ROOT / rows_file, [*rows, summary])

    print(f"\nStress: {setup}; {args.clients} clients for {loaded_s:.0f} s ({rows_file})\n")
    print("| request | n | 5xx / conn. errors | p50 ms | p95 ms | max ms |")
    print("|---|---:|---:|---:|---:|---:|")
    for kind in kinds:
        ms = [r["ms"] for r in rows if r["kind"] == kind]
        bad = sum(1 for r in errors if r["kind"] == kind)
        print(f"| {kind} | {len(ms)} | {bad} | {percentile(ms, 50):.0f} | {percentile(ms, 95):.0f} | {max(ms):.0f} |")
    print(
        f"| **all API requests** | {len(api)} | {len(errors)} | {percentile(api, 50):.0f} | {percentile(api, 95):.0f} | {max(api, default=0):.0f} |"
    )
    print()
    print("| check | result |")
    print("|---|---|")
    print(
        f"| worker never died | {'no: ' if worker_died else 'yes'}{f'{restarts} restarts, {lost_pool} pool processes lost' if worker_died else ''} |"
    )
    print(
        f"| runs / eval cases left queued or running | {left['runs_left']} of {left['runs']} / {left['cases_left']} of {left['cases']} |"
    )
    print(
        f"| acknowledged saves in git | {acked_in_git} of {len(shared.saves)} (and {shared.ops['save 409']} stale saves refused with 409) |"
    )
    print(f"| work started | {shared.ops['run']} try-it runs, {shared.ops['eval']} evals |")
    if gone:
        print("| the studio kept serving | no: it stopped during the run |")
    ok = not gone and not worker_died and not errors and not missing and left["runs_left"] == left["cases_left"] == 0
    print(f"\n{'PASS' if ok else 'FAIL'}")
    if not args.keep:
        import shutil

        shutil.rmtree(tmp, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
