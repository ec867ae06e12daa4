"""The EDN server's errors and the faults the edge answers them with (wsframework.faults)."""
from __future__ import annotations

import pytest

from subscription_manager.server.exceptions import (IncompleteImport, PlacementRefused,
                                                 TopicNotHere, UnansweredImport, UnusableImport,
                                                 UnusablePeerSummary)
from wsframework.admin import contracts
from wsframework.exceptions import RECEIVER, SENDER
from wsframework.faults import fault_for
from wsframework.matching.errors import MatcherError
from wsframework.namespace import UnknownEntry


@pytest.mark.parametrize("exc, code, reason, subcodes", [
    (TopicNotHere("grid"), SENDER, "no topic named 'grid' here", (contracts.FAULT_UNKNOWN_TOPIC,)),
    (PlacementRefused(), SENDER, "edn:Placed needs the network's admin credential",
     (contracts.FAULT_ACCESS_DENIED,)),
    (UnusablePeerSummary("s9", MatcherError("bad boxes")), SENDER,
     "unusable peer summary from s9: bad boxes", (contracts.FAULT_INVALID_REQUEST,)),
    (UnusableImport("grid", ValueError("missing created")), SENDER,
     "cannot import into grid: missing created", (contracts.FAULT_INVALID_REQUEST,)),
    (IncompleteImport("http://s1.test", 2, 3), SENDER,
     "http://s1.test imported 2 of 3 subscriptions", ()),
    (UnansweredImport("http://s2.test", OSError("refused")), RECEIVER,
     "http://s2.test did not answer the import: refused", ()),
])
def test_each_error_has_its_fault(exc, code, reason, subcodes):
    fault = fault_for(exc)
    assert (fault.code, fault.reason, fault.subcodes, fault.action) == (code, reason, subcodes, None)


def test_a_topic_not_here_is_an_unknown_entry():
    assert isinstance(TopicNotHere("grid"), UnknownEntry)
