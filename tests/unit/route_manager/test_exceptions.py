"""The route manager's errors become, at the edge, the faults its peers have always seen."""
import pytest

from matchers import MatcherError
from route_manager.protocol import FAULT_UNKNOWN_SERVER
from route_manager.exceptions import (InvalidConfiguration, InvalidRepartition, RepartitionFailed,
                                      UnknownAlgorithm, UnknownServer, UnusableSummary)
from wsframework.admin import contracts
from wsframework.faults import fault_for


@pytest.mark.parametrize("error, code, subcode, reason", [
    (UnknownServer("s9"), "Sender", FAULT_UNKNOWN_SERVER, "server 's9' is not registered"),
    (UnusableSummary("s1", MatcherError("bad box")), "Sender", contracts.FAULT_INVALID_REQUEST,
     "unusable summary from s1: bad box"),
    (InvalidConfiguration("unknown setting 'colour'"), "Sender", contracts.FAULT_INVALID_REQUEST,
     "unknown setting 'colour'"),
    (UnknownAlgorithm("hash", ("rtree", "kmeans")), "Sender", contracts.FAULT_INVALID_REQUEST,
     "unknown algorithm 'hash'; use one of rtree, kmeans"),
    (InvalidRepartition("kyra needs maxDistance=MS"), "Sender", contracts.FAULT_INVALID_REQUEST,
     "kyra needs maxDistance=MS"),
    (RepartitionFailed("the servers disagree on the dimensions of t"), "Receiver", None,
     "the servers disagree on the dimensions of t"),
])
def test_each_error_has_its_fault(error, code, subcode, reason):
    fault = fault_for(error)
    assert (fault.code, fault.subcode, fault.reason) == (code, subcode, reason)
