"""The fuzz's memory goal: a process's RSS grows by at most its new subscriptions' cost plus
50 MB."""
from benchmarks.robustness.fuzz.harness import RSS_SLACK_MB, SUBSCRIPTION_BYTES, memory_bound


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
