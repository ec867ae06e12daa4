"""The fuzz's memory goal: a process's RSS grows by at most its new subscriptions' cost plus
50 MB."""
from benchmarks.robustness.fuzz.harness import (RSS_SLACK_MB, SUBSCRIPTION_BYTES, memory_bound,
                                               pending_in_metrics)


def entry(before, after, subscriptions=0):
    return {"rss_mb_before": before, "rss_mb_after": after, "subscriptions_created": subscriptions}


def test_growth_within_the_slack_and_the_subscriptions_cost_is_bounded():
    assert memory_bound(entry(150.0, 150.0 + RSS_SLACK_MB))["memory_bounded"]
    allowed = 1_000 * SUBSCRIPTION_BYTES / 2**20
    found = memory_bound(entry(150.0, 150.0 + RSS_SLACK_MB + allowed - 0.1, 1_000))
    assert found["memory_bounded"] and found["rss_growth_bound_mb"] == round(RSS_SLACK_MB + allowed, 1)


def test_growth_past_the_bound_or_a_dead_process_is_not():
    assert not memory_bound(entry(150.0, 150.0 + RSS_SLACK_MB + 0.5))["memory_bounded"]
    assert not memory_bound(entry(150.0, 150.0 + RSS_SLACK_MB + 5, 1_000))["memory_bounded"]
    assert memory_bound(entry(150.0, None)) == {"rss_growth_mb": None, "rss_growth_bound_mb": None,
                                                "memory_bounded": False}


def test_the_notifications_a_process_owes_are_read_from_its_metrics():
    exposition = ("# HELP edn_delivery_pending notifications not yet finished\n"
                  "edn_delivery_pending{pid=\"11\"} 24824.0\n"
                  "edn_delivery_pending{pid=\"12\"} 3.0\n"
                  "edn_delivery_pending_total_other 7\n")
    assert pending_in_metrics(exposition) == 24_827
    assert pending_in_metrics("edn_delivery_pending 0.0\n") == 0
    assert pending_in_metrics("edn_notifications_queued_total 5.0\n") is None
