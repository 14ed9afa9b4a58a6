"""What a worker (or a web process walking a `?wait` run) opens once per deployment
version and tiers: the pack, its tools, and one runtime Tier per deployment endpoint,
named by the endpoint, each call holding a slot of that endpoint's global cap
(studio.work.slots, the key evals use, so served runs and evals share one cap per
endpoint). A deployment without tiers runs on the pack's own (scripted) model as its one
tier, "pack". Kept in a small per-process cache; a runner that leaves the cache under a
walk is closed when its last walk ends."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from runtime import Pack, Registry, Tier, open_backend
from studio import host_tools, packs
from studio.deployments.models import Deployment
from studio.endpoints.backends import spec_for
from studio.endpoints.models import Endpoint
from studio.kept import Kept
from studio.work.slots import endpoint_tiers

OWN_TIER = "pack"  # the one tier of a deployment without endpoints: the pack's own model


@dataclass
class Runner:
    pack: Pack
    tools: Registry | None
    tiers: list[Tier]
    users: int = 0  # walks using it now (a web process walks several at once)
    evicted: bool = False

    def close(self) -> None:
        for tier in self.tiers:
            tier.backend.close()


_RUNNERS_KEPT = 8
_runners: Kept[tuple[Any, ...], Runner] = Kept(lambda: _RUNNERS_KEPT)


def _endpoints(deployment: Deployment) -> list[Endpoint]:
    if not deployment.tiers:
        return []
    found = {e.pk: e for e in Endpoint.objects.filter(pk__in=deployment.tiers)}
    missing = [pk for pk in deployment.tiers if pk not in found]
    if missing:
        raise packs.PackUnrunnable([f"the deployment's tier endpoint {missing[0]} was deleted; change its tiers"])
    return [found[pk] for pk in deployment.tiers]


@contextmanager
def using_runner(deployment: Deployment, version: str) -> Iterator[Runner]:
    """The runner of `deployment` at `version` for one walk. One that leaves the cache
    meanwhile (more than _RUNNERS_KEPT others opened) is closed when its last walk ends,
    not under a walk."""
    runner = runner_for(deployment, version)
    try:
        yield runner
    finally:
        with _runners.lock:
            runner.users -= 1
            if runner.evicted and runner.users == 0:
                runner.close()


def runner_for(deployment: Deployment, version: str) -> Runner:
    """The cached runner (counted as used: `using_runner` gives it back)."""
    endpoints = _endpoints(deployment)
    key = (deployment.project_id, version, tuple((e.pk, e.name, spec_for(e), e.concurrency) for e in endpoints))
    with _runners.lock:
        runner = _runners.get(key)
        if runner is not None:
            runner.users += 1
            return runner
        got = packs.load_folder(
            packs.version_folder(deployment.project_id, version), version, own_model=not endpoints
        ).ensure_runnable()
        pack = got.pack
        tiers: list[Tier] = []
        if not endpoints:
            tiers.append(Tier(OWN_TIER, open_backend(pack.model or "", base_dir=pack.root, default=pack.model)))
        tiers.extend(endpoint_tiers(endpoints, base_dir=pack.root, default=pack.model))
        runner = Runner(pack, got.tools, tiers, users=1)
        for old in _runners.put(key, runner):
            old.evicted = True
            if old.users == 0:
                old.close()
        return runner


def forget_runners() -> None:
    """Close and drop this process's opened deployments (tests; a worker keeps them)."""
    with _runners.lock:
        for runner in _runners.drain():
            runner.evicted = True
            if runner.users == 0:
                runner.close()
        packs.forget_folders()
        host_tools.forget()
