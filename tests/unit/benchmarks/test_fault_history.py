"""The fault campaign's history checker, on histories written by hand."""
import numpy as np

from benchmarks.lab.history import History, Notification, check, period_figures


def history(points, acknowledged=None):
    h = History()
    h.subscribed(np.array([[0.0, 0.0], [0.5, 0.5]]), np.array([[0.6, 0.6], [1.0, 1.0]]))
    for event_id, point in enumerate(points):
        h.sent(event_id, np.array(point), at=100.0 + event_id)
        if acknowledged is None or event_id in acknowledged:
            h.acknowledged(event_id, at=100.5 + event_id)
    return h


def note(h, subscriber, event_id, message_id="m", at=None):
    h.notified(Notification(subscriber, event_id, message_id,
                            at if at is not None else 101.0 + event_id))


def test_a_complete_history_passes():
    h = history([[0.1, 0.1], [0.55, 0.55], [0.9, 0.9]])
    for subscriber, event_id in [(0, 0), (0, 1), (1, 1), (1, 2)]:
        note(h, subscriber, event_id, f"m{subscriber}{event_id}")
    verdict = check(h, holders={0: ["s1"], 1: ["s2"]})
    assert (verdict["expected_notifications"], verdict["lost"], verdict["unexpected"],
            verdict["duplicates"]) == (4, 0, 0, 0)
    assert verdict["subscriptions_lost"] == verdict["subscriptions_held_twice"] == []


def test_a_missing_acknowledged_notification_is_lost_and_named():
    h = history([[0.55, 0.55]])
    note(h, 0, 0)
    verdict = check(h)
    assert verdict["lost"] == 1 and verdict["lost_examples"] == [{"subscriber": 1, "event": 0}]


def test_an_unacknowledged_event_need_not_arrive_but_may():
    h = history([[0.1, 0.1], [0.2, 0.2]], acknowledged={0})
    note(h, 0, 0)
    assert check(h)["lost"] == 0
    note(h, 0, 1)  # delivered though its publisher never heard back: allowed
    assert check(h)["unexpected"] == 0


def test_an_event_the_filter_does_not_select_or_never_published_is_unexpected():
    h = history([[0.1, 0.1]])
    note(h, 0, 0)
    note(h, 1, 0)   # outside subscriber 1's box
    note(h, 0, 99)  # never published
    verdict = check(h)
    assert verdict["unexpected"] == 2
    assert {(u["subscriber"], u["event"]) for u in verdict["unexpected_examples"]} == {(1, 0), (0, 99)}


def test_duplicates_are_counted_with_their_message_ids():
    h = history([[0.1, 0.1], [0.2, 0.2]])
    note(h, 0, 0, "a")
    note(h, 0, 0, "a")  # a redelivery: the same MessageID
    note(h, 0, 1, "b")
    note(h, 0, 1, "c")  # routed twice: a new MessageID
    verdict = check(h)
    assert verdict["duplicates"] == 2 and verdict["duplicates_with_new_message_id"] == 1
    assert verdict["duplicate_examples"][0]["message_ids"] == ["a", "a"]


def test_subscriptions_lost_resurrected_and_held_twice():
    h = history([])
    h.subscribed(np.array([[0.0, 0.0]]), np.array([[1.0, 1.0]]))
    h.ended.add(1)
    verdict = check(h, holders={1: ["s1"], 2: ["s1", "s2"]})
    assert verdict["subscriptions_lost"] == [0]
    assert verdict["subscriptions_resurrected"] == [1]
    assert verdict["subscriptions_held_twice"] == [2]


def test_a_subscription_counts_only_events_sent_once_it_was_routed():
    h = History()
    added = h.subscribed(np.array([[0.0, 0.0]]), np.array([[1.0, 1.0]]), active_from=float("inf"))
    h.sent(0, np.array([0.5, 0.5]), at=10.0)
    h.acknowledged(0, at=10.1)
    h.routed(added, at=20.0)
    h.sent(1, np.array([0.5, 0.5]), at=21.0)
    h.acknowledged(1, at=21.1)
    assert h.expected() == {(0, 1)}


def test_period_figures_time_the_heal_and_split_latency_during_and_after():
    h = history([[0.1, 0.1]] * 6)
    window = h.began("cut", at=101.5)
    window.healed_at = 103.5
    for event_id, arrived in [(0, 100.2), (1, 104.0), (2, 104.5), (3, 104.1), (4, 104.2), (5, 105.3)]:
        note(h, 0, event_id, at=arrived)
    figures = period_figures(h, 0)
    assert figures["lasted_s"] == 2.0
    # sent before the heal, arrived after it: events 1 (at 104.0), 2 (104.5), 3 (104.1)
    assert figures["heal_to_first_held_delivery_s"] == 0.5 and figures["heal_to_drained_s"] == 1.0
    assert figures["during"]["n"] == 2 and figures["after"]["n"] == 2


def test_period_figures_count_a_faults_duplicates_by_message_id():
    h = history([[0.1, 0.1]] * 4)
    window = h.began("cut", at=100.5)
    window.healed_at = 101.5
    note(h, 0, 1, "a")
    note(h, 0, 1, "a")  # redelivered
    note(h, 0, 2, "b")
    note(h, 0, 2, "c")  # published twice
    note(h, 0, 0, "z")
    note(h, 0, 0, "z")  # sent before the fault began: not its duplicate
    assert period_figures(h, 0)["duplicates"] == {"same_message_id": 1, "new_message_id": 1}


def test_a_late_copy_of_a_delivered_notification_does_not_delay_the_drain():
    """A request sent into a cut reaches the sink long after its retry did: a duplicate, not
    a later delivery."""
    h = history([[0.1, 0.1]] * 3)
    window = h.began("cut", at=100.5)
    window.healed_at = 101.5
    note(h, 0, 1, "a", at=101.8)
    note(h, 0, 1, "a", at=109.0)  # the copy sent into the cut, retransmitted by TCP
    note(h, 0, 2, "b", at=102.3)
    figures = period_figures(h, 0)
    assert figures["heal_to_drained_s"] == 0.3
    assert figures["during"] == {"n": 1, "p50_s": 0.8, "p99_s": 0.8}
    assert figures["duplicates"] == {"same_message_id": 1, "new_message_id": 0}
