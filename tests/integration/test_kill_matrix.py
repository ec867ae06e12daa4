"""The kill matrix, quick size (issue 13): ``kill -9`` (the gunicorn master and its workers)
of each EDN server, the dispatcher and a standalone source at random moments during bursts
of publications, restarted on the same data directory and port. Every notification of an
event the publisher got a success answer for reaches every subscription its filter selects
(computed from the range filters); a notification delivered twice keeps its wsa:MessageID;
every killed process delivers again after its restart. See ``edn bench kill``."""
from __future__ import annotations

import pytest

from benchmarks.robustness.kill import measure

TARGETS = ("server", "dispatcher", "source")


@pytest.fixture(scope="module")
def matrix():
    return measure(server_kills=2, dispatcher_kills=2, source_kills=2, subscriptions=20,
                   burst=100)


@pytest.mark.parametrize("target", TARGETS)
def test_nothing_acknowledged_is_lost(matrix, target):
    figures = matrix[target]
    assert figures["kills"] == 2
    assert figures["acknowledged"] > 0 and figures["expected"] > 0
    assert figures["lost"] == 0, figures["examples"]
    assert figures["unexpected"] == 0


@pytest.mark.parametrize("target", TARGETS)
def test_a_redelivered_notification_keeps_its_message_id(matrix, target):
    figures = matrix[target]
    # every event delivered twice to one subscription came under one MessageID
    assert figures["duplicate_events"] == figures["duplicates"], figures


@pytest.mark.parametrize("target", TARGETS)
def test_every_killed_process_delivers_again(matrix, target):
    figures = matrix[target]
    assert figures["not_recovered"] == 0, figures
    assert figures["recovery_ms_max"] < 30_000
