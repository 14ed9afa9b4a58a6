"""Real Postgres and Redis servers for tests, each in its own temporary folder on a free
loopback port, started and stopped by the harness.

    with postgres() as pg, redis() as rd:
        os.environ["DATABASE_URL"] = pg.url
        os.environ["REDIS_URL"] = rd.url

As a command (what scripts/with-services runs):

    python tests/support/services.py CMD [ARGS...]

starts both, runs CMD with DATABASE_URL and REDIS_URL exported, stops both, and exits
with CMD's status. Standard library only, so it runs before the project's virtual
environment exists.

Postgres comes from Debian's `postgresql` package (initdb, pg_ctl under
/usr/lib/postgresql/<version>/bin). It refuses to run as root: as root, the harness
runs its programs as the `postgres` user (made by that package) through `runuser`, and
hands that user the temporary folder. The cluster trusts local connections (it listens
on 127.0.0.1 and a socket in its own folder only) and skips fsync: it holds test data."""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

READY_TIMEOUT_S = 30.0


class ServiceError(RuntimeError):
    """A service could not be found, started or stopped; the message says what to do."""


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _tail(path: Path, lines: int = 20) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


# -- Postgres ----------------------------------------------------------------------------


def postgres_bin() -> Path:
    """The folder holding initdb and pg_ctl: the newest /usr/lib/postgresql/*/bin, or the
    one beside `initdb` on PATH."""
    found = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/initdb"),
        key=lambda p: [int(x) if x.isdigit() else 0 for x in Path(p).parent.parent.name.split(".")],
    )
    if found:
        return Path(found[-1]).parent
    on_path = shutil.which("initdb")
    if on_path:
        return Path(on_path).resolve().parent
    raise ServiceError("Postgres is not installed: apt-get install postgresql (initdb and pg_ctl are needed)")


@dataclass
class Postgres:
    root: Path
    port: int
    user: str = "packforge"
    database: str = "packforge"
    bin: Path = field(default_factory=postgres_bin)
    run_as: str | None = None  # the OS user the server runs as, when we are root

    @property
    def data(self) -> Path:
        return self.root / "data"

    @property
    def log(self) -> Path:
        return self.root / "postgres.log"

    @property
    def url(self) -> str:
        return f"postgres://{self.user}@127.0.0.1:{self.port}/{self.database}"

    def _cmd(self, program: str, *args: str) -> list[str]:
        cmd = [str(self.bin / program), *args]
        return ["runuser", "-u", self.run_as, "--", *cmd] if self.run_as else cmd

    def _run(self, program: str, *args: str, timeout: float = 60) -> None:
        done = subprocess.run(self._cmd(program, *args), capture_output=True, text=True, timeout=timeout, cwd=self.root)
        if done.returncode != 0:
            raise ServiceError(
                f"{program} failed ({done.returncode}): {done.stderr.strip() or done.stdout.strip()}\n{_tail(self.log)}"
            )

    def start(self) -> Postgres:
        self._run(
            "initdb", "-D", str(self.data), "-U", self.user, "--auth=trust", "--no-sync", "-E", "UTF8", "--locale=C"
        )
        self._serve()
        self._run("createdb", "-h", "127.0.0.1", "-p", str(self.port), "-U", self.user, self.database)
        return self

    def restart(self) -> None:
        """Crash the server (`pg_ctl stop -m immediate`: connections cut, no clean
        shutdown) and start it again on the same port and data: what a fault test needs."""
        self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop", timeout=30)
        self._serve()

    def _serve(self) -> None:
        options = (
            f"-p {self.port} -c listen_addresses=127.0.0.1 -k {self.root} -c fsync=off "
            "-c synchronous_commit=off -c full_page_writes=off -c max_connections=100"
        )
        self._run(
            "pg_ctl",
            "-D",
            str(self.data),
            "-l",
            str(self.log),
            "-o",
            options,
            "-w",
            "-t",
            str(int(READY_TIMEOUT_S)),
            "start",
        )

    def stop(self) -> None:
        if (self.data / "postmaster.pid").exists():
            with contextlib.suppress(ServiceError, subprocess.TimeoutExpired):
                self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop", timeout=30)


def _postgres_user() -> str | None:
    if os.geteuid() != 0:
        return None
    try:
        pwd.getpwnam("postgres")
    except KeyError:
        raise ServiceError(
            "running as root, Postgres needs a non-root user to run as; the Debian postgresql "
            "package makes one named postgres (apt-get install postgresql)"
        ) from None
    if shutil.which("runuser") is None:
        raise ServiceError("running as root, the harness needs runuser (util-linux) to start Postgres as postgres")
    return "postgres"


@contextlib.contextmanager
def postgres(attempts: int = 3) -> Iterator[Postgres]:
    """A running Postgres with an empty database; removed, folder and all, on exit."""
    root = Path(tempfile.mkdtemp(prefix="pf-postgres-"))
    run_as = _postgres_user()
    if run_as:
        entry = pwd.getpwnam(run_as)
        os.chown(root, entry.pw_uid, entry.pw_gid)
    server = None
    try:
        for attempt in range(attempts):  # a free port can be taken between choosing and binding
            server = Postgres(root=root, port=free_port(), run_as=run_as)
            try:
                server.start()
                break
            except ServiceError:
                server.stop()
                shutil.rmtree(server.data, ignore_errors=True)
                if attempt == attempts - 1:
                    raise
        assert server is not None
        yield server
    finally:
        if server is not None:
            server.stop()
        shutil.rmtree(root, ignore_errors=True)


# -- Redis -------------------------------------------------------------------------------


@dataclass
class Redis:
    root: Path
    port: int
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    @property
    def log(self) -> Path:
        return self.root / "redis.log"

    def start(self) -> Redis:
        binary = shutil.which("redis-server")
        if binary is None:
            raise ServiceError("Redis is not installed: apt-get install redis-server")
        with open(self.log, "wb") as log:
            self.process = subprocess.Popen(
                [
                    binary,
                    "--port",
                    str(self.port),
                    "--bind",
                    "127.0.0.1",
                    "--save",
                    "",
                    "--appendonly",
                    "no",
                    "--daemonize",
                    "no",
                    "--dir",
                    str(self.root),
                    "--protected-mode",
                    "yes",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.root,
            )
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise ServiceError(f"redis-server exited with {self.process.returncode}:\n{_tail(self.log)}")
            if self.ping():
                return self
            # Polls a condition; its own loop, not tests.support.waiting: this file also runs as
            # a script (scripts/with-services), outside the tests package.
            time.sleep(0.05)
        self.stop()
        raise ServiceError(f"redis-server did not answer PING within {READY_TIMEOUT_S:.0f} s:\n{_tail(self.log)}")

    def ping(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1) as s:
                s.sendall(b"PING\r\n")
                return s.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    def restart(self) -> None:
        """Stop the server and start a new one on the same port. It keeps nothing on
        disk, so every queued message and key is gone, as after a crash without
        persistence."""
        self.stop()
        self.start()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


@contextlib.contextmanager
def redis(attempts: int = 3) -> Iterator[Redis]:
    """A running Redis that keeps nothing on disk; stopped and removed on exit."""
    root = Path(tempfile.mkdtemp(prefix="pf-redis-"))
    server = None
    try:
        for attempt in range(attempts):
            server = Redis(root=root, port=free_port())
            try:
                server.start()
                break
            except ServiceError:
                server.stop()
                if attempt == attempts - 1:
                    raise
        assert server is not None
        yield server
    finally:
        if server is not None:
            server.stop()
        shutil.rmtree(root, ignore_errors=True)


# -- the command -------------------------------------------------------------------------


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(
            "usage: scripts/with-services CMD [ARGS...]\n"
            "Starts a throwaway Postgres and Redis on free loopback ports, runs CMD with DATABASE_URL and\n"
            "REDIS_URL exported, then stops both.",
            file=sys.stderr,
        )
        return 2
    # Stop the servers on SIGTERM too (CI cancelling a job), not only on Ctrl-C.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        with postgres() as pg, redis() as rd:
            env = {**os.environ, "DATABASE_URL": pg.url, "REDIS_URL": rd.url}
            print(f"with-services: DATABASE_URL={pg.url} REDIS_URL={rd.url}", file=sys.stderr, flush=True)
            try:
                return subprocess.call(argv, env=env)
            except FileNotFoundError:
                print(f"with-services: no such command: {argv[0]}", file=sys.stderr)
                return 127
    except ServiceError as exc:
        print(f"with-services: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
