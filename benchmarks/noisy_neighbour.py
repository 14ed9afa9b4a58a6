"""Noisy neighbour (issue 22): can one plain author stall the studio for another?

Starts `scripts/start` as a user would (benchmarks/serving.py's `start_studio`: a fresh
var/ in a temp folder, SQLite, the embedded broker, gunicorn and one Celery worker on
loopback). Two users who are not staff are made with `manage.py shell` (a password for
the pages, an API token for the API): A, author of one project only (`noisy`, made
through the API), and B, author of another (`calm`, from the support_triage example).
A also makes a deployment of its project and one served run that waits for a person.

B's workload, one client in a loop (`--b-clients` of them), each request timed:

  run           POST /api/runs (try-it run of a support_triage input that ends done),
                then GET /api/runs/<id> every 50 ms until it is final: submit -> final
  save          PUT /api/projects/calm/files (README.md changed, on the head it read)
  project_page  GET /p/calm/ (the session of B's login)
  runs_list     GET /api/runs?project=calm
  login_page    GET /login/ (no session)

Phase 1, idle: B alone for --idle-s. Phase 2, under attack: the same B workload for
--attack-s while A runs three attacks, each in its own loop (one thread each):

  regex   save grammars/answer.json with the pattern `^(a|a)*b$` (a backtracking one
          under Python `re`), then a try-it run whose scripted model answers 27+ 'a's
          (--a-length); with RE2 it fails its pattern at once, down the retry ladder.
  steps   save manifest.yaml asking max_steps 100000000 (expected: 400 naming
          PACKFORGE_MAX_STEPS), then a try-it run of the self-looping graph at the cap
          (max_steps 10000): expected to end failed with "step bound reached".
  streams open --streams event streams at once on the waiting served run with one token
          (GET /api/deployments/noisy/runs/<id>/events?timeout=--stream-hold-s):
          expected most 429 (PACKFORGE_SSE_MAX_PER_USER / _PER_PROCESS), the rest held
          until the server ends them; then again.

When the attack time is up B stops, A starts nothing new, and A's runs in flight are
waited for (at most --drain-s) so that every one has an ending. Database growth: the
SQLite file plus its WAL, read before and after each phase.

Goals (issue 22): B's p95 under attack within 2x of idle for every request kind; 0 errors
for B; every A run ended, each by a cap or a refusal with a clear message (steps runs:
failed, "step bound reached ... PACKFORGE_MAX_STEPS"; regex runs: failed on the pattern,
in linear time). Each goal is printed met or NOT met, as measured.

One row per run of this script is appended to benchmarks/results/noisy_neighbour.jsonl:
every number of the table, A's runs one by one, B's latencies per kind and phase.

    .venv/bin/python benchmarks/noisy_neighbour.py [--idle-s 30] [--attack-s 60]
        [--streams 32] [--stream-hold-s 15] [--a-length 27] [--b-clients 1]
        [--concurrency 2] [--drain-s 240] [--attacks regex,steps,streams] [--json] [--rows FILE] [--keep]

The issue's own setting is `--attack-s 180`.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.serving import Bare, start_studio  # noqa: E402
from benchmarks.stress import Studio, free_port  # noqa: E402
from runtime.stats import percentile  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "noisy_neighbour.jsonl"
B_KINDS = ("run", "save", "project_page", "runs_list", "login_page")
PASSWORD = "noisy-neighbour-bench-password"  # loopback only, a throwaway var/
BAD_PATTERN = "^(a|a)*b$"
HUGE_STEPS = 100_000_000
RUN_TIMEOUT_S = 600.0  # a try-it run not final by then is an error (B) / "not ended" (A)
POLL_S = 0.05


def pct(values: list[float], p: float) -> float | None:
    return round(percentile(values, p), 1) if values else None


def db_bytes(var: Path) -> int:
    """The SQLite file plus its WAL (and shared-memory index)."""
    base = var / "studio.sqlite3"
    return sum(p.stat().st_size for p in (base, Path(f"{base}-wal"), Path(f"{base}-shm")) if p.exists())


# -- A's pack --------------------------------------------------------------------------------

MANIFEST = """\
name: noisy
version: 1
description: One graph, three ways to be a noisy neighbour (benchmarks/noisy_neighbour.py).
entry: start
model: fake:fakes/scripted.json
inputs: [mode]
max_steps: {max_steps}
"""

GRAPH = """\
nodes:
  start:
    kind: assert
    reads: [input.mode]
    expr: "true"
  answer:
    kind: generate
    reads: [input.mode]
    writes: [text]
  spin:
    kind: assert
    expr: "true"
  ask:
    kind: human
    writes: [reply]
  done:
    kind: end
edges:
  - {from: start, to: answer, when: "input.mode == 'regex'"}
  - {from: start, to: ask, when: "input.mode == 'wait'"}
  - {from: start, to: spin}
  - {from: spin, to: spin, when: "true"}
  - {from: spin, to: done}
  - {from: answer, to: done}
  - {from: ask, to: done}
"""


def answer_grammar(attempt: int) -> str:
    return json.dumps(
        {
            "description": f"attempt {attempt}",  # each save is a change
            "type": "object",
            "properties": {"text": {"type": "string", "pattern": BAD_PATTERN}},
            "required": ["text"],
            "additionalProperties": False,
        },
        indent=1,
    )


def a_pack(length: int, max_steps: int) -> dict[str, str]:
    return {
        "manifest.yaml": MANIFEST.format(max_steps=max_steps),
        "graph.yaml": GRAPH,
        "prompts/answer.txt": "Write the text.\n",
        "prompts/ask.txt": "Anything to add?\n",
        "grammars/answer.json": answer_grammar(0),
        "grammars/ask.json": json.dumps(
            {"type": "object", "properties": {"reply": {"type": "string"}}, "required": ["reply"]}
        ),
        "fakes/scripted.json": json.dumps({"nodes": {"answer": {"text": "a" * length}}}),
    }


# -- users, sessions -------------------------------------------------------------------------

MAKE_USERS = """
from django.contrib.auth.models import User
from studio.accounts.models import ApiToken
for name in ("alice_noisy", "bob_calm"):
    user = User.objects.create_user(name, name + "@example.com", {password!r})
    print("token", name, ApiToken.issue(user, "noisy-neighbour")[1])
"""


def session(url: str, username: str) -> httpx.Client:
    """A browser-like client logged in with the form (for the pages)."""
    browser = httpx.Client(base_url=url, timeout=60)
    page = browser.get("/login/")
    csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
    assert csrf, page.text
    done = browser.post(
        "/login/", data={"csrfmiddlewaretoken": csrf.group(1), "username": username, "password": PASSWORD}
    )
    if done.status_code not in (200, 302) or "sessionid" not in browser.cookies:
        raise SystemExit(f"could not log in as {username}: {done.status_code}")
    return browser


def api(url: str, token: str) -> httpx.Client:
    return httpx.Client(base_url=url, timeout=120, headers={"Authorization": f"Bearer {token}"})


def check(got: httpx.Response, *codes: int) -> dict[str, Any]:
    if got.status_code not in codes:
        raise SystemExit(f"{got.request.method} {got.request.url}: {got.status_code} {got.text[:2000]}")
    return got.json() if got.content else {}


# -- B ---------------------------------------------------------------------------------------


@dataclass
class Recorder:
    phase: str = "setup"
    rows: list[dict[str, Any]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, kind: str, ms: float, ok: bool, status: int | str, why: str = "") -> None:
        with self.lock:
            self.rows.append(
                {
                    "phase": self.phase,
                    "kind": kind,
                    "ms": round(ms, 2),
                    "ok": ok,
                    "status": status,
                    "why": " ".join(why.split())[:300],
                }
            )


def wait_run(
    http: httpx.Client, run_id: int, timeout: float, poll: float = POLL_S, give_up: threading.Event | None = None
) -> tuple[dict[str, Any], int]:
    """Poll GET /api/runs/<id> until the run is final (or `timeout`, or `give_up` is set);
    the run as last read and that answer's size."""
    deadline = time.monotonic() + timeout
    while True:
        got = http.get(f"/api/runs/{run_id}")
        if got.status_code != 200:
            return {"status": f"http {got.status_code}", "error": got.text[:300], "final": False}, len(got.content)
        run = got.json()
        if run["final"] or time.monotonic() > deadline or (give_up is not None and give_up.is_set()):
            return run, len(got.content)
        time.sleep(poll)


def b_client(url: str, token: str, slug: str, inputs: list[dict[str, Any]], rec: Recorder, stop: threading.Event):
    http, browser = api(url, token), session(url, "bob_calm")
    head = check(http.get(f"/api/projects/{slug}"), 200)["head"]
    readme = check(http.get(f"/api/projects/{slug}/files/README.md"), 200)["content"]
    i = 0

    def timed(kind: str, call: Any, want: int) -> httpx.Response | None:
        begun = time.perf_counter()
        try:
            got = call()
        except httpx.HTTPError as exc:
            rec.add(kind, (time.perf_counter() - begun) * 1000, False, "exception", repr(exc))
            return None
        ms = (time.perf_counter() - begun) * 1000
        ok = got.status_code == want
        rec.add(kind, ms, ok, got.status_code, "" if ok else got.text)
        return got

    try:
        while not stop.is_set():
            # a try-it run, submit -> final
            begun = time.perf_counter()
            try:
                made = http.post("/api/runs", json={"project": slug, "input": inputs[i % len(inputs)]})
                if made.status_code != 201:
                    rec.add("run", (time.perf_counter() - begun) * 1000, False, made.status_code, made.text)
                else:
                    run, _ = wait_run(http, made.json()["id"], RUN_TIMEOUT_S)
                    ms = (time.perf_counter() - begun) * 1000
                    ok = run.get("status") == "done"
                    rec.add("run", ms, ok, str(run.get("status")), "" if ok else str(run.get("error")))
            except httpx.HTTPError as exc:
                rec.add("run", (time.perf_counter() - begun) * 1000, False, "exception", repr(exc))
            # a save on the head it has
            readme_now = f"{readme}\n<!-- save {i} -->\n"
            body = {"base": head, "message": f"bench save {i}", "files": {"README.md": readme_now}}
            got = timed("save", lambda body=body: http.put(f"/api/projects/{slug}/files", json=body), 200)
            if got is not None and got.status_code == 200:
                head = got.json()["version"]
            elif got is not None and got.status_code == 409:
                head = got.json()["head"]
            timed("project_page", lambda: browser.get(f"/p/{slug}/"), 200)
            timed("runs_list", lambda: http.get("/api/runs", params={"project": slug}), 200)
            timed("login_page", lambda: httpx.get(f"{url.rstrip('/')}/login/", timeout=60), 200)
            i += 1
    finally:
        http.close()
        browser.close()


# -- A ---------------------------------------------------------------------------------------


@dataclass
class Attack:
    runs: list[dict[str, Any]] = field(default_factory=list)
    codes: Counter[str] = field(default_factory=Counter)  # "what status": count
    saves_refused: list[str] = field(default_factory=list)  # the 400's detail, first few
    lock: threading.Lock = field(default_factory=threading.Lock)
    give_up: threading.Event = field(default_factory=threading.Event)  # the drain is over: stop waiting

    def count(self, what: str) -> None:
        with self.lock:
            self.codes[what] += 1

    def run(self, http: httpx.Client, slug: str, mode: str) -> None:
        begun = time.perf_counter()
        made = http.post("/api/runs", json={"project": slug, "input": {"mode": mode}})
        self.count(f"{mode} run POST {made.status_code}")
        if made.status_code != 201:
            with self.lock:
                self.runs.append(
                    {"mode": mode, "status": f"http {made.status_code}", "error": made.text[:300], "ended": False}
                )
            return
        try:
            run, size = wait_run(http, made.json()["id"], RUN_TIMEOUT_S, poll=0.25, give_up=self.give_up)
        except httpx.HTTPError as exc:
            run, size = {"id": made.json()["id"], "status": f"poll failed: {exc!r}"[:200], "final": False}, 0
        with self.lock:
            self.runs.append(
                {
                    "mode": mode,
                    "id": run.get("id"),
                    "status": run.get("status"),
                    "ended": bool(run.get("final")),
                    "error": str(run.get("error") or "")[:300],
                    "steps": run.get("steps_total", len(run.get("steps") or [])),
                    "seconds": round(time.perf_counter() - begun, 2),
                    "answer_bytes": size,
                }
            )


def a_regex(http: httpx.Client, slug: str, attack: Attack, stop: threading.Event) -> None:
    attempt = 0
    while not stop.is_set():
        attempt += 1
        head = check(http.get(f"/api/projects/{slug}"), 200)["head"]
        saved = http.put(
            f"/api/projects/{slug}/files",
            json={
                "base": head,
                "message": f"pattern {attempt}",
                "files": {"grammars/answer.json": answer_grammar(attempt)},
            },
        )
        attack.count(f"regex save {saved.status_code}")
        attack.run(http, slug, "regex")


def a_steps(http: httpx.Client, slug: str, length: int, attack: Attack, stop: threading.Event) -> None:
    while not stop.is_set():
        head = check(http.get(f"/api/projects/{slug}"), 200)["head"]
        manifest = a_pack(length, HUGE_STEPS)["manifest.yaml"]
        saved = http.put(
            f"/api/projects/{slug}/files",
            json={"base": head, "message": "more steps", "files": {"manifest.yaml": manifest}},
        )
        attack.count(f"max_steps {HUGE_STEPS} save {saved.status_code}")
        if saved.status_code == 400 and len(attack.saves_refused) < 3:
            attack.saves_refused.append(str(saved.json().get("detail"))[:300])
        attack.run(http, slug, "loop")


def a_streams(
    url: str, token: str, deployment: str, run_id: str, n: int, hold_s: float, attack: Attack, stop: threading.Event
) -> None:
    def one() -> None:
        try:
            with httpx.Client(base_url=url, timeout=hold_s + 60, headers={"Authorization": f"Bearer {token}"}) as c:
                path = f"/api/deployments/{deployment}/runs/{run_id}/events"
                with c.stream("GET", path, params={"timeout": hold_s}) as s:
                    attack.count(f"stream {s.status_code}")
                    for _ in s.iter_lines():  # held until the server ends it
                        pass
        except httpx.HTTPError as exc:
            attack.count(f"stream {type(exc).__name__}")

    while not stop.is_set():
        threads = [threading.Thread(target=one, daemon=True) for _ in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        attack.count("stream rounds")


# -- main ------------------------------------------------------------------------------------


def setup(url: str, tokens: dict[str, str], length: int) -> tuple[str, str]:
    """A's project, its deployment and a served run that waits for a person; B's project."""
    with api(url, tokens["bob_calm"]) as b:
        check(b.post("/api/projects", json={"slug": "calm", "name": "Calm", "example": "support_triage"}), 201)
    with api(url, tokens["alice_noisy"]) as a:
        head = check(a.post("/api/projects", json={"slug": "noisy", "name": "Noisy"}), 201)["head"]
        files = a_pack(length, 10_000)
        check(a.put("/api/projects/noisy/files", json={"base": head, "message": "the pack", "files": files}), 200)
        check(a.post("/api/deployments", json={"project": "noisy", "name": "noisy", "tiers": []}), 201)
        run = check(
            a.post("/api/deployments/noisy/runs", json={"input": {"mode": "wait"}}, params={"wait": 30}), 200, 202
        )
        deadline = time.monotonic() + 60
        while run["status"] != "waiting" and time.monotonic() < deadline:
            time.sleep(0.2)
            run = check(a.get(f"/api/deployments/noisy/runs/{run['run_id']}"), 200)
        if run["status"] != "waiting":
            raise SystemExit(f"A's served run did not wait for a person: {run['status']} {run['error']}")
    return "noisy", str(run["run_id"])


def summarise(rows: list[dict[str, Any]], phase: str, kind: str) -> dict[str, Any]:
    mine = [r for r in rows if r["phase"] == phase and r["kind"] == kind]
    ok = [r["ms"] for r in mine if r["ok"]]
    return {"n": len(mine), "errors": len(mine) - len(ok), "p50_ms": pct(ok, 50), "p95_ms": pct(ok, 95)}


def a_ended_by_cap(run: dict[str, Any]) -> bool:
    if not run.get("ended") or run.get("status") != "failed":
        return False
    error = run.get("error", "")
    if run["mode"] == "loop":
        return "step bound reached" in error and "PACKFORGE_MAX_STEPS" in error
    return "pattern" in error or BAD_PATTERN in error


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--idle-s", type=float, default=30, help="phase 1, B alone (default 30)")
    parser.add_argument("--attack-s", type=float, default=60, help="phase 2, B under attack (default 60; issue: 180)")
    parser.add_argument("--streams", type=int, default=32, help="event streams A opens at once (default 32)")
    parser.add_argument("--stream-hold-s", type=float, default=15, help="?timeout= of A's streams (default 15)")
    parser.add_argument("--a-length", type=int, default=27, help="'a's in A's scripted answer (default 27)")
    parser.add_argument("--b-clients", type=int, default=1, help="B's clients, each the whole workload (default 1)")
    parser.add_argument("--concurrency", type=int, default=2, help="CELERY_CONCURRENCY (default 2, scripts/start's)")
    parser.add_argument(
        "--runs-per-user",
        type=int,
        default=1,
        help="PACKFORGE_MAX_RUNS_PER_USER (default 1, scripts/start's own with 2 workers: one stays free for others)",
    )
    parser.add_argument(
        "--drain-s",
        type=float,
        default=240,
        help="the most A's runs in flight are waited for (default 240: a paced loop takes 200 s)",
    )
    parser.add_argument(
        "--attacks",
        default="regex,steps,streams",
        help="A's attacks to run, comma-separated (default regex,steps,streams; fewer: which one costs B what)",
    )
    parser.add_argument("--json", action="store_true", help="print the row as JSON")
    parser.add_argument("--rows", type=Path, default=RESULTS, help="the jsonl the row is appended to")
    parser.add_argument("--keep", action="store_true", help="keep the temp folder (var/, logs)")
    args = parser.parse_args(argv)

    pack_dir = ROOT / "packs" / "support_triage"
    bare = Bare(pack_dir)
    cases = [json.loads(line)["input"] for line in (pack_dir / "evalset.jsonl").read_text().splitlines() if line]
    inputs = [c for c in cases if bare.run(c)[1] == "done"]

    tmp = Path(tempfile.mkdtemp(prefix="pf-noisy-"))
    began = time.perf_counter()
    load_before = os.getloadavg()[0]
    print(f"noisy neighbour: var in {tmp}", file=sys.stderr)
    studio: Studio = start_studio(
        tmp, free_port(), args.concurrency, {"PACKFORGE_MAX_RUNS_PER_USER": str(args.runs_per_user)}
    )
    rec, attack = Recorder(), Attack()
    db: dict[str, int] = {}
    try:
        url = studio.wait_for(r"^Packforge studio: (http://\S+)", timeout=1).group(1)
        made = studio.shell(MAKE_USERS.format(password=PASSWORD))
        tokens = {m[1]: m[2] for m in re.finditer(r"^token (\S+) (\S+)$", made, re.M)}
        deployment, waiting_run = setup(url, tokens, args.a_length)
        var = tmp / "var"

        def b_phase(seconds: float) -> None:
            stop = threading.Event()
            clients = [
                threading.Thread(target=b_client, args=(url, tokens["bob_calm"], "calm", inputs, rec, stop))
                for _ in range(args.b_clients)
            ]
            for t in clients:
                t.start()
            time.sleep(seconds)
            stop.set()
            for t in clients:
                t.join()

        print(f"  phase 1: B alone, {args.idle_s:.0f} s ...", file=sys.stderr)
        db["idle_before"] = db_bytes(var)
        rec.phase = "idle"
        b_phase(args.idle_s)
        db["idle_after"] = db_bytes(var)

        print(f"  phase 2: B under attack, {args.attack_s:.0f} s ...", file=sys.stderr)
        rec.phase = "attack"
        a_stop = threading.Event()
        a_http = api(url, tokens["alice_noisy"])
        attackers = [
            threading.Thread(target=a_regex, args=(a_http, "noisy", attack, a_stop), daemon=True),
            threading.Thread(target=a_steps, args=(a_http, "noisy", args.a_length, attack, a_stop), daemon=True),
            threading.Thread(
                target=a_streams,
                args=(url, tokens["alice_noisy"], deployment, waiting_run, args.streams, args.stream_hold_s),
                kwargs={"attack": attack, "stop": a_stop},
                daemon=True,
            ),
        ]
        chosen = {name.strip() for name in args.attacks.split(",")}
        unknown = chosen - {"regex", "steps", "streams"}
        if unknown:
            raise SystemExit(f"--attacks: no attack {', '.join(sorted(unknown))}")
        attackers = [t for t, name in zip(attackers, ("regex", "steps", "streams"), strict=True) if name in chosen]
        attack_began = time.perf_counter()
        for t in attackers:
            t.start()
        b_phase(args.attack_s)
        a_stop.set()
        db["attack_after"] = db_bytes(var)
        print(f"  B stopped; waiting for A's runs in flight (at most {args.drain_s:.0f} s) ...", file=sys.stderr)
        drain_began = time.perf_counter()
        for t in attackers:
            t.join(timeout=max(0.1, args.drain_s - (time.perf_counter() - drain_began)))
        drained = not any(t.is_alive() for t in attackers)
        attack.give_up.set()  # the runs still in flight are recorded as they are now
        for t in attackers:
            t.join(timeout=30)
        attack_wall = time.perf_counter() - attack_began
        db["drained"] = db_bytes(var)
        a_http.close()
    finally:
        studio.stop()
        if args.keep:
            print(f"kept {tmp}", file=sys.stderr)
        else:
            shutil.rmtree(tmp, ignore_errors=True)

    # -- the numbers --------------------------------------------------------------------------
    kinds = {}
    for kind in B_KINDS:
        idle, hit = summarise(rec.rows, "idle", kind), summarise(rec.rows, "attack", kind)
        ratio = round(hit["p95_ms"] / idle["p95_ms"], 2) if hit["p95_ms"] and idle["p95_ms"] else None
        kinds[kind] = {"idle": idle, "attack": hit, "p95_ratio": ratio}
    b_errors = {p: [r for r in rec.rows if r["phase"] == p and not r["ok"]] for p in ("idle", "attack")}
    endings = Counter(
        f"{r['mode']}: {r['status']}" + (f" ({r['error'][:70]})" if r.get("error") else "") for r in attack.runs
    )
    loops = [r for r in attack.runs if r["mode"] == "loop"]
    regexes = [r for r in attack.runs if r["mode"] == "regex"]
    ratio_met = all(k["p95_ratio"] is not None and k["p95_ratio"] <= 2.0 for k in kinds.values())
    goals = {
        "b_p95_within_2x": ratio_met,
        "b_no_errors": not b_errors["attack"] and not b_errors["idle"],
        "a_runs_ended_by_cap": bool(attack.runs) and all(a_ended_by_cap(r) for r in attack.runs) and drained,
    }
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    row = {
        "bench": "noisy_neighbour",
        "at": datetime.now(UTC).isoformat(timespec="seconds"),
        "commit": commit.stdout.strip(),
        "setup": "scripts/start: SQLite + embedded broker, gunicorn (2 processes x 8 threads), "
        f"celery worker concurrency {args.concurrency}, worker nice {os.environ.get('PACKFORGE_WORKER_NICE', '10')}",
        "args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "b_kinds": kinds,
        "b_errors": {
            p: [{k: r[k] for k in ("kind", "status", "why")} for r in errs[:10]] for p, errs in b_errors.items()
        },
        "b_error_counts": {p: len(errs) for p, errs in b_errors.items()},
        "a_runs": attack.runs,
        "a_endings": dict(endings),
        "a_codes": dict(attack.codes),
        "a_refused_saves": attack.saves_refused,
        "a_loop_seconds_max": max((r.get("seconds", 0) for r in loops), default=None),
        "a_loop_steps": sorted({r.get("steps") for r in loops}),
        "a_not_ended": len([r for r in attack.runs if not r.get("ended")]),
        "a_loop_answer_bytes_max": max((r.get("answer_bytes", 0) for r in loops), default=None),
        "a_regex_seconds_max": max((r.get("seconds", 0) for r in regexes), default=None),
        "a_drained": drained,
        "attack_wall_s": round(attack_wall, 1),
        "db_bytes": db,
        "db_growth_idle": db["idle_after"] - db["idle_before"],
        "db_growth_attack": db["drained"] - db["idle_after"],
        "goals": goals,
        "b_latencies_ms": {
            p: {k: [r["ms"] for r in rec.rows if r["phase"] == p and r["kind"] == k] for k in B_KINDS}
            for p in ("idle", "attack")
        },
        "cpus": os.cpu_count(),
        "load_average": [load_before, os.getloadavg()[0]],
        "wall_s": round(time.perf_counter() - began, 1),
    }
    args.rows.parent.mkdir(parents=True, exist_ok=True)
    with args.rows.open("a", encoding="utf-8") as f:
        f.write(json.dumps(row) + "\n")
    if args.json:
        print(json.dumps(row, indent=1))
        return 0
    print_table(row)
    shown = args.rows.relative_to(ROOT) if args.rows.is_relative_to(ROOT) else args.rows
    print(f"\nrow appended to {shown}; wall {row['wall_s']} s")
    return 0


def mb(n: int) -> str:
    return f"{n / 1e6:.1f} MB"


def print_table(row: dict[str, Any]) -> None:
    a = row["args"]
    print(
        f"Noisy neighbour: {row['setup']}; idle {a['idle_s']:.0f} s, attack {a['attack_s']:.0f} s "
        f"({a['attacks']}); "
        f"{row['cpus']} CPUs, load average {row['load_average'][0]:.1f} before, {row['load_average'][1]:.1f} after"
    )
    print()
    print(
        "| B's request | idle n | idle p50 ms | idle p95 ms | attack n | attack p50 ms | attack p95 ms | p95 ratio | B errors (idle/attack) |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for kind, k in row["b_kinds"].items():
        i, h = k["idle"], k["attack"]
        print(
            f"| {kind} | {i['n']} | {i['p50_ms']} | {i['p95_ms']} | {h['n']} | {h['p50_ms']} | {h['p95_ms']} | "
            f"{k['p95_ratio']} | {i['errors']}/{h['errors']} |"
        )
    print()
    print(f"A's runs: {len(row['a_runs'])}, {row['a_not_ended']} not ended when the drain was over; how they ended:")
    for ending, n in sorted(row["a_endings"].items()):
        print(f"  {n:4d}  {ending}")
    print(
        f"  steps runs: steps {row['a_loop_steps']}, longest {row['a_loop_seconds_max']} s, "
        f"largest final GET /api/runs/<id> answer {row['a_loop_answer_bytes_max']} bytes; "
        f"regex runs: longest {row['a_regex_seconds_max']} s"
    )
    print("A's answers: " + ", ".join(f"{k}: {v}" for k, v in sorted(row["a_codes"].items())))
    for detail in row["a_refused_saves"][:1]:
        print(f"  refused save says: {detail}")
    db = row["db_bytes"]
    print(
        f"Database (SQLite + WAL): {mb(db['idle_before'])} before; +{mb(row['db_growth_idle'])} in the idle phase; "
        f"+{mb(row['db_growth_attack'])} in the attack phase (to {mb(db['drained'])}, A's runs drained: {row['a_drained']})"
    )
    for p, errs in row["b_errors"].items():
        for e in errs[:5]:
            print(f"  B error ({p}): {e['kind']} {e['status']} {e['why'][:200]}")
    print()
    g = row["goals"]
    print(f"goal: B's p95 under attack within 2x of idle, every kind: {'met' if g['b_p95_within_2x'] else 'NOT met'}")
    print(f"goal: 0 errors for B: {'met' if g['b_no_errors'] else 'NOT met'}")
    print(f"goal: A's runs all ended by a cap with a clear message: {'met' if g['a_runs_ended_by_cap'] else 'NOT met'}")


if __name__ == "__main__":
    sys.exit(main())
