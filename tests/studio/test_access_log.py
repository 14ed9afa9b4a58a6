"""Gunicorn's access log, through the logger class gunicorn.conf.py names: a token in a
query string (refused with 401 by the API) never reaches the log."""

from __future__ import annotations

import datetime
import logging
from pathlib import Path
from types import SimpleNamespace

import pytest
from gunicorn.config import Config

from studio.access_log import AccessLogger

ROOT = Path(__file__).resolve().parents[2]


def logged_line(caplog: pytest.LogCaptureFixture, environ: dict[str, str], headers: list[tuple[str, str]]) -> str:
    cfg = Config()
    cfg.set("accesslog", "-")
    cfg.set(
        "access_log_format",
        '%(h)s "%(r)s" %(s)s "%(f)s" q=%(q)s U=%(U)s {raw_uri}e {query_string}e {authorization}i',
    )
    logger = AccessLogger(cfg)
    logger.access_log.propagate = True
    resp = SimpleNamespace(status="401 Unauthorized", headers=[], sent=26)
    req = SimpleNamespace(headers=headers)
    with caplog.at_level(logging.INFO, logger="gunicorn.access"):
        logger.access(resp, req, environ, datetime.timedelta(milliseconds=3))
    return caplog.records[-1].getMessage()


def test_it_logs_the_path_without_the_query_string(caplog: pytest.LogCaptureFixture) -> None:
    environ = {
        "REQUEST_METHOD": "GET",
        "RAW_URI": "/api/projects?token=pf_s_SECRET123&x=1",
        "PATH_INFO": "/api/projects",
        "QUERY_STRING": "token=pf_s_SECRET123&x=1",
        "SERVER_PROTOCOL": "HTTP/1.1",
        "REMOTE_ADDR": "127.0.0.1",
        "HTTP_REFERER": "http://studio.local/p/x/?token=pf_s_SECRET123",
    }
    line = logged_line(caplog, environ, [("AUTHORIZATION", "Bearer pf_s_SECRET123")])
    assert "SECRET123" not in line
    assert '"GET /api/projects HTTP/1.1" 401 "http://studio.local/p/x/"' in line
    assert "U=/api/projects" in line


def test_it_is_the_logger_gunicorn_loads_from_the_repository_root() -> None:
    cfg: dict[str, object] = {}
    exec((ROOT / "gunicorn.conf.py").read_text(), cfg)
    assert cfg["logger_class"] == "studio.access_log.AccessLogger"
