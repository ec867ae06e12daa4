"""``edn serve table`` and ``edn table``: the role is registered like the others, refuses more
than one worker and bad settings before any process starts, its feed-schema command prints the
schema the feed topic needs, and its modules bind no blocking primitive before gevent's patch."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest
from lxml import etree

from edn.cli import main
from edn.roles import known_roles, settings_groups
from tests.unit.edn.test_gunicorn_worker_classes import _HARMLESS, _SCAN

GOOD = ["--set", "table=stocks", "--set", "value=per", "--set", "over=risk", "--set", "low=0",
        "--set", "high=100", "--dispatcher", "http://127.0.0.1:9"]


def test_the_table_role_is_registered_with_its_settings():
    assert "table" in known_roles()
    keys = {key for group in settings_groups("table") for key in group.keys()}
    assert {"table", "value", "over", "low", "high", "dispatcher", "feed", "max_tuples"} <= keys


def test_more_than_one_worker_is_refused_before_anything_starts(tmp_path):
    with pytest.raises(SystemExit, match="runs in one worker .*--workers 1"):
        main(["serve", "table", "--data", str(tmp_path / "t"), "--workers", "2", *GOOD])
    assert not (tmp_path / "t").exists()   # refused before the data directory was made


@pytest.mark.parametrize("argv, reason", [
    (GOOD[:-2], "dispatcher"),
    (GOOD + ["--set", "low=200"], "low < high"),
    (GOOD + ["--set", "tables=x"], "unknown setting"),
])
def test_bad_settings_are_refused_before_anything_starts(tmp_path, argv, reason):
    with pytest.raises(SystemExit, match=reason):
        main(["serve", "table", "--data", str(tmp_path / "t"), *argv])
    assert not (tmp_path / "t").exists()


def test_feed_schema_prints_what_the_feed_topic_needs(capsys):
    from matchers.schema import Schema
    assert main(["table", "feed-schema", "--value", "per", "--over", "risk", "--low", "0",
                 "--high", "100"]) == 0
    schema = Schema.from_element(etree.fromstring(capsys.readouterr().out.encode()))
    assert schema.dims == ("per.min.risk.low", "per.min.risk.high", "per.max.risk.low",
                           "per.max.risk.high")


def test_feed_schema_refuses_an_empty_domain(capsys):
    assert main(["table", "feed-schema", "--value", "per", "--over", "risk", "--low", "5",
                 "--high", "5"]) == 4
    assert "min must be below max" in capsys.readouterr().err


def test_the_table_role_binds_no_blocking_primitive_before_the_gevent_patch():
    # The scan of test_gunicorn_worker_classes, over the modules the table role imports.
    pytest.importorskip("gevent")
    scan = _SCAN.replace("for role in known_roles():", 'for role in ("table",):', 1)
    assert scan != _SCAN
    result = subprocess.run([sys.executable, "-W", "ignore", "-c", scan], capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    found = set(json.loads(result.stdout.strip().splitlines()[-1])) - _HARMLESS
    assert not found, sorted(found)
