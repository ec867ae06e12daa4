"""The options of ``edn publish`` that make it survive a lossy link: a connect timeout
longer than TCP's first SYN retransmission, and retries (the retries themselves:
tests/unit/wsframework/test_publisher_retries.py)."""
from __future__ import annotations

import pytest

from edn import cli

A = "http://a.test"


def test_edn_publish_defaults_outlast_a_lost_syn_and_retry():
    args = cli.build_parser().parse_args(["publish", "--at", A, "stocks", "e.xml"])
    assert args.connect_timeout == 3.0 > 1.0  # TCP's first SYN retransmission comes at 1 s
    assert args.attempts == 3


@pytest.mark.parametrize("option, value", [
    ("--attempts", "0"), ("--attempts", "21"), ("--attempts", "-1"), ("--attempts", "3.5"),
    ("--attempts", "1" * 50), ("--connect-timeout", "0"), ("--connect-timeout", "nan"),
    ("--connect-timeout", "-3"), ("--timeout", "inf"), ("--timeout", "1e9"),
    ("--timeout", "soon")])
def test_edn_publish_refuses_bad_retry_options(option, value, capsys):
    with pytest.raises(SystemExit) as caught:
        cli.build_parser().parse_args(["publish", "--at", A, option, value, "stocks", "e.xml"])
    assert caught.value.code == 2 and option in capsys.readouterr().err
