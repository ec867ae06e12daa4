"""The loss of the database's host (benchmarks.lab.host_loss, in a quick form): a source on
PostgreSQL with a synchronous standby on another lab host; the primary's host is cut off and
its database killed, the standby promoted. Nothing acknowledged is lost. Needs root (network
namespaces), iptables and PostgreSQL (``.ci/setup`` installs it)."""
import pytest

from benchmarks.lab import why_not_available
from benchmarks.postgres_cluster import unavailable_reason

reason = why_not_available() or unavailable_reason()
pytestmark = pytest.mark.skipif(bool(reason), reason=f"the host-loss check cannot run here: {reason}")


def test_a_lost_database_host_loses_nothing_acknowledged():
    from benchmarks.lab.host_loss import run_host_loss
    result = run_host_loss(subscriptions=20, rate=20.0, before_s=3.0, after_s=3.0, log=lambda _: None)
    assert result.subscriptions_acknowledged >= 20 and result.events_acknowledged > 0
    assert result.notifications_expected > 0
    assert result.cut_to_first_ack_s is not None  # the role works again on the standby
    assert result.subscriptions_lost == 0, result.lost_examples
    assert result.notifications_lost == 0, result.lost_examples
