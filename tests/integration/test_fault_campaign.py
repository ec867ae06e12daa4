"""The quick fault campaign (``edn bench faults --quick``) across a lab of hosts: its
history holds every guarantee. Needs root (network namespaces), iptables and faketime."""
import shutil

import pytest

from benchmarks.lab import why_not_available

reason = why_not_available() or (None if shutil.which("faketime") else "no faketime")
pytestmark = pytest.mark.skipif(bool(reason), reason=f"the fault campaign cannot run here: {reason}")


def test_the_quick_campaign_loses_nothing_acknowledged():
    from benchmarks.robustness.faults import run
    verdict = run(quick=True)
    assert verdict["acknowledged"] > 0 and verdict["expected_notifications"] > 0
    assert verdict["lost"] == 0, verdict["lost_examples"]
    assert verdict["unexpected"] == 0, verdict["unexpected_examples"]
    assert verdict["duplicates_with_new_message_id"] == 0, verdict["duplicate_examples"]
    assert verdict["subscriptions_lost"] == verdict["subscriptions_resurrected"] == []
    assert verdict["subscriptions_held_twice"] == []
    assert all(verdict["alive"].values()), verdict["alive"]
    assert verdict["drained_after_final_heal"]
    for fault in verdict["faults"]:
        assert fault["back_in_view_s"] is not None, fault
    # a new Subscribe at the server whose disk is full is refused, and told why, unless
    # placement put it on a server with room, or its commit fitted in the write-ahead log's
    # pages already on disk (a log that a checkpoint emptied is written again from its start,
    # needing no new block; the commit is synced like any other, and nothing is lost above)
    answers = verdict["full_disk_subscribe_answers"]
    assert answers, verdict["notes"]
    assert all(("Receiver" in a and "storage is full" in a)
               or a in ("accepted elsewhere", "accepted by the full server itself")
               for a in answers), answers
