"""The work core's settings (studio.work.settings): the new names, the old ones read as
aliases for one release, and the one parser every app's settings go through."""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured

from studio.work import settings as work_settings
from studio.work.leases import lease


def test_the_defaults_hold_when_nothing_is_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PACKFORGE_WORK_LEASE_S", raising=False)
    monkeypatch.delenv("PACKFORGE_EVAL_LEASE_S", raising=False)
    assert work_settings.setting("PACKFORGE_WORK_LEASE_S") == 30.0
    assert lease() == timedelta(seconds=work_settings.DEFAULTS["PACKFORGE_WORK_LEASE_S"])  # built from the setting


def test_an_old_name_is_read_when_the_new_one_is_not_set(settings: Any, caplog: pytest.LogCaptureFixture) -> None:
    settings.PACKFORGE_EVAL_STALL_S = 12
    work_settings._warned.discard("PACKFORGE_EVAL_STALL_S")
    logger = logging.getLogger("packforge.studio.work")  # the studio's LOGGING may stop it propagating
    logger.addHandler(caplog.handler)
    try:
        assert work_settings.setting("PACKFORGE_WORK_STALL_S") == 12.0
        assert work_settings.setting("PACKFORGE_WORK_STALL_S") == 12.0  # warned once, not per read
    finally:
        logger.removeHandler(caplog.handler)
    said = {
        id(r): r.getMessage() for r in caplog.records if "old name" in r.getMessage()
    }  # one record, seen once or twice
    assert list(said.values()) == [
        "PACKFORGE_EVAL_STALL_S is the old name of PACKFORGE_WORK_STALL_S; it is read until release 0.3"
    ]


def test_the_new_name_wins_over_the_old_one(settings: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    settings.PACKFORGE_EVAL_LEASE_S = 12
    monkeypatch.setenv("PACKFORGE_WORK_LEASE_S", "7.5")
    assert work_settings.setting("PACKFORGE_WORK_LEASE_S") == 7.5  # the new name wins
    assert lease() == timedelta(seconds=work_settings.setting("PACKFORGE_WORK_LEASE_S"))


@pytest.mark.parametrize(
    ("name", "value", "says"),
    [
        ("PACKFORGE_WORK_LEASE_S", "0", "must be more than 0"),
        ("PACKFORGE_WORK_SWEEP_S", "-1", "must be more than 0"),
        ("PACKFORGE_EVAL_POLL_S", "fast", "PACKFORGE_EVAL_POLL_S='fast'"),
    ],
)
def test_a_bad_value_is_refused_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str, says: str
) -> None:
    monkeypatch.setenv(name, value)
    new = next((new for new, old in work_settings.ALIASES.items() if old == name), name)
    with pytest.raises(ImproperlyConfigured, match=says.replace("(", r"\(")):
        work_settings.setting(new)
